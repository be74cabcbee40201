"""CLE's neighbour search of a set among itself on the CPU: the row-block search (every block of rows
against all rows, below ``knn.SYMMETRIC_MIN_N``) against the symmetric one (each pair of row blocks
multiplied once, from ``SYMMETRIC_MIN_N`` on), alternated, on the synthetic inputs of paper shape
that ``bench_fit.py`` fits (4096-d image features, 1386-d binary text), standardised and scaled as
DMH hands them to CLE in round 1: seconds, and how many
neighbours agree (they differ only where distances tie, exactly or to float32 rounding; binary
text has many exact ties).

    python benchmarks/bench_knn_self.py [--n 10000] [--k 30] [--threads 2] [--repeats 2] [--out FILE]
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_fit import synthetic  # noqa: E402

from dmh import set_threads  # noqa: E402
from dmh.methods import cle, knn  # noqa: E402
from dmh.methods.dmh import column_mean_std  # noqa: E402


def row_blocks(X, k):
    """The search below SYMMETRIC_MIN_N: every block of rows against all rows."""
    limit, knn.SYMMETRIC_MIN_N = knn.SYMMETRIC_MIN_N, X.shape[0] + 1
    try:
        return knn._knn(X, X, k, exclude_self=True)
    finally:
        knn.SYMMETRIC_MIN_N = limit


def symmetric(X, k):
    return knn._knn_self_symmetric(X, k)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000, help="objects (default 10,000)")
    ap.add_argument("--k", type=int, default=30, help="neighbours (default 30, CLE's neighbour_pool)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=2, help="alternated rounds per search (default 2)")
    ap.add_argument("--out", default=None, help="write the result as JSON here")
    args = ap.parse_args()
    set_threads(args.threads)
    data = synthetic(args.n)
    rows = np.ones(args.n, dtype=bool)
    res = {"n": args.n, "k": args.k, "threads": args.threads}
    for view in ("image", "text"):
        raw = getattr(data, view)
        mean, std = column_mean_std(raw, rows)  # standardised and scaled as DMH gives CLE its views
        X = cle.scale_view(((raw - mean) / np.where(std > 0, std, 1.0)).astype(np.float32), rows, dtype=np.float32)
        searches = (("row_blocks", row_blocks), ("symmetric", symmetric))
        got = {}
        for rep in range(args.repeats):
            for name, search in searches if rep % 2 == 0 else searches[::-1]:
                t = time.perf_counter()
                got[name] = search(X, args.k)
                res.setdefault(f"{view}_{name}_s", []).append(round(time.perf_counter() - t, 2))
        a, b = got["row_blocks"], got["symmetric"]
        res[f"{view}_same_entries"] = float((a == b).mean())
        res[f"{view}_same_sets"] = float(np.mean([len(set(x) & set(y)) / len(x) for x, y in zip(a, b, strict=True)]))
        res[f"{view}_rows_identical"] = float((a == b).all(1).mean())
    print(json.dumps(res))
    if args.out:
        from dmh.report import atomic_write_text

        atomic_write_text(args.out, json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
