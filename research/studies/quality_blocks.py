"""Codes made of independent fits (research/log/quality.md): is a code of B bits built from k
independent DMH fits of B/k bits each (their codes side by side) better than one fit of B bits?

    python research/studies/quality_blocks.py DATA --block 32 --blocks 4 --bits 64,128 --seed 0 --out FILE.json \
        [--ratio 0.5] [--param KEY=VALUE ...]

Every fit is on the training set minus the held-out pairs of ``--seed``
(:func:`dmh.selection.holdout_pairs`); block ``j`` has ``random_state = 100 * seed + j``, the single
fits ``random_state = seed``. After each block, the code of the blocks so far (``j + 1`` blocks,
``(j + 1) * block`` bits) is scored; then one fit at each of ``--bits``. Per code: the held-out
pair MRR and the neighbourhood figure (label-free, :mod:`dmh.selection`) and, for diagnosis only,
test MAP, MAP@50 and precision@10 (image->text, text->image). Records are appended to ``--out`` after each score.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from dmh import DMH, make_semi_paired, mean_average_precision
from dmh.report import atomic_write_text
from dmh.report import jsonable
from dmh.metrics import topn_precision
from dmh.selection import holdout_pairs, neighbourhood_scores, pair_retrieval_scores

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the benchmarks' shared helpers
from _data import int_list, load_or_exit, param_dict, results_file  # noqa: E402


class _Side:
    """Models whose codes are put side by side (the object :func:`neighbourhood_scores` encodes with)."""

    def __init__(self, models):
        self.models = models

    def encode(self, X, modality):
        return np.concatenate([m.encode(X, modality=modality) for m in self.models], axis=1)


def _score(models, held, fit_data, query, database) -> dict:
    side = _Side(models)
    hi, ht = side.encode(held.image, "image"), side.encode(held.text, "text")
    out = {
        "n_bits": int(hi.shape[1]),
        "mrr": pair_retrieval_scores(hi, ht)["mrr"],
        "neighbourhood": neighbourhood_scores(side, held, fit_data, held_codes=(hi, ht))["map"],
    }
    q = {"image->text": (side.encode(query.image, "image"), side.encode(database.text, "text")),
         "text->image": (side.encode(query.text, "text"), side.encode(database.image, "image"))}
    for name, top_k in (("test_map", None), ("test_map@50", 50)):
        out[name] = {task: mean_average_precision(a, b, query.labels, database.labels, top_k=top_k)
                     for task, (a, b) in q.items()}
    out["test_precision@10"] = {task: float(topn_precision(a, b, query.labels, database.labels, [10])[0])
                                for task, (a, b) in q.items()}
    return out


def _fit(n_bits, seed, params, fit_data):
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = DMH(n_bits, random_state=seed, **params).fit(fit_data)
    return model, time.perf_counter() - t0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data")
    ap.add_argument("--block", type=int, default=32, help="bits of each block")
    ap.add_argument("--blocks", type=int, default=4, help="number of independent blocks")
    ap.add_argument("--bits", default="64,128", help="code lengths of the single fits to compare with")
    ap.add_argument("--ratio", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--param", action="append", default=[])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    bits = int_list(ap, args.bits, "--bits")
    int_list(ap, str(args.block), "--block")
    if args.blocks < 1:
        ap.error(f"--blocks must be at least 1, got {args.blocks}")
    results = results_file(ap, args.out)
    params = param_dict(ap, args.param)
    data = load_or_exit(ap, args.data)
    train = data.train()
    if args.ratio < 1.0:
        train = make_semi_paired(train, args.ratio, random_state=args.seed)
    fit_data, held = holdout_pairs(train, random_state=args.seed)
    query, database = data.query(), data.database()
    base = {"data": args.data, "ratio": args.ratio, "seed": args.seed, "params": params}

    def record(kind, models, seconds):
        rec = {**base, "kind": kind, "fit_seconds": seconds, **_score(models, held, fit_data, query, database)}
        t, t5, p = rec["test_map"], rec["test_map@50"], rec["test_precision@10"]
        print(f"{kind:>10} {rec['n_bits']:4d} bits: MRR {rec['mrr']:.4f}  neighbourhood {rec['neighbourhood']:.4f}  "
              f"test MAP {t['image->text']:.4f} / {t['text->image']:.4f}  MAP@50 {t5['image->text']:.4f} / "
              f"{t5['text->image']:.4f}  P@10 {p['image->text']:.4f} / {p['text->image']:.4f}  "
              f"({seconds:.0f} s of fits)",
              flush=True)
        results.append(rec)
        atomic_write_text(Path(args.out), json.dumps(jsonable(results), indent=1))

    blocks, seconds = [], 0.0
    for j in range(args.blocks):
        model, s = _fit(args.block, 100 * args.seed + j, params, fit_data)
        blocks.append(model)
        seconds += s
        record(f"{args.block}x{j + 1}", blocks, seconds)
    for b in bits:
        model, s = _fit(b, args.seed, params, fit_data)
        record("single", [model], s)


if __name__ == "__main__":
    main()
