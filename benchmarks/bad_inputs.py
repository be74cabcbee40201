"""Hostile and careless input through the ``dmh`` command line: each case must end with the exit
code it expects (2 for bad input) and, for bad input, one line ``Error: ...`` naming the file or
argument, never a Python traceback and never advice to unpickle a file.

    python benchmarks/bad_inputs.py [--filter TEXT] [--subprocess [--jobs 2]] [--verbose]

Builds small valid files (data, model, codes, index) in a temporary folder, derives damaged and
inconsistent ones from them, runs every case through ``dmh.cli.main`` (in this process, output
captured; an exception escaping it counts as a traceback) or, with ``--subprocess``, as
``python -m dmh.cli ...``, and prints the cases that fail; exits 1 when any does. Cases that
expect success (exit 0) check that a valid-but-unusual input (one object, a path with spaces and
unicode, a symlink) is not refused.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np


def _build(root: Path) -> None:
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
    _build_collections(root)


def _build_collections(root: Path) -> None:
    """A small collection (shape photos, pixels-16 features, CVH 16 bits), the photo folders and
    captions files the collection cases use, and damaged copies of the collection."""
    import shutil

    from dmh.collection import build_collection
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


# (name, argv, expected exit code, text the output must contain)
def _cases(root: Path) -> list[tuple[str, list[str], int, str]]:
    r = str(root)
    fit = ["fit", f"{r}/good.npz", "--method", "cvh", "--bits", "8"]
    ev = ["evaluate", f"{r}/good.npz", "--method", "cvh", "--bits", "8", "--paired-ratio", "1.0"]
    return [
        # ---- data files through `dmh info`
        ("info: missing file", ["info", f"{r}/missing.npz"], 2, "missing.npz"),
        ("info: empty npz", ["info", f"{r}/empty.npz"], 2, "empty.npz"),
        ("info: garbage npz (pickle-like)", ["info", f"{r}/garbage.npz"], 2, "garbage.npz"),
        ("info: truncated npz", ["info", f"{r}/truncated.npz"], 2, "truncated.npz"),
        ("info: bad CRC npz", ["info", f"{r}/flipped.npz"], 2, "flipped.npz"),
        ("info: .npy saved as .npz", ["info", f"{r}/single.npz"], 2, "single.npz"),
        ("info: empty mat", ["info", f"{r}/empty.mat"], 2, "empty.mat"),
        ("info: garbage mat", ["info", f"{r}/garbage.mat"], 2, "garbage.mat"),
        ("info: truncated v5 mat", ["info", f"{r}/truncated.mat"], 2, "truncated.mat"),
        ("info: truncated v7.3 mat", ["info", f"{r}/truncated73.mat"], 2, "truncated73.mat"),
        ("info: a directory", ["info", r], 2, r),
        ("info: directory named .npz", ["info", f"{r}/folder.npz"], 2, "folder.npz"),
        ("info: unsupported .csv", ["info", f"{r}/table.csv"], 2, "table.csv"),
        ("info: object array", ["info", f"{r}/objects.npz"], 2, "objects.npz"),
        ("info: string labels", ["info", f"{r}/strlabels.npz"], 2, "strlabels.npz"),
        ("info: NaN features", ["info", f"{r}/nan.npz"], 2, "NaN"),
        ("info: inf features", ["info", f"{r}/inf.npz"], 2, "inf.npz"),
        ("info: mismatched rows", ["info", f"{r}/rows.npz"], 2, "rows.npz"),
        ("info: negative index", ["info", f"{r}/negidx.npz"], 2, "negidx.npz"),
        ("info: duplicate index", ["info", f"{r}/dupidx.npz"], 2, "dupidx.npz"),
        ("info: out-of-range index", ["info", f"{r}/bigidx.npz"], 2, "bigidx.npz"),
        ("info: fractional index", ["info", f"{r}/floatidx.npz"], 2, "floatidx.npz"),
        ("info: complex features", ["info", f"{r}/complex.npz"], 2, "complex.npz"),
        ("info: 3-D features", ["info", f"{r}/threed.npz"], 2, "threed.npz"),
        ("info: only image", ["info", f"{r}/onlyimage.npz"], 2, "onlyimage.npz"),
        ("info: unknown key", ["info", f"{r}/unknownkey.npz"], 2, "unknownkey.npz"),
        ("info: object without modality", ["info", f"{r}/nomodality.npz"], 2, "nomodality.npz"),
        ("info: mask of 2s", ["info", f"{r}/badmask.npz"], 2, "badmask.npz"),
        ("info: zero rows", ["info", f"{r}/emptyrows.npz"], 2, "emptyrows.npz"),
        ("info: toolkit without T_te", ["info", f"{r}/toolkit_partial.npz"], 2, "T_te"),
        ("info: dangling symlink", ["info", f"{r}/dangling.npz"], 2, "dangling.npz"),
        ("info: one object", ["info", f"{r}/tiny1.npz"], 0, "1 objects"),
        ("info: two objects", ["info", f"{r}/tiny2.npz"], 0, "2 objects"),
        ("info: unicode and spaces", ["info", f"{r}/spaced dätä ✓.npz"], 0, "60 objects"),
        ("info: symlink", ["info", f"{r}/link.npz"], 0, "60 objects"),
        ("info: valid v7.3", ["info", f"{r}/v73.mat"], 0, "60 objects"),
        # ---- fit: options, parameters, output place (checked before fitting)
        ("fit: --out in a missing folder", [*fit, "--out", f"{r}/nope/m.npz"], 2, "nope"),
        ("fit: --out is a directory", [*fit, "--out", f"{r}/folder.npz"], 2, "folder.npz"),
        ("fit: --out under /proc", [*fit, "--out", "/proc/dmh-test.npz"], 2, "/proc/dmh-test.npz"),
        ("fit: --paired-ratio 1.5", [*fit, "--paired-ratio", "1.5", "--out", f"{r}/m.npz"], 2, "paired"),
        ("fit: --paired-ratio nan", [*fit, "--paired-ratio", "nan", "--out", f"{r}/m.npz"], 2, "paired"),
        ("fit: --paired-ratio 0", [*fit, "--paired-ratio", "0", "--out", f"{r}/m.npz"], 2, "paired"),
        ("fit: --bits 0", ["fit", f"{r}/good.npz", "--method", "cvh", "--bits", "0", "--out", f"{r}/m.npz"], 2,
         "n_bits"),
        ("fit: --bits 100000", ["fit", f"{r}/good.npz", "--method", "cvh", "--bits", "100000", "--out",
                                f"{r}/m.npz"], 2, "n_bits"),
        ("fit: unknown method", ["fit", f"{r}/good.npz", "--method", "nope", "--out", f"{r}/m.npz"], 2, "nope"),
        ("fit: gamma=nan", ["fit", f"{r}/good.npz", "--method", "dmh", "--param", "gamma=nan", "--out",
                            f"{r}/m.npz"], 2, "gamma"),
        ("fit: gamma=inf", ["fit", f"{r}/good.npz", "--method", "dmh", "--param", "gamma=1e999", "--out",
                            f"{r}/m.npz"], 2, "gamma"),
        ("fit: dam_precision=float16", ["fit", f"{r}/good.npz", "--method", "dmh", "--param",
                                        "dam_precision=float16", "--out", f"{r}/m.npz"], 2, "dam_precision"),
        ("fit: hidden_size=1e13", ["fit", f"{r}/good.npz", "--method", "dmh", "--param",
                                   "dmh.hidden_size=10000000000000", "--out", f"{r}/m.npz"], 2, "hidden_size"),
        ("fit: unknown param", [*fit, "--param", "nope=1", "--out", f"{r}/m.npz"], 2, "nope"),
        ("fit: --param random_state", [*fit, "--param", "random_state=3", "--out", f"{r}/m.npz"], 2, "--seed"),
        ("evaluate: --param n_bits", [*ev, "--param", "cvh.n_bits=16", "--out", f"{r}/e5.json"], 2, "--bits"),
        ("fit: reg=abc", [*fit, "--param", "reg=abc", "--out", f"{r}/m.npz"], 2, "reg"),
        ("fit: param without =", [*fit, "--param", "gamma", "--out", f"{r}/m.npz"], 2, "--param"),
        ("fit: perplexity=abc", ["fit", f"{r}/good.npz", "--method", "dmh", "--param", 'perplexity="abc"', "--out",
                                 f"{r}/m.npz"], 2, "perplexity"),
        ("fit: preset=[1]", ["fit", f"{r}/good.npz", "--method", "dmh", "--param", "preset=[1]", "--out",
                             f"{r}/m.npz"], 2, "preset"),
        ("fit: bad value before missing data", ["fit", f"{r}/missing.npz", "--method", "dmh", "--param", "k=0",
                                                "--out", f"{r}/m.npz"], 2, "dmh: k must"),
        ("fit: diverged peer", ["fit", f"{r}/good.npz", "--method", "jdsh", "--bits", "8", "--param", "mu=1e30",
                                "--out", f"{r}/m.npz"], 2, "training loss became"),
        ("tune: --param n_bits", ["tune", f"{r}/good.npz", "--method", "dmh", "--param", "n_bits=3", "--bits", "8",
                                  "--out", f"{r}/t1.json"], 2, "--bits"),
        ("tune: --out under /proc", ["tune", f"{r}/good.npz", "--method", "cvh", "--grid", "reg=0.1", "--bits", "8",
                                     "--out", "/proc/dmh-tune.json"], 2, "/proc/dmh-tune.json"),
        ("tune: bad grid value", ["tune", f"{r}/good.npz", "--method", "dmh", "--grid", "perplexity=30,abc",
                                  "--bits", "8", "--out", f"{r}/t2.json"], 2, "perplexity"),
        ("fit: bad data file", ["fit", f"{r}/truncated.npz", "--method", "cvh", "--out", f"{r}/m.npz"], 2,
         "truncated.npz"),
        ("fit: too few objects", ["fit", f"{r}/tiny2.npz", "--method", "cvh", "--all-rows", "--bits", "8",
                                  "--out", f"{r}/m.npz"], 2, "paired"),
        # ---- evaluate
        ("evaluate: --seeds 0,0", [*ev, "--seeds", "0,0", "--out", f"{r}/e.json"], 2, "--seeds"),
        ("evaluate: --bits 8,8", ["evaluate", f"{r}/good.npz", "--method", "cvh", "--bits", "8,8", "--out",
                                  f"{r}/e.json"], 2, "--bits"),
        ("evaluate: --paired-ratio 1,1", ["evaluate", f"{r}/good.npz", "--method", "cvh", "--bits", "8",
                                          "--paired-ratio", "1,1.0", "--out", f"{r}/e.json"], 2, "--paired-ratio"),
        ("evaluate: --method cvh,cvh", ["evaluate", f"{r}/good.npz", "--method", "cvh,CVH", "--bits", "8",
                                        "--out", f"{r}/e.json"], 2, "--method"),
        ("evaluate: --paired-ratio nan", ["evaluate", f"{r}/good.npz", "--method", "cvh", "--bits", "8",
                                          "--paired-ratio", "nan", "--out", f"{r}/e.json"], 2, "paired"),
        ("evaluate: --bits abc", ["evaluate", f"{r}/good.npz", "--bits", "abc"], 2, "--bits"),
        ("evaluate: existing --out", [*ev, "--out", f"{r}/results_existing.json"], 2, "results_existing.json"),
        ("evaluate: --resume bad JSON", [*ev, "--resume", "--out", f"{r}/results_bad.json"], 2, "results_bad.json"),
        ("evaluate: --resume JSON list", [*ev, "--resume", "--out", f"{r}/results_list.json"], 2,
         "results_list.json"),
        ("evaluate: --out missing folder", [*ev, "--out", f"{r}/nope/e.json"], 2, "nope"),
        ("evaluate: no labels", ["evaluate", f"{r}/nolabels.npz", "--method", "cvh", "--bits", "8", "--out",
                                 f"{r}/e2.json"], 2, "labels"),
        # ---- encode / index / search
        ("encode: truncated model", ["encode", f"{r}/model_trunc.npz", f"{r}/good.npz", "--modality", "image",
                                     "--out", f"{r}/c.npz"], 2, "model_trunc.npz"),
        ("encode: header n_bits vs weights", ["encode", f"{r}/model_bits.npz", f"{r}/good.npz", "--modality",
                                              "image", "--out", f"{r}/c.npz"], 2, "model_bits.npz"),
        ("encode: header features vs weights", ["encode", f"{r}/model_feats.npz", f"{r}/good.npz", "--modality",
                                                "image", "--out", f"{r}/c.npz"], 2, "model_feats.npz"),
        ("encode: header is a list", ["encode", f"{r}/model_list.npz", f"{r}/good.npz", "--modality", "image",
                                      "--out", f"{r}/c.npz"], 2, "model_list.npz"),
        ("encode: unknown method in header", ["encode", f"{r}/model_method.npz", f"{r}/good.npz", "--modality",
                                              "image", "--out", f"{r}/c.npz"], 2, "model_method.npz"),
        ("encode: NaN weights", ["encode", f"{r}/model_nan.npz", f"{r}/good.npz", "--modality", "image",
                                 "--out", f"{r}/c.npz"], 2, "model_nan.npz"),
        ("encode: data is not a model", ["encode", f"{r}/good.npz", f"{r}/good.npz", "--modality", "image",
                                         "--out", f"{r}/c.npz"], 2, "good.npz"),
        ("encode: features differ from model", ["encode", f"{r}/model.npz", f"{r}/wrongdims.npz", "--modality",
                                                "image", "--out", f"{r}/c.npz"], 2, "features"),
        ("encode: --rows query of 2 objects", ["encode", f"{r}/model.npz", f"{r}/tiny2.npz", "--modality",
                                               "image", "--rows", "query", "--out", f"{r}/c.npz"], 2, "query"),
        ("encode: --out missing folder", ["encode", f"{r}/model.npz", f"{r}/good.npz", "--modality", "image",
                                          "--out", f"{r}/nope/c.npz"], 2, "nope"),
        ("encode: 1 object, --rows all", ["encode", f"{r}/model.npz", f"{r}/tiny1.npz", "--modality", "image",
                                          "--out", f"{r}/c1.npz"], 0, "wrote 1"),
        ("encode: 2 objects, --rows all", ["encode", f"{r}/model.npz", f"{r}/tiny2.npz", "--modality", "text",
                                           "--out", f"{r}/c2.npz"], 0, "wrote 2"),
        ("index: model given as codes", ["index", f"{r}/model.npz", "--out", f"{r}/i.dmhidx"], 2, "model.npz"),
        ("index: 12-bit codes", ["index", f"{r}/codes12.npz", "--out", f"{r}/i.dmhidx"], 2, "8"),
        ("index: truncated codes", ["index", f"{r}/truncated.npz", "--out", f"{r}/i.dmhidx"], 2, "truncated.npz"),
        ("index: --out is a directory", ["index", f"{r}/codes.npz", "--out", f"{r}/folder.npz"], 2, "folder.npz"),
        ("search: --k 1e12 (every code)", ["search", f"{r}/index.dmhidx", "--codes", f"{r}/codes.npz", "--k",
                                          "1000000000000", "--format", "csv"], 0, "query_id,rank"),
        ("search: --k 0", ["search", f"{r}/index.dmhidx", "--codes", f"{r}/codes.npz", "--k", "0"], 2, "--k"),
        ("search: --radius -1", ["search", f"{r}/index.dmhidx", "--codes", f"{r}/codes.npz", "--radius", "-1"],
         2, "radius"),
        ("search: damaged index", ["search", f"{r}/index_flip.dmhidx", "--codes", f"{r}/codes.npz", "--k", "3"],
         2, "index_flip.dmhidx"),
        ("search: bits differ", ["search", f"{r}/index.dmhidx", "--codes", f"{r}/codes16.npz", "--k", "3"], 2,
         "bits"),
        ("search: --out missing folder", ["search", f"{r}/index.dmhidx", "--codes", f"{r}/codes.npz", "--k", "3",
                                          "--out", f"{r}/nope/s.json"], 2, "nope"),
        ("search: 2-object data, --rows all", ["search", f"{r}/index.dmhidx", "--model", f"{r}/model.npz",
                                               "--data", f"{r}/tiny2.npz", "--modality", "image", "--rows", "all",
                                               "--k", "2"], 0, "query_id"),
        # ---- reproduce, featurize, datasets, demo
        ("reproduce: cells.json of the wrong shape", ["reproduce", "table1", "--quick", "--datasets", "uci-digits",
                                                      "--out", f"{r}/cells_wrong"], 2, "cells.json"),
        ("reproduce: cells.json a list", ["reproduce", "table1", "--quick", "--datasets", "uci-digits", "--out",
                                          f"{r}/cells_list"], 2, "cells.json"),
        ("reproduce: unknown experiment", ["reproduce", "nope"], 2, "nope"),
        ("reproduce: --shard 3/2", ["reproduce", "table1", "--quick", "--shard", "3/2", "--out", f"{r}/sh"], 2,
         "--shard"),
        ("reproduce: --shard half", ["reproduce", "table1", "--quick", "--shard", "half", "--out", f"{r}/sh"], 2,
         "--shard"),
        ("reproduce: --seeds 1,1", ["reproduce", "table1", "--quick", "--seeds", "1,1", "--out", f"{r}/rep"], 2,
         "--seeds"),
        ("featurize: empty CSV", ["featurize", "--texts", f"{r}/empty.csv", "-o", f"{r}/f.npz"], 2, "empty.csv"),
        ("featurize: header-only CSV", ["featurize", "--texts", f"{r}/header_only.csv", "-o", f"{r}/f.npz"], 2,
         "header_only.csv"),
        ("featurize: missing column", ["featurize", "--texts", f"{r}/nocolumn.csv", "-o", f"{r}/f.npz"], 2,
         "id"),
        ("featurize: --output .txt", ["featurize", "--texts", f"{r}/nocolumn.csv", "-o", f"{r}/f.txt"], 2,
         "--output"),
        ("featurize: empty image folder", ["featurize", "--images", f"{r}/imgs", "-o", f"{r}/f.npz"], 2, "imgs"),
        ("featurize: --output missing folder", ["featurize", "--texts", f"{r}/header_only.csv", "-o",
                                                f"{r}/nope/f.npz"], 2, "nope"),
        ("datasets: missing benchmark folder", ["datasets", f"mirflickr25k:{r}/nope"], 2, "nope"),
        ("demo: --bits 0", ["demo", "--bits", "0"], 2, "n_bits"),
        ("demo: --seed -1", ["demo", "--seed", "-1"], 2, "--seed"),
        ("evaluate: --seeds -1", [*ev, "--seeds", "-1", "--out", f"{r}/e3.json"], 2, "--seeds"),
        ("fit: --seed -5", [*fit, "--seed", "-5", "--out", f"{r}/m.npz"], 2, "--seed"),
        ("reproduce: --seeds -2", ["reproduce", "table1", "--quick", "--seeds", "-2", "--out", f"{r}/rep2"], 2,
         "--seeds"),
        ("reproduce: binary config", ["reproduce", f"{r}/binary.json"], 2, "binary.json"),
        ("reproduce: config a list", ["reproduce", f"{r}/config_list.json"], 2, "config"),
        ("reproduce: --out is a file", ["reproduce", "table1", "--quick", "--datasets", "uci-digits", "--out",
                                        f"{r}/table.csv"], 2, "table.csv"),
        ("evaluate: training set not paired", ["evaluate", f"{r}/halfpaired.npz", "--method", "cvh", "--bits", "4",
                                               "--paired-ratio", "0.5", "--out", f"{r}/e4.json"], 2, "paired"),
        ("featurize: repeated id", ["featurize", "--texts", f"{r}/dup_ids.csv", "-o", f"{r}/f.npz"], 2,
         "dup_ids.csv"),
        ("featurize: latin-1 CSV", ["featurize", "--texts", f"{r}/latin1.csv", "-o", f"{r}/f.npz"], 2, "latin1.csv"),
        ("featurize: NUL in CSV", ["featurize", "--texts", f"{r}/nul.csv", "-o", f"{r}/f.npz"], 2, "nul.csv"),
        ("featurize: missing labels column", ["featurize", "--texts", f"{r}/nocolumn.csv", "--id-column", "name",
                                              "--text-column", "body", "--labels-column", "tags", "-o",
                                              f"{r}/f.npz"], 2, "tags"),
        ("info: unknown benchmark name", ["info", "nosuchbench:/tmp"], 2, "nosuchbench"),
        ("search: --format csv to a directory", ["search", f"{r}/index.dmhidx", "--codes", f"{r}/codes.npz",
                                                 "--k", "3", "--format", "csv", "--out", r], 2, r),
        # ---- found by benchmarks/fuzz_options.py
        ("fit: empty DATA", ["fit", "", "--method", "cvh", "--out", f"{r}/m.npz"], 2, "DATA"),
        ("fit: empty --out", [*fit, "--out", ""], 2, "--out"),
        ("tune: empty --out", ["tune", f"{r}/good.npz", "--method", "cvh", "--bits", "8", "--out", ""], 2,
         "--out"),
        ("search: blank INDEX", ["search", " ", "--k", "3"], 2, "must not be empty"),
        ("evaluate: empty --param", [*ev, "--param", "", "--out", f"{r}/e6.json"], 2, "--param"),
        ("tune: --seeds -1", ["tune", f"{r}/good.npz", "--method", "cvh", "--bits", "8", "--seeds", "-1", "--out",
                              f"{r}/t3.json"], 2, "--seeds"),
        ("featurize: empty --label-separator", ["featurize", "--texts", f"{r}/labelled.csv", "--labels-column",
                                                "labels", "--label-separator", "", "-o", f"{r}/f.npz"], 2,
         "--label-separator"),
        ("dmh --threads 1e13", ["--threads", "10000000000000", "info", f"{r}/good.npz"], 2, "--threads"),
        ("reproduce: --datasets ','", ["reproduce", f"{r}/tiny.json", "--datasets", ",", "--out", f"{r}/rep3"], 2,
         "--datasets"),
        ("reproduce: --reuse a missing folder", ["reproduce", f"{r}/tiny.json", "--no-plots", "--reuse",
                                                 f"{r}/nope", "--out", f"{r}/rep4"], 2, "--reuse"),
        ("reproduce: config without paper_ref", ["reproduce", f"{r}/no_paper_ref.json", "--no-plots", "--out",
                                                 f"{r}/rep5"], 2, "paper_ref"),
        *_collection_cases(root),
    ]


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


def _api_cases(root: Path):
    """(name, thunk): each call must raise a ``dmh.errors.DmhError`` with a one-line message."""
    import warnings

    from dmh import CrossModalData, load_data, make_semi_paired
    from dmh.base import load_model
    from dmh.data import random_split
    from dmh.index import HammingIndex, save_codes
    from dmh.metrics import evaluate_retrieval

    warnings.simplefilter("ignore")
    good = load_data(root / "good.npz")
    model = load_model(root / "model.npz")
    ones = np.ones((4, 2))
    codes = np.ones((4, 8), np.int8)
    index = HammingIndex(8, backend="numpy").add(codes)

    def fit(method, data, **params):
        from dmh.registry import get_method_class

        return lambda: get_method_class(method)(n_bits=8, **params).fit(data)

    return [
        ("CrossModalData: image a string", lambda: CrossModalData(image="abc", text=ones)),
        ("CrossModalData: text None", lambda: CrossModalData(image=ones, text=None)),
        ("CrossModalData: object text", lambda: CrossModalData(image=ones, text=np.array([[None, 1]] * 4))),
        ("CrossModalData: nested lists of str", lambda: CrossModalData(image=[["a", "b"]] * 4, text=ones)),
        ("CrossModalData: NaN in observed rows", lambda: CrossModalData(image=ones * np.nan, text=ones)),
        ("CrossModalData: labels with NaN", lambda: CrossModalData(image=ones, text=ones,
                                                                   labels=[0, 1, np.nan, 1])),
        ("CrossModalData: labels of 3 rows", lambda: CrossModalData(image=ones, text=ones, labels=[0, 1, 2])),
        ("CrossModalData: multi-hot of 2s", lambda: CrossModalData(image=ones, text=ones, labels=ones * 2)),
        ("CrossModalData: mask of 5 entries", lambda: CrossModalData(image=ones, text=ones,
                                                                     image_mask=np.ones(5, bool))),
        ("CrossModalData: index 1e300", lambda: CrossModalData(image=ones, text=ones,
                                                               query_idx=np.array([1e300]))),
        ("CrossModalData: dtype float16", lambda: CrossModalData(image=ones, text=ones, dtype="float16")),
        ("CrossModalData.astype: dtype 'half'", lambda: good.astype("half")),
        ("make_semi_paired: ratio 2", lambda: make_semi_paired(good, 2)),
        ("make_semi_paired: ratio 'half'", lambda: make_semi_paired(good, "half")),
        ("random_split: 1 object", lambda: random_split(1)),
        ("random_split: train_size -1", lambda: random_split(100, train_size=-1)),
        ("random_split: train_size 2.5", lambda: random_split(100, train_size=2.5)),
        ("random_split: query_size nan", lambda: random_split(100, query_size=float("nan"))),
        ("random_split: query_size None", lambda: random_split(100, query_size=None)),
        ("fit: dmh perplexity 'abc'", fit("dmh", good, perplexity="abc")),
        ("fit: dmh preset [1]", fit("dmh", good, preset=[1])),
        ("fit: one paired object", fit("cvh", CrossModalData(image=ones, text=ones,
                                                             text_mask=np.array([1, 0, 0, 0]),
                                                             image_mask=np.array([1, 1, 1, 1])))),
        ("fit: dmh gamma nan", fit("dmh", good, gamma=float("nan"))),
        ("fit: dmh hidden_size 1e13", fit("dmh", good, hidden_size=10**13)),
        ("fit: dmh hidden_size 2.5", fit("dmh", good, hidden_size=2.5)),
        ("fit: dmh complement 'nope'", fit("dmh", good, complement="nope")),
        ("fit: lssh n_atoms 0", fit("lssh", good, n_atoms=0)),
        ("fit: cmfh lambda_ 2", fit("cmfh", good, lambda_=2.0)),
        ("fit: n_bits 0", lambda: model.__class__(n_bits=0).fit(good)),
        ("encode: NaN features", lambda: model.encode(np.full((2, 6), np.nan), "image")),
        ("encode: wrong width", lambda: model.encode(np.ones((2, 7)), "image")),
        ("encode: 1-D features", lambda: model.encode(np.ones(6), "image")),
        ("encode: modality audio", lambda: model.encode(np.ones((2, 6)), "audio")),
        ("HammingIndex: 12 bits", lambda: HammingIndex(12)),
        ("HammingIndex: backend nope", lambda: HammingIndex(8, backend="nope")),
        ("index.add: codes of 0", lambda: HammingIndex(8, backend="numpy").add(np.zeros((2, 8)))),
        ("index.add: repeated ids", lambda: HammingIndex(8, backend="numpy").add(codes, ids=[1, 1, 2, 3])),
        ("index.add: negative ids", lambda: HammingIndex(8, backend="numpy").add(codes, ids=[-1, 1, 2, 3])),
        ("index.search: k 0", lambda: index.search(codes, 0)),
        ("index.search: k 1e12", lambda: index.search(codes, 10**12)),
        ("index.search: 16-bit queries", lambda: index.search(np.ones((1, 16), np.int8), 1)),
        ("index.range_search: radius 9", lambda: index.range_search(codes, 9)),
        ("save_codes: codes of 2", lambda: save_codes(root / "x.npz", codes * 2)),
        ("save_codes: missing folder", lambda: save_codes(root / "nope" / "x.npz", codes)),
        ("evaluate_retrieval: bits differ", lambda: evaluate_retrieval(codes, np.ones((3, 16), np.int8),
                                                                       [0, 1, 0, 1], [0, 1, 0])),
        ("evaluate_retrieval: label rows", lambda: evaluate_retrieval(codes, codes, [0, 1], [0, 1, 0, 1])),
        ("evaluate_retrieval: empty database", lambda: evaluate_retrieval(codes, codes[:0], [0, 1, 0, 1],
                                                                          np.zeros(0, int))),
    ]


def _run_api(name, thunk):
    import traceback

    from dmh.errors import DmhError

    try:
        thunk()
    except DmhError as exc:
        text = str(exc)
        if "\n" in text or not text:
            return name, "FAIL: not one line", text[:150], 0.0
        return name, "ok", text[:150], 0.0
    except Exception as exc:  # noqa: BLE001 - recorded as a failure of the case
        return name, f"FAIL: {type(exc).__name__}, not a DmhError", traceback.format_exception_only(exc)[-1][:150], 0.0
    return name, "FAIL: no error", "", 0.0


def _in_process(argv) -> tuple[int, str, str]:
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


def _run(case, root: Path, timeout: float, subprocess_mode: bool):
    name, argv, want, text = case
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    if subprocess_mode:
        try:
            proc = subprocess.run([sys.executable, "-m", "dmh.cli", *argv], capture_output=True, text=True,
                                  timeout=timeout, cwd=root, env=env)
            rc, out, err = proc.returncode, proc.stdout, proc.stderr
        except subprocess.TimeoutExpired:
            return name, "timeout", f"no answer in {timeout:.0f} s", time.perf_counter() - t0
    else:
        rc, out, err = _in_process(argv)
    problems = []
    if rc != want:
        problems.append(f"exit {rc}, expected {want}")
    if "Traceback" in out + err:
        problems.append("traceback")
    if "pickle" in (out + err).lower():
        problems.append("mentions pickle")
    if want == 2:
        errors = [line for line in err.splitlines() if line.strip() and not line.startswith(("warning:", "\r"))]
        error_lines = [line for line in errors if line.startswith("Error:")]
        if len(error_lines) != 1 or len(errors) != 1:
            problems.append(f"{len(errors)} stderr line(s), not one 'Error:' line")
    if text and text.lower() not in (out + err).lower():
        problems.append(f"output lacks {text!r}")
    first = (err.strip().splitlines() or out.strip().splitlines() or [""])[-1][:150]
    return name, "ok" if not problems else "FAIL: " + "; ".join(problems), first, time.perf_counter() - t0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--filter", default="", help="run only cases whose name contains this")
    parser.add_argument("--subprocess", action="store_true", help="run each case as python -m dmh.cli")
    parser.add_argument("--jobs", type=int, default=2, help="parallel cases with --subprocess")
    parser.add_argument("--timeout", type=float, default=120.0)
    parser.add_argument("--verbose", action="store_true", help="also print the message of passing cases")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="dmh-bad-inputs-") as tmp:
        root = Path(tmp)
        _build(root)
        cases = [c for c in _cases(root) if args.filter in c[0]]
        if args.subprocess:
            with ThreadPoolExecutor(max_workers=args.jobs) as pool:
                results = list(pool.map(lambda c: _run(c, root, args.timeout, True), cases))
        else:
            results = [_run(c, root, args.timeout, False) for c in cases]
        if not args.subprocess:
            results += [_run_api(n, t) for n, t in _api_cases(root) if args.filter in n]
    failed = 0
    for name, verdict, message, seconds in results:
        failed += verdict != "ok"
        if verdict != "ok" or args.verbose:
            print(f"{verdict:<4} {name} ({seconds:.1f} s)\n       {message}")
    print(f"{len(results) - failed} of {len(results)} cases behave as expected")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
