"""Hostile and careless input for the command line and the API (tests/cli/test_hostile_*.py):
small valid files (data, model, codes, index, a collection) and the damaged and inconsistent ones
derived from them, and the check every command-line case must pass."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

#: the placeholder of the files' folder in the case lists (the cases are named before the files exist)
ROOT = "{root}"


def build_files(root: Path) -> None:
    """Valid files, then the damaged variants every case below refers to."""
    import h5py

    from dmh import CrossModalData, save_data
    from dmh.index import HammingIndex, save_codes
    from dmh.registry import get_method_class

    rng = np.random.default_rng(0)
    n = 60
    y = rng.integers(0, 3, n)
    good = CrossModalData(image=rng.normal(size=(n, 6)) + y[:, None], text=rng.normal(size=(n, 5)) + y[:, None],
                          labels=y, name="good")
    save_data(good, root / "good.npz")
    save_data(good, root / "good.mat")
    model = get_method_class("cvh")(n_bits=8, random_state=0).fit(good)
    model.save(root / "model.npz")
    codes = model.encode(good.image, "image")
    save_codes(root / "codes.npz", codes, modality="image")
    HammingIndex(8, backend="numpy").add(model.encode(good.text, "text")).save(root / "index.dmhidx")
    save_codes(root / "codes16.npz", np.ones((3, 16), np.int8))
    np.savez(root / "codes12.npz", codes=np.ones((3, 12), np.int8))

    blob = (root / "good.npz").read_bytes()
    (root / "empty.npz").write_bytes(b"")
    (root / "garbage.npz").write_bytes(b"\x80\x04\x95garbage" * 20)
    (root / "truncated.npz").write_bytes(blob[: len(blob) // 2])
    flipped = bytearray(blob)
    flipped[len(blob) // 3] ^= 0xFF
    (root / "flipped.npz").write_bytes(bytes(flipped))
    np.save(root / "single.npy", np.ones((3, 3)))
    os.replace(root / "single.npy", root / "single.npz")
    (root / "empty.mat").write_bytes(b"")
    (root / "garbage.mat").write_bytes(b"MATLAB 5.0 MAT-file, garbage" + bytes(range(256)) * 4)
    mat = (root / "good.mat").read_bytes()
    (root / "truncated.mat").write_bytes(mat[: len(mat) // 2])
    with h5py.File(root / "v73.mat", "w") as f:
        f["image"] = good.image.T
        f["text"] = good.text.T
    v73 = (root / "v73.mat").read_bytes()
    (root / "truncated73.mat").write_bytes(v73[: len(v73) // 2])
    (root / "folder.npz").mkdir()
    (root / "table.csv").write_text("a,b\n1,2\n")

    ones = np.ones((4, 2))

    def arr(name, **arrays):
        np.savez(root / f"{name}.npz", **arrays)

    arr("objects", image=np.array([[None, 1]] * 4, dtype=object), text=ones)
    arr("strlabels", image=ones, text=ones, labels=np.array(["cat", "dog", "cat", "dog"]))
    arr("nan", image=np.where(np.eye(4, 2) > 0, np.nan, 1.0), text=ones)
    arr("inf", image=ones, text=np.full((4, 2), np.inf))
    arr("rows", image=ones, text=np.ones((3, 2)))
    arr("negidx", image=ones, text=ones, query_idx=np.array([-1, 0]))
    arr("dupidx", image=ones, text=ones, query_idx=np.array([1, 1]))
    arr("bigidx", image=ones, text=ones, query_idx=np.array([0, 99]))
    arr("floatidx", image=ones, text=ones, query_idx=np.array([0.5, 1.0]))
    arr("complex", image=ones.astype(complex), text=ones)
    arr("threed", image=np.ones((4, 2, 2)), text=ones)
    arr("onlyimage", image=ones)
    arr("unknownkey", image=ones, text=ones, extra=ones)
    arr("nomodality", image=ones, text=ones, image_mask=np.zeros(4, bool), text_mask=np.array([1, 1, 0, 0]))
    arr("badmask", image=ones, text=ones, image_mask=np.array([2, 0, 1, 1]))
    arr("nolabels", image=rng.normal(size=(20, 3)), text=rng.normal(size=(20, 3)))
    arr("emptyrows", image=np.ones((0, 2)), text=np.ones((0, 2)))
    arr("tiny1", image=np.ones((1, 6)), text=np.ones((1, 5)))
    arr("tiny2", image=rng.normal(size=(2, 6)), text=rng.normal(size=(2, 5)))
    arr("wrongdims", image=np.ones((5, 3)), text=np.ones((5, 5)))
    np.savez(root / "toolkit_partial.npz", I_tr=ones, T_tr=ones, I_te=ones)
    save_data(good, root / "spaced dätä ✓.npz")
    os.symlink(root / "good.npz", root / "link.npz")
    os.symlink(root / "gone.npz", root / "dangling.npz")

    def model_variant(name, meta_change=None, array_change=None):
        with np.load(root / "model.npz") as f:
            arrays = {k: f[k] for k in f.files}
        meta = json.loads(arrays["__meta__"].tobytes())
        if meta_change:
            meta = meta_change(meta)
        if array_change:
            array_change(arrays)
        arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
        np.savez(root / f"{name}.npz", **arrays)

    model_variant("model_bits", lambda m: {**m, "n_bits": 16})
    model_variant("model_feats", lambda m: {**m, "n_features": {"image": 7, "text": 5}})
    model_variant("model_list", lambda m: [m])
    model_variant("model_method", lambda m: {**m, "method": "nope"})
    model_variant("model_nan", array_change=lambda a: a.__setitem__("image_projection", a["image_projection"] * np.nan))
    mblob = (root / "model.npz").read_bytes()
    (root / "model_trunc.npz").write_bytes(mblob[: len(mblob) - 40])
    iblob = (root / "index.dmhidx").read_bytes()
    flipped = bytearray(iblob)
    flipped[100] ^= 0x01
    (root / "index_flip.dmhidx").write_bytes(bytes(flipped))

    (root / "results_bad.json").write_text("{not json")
    (root / "results_list.json").write_text("[1, 2, 3]")
    (root / "results_existing.json").write_text(json.dumps({"results": []}))
    (root / "cells_wrong").mkdir()
    (root / "cells_wrong" / "cells.json").write_text(json.dumps({"cells": [1, 2]}))
    (root / "cells_list").mkdir()
    (root / "cells_list" / "cells.json").write_text("[]")
    (root / "empty.csv").write_text("")
    (root / "header_only.csv").write_text("id,text\n")
    (root / "nocolumn.csv").write_text("name,body\n1,hello\n")
    (root / "imgs").mkdir()
    (root / "binary.json").write_bytes(bytes(range(256)))
    (root / "config_list.json").write_text("[1, 2]")
    (root / "dup_ids.csv").write_text("id,text\n1,a cat\n1,a dog\n")
    (root / "latin1.csv").write_bytes("id,text\n1,caf\xe9 au lait\n".encode("latin-1"))
    (root / "nul.csv").write_bytes(b"id,text\n1,a\x00b\n")
    (root / "labelled.csv").write_text("id,text,labels\n1,a red thing,red\n2,a blue thing,blue\n")
    tiny = {"name": "tiny", "title": "one CVH cell", "paper_ref": "no table", "kind": "table", "bits": [8],
            "seeds": [0], "runs": [{"label": "CVH", "method": "cvh", "paired_ratios": [1.0]}],
            "datasets": {"good": {"file": str(root / "good.npz"), "paper": False, "title": "good"}},
            "default_datasets": ["good"], "paper": {"source": "none", "rows": None, "notes": ["no numbers"]}}
    (root / "tiny.json").write_text(json.dumps(tiny))
    (root / "no_paper_ref.json").write_text(json.dumps({k: v for k, v in tiny.items() if k != "paper_ref"}))
    arr("halfpaired", image=rng.normal(size=(20, 6)), text=rng.normal(size=(20, 5)), labels=rng.integers(0, 2, 20),
        text_mask=np.arange(20) % 2 == 0, query_idx=np.arange(10))
    build_collections(root)


def build_collections(root: Path) -> None:
    """A small collection (shape photos, pixels-16 features, CVH 16 bits), the photo folders and
    captions files the collection cases use, and damaged copies of the collection."""
    import shutil

    from dmh.app.collection import build_collection
    from dmh.datasets.shapes import draw_shape, make_shapes

    photos, captions = make_shapes(root / "photos", 24, caption_ratio=0.75, extra_captions=2)
    os.replace(captions, root / "captions.csv")
    build_collection(photos, root / "captions.csv", root / "col", method="cvh", n_bits=16, image_model="pixels-16",
                     progress=False, log=lambda m: None)
    names = sorted(p.name for p in photos.iterdir())
    draw_shape("circle", "red", "centre", rng=1).save(root / "query.png")
    (root / "notimage.png").write_text("this is text, not a picture\n")
    (root / "empty_photos").mkdir()
    mixed = root / "mixed_photos"  # 20 good photos, a text file, a truncated and a garbage "JPEG"
    mixed.mkdir()
    for name in names[:20]:
        shutil.copy(photos / name, mixed / name)
    (mixed / "notes.txt").write_text("not a photo")
    (mixed / "broken.png").write_bytes((photos / names[0]).read_bytes()[:200])
    (mixed / "garbage.jpg").write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg" * 10)
    rows = "".join(f"{n},a red thing number {i}\n" for i, n in enumerate(names[:20]))
    (root / "mixed.csv").write_text("image,caption\n" + rows + "broken.png,a broken photo\n")
    (root / "cap_empty.csv").write_text("")
    (root / "cap_header.csv").write_text("file,text\n" + names[0] + ",a photo\n")
    (root / "cap_latin1.csv").write_bytes(f"image,caption\n{names[0]},caf\xe9 au lait\n".encode("latin-1"))
    (root / "cap_nul.csv").write_bytes(f"image,caption\n{names[0]},a\x00b\n".encode())
    (root / "cap_dup.csv").write_text(f"image,caption\n{names[0]},one\n{names[0]},two\n")
    (root / "cap_unknown.csv").write_text("image,caption\nno-such-photo.jpg,a caption\n")
    (root / "cap_blank.csv").write_text("image,caption\n,\n")
    (root / "cap_long.csv").write_text(f"image,caption\n{names[0]},{'word ' * 60_000}\n")
    (root / "more.csv").write_text("image,caption\n,a caption added later\n")
    (root / "afile").write_text("a file where a folder is expected")
    os.makedirs(root / "notcol")
    (root / "notcol" / "x.txt").write_text("x")

    def damaged(name, change):
        shutil.copytree(root / "col", root / name)
        change(root / name)

    damaged("col_add", lambda c: None)  # a copy for add cases that must leave it as it is
    damaged("col_manifest_garbage", lambda c: (c / "manifest.json").write_text("{not json"))
    damaged("col_manifest_list", lambda c: (c / "manifest.json").write_text("[]"))
    damaged("col_manifest_items", lambda c: (c / "manifest.json").write_text(
        json.dumps({"format": "dmh-collection", "format_version": 1, "items": [{"id": "x"}]})))
    damaged("col_build_garbage", lambda c: (c / "build.json").write_bytes(bytes(range(256))))
    damaged("col_build_list", lambda c: (c / "build.json").write_text("[1]"))
    damaged("col_build_missing", lambda c: (c / "build.json").unlink())
    damaged("col_unfinished", lambda c: (c / "build.json").write_text(json.dumps(
        {**json.loads((c / "build.json").read_text()), "done": ["scan", "features"]})))

    def truncate(path):
        blob = path.read_bytes()
        path.write_bytes(blob[: len(blob) // 2])

    def flip(path):
        blob = bytearray(path.read_bytes())
        blob[len(blob) // 2] ^= 0xFF
        path.write_bytes(bytes(blob))

    damaged("col_model_trunc", lambda c: truncate(c / "model.npz"))
    damaged("col_index_flip", lambda c: flip(c / "images.dmhidx"))
    damaged("col_index_missing", lambda c: (c / "texts.dmhidx").unlink())
    damaged("col_codes_garbage", lambda c: (c / "image_codes.npz").write_bytes(b"PK\x03\x04garbage"))
    damaged("col_features_trunc", lambda c: truncate(c / "features.npz"))


def in_process(argv) -> tuple[int, str, str]:
    import contextlib
    import io
    import traceback
    import warnings

    from dmh.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            rc = main(argv)
        except SystemExit as exc:  # pragma: no cover - main returns its code
            rc = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - the point: anything escaping main is a traceback
            traceback.print_exc()
            rc = 1
    return rc, out.getvalue(), err.getvalue()


def problems(argv: list[str], want: int, text: str) -> list[str]:
    """What is wrong with the answer of ``dmh ARGV`` (run in this process): the exit code, a
    traceback, advice to unpickle a file, for bad input anything but one ``Error:`` line on standard
    error, or output that lacks ``text`` (case-insensitive)."""
    rc, out, err = in_process(argv)
    found = []
    if rc != want:
        found.append(f"exit {rc}, expected {want}")
    if "Traceback" in out + err:
        found.append("traceback")
    if "pickle" in (out + err).lower():
        found.append("mentions pickle")
    if want == 2:
        errors = [line for line in err.splitlines() if line.strip() and not line.startswith(("warning:", "\r"))]
        error_lines = [line for line in errors if line.startswith("Error:")]
        if len(error_lines) != 1 or len(errors) != 1:
            found.append(f"{len(errors)} stderr line(s), not one 'Error:' line")
    if text and text.lower() not in (out + err).lower():
        found.append(f"output lacks {text!r}")
    if found:
        found.append("output: " + (err.strip() or out.strip())[-500:])
    return found
