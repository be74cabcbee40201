"""research/build_listed_set.py on a tiny set in the Wikipedia dataset's layout: rows, labels and
split follow the lists, missing files are left out and reported, a bad layout is one line."""
import importlib.util
import json
import sys
from pathlib import Path

import numpy as np
import pytest

from .conftest import import_or_skip

Image = import_or_skip("PIL.Image", "images")

ROOT = Path(__file__).resolve().parents[1]
COLOURS = {"sea": (0, 0, 255), "forest": (0, 160, 0), "city": (128, 128, 128)}


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("build_listed_set", ROOT / "research" / "build_listed_set.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up while being defined
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def mean_colour(batch: np.ndarray) -> np.ndarray:
    return batch.mean(axis=(2, 3)).astype(np.float32)


def checkout(tmp_path, *, test_list=True):
    root = tmp_path / "set"
    (root / "texts").mkdir(parents=True)
    (root / "categories.list").write_text("sea\nforest\ncity\n", encoding="utf-8")
    lines = {"train": [], "query": []}
    for c, (cat, colour) in enumerate(COLOURS.items(), start=1):
        (root / "images" / cat).mkdir(parents=True)
        for j in range(4):
            oid = f"{cat}{j}"
            Image.new("RGB", (30 + j, 20), colour).save(root / "images" / cat / f"i{oid}.jpg")
            words = f"the {cat} {cat} {cat} story number {j}. It goes on for a while about the {cat}."
            if j == 0:  # one text as XML, as the Wikipedia release has them
                (root / "texts" / f"t{oid}.xml").write_text(f"<document><text>{words}</text></document>")
            else:
                (root / "texts" / f"t{oid}.txt").write_text(words + "\n")
            lines["query" if j == 3 else "train"].append(f"t{oid}\ti{oid}\t{c}")
    lines["train"].append("tmissing\tisea0\t1")  # a listed text with no file: left out
    (root / "trainset_txt_img_cat.list").write_text("\n".join(lines["train"]) + "\n")
    if test_list:
        (root / "testset_txt_img_cat.list").write_text("\n".join(lines["query"]) + "\n")
    return root


def test_rows_labels_and_split_follow_the_lists(script, tmp_path):
    root = checkout(tmp_path)
    data, npz = script.build(root, tmp_path / "out", name="tiny", source="github:o/r", commit="abc",
                             image_encoder=mean_colour, progress=False, command="python build")
    assert data.image.shape == (12, 3) and data.labels.tolist() == [0, 0, 0, 1, 1, 1, 2, 2, 2, 0, 1, 2]
    assert data.query_idx.tolist() == [9, 10, 11]
    assert data.train_idx.tolist() == data.database_idx.tolist() == list(range(9))
    assert np.argmax(data.image, axis=1).tolist() == [2, 2, 2, 1, 1, 1, 0, 0, 0, 2, 1, 0]  # blue, green, grey
    assert data.text.shape[0] == 12 and data.text.any(axis=1).all()
    rows = [json.loads(line) for line in (tmp_path / "out" / "texts.jsonl").read_text().splitlines()]
    assert rows[0]["text"].startswith("the sea sea sea story number 0.") and "<" not in rows[0]["text"]
    assert [r["split"] for r in rows].count("query") == 3
    readme = (tmp_path / "out" / "README.txt").read_text()
    assert "github:o/r  commit abc" in readme and "1 listed pair(s) left out" in readme
    assert "  2 city 4" in readme and "python build" in readme

    import dmh

    loaded = dmh.load_dataset(str(npz))
    assert loaded.query_idx.tolist() == [9, 10, 11] and loaded.labels.tolist() == data.labels.tolist()


def test_without_a_test_list_the_split_is_seeded(script, tmp_path):
    root = checkout(tmp_path, test_list=False)
    a, _ = script.build(root, tmp_path / "a", name="t", image_encoder=mean_colour, progress=False)
    b, _ = script.build(root, tmp_path / "b", name="t", image_encoder=mean_colour, progress=False,
                        random_state=0)
    assert a.image.shape[0] == 9 and len(a.query_idx) == 2  # 20% of 9, rounded
    assert a.query_idx.tolist() == b.query_idx.tolist()
    assert sorted(a.query_idx.tolist() + a.train_idx.tolist()) == list(range(9))
    assert a.train_idx.tolist() == a.database_idx.tolist()


def test_a_bad_layout_is_one_line(script, tmp_path, capsys):
    root = checkout(tmp_path)
    (root / "testset_txt_img_cat.list").write_text("tsea3\tisea3\t7\n")
    assert script.main(["--checkout", str(root), "--out", str(tmp_path / "o"), "--name", "x"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "testset_txt_img_cat.list, line 1: category 7 is not in 1..3" in err
    (root / "categories.list").unlink()
    assert script.main(["--checkout", str(root), "--out", str(tmp_path / "o"), "--name", "x"]) == 2
    assert "categories.list: missing" in capsys.readouterr().err
