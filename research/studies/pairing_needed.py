"""How much pairing DMH needs to beat the fully-paired baselines: for each (dataset, task, bits),
DMH's MAP at each paired ratio of a ``fig4`` run (mean over its seeds) against the best baseline
trained on all pairs in a ``table1`` run (mean over its seeds), and the smallest ratio from
which DMH stays above it. Reads the two runs' ``metrics.json``; fits nothing.

    python research/studies/pairing_needed.py docs/results/fig4/metrics.json docs/results/table1/metrics.json [--out F.json]
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

DMH_LABELS = {"DMH", "DMH (100%)", "DMH (50%)", "DMH-paper"}


def _records(parser, path: str) -> list[dict]:
    try:
        records = json.loads(Path(path).read_text())["records"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        parser.error(f"{path}: not an experiment's metrics.json ({exc})")
    return records


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("fig4", help="metrics.json of a fig4 run (DMH at several paired ratios)")
    ap.add_argument("table1", help="metrics.json of a table1 run (the baselines, fully paired)")
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    dmh = defaultdict(lambda: defaultdict(list))
    for r in _records(ap, args.fig4):
        if r["method"] == "DMH":
            dmh[(r["dataset"], r["task"], r["n_bits"])][r["paired_ratio"]].append(r["map"])
    base = defaultdict(list)
    for r in _records(ap, args.table1):
        if r["paired_ratio"] == 1.0 and r["method"] not in DMH_LABELS:
            base[(r["dataset"], r["task"], r["n_bits"], r["method"])].append(r["map"])
    best: dict = {}
    for (ds, task, bits, method), values in base.items():
        mean = statistics.mean(values)
        if mean > best.get((ds, task, bits), (-1.0, ""))[0]:
            best[(ds, task, bits)] = (mean, method)
    rows = []
    print("| dataset | task | bits | best fully-paired baseline | DMH by paired ratio (mean over seeds) | "
          "DMH above from |")
    print("|---|---|---:|---|---|---:|")
    for key in sorted(k for k in dmh if k in best):
        ratios = sorted(dmh[key])
        means = {p: statistics.mean(dmh[key][p]) for p in ratios}
        b_mean, b_method = best[key]
        above = [p for i, p in enumerate(ratios) if all(means[q] > b_mean for q in ratios[i:])]
        first = above[0] if above else None
        seeds = sorted({len(dmh[key][p]) for p in ratios})
        rows.append({"dataset": key[0], "task": key[1], "bits": key[2], "baseline": b_method,
                     "baseline_map": round(b_mean, 4), "dmh_map": {str(p): round(means[p], 4) for p in ratios},
                     "seeds_per_ratio": seeds, "dmh_above_from": first})
        cells = " ".join(f"{p:g}: {means[p]:.3f}" for p in ratios)
        print(f"| {key[0]} | {key[1]} | {key[2]} | {b_method} {b_mean:.3f} | {cells} | "
              f"{'-' if first is None else f'{first:.0%}'} |")
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
