"""Hostile and careless input to ``dmh build``, ``add``, ``search COLLECTION`` and ``serve``: each
case ends with the exit code it expects and, for bad input, one line ``Error: ...`` naming the file
or argument, never a traceback (the check of ``test_hostile_inputs.py``, on the collection and the
photo folders and captions files of ``hostile_files.build_collections``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ..conftest import import_or_skip
from .hostile_files import ROOT, problems


def _collection_cases(root: Path) -> list[tuple[str, list[str], int, str]]:
    """dmh build / add / search COLLECTION / serve."""
    r = str(root)
    small = ["--method", "cvh", "--bits", "16", "--image-model", "pixels-16", "--no-progress"]

    def build(name, photos, captions, *extra):
        args = [photos] + ([captions] if captions else [])
        return ["build", *args, "-o", f"{r}/{name}", *small, *extra]

    col = f"{r}/col"
    text = ["--text", "a red circle"]
    return [
        # ---- build: inputs
        ("build: missing photos folder", build("b1", f"{r}/nope", f"{r}/captions.csv"), 2, "nope"),
        ("build: photos folder is a file", build("b2", f"{r}/afile", f"{r}/captions.csv"), 2, "afile"),
        ("build: empty photos folder, no captions", build("b3", f"{r}/empty_photos", None), 2, "no items"),
        ("build: empty photos folder, captions name photos", build("b4", f"{r}/empty_photos", f"{r}/captions.csv"),
         2, "captions.csv"),
        ("build: photos without captions", build("b5", f"{r}/photos", None), 2, "captions"),
        ("build: captions missing", build("b6", f"{r}/photos", f"{r}/nope.csv"), 2, "nope.csv"),
        ("build: captions a folder", build("b7", f"{r}/photos", f"{r}/photos"), 2, "photos"),
        ("build: captions empty", build("b8", f"{r}/photos", f"{r}/cap_empty.csv"), 2, "cap_empty.csv"),
        ("build: captions wrong header", build("b9", f"{r}/photos", f"{r}/cap_header.csv"), 2, "cap_header.csv"),
        ("build: captions latin-1", build("b10", f"{r}/photos", f"{r}/cap_latin1.csv"), 2, "cap_latin1.csv"),
        ("build: captions with NUL", build("b11", f"{r}/photos", f"{r}/cap_nul.csv"), 2, "cap_nul.csv"),
        ("build: captions photo twice", build("b12", f"{r}/photos", f"{r}/cap_dup.csv"), 2, "cap_dup.csv"),
        ("build: captions unknown photo", build("b13", f"{r}/photos", f"{r}/cap_unknown.csv"), 2, "no-such-photo"),
        ("build: captions row all empty", build("b14", f"{r}/photos", f"{r}/cap_blank.csv"), 2, "cap_blank.csv"),
        ("build: a 300 kB caption", build("b15", f"{r}/photos", f"{r}/cap_long.csv"), 2, "cap_long.csv"),
        ("build: unreadable photos skipped, named", build("b16", f"{r}/mixed_photos", f"{r}/mixed.csv"), 0,
         "broken.png"),
        # ---- build: settings and output folder (checked before any work)
        ("build: --bits 12", build("b17", f"{r}/photos", f"{r}/captions.csv", "--bits", "12"), 2, "--bits"),
        ("build: --method nope", build("b18", f"{r}/photos", f"{r}/captions.csv", "--method", "nope"), 2, "nope"),
        ("build: --param nope=1", build("b19", f"{r}/photos", f"{r}/captions.csv", "--param", "nope=1"), 2, "nope"),
        ("build: --fit-max 1", build("b20", f"{r}/photos", f"{r}/captions.csv", "--fit-max", "1"), 2, "--fit-max"),
        ("build: -o a non-collection folder", build("notcol", f"{r}/photos", f"{r}/captions.csv"), 2, "notcol"),
        ("build: -o a file", build("afile", f"{r}/photos", f"{r}/captions.csv"), 2, "afile"),
        ("build: -o under a file", build("afile/col", f"{r}/photos", f"{r}/captions.csv"), 2, "afile"),
        ("build: -o under /proc", ["build", f"{r}/photos", f"{r}/captions.csv", "-o", "/proc/dmh-col", *small], 2,
         "/proc"),
        ("build: other settings into a built collection", build("col", f"{r}/photos", f"{r}/captions.csv",
                                                                "--bits", "32"), 2, "n_bits"),
        ("build: damaged build record", build("col_build_list", f"{r}/photos", f"{r}/captions.csv"), 2,
         "build.json"),
        ("build: --bits 1e13", build("b21", f"{r}/photos", f"{r}/captions.csv", "--bits", "10000000000000"), 2,
         "--bits"),
        ("build: --seed -1", build("b22", f"{r}/photos", f"{r}/captions.csv", "--seed", "-1"), 2, "--seed"),
        ("build: --param reg=-1", build("b23", f"{r}/photos", f"{r}/captions.csv", "--param", "reg=-1"), 2, "reg"),
        ("build: bad --ray address", build("b24", f"{r}/photos", f"{r}/captions.csv", "--ray", "no-such-address"),
         2, "no-such-address"),
        ("add: bad --ray address", ["add", f"{r}/col_add", f"{r}/more.csv", "--no-progress", "--ray",
                                    "no-such-address"], 2, "no-such-address"),
        # ---- search on a collection
        ("search: collection, no query", ["search", col], 2, "--text"),
        ("search: collection, two queries", ["search", col, *text, "--like", "1"], 2, "exactly one"),
        ("search: collection, --k 0", ["search", col, *text, "--k", "0"], 2, "--k"),
        ("search: collection, --k -3", ["search", col, *text, "--k", "-3"], 2, "--k"),
        ("search: collection, --k 1e12", ["search", col, *text, "--k", "1000000000000", "--format", "csv"], 0,
         "rank,id"),
        ("search: collection, empty --text", ["search", col, "--text", "  "], 2, "empty"),
        ("search: --like unknown id", ["search", col, "--like", "99999"], 2, "99999"),
        ("search: --like not a number", ["search", col, "--like", "abc"], 2, "--like"),
        ("search: --image not an image", ["search", col, "--image", f"{r}/notimage.png"], 2, "notimage.png"),
        ("search: --image missing", ["search", col, "--image", f"{r}/nope.jpg"], 2, "nope.jpg"),
        ("search: --image a folder", ["search", col, "--image", f"{r}/photos"], 2, "photos"),
        ("search: --image a truncated photo", ["search", col, "--image", f"{r}/mixed_photos/broken.png"], 2,
         "broken.png"),
        ("search: a folder that is not a collection", ["search", f"{r}/notcol", *text], 2, "notcol"),
        ("search: collection, index options", ["search", col, *text, "--model", f"{r}/model.npz"], 2, "--model"),
        ("search: collection, --out in a missing folder", ["search", col, *text, "--out", f"{r}/nope/s.txt"], 2,
         "nope"),
        ("search: manifest not JSON", ["search", f"{r}/col_manifest_garbage", *text], 2, "manifest.json"),
        ("search: manifest a list", ["search", f"{r}/col_manifest_list", *text], 2, "manifest.json"),
        ("search: manifest items damaged", ["search", f"{r}/col_manifest_items", *text], 2, "manifest.json"),
        ("search: build record binary", ["search", f"{r}/col_build_garbage", *text], 2, "build.json"),
        ("search: build record missing", ["search", f"{r}/col_build_missing", *text], 2, "build.json"),
        ("search: unfinished build", ["search", f"{r}/col_unfinished", *text], 2, "not finished"),
        ("search: truncated model", ["search", f"{r}/col_model_trunc", *text], 2, "model.npz"),
        ("search: damaged index", ["search", f"{r}/col_index_flip", *text], 2, "images.dmhidx"),
        ("search: missing index", ["search", f"{r}/col_index_missing", *text], 2, "texts.dmhidx"),
        ("search: damaged codes", ["search", f"{r}/col_codes_garbage", *text], 2, "image_codes.npz"),
        # ---- add
        ("add: not a collection", ["add", f"{r}/notcol", f"{r}/more.csv", "--no-progress"], 2, "notcol"),
        ("add: missing collection", ["add", f"{r}/nope", f"{r}/more.csv", "--no-progress"], 2, "nope"),
        ("add: nothing to add", ["add", col], 2, "captions"),
        ("add: unknown photo in captions", ["add", col, "--captions", f"{r}/cap_unknown.csv", "--no-progress"], 2,
         "no-such-photo"),
        ("add: captions latin-1", ["add", col, "--captions", f"{r}/cap_latin1.csv", "--no-progress"], 2,
         "cap_latin1.csv"),
        ("add: unfinished build", ["add", f"{r}/col_unfinished", f"{r}/more.csv", "--no-progress"], 2,
         "not finished"),
        ("add: damaged features", ["add", f"{r}/col_features_trunc", f"{r}/more.csv", "--no-progress"], 2,
         "features.npz"),
        ("add: photos already there", ["add", col, f"{r}/photos", "--no-progress"], 0, "nothing new"),
        # ---- serve (refused before serving)
        ("serve: not a collection", ["serve", f"{r}/notcol"], 2, "notcol"),
        ("serve: damaged manifest", ["serve", f"{r}/col_manifest_list"], 2, "manifest.json"),
        ("serve: invalid host", ["serve", col, "--host", "no such host..invalid", "--port", "0"], 2, "--host"),
        ("serve: --port 70000", ["serve", col, "--port", "70000"], 2, "--port"),
        ("serve: --max-k 0", ["serve", col, "--max-k", "0"], 2, "--max-k"),
    ]



@pytest.mark.parametrize(("argv", "want", "text"),
                         [pytest.param(a, w, t, id=n) for n, a, w, t in _collection_cases(Path(ROOT))])
def test_a_collection_case_ends_as_expected(argv, want, text, hostile_root, monkeypatch):
    if "--ray" in argv:  # without Ray the refusal is about the missing package, not the address
        import_or_skip("ray", "ray")
    monkeypatch.chdir(hostile_root)
    r = str(hostile_root)
    found = problems([a.replace(ROOT, r) for a in argv], want, text.replace(ROOT, r))
    assert not found, "; ".join(found)
