"""DMH's rows of two sets of experiment results, cell by cell, paired by seed: the mean difference
per (row, paired ratio) and every (dataset, bits, direction) cell that fell by more than --limit.

    python research/studies/compare_dmh_runs.py --base A/metrics.json [B/metrics.json ...] \
        --new C/metrics.json [D/metrics.json ...] [--metric map] [--limit 0.01]

Used for the fit-cost rule of docs/speed.md (mean MAP within 0.005, no cell down by more than 0.01).
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics

ROWS = ("DMH", "DMH (pairs only)")


def load(paths):
    out = collections.defaultdict(dict)
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for r in json.load(f)["records"]:
                if r["method"] in ROWS:
                    out[(r["dataset"], r["method"], r["paired_ratio"], r["n_bits"], r["task"])][r["seed"]] = r
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", nargs="+", required=True)
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--metric", default="map")
    ap.add_argument("--limit", type=float, default=0.01)
    args = ap.parse_args(argv)
    base, new = load(args.base), load(args.new)
    groups = collections.defaultdict(list)
    down = []
    unmatched = 0  # (cell, seed) pairs on one side only: said, never dropped silently
    for key in sorted(set(base) | set(new)):
        seeds = sorted(set(base.get(key, {})) & set(new.get(key, {})))
        unmatched += len(set(base.get(key, {})) ^ set(new.get(key, {})))
        if not seeds:
            continue
        b = statistics.mean(base[key][s][args.metric] for s in seeds)
        n = statistics.mean(new[key][s][args.metric] for s in seeds)
        groups[key[1:3]].append(n - b)
        if n - b < -args.limit:
            per_seed = " ".join(f"{new[key][s][args.metric] - base[key][s][args.metric]:+.3f}" for s in seeds)
            down.append(f"{key[0]} {key[1]} {key[2]:g} {key[3]} bits {key[4]}: {b:.4f} -> {n:.4f} "
                        f"({n - b:+.4f}; per seed {per_seed})")
    print(f"{args.metric}: new minus base, mean over the seeds both have")
    print("| row | paired ratio | cells | mean | lowest | highest | down by more than the limit |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for (row, ratio), diffs in sorted(groups.items()):
        print(f"| {row} | {ratio:g} | {len(diffs)} | {statistics.mean(diffs):+.4f} | {min(diffs):+.4f} | "
              f"{max(diffs):+.4f} | {sum(d < -args.limit for d in diffs)} |")
    for line in down:
        print("*", line)
    if unmatched:
        print(f"({unmatched} (cell, seed) record(s) on one side only: not compared)")


if __name__ == "__main__":
    main()
