"""Exact top-k Hamming search: queries per second of HammingIndex (default backend, and the numpy
backend on request) and of faiss.IndexBinaryFlat.search called directly, over random codes.

    python benchmarks/bench_index.py [--n-database 1000000] [--n-queries 1000] [--k 100]
        [--bits 16,32,64,128] [--backends auto,numpy] [--threads N] [--repeat 5] [--out bench_index.json]

Each timing is one ``search(queries, k)`` call (index built beforehand); the contenders alternate
within each round, ``--repeat`` rounds, and the table gives the median (and best) queries per second
and the ratio of medians to faiss direct. Every contender runs with the same thread count (dmh's
setting, ``--threads`` or its default, applied to faiss's OpenMP pool as well). The faiss-direct
column returns ties in faiss's own order; the index columns return them ordered by id (exact);
the script checks that the index's distances equal faiss's.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time

import numpy as np

from dmh.report import atomic_write_text
from dmh import get_threads, set_threads
from dmh.index import HammingIndex, pack_codes


def interleaved_times(contenders, repeat):
    """Every time of each contender over ``repeat`` rounds, the contenders alternating inside each
    round (the order reversed every other round), so that a change of machine load affects them
    alike."""
    times = {name: [] for name in contenders}
    names = list(contenders)
    for r in range(repeat):
        for name in names if r % 2 == 0 else names[::-1]:
            t0 = time.perf_counter()
            contenders[name]()
            times[name].append(time.perf_counter() - t0)
    return times


def run(n_database, n_queries, k, bits, repeat, backends, seed=0):
    import faiss

    rng = np.random.default_rng(seed)
    rows = []
    for n_bits in bits:
        # random packed codes (uniform bits), as HammingIndex stores them
        db = rng.integers(0, 256, size=(n_database, n_bits // 8), dtype=np.uint8)
        queries = pack_codes(np.where(rng.random((n_queries, n_bits)) > 0.5, 1, -1))
        row = {"n_bits": n_bits, "n_database": n_database, "n_queries": n_queries, "k": k}
        results, contenders = {}, {}
        flat = faiss.IndexBinaryFlat(n_bits)
        flat.add(db)

        def direct(flat=flat, queries=queries, results=results):
            results["faiss_direct"] = flat.search(queries, k)

        contenders["faiss_direct"] = direct
        for backend in backends:
            index = HammingIndex(n_bits, backend=backend).add(db)
            name = f"index_{backend}" if backend != "auto" else f"index_auto({index.backend})"
            index.search(queries[:10], k)  # builds the backend's structures outside the timing

            def call(index=index, name=name, queries=queries, results=results):
                results[name] = index.search(queries, k)

            contenders[name] = call
        row["threads"] = get_threads()
        row["faiss_omp_threads"] = faiss.omp_get_max_threads()
        times = interleaved_times(contenders, repeat)
        base = statistics.median(times["faiss_direct"])
        for name, ts in times.items():
            row[f"{name}_qps"] = round(n_queries / statistics.median(ts), 1)
            row[f"{name}_best_qps"] = round(n_queries / min(ts), 1)
            row[f"{name}_vs_faiss_direct"] = round(base / statistics.median(ts), 2)
        ref = results["faiss_direct"][0]
        for name in contenders:
            if name != "faiss_direct":  # same distances; ids may differ only within ties
                np.testing.assert_array_equal(results[name][0], ref)
        row["distances_equal_faiss"] = True
        rows.append(row)
        print_row(row, list(contenders))
    return rows


def print_row(row, names):
    cols = [f"{row['n_bits']:>4} bits"]
    for name in names:
        cols.append(f"{name}: {row[f'{name}_qps']:>9.1f} q/s (x{row[f'{name}_vs_faiss_direct']:.2f})")
    print(" | ".join(cols), flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n-database", type=int, default=1_000_000)
    parser.add_argument("--n-queries", type=int, default=1000)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--bits", default="16,32,64,128")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--backends", default="auto", help="HammingIndex backends to time (auto, numpy, faiss)")
    parser.add_argument("--threads", type=int, default=None, help="threads for every contender (default: dmh's)")
    parser.add_argument("--out", default="bench_index.json")
    args = parser.parse_args(argv)
    bits = [int(b) for b in args.bits.split(",")]
    set_threads(args.threads)  # also sizes faiss's OpenMP pool used by faiss direct
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    rows = run(args.n_database, args.n_queries, args.k, bits, args.repeat, backends)
    info = {
        "benchmark": "exact top-k Hamming search",
        "command": "python benchmarks/bench_index.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "loadavg_1min_at_end": os.getloadavg()[0],
        "machine": {
            "cpus": os.cpu_count(),
            "processor": platform.processor(),
            "numpy": np.__version__,
        },
        "rows": rows,
    }
    atomic_write_text(args.out, json.dumps(info, indent=1) + "\n")
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
