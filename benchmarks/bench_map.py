"""MAP over a large database: seconds and peak memory of dmh.metrics.

    nice -n 10 python benchmarks/bench_map.py [--sizes 2000x18015,5000x82081] [--bits 64]
                                              [--labels 24] [--out bench_map.json]

Each measurement runs in a fresh subprocess, so that its peak resident memory
(``resource.getrusage(RUSAGE_SELF).ru_maxrss``) belongs to it alone; the baseline (interpreter,
numpy, the random codes and labels) is measured in the same process just before the metric runs.
Codes are uniform random bits; labels are random multi-hot (``--labels`` columns, each set with
probability 0.1, at least one per item: a MIRFLICKR-25K-like 24-label layout by default).
Timings are wall-clock seconds and process CPU seconds of one call.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

import numpy as np

FUNCTIONS = (
    "mean_average_precision",
    "mean_average_precision@50",
    "mean_average_precision_tie_aware",
    "evaluate_retrieval",
)


def make_data(n_query, n_database, n_bits, n_labels, seed=0):
    rng = np.random.default_rng(seed)

    def codes(n):
        return np.where(rng.random((n, n_bits), dtype=np.float32) > 0.5, 1, -1).astype(np.int8)

    def labels(n):
        lab = rng.random((n, n_labels), dtype=np.float32) < 0.1
        lab[np.arange(n), rng.integers(0, n_labels, n)] = True
        return lab.astype(np.uint8)

    return codes(n_query), codes(n_database), labels(n_query), labels(n_database)


def child(spec):
    """Run one measurement; print a JSON line."""
    from dmh import metrics

    q, d, ql, dl = make_data(spec["n_query"], spec["n_database"], spec["n_bits"], spec["n_labels"])
    base_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    name = spec["function"]
    if name == "mean_average_precision@50":
        call = lambda: metrics.mean_average_precision(q, d, ql, dl, top_k=50)  # noqa: E731
    elif name == "evaluate_retrieval":
        call = lambda: metrics.evaluate_retrieval(q, d, ql, dl)["map"]  # noqa: E731
    else:
        call = lambda: getattr(metrics, name)(q, d, ql, dl)  # noqa: E731
    t0, c0 = time.perf_counter(), time.process_time()
    value = call()
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    rel_share = float(metrics.relevance(ql[:50], dl).mean())
    print(
        json.dumps(
            {
                **spec,
                "seconds": wall,
                "cpu_seconds": cpu,
                "value": value,
                "baseline_rss_mb": base_kb / 1024,
                "peak_rss_mb": peak_kb / 1024,
                "extra_rss_mb": (peak_kb - base_kb) / 1024,
                "relevant_share": rel_share,
            }
        )
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000x18015,5000x82081")
    parser.add_argument("--bits", default="64")
    parser.add_argument("--labels", type=int, default=24)
    parser.add_argument("--functions", default=",".join(FUNCTIONS))
    parser.add_argument("--out", default="bench_map.json")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(json.loads(args.child))
        return
    rows = []
    print(
        f"{'queries x database':>20} {'bits':>4} {'function':>34} {'wall s':>8} {'cpu s':>7} "
        f"{'extra MB':>9} {'peak MB':>8}  value"
    )
    for size in args.sizes.split(","):
        n_query, n_database = (int(v) for v in size.lower().split("x"))
        for n_bits in (int(b) for b in args.bits.split(",")):
            for function in args.functions.split(","):
                spec = {
                    "n_query": n_query,
                    "n_database": n_database,
                    "n_bits": n_bits,
                    "n_labels": args.labels,
                    "function": function,
                }
                proc = subprocess.run(
                    [sys.executable, __file__, "--child", json.dumps(spec)],
                    capture_output=True,
                    text=True,
                    check=True,
                )
                row = json.loads(proc.stdout.strip().splitlines()[-1])
                rows.append(row)
                print(
                    f"{size:>20} {n_bits:>4} {function:>34} {row['seconds']:>8.2f} "
                    f"{row['cpu_seconds']:>7.2f} "
                    f"{row['extra_rss_mb']:>9.0f} {row['peak_rss_mb']:>8.0f}  {row['value']:.4f}",
                    flush=True,
                )
    from dmh.report import atomic_write_text

    info = {
        "benchmark": "MAP over a large database",
        "cpus": os.cpu_count(),
        "numpy": np.__version__,
        "load_average_after": os.getloadavg(),
        "rows": rows,
    }
    atomic_write_text(args.out, json.dumps(info, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
