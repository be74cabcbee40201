"""Hostile and careless input through the ``dmh`` command line and the API: each command-line case
ends with the exit code it expects (2 for bad input) and, for bad input, one line ``Error: ...``
naming the file or argument, never a Python traceback and never advice to unpickle a file; each API
case raises a ``dmh.errors.DmhError`` of one line. Cases that expect success (exit 0) check that a
valid-but-unusual input (one object, a path with spaces and unicode, a symlink) is not refused.
The files are those of ``hostile_files.build_files``; the collection cases are
``test_hostile_collection.py``; careless values in every option, ``test_fuzz_options.py``."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest

from .hostile_files import ROOT, problems


def _cases(root: Path) -> list[tuple[str, list[str], int, str]]:
    r = str(root)
    fit = ["fit", f"{r}/good.npz", "--method", "cvh", "--bits", "8"]
    ev = ["evaluate", f"{r}/good.npz", "--method", "cvh", "--bits", "8", "--paired-ratio", "1.0"]
    """(name, argv, expected exit code, text the output must contain)."""
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
         "--bits"),
        ("fit: --bits 100000", ["fit", f"{r}/good.npz", "--method", "cvh", "--bits", "100000", "--out",
                                f"{r}/m.npz"], 2, "--bits"),
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
        ("demo: --bits 0", ["demo", "--bits", "0"], 2, "--bits"),
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
        # ---- found by test_fuzz_options.py
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
    ]



def _api_cases(root: Path, good, model):
    """(name, thunk): each call must raise a ``dmh.errors.DmhError`` with a one-line message. ``good``
    and ``model``: the data and model files loaded (None while the cases are only named)."""
    from dmh import CrossModalData, make_semi_paired
    from dmh.data import random_split
    from dmh.index import HammingIndex, save_codes
    from dmh.metrics import evaluate_retrieval

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
        ("fit: n_bits 0", lambda: type(model)(n_bits=0).fit(good)),
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



@pytest.mark.parametrize(("argv", "want", "text"), [pytest.param(a, w, t, id=n) for n, a, w, t in _cases(Path(ROOT))])
def test_a_command_line_case_ends_as_expected(argv, want, text, hostile_root, monkeypatch):
    monkeypatch.chdir(hostile_root)
    r = str(hostile_root)
    found = problems([a.replace(ROOT, r) for a in argv], want, text.replace(ROOT, r))
    assert not found, "; ".join(found)


@pytest.fixture(scope="module")
def api_cases(hostile_root):
    from dmh import load_data, load_model

    return dict(_api_cases(hostile_root, load_data(hostile_root / "good.npz"), load_model(hostile_root / "model.npz")))


@pytest.mark.parametrize("name", [name for name, _ in _api_cases(Path(ROOT), None, None)])
def test_an_api_case_is_one_dmh_error_line(name, api_cases):
    from dmh.errors import DmhError

    with warnings.catch_warnings(), pytest.raises(DmhError) as exc:
        warnings.simplefilter("ignore")
        api_cases[name]()
    message = str(exc.value)
    assert message and "\n" not in message, repr(message)
