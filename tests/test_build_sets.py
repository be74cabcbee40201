"""The set builders of research/ on tiny inputs: build_listed_set.py (the Wikipedia dataset's
layout: rows, labels and split follow the lists) and build_medpix.py (MedPix 2.0: a row per image,
its caption and case text, the repository's split by case); missing files are left out and
reported, a bad layout is one line."""
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


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "research" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up while being defined
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def script():
    try:
        yield _load("build_listed_set")
    finally:
        sys.modules.pop("build_listed_set", None)


@pytest.fixture(scope="module")
def medpix():
    try:
        yield _load("build_medpix")  # imports build_listed_set from research/
    finally:
        for name in ("build_medpix", "build_listed_set"):
            sys.modules.pop(name, None)
        sys.path.remove(str(ROOT / "research"))


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
    assert "github:o/r  commit abc" in readme and "1 pair(s) left out: trainset_txt_img_cat.list:10 (tmissing/isea0: no text file)" in readme
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


def medpix_checkout(tmp_path):
    root = tmp_path / "MedPix-2-0"
    (root / "images").mkdir(parents=True)
    (root / "splitted_dataset").mkdir()
    cases = [
        {"U_id": "C1", "Case": {"Title": "Glioma", "History": "Headache for a week.", "Exam": "N/A",
                                "Findings": "Mass in the left frontal lobe."},
         "Topic": {"Disease Discussion": "Gliomas are tumours of glial cells."}},
        {"U_id": "C2", "Case": {"Title": "Pneumonia", "History": "Cough and fever.", "Findings": "Consolidation."},
         "Topic": {"Disease Discussion": ""}},
        {"U_id": "C3", "Case": {"Title": "Renal cyst", "Findings": "A simple cyst of the kidney."}, "Topic": {}},
    ]
    rows = [("C1", "C1_a", "Head", (250, 250, 250)), ("C1", "C1_b", "Head", (240, 240, 240)),
            ("C2", "C2_a", "Thorax", (20, 20, 20)), ("C3", "C3_a", "Abdomen", (120, 120, 120)),
            ("C3", "C3_gone", "Abdomen", None)]  # listed, but its image file is missing
    descriptions = []
    for uid, image, category, grey in rows:
        if grey is not None:
            Image.new("L", (32, 24), grey[0]).save(root / "images" / f"{image}.png")
        descriptions.append({"U_id": uid, "image": image, "Location Category": category,
                             "Description": {"Caption": f"Caption of {image}."}})
    (root / "Descriptions.json").write_text(json.dumps(descriptions))
    (root / "Case_topic.json").write_text(json.dumps(cases))
    uids = {"train": ["C1", "C3"], "dev": ["C2"], "test": []}
    (root / "splitted_dataset" / "uid_list.json").write_text(json.dumps(uids))
    return root


def test_medpix_rows_texts_and_split_by_case(medpix, tmp_path):
    root = medpix_checkout(tmp_path)
    data, npz = medpix.build(root, tmp_path / "out", commit="abc", image_encoder=mean_colour, progress=False)
    rows = [json.loads(line) for line in (tmp_path / "out" / "texts.jsonl").read_text().splitlines()]
    assert [r["image_id"] for r in rows] == ["C1_a", "C1_b", "C2_a", "C3_a"]
    assert rows[0]["text"] == ("Caption of C1_a. Glioma Headache for a week. Mass in the left frontal lobe. "
                               "Gliomas are tumours of glial cells.")  # 'N/A' and empty fields left out
    assert rows[2]["text"] == "Caption of C2_a. Pneumonia Cough and fever. Consolidation."
    assert data.labels.tolist() == [0, 0, 2, 1]  # Head (2 images) first, then Abdomen and Thorax by name
    assert data.query_idx.tolist() == [2] and data.train_idx.tolist() == [0, 1, 3]
    assert data.image[:, 0].round(2).tolist() == [0.96, 0.88, -0.84, -0.05]  # (grey - 127) / 128
    readme = (tmp_path / "out" / "README.txt").read_text()
    assert "C3_gone (no image file)" in readme and "github:CHILab1/MedPix-2.0  commit abc" in readme
    assert "  0 Head 2" in readme and "dev + test cases are the queries" in readme


def test_medpix_captions_alone(medpix, tmp_path):
    root = medpix_checkout(tmp_path)
    descriptions = json.loads((root / "Descriptions.json").read_text())
    descriptions[1]["Description"]["Caption"] = "N/A"  # C1_b: no caption, so not a row of this variant
    (root / "Descriptions.json").write_text(json.dumps(descriptions))
    data, _ = medpix.build(root, tmp_path / "out", image_encoder=mean_colour, progress=False, text="caption")
    rows = [json.loads(line) for line in (tmp_path / "out" / "texts.jsonl").read_text().splitlines()]
    assert [(r["image_id"], r["text"]) for r in rows] == [
        ("C1_a", "Caption of C1_a."), ("C2_a", "Caption of C2_a."), ("C3_a", "Caption of C3_a.")]
    readme = (tmp_path / "out" / "README.txt").read_text()
    assert "C1_b (no caption)" in readme and "the image's caption alone" in readme
    assert "disease discussion" not in readme


def test_medpix_bad_layout_is_one_line(medpix, tmp_path, capsys):
    root = medpix_checkout(tmp_path)
    (root / "splitted_dataset" / "uid_list.json").write_text(json.dumps({"train": ["C1"]}))
    assert medpix.main(["--checkout", str(root), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.endswith("uid_list.json: no dev, test list")
    (root / "Case_topic.json").write_text("{not json")
    assert medpix.main(["--checkout", str(root), "--out", str(tmp_path / "o")]) == 2
    assert "Case_topic.json: not JSON" in capsys.readouterr().err
