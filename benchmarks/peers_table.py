"""Markdown MAP table of the deep peers beside DMH and the best of the six baselines, from the JSON
files written by ``dmh evaluate`` (one per dataset).

    dmh evaluate DATA --method djsrh,jdsh,dgcpn,ucch,sadch,dmh,cvh,imh,cmfh,lssh,stmh,fsh \\
        --bits 16,64 --paired-ratio 1.0 --seeds 0 --out RUN.json
    python benchmarks/peers_table.py RUN.json [RUN2.json ...]

Runs on the same dataset (the name before the colon of their ``dataset`` field) are merged into one
table, so the methods of one dataset may come from several ``dmh evaluate`` calls.

Every number is read from the records; the "best baseline" of a column is the baseline with the
highest MAP in that column (named beside it). The last lines say, per dataset and column, whether
the order UCCH > JDSH > DGCPN > DJSRH published by UCCH's authors holds.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

PEERS = ("djsrh", "jdsh", "dgcpn", "ucch", "sadch")
BASELINES = ("cvh", "imh", "lssh", "stmh", "cmfh", "fsh")
PUBLISHED_ORDER = ("ucch", "jdsh", "dgcpn", "djsrh")
TASKS = (("image->text", "I→T"), ("text->image", "T→I"))


def dataset_name(run: dict, path: Path) -> str:
    return run["dataset"].split(":")[0] if isinstance(run.get("dataset"), str) else path.stem


def table(name: str, runs: list[dict]) -> list[str]:
    """The table of one dataset from the records of one or more runs on it."""
    maps = defaultdict(list)
    fit = defaultdict(list)
    prior = runs[0].get("label_prior_map", float("nan"))
    for r in (r for run in runs for r in run["results"]):
        if r["paired_ratio"] != 1.0:
            continue
        maps[(r["method"], r["n_bits"], r["task"])].append(r["map"])
        fit[r["method"]].append(r.get("fit_seconds", float("nan")))
    bits = sorted({k[1] for k in maps})
    cols = [(b, t, short) for b in bits for t, short in TASKS]

    def cell(method, b, t):
        v = maps.get((method, b, t))
        return None if not v else sum(v) / len(v)

    header = "| method | " + " | ".join(f"{short} {b}" for b, _, short in cols) + " | fit s (mean) |"
    lines = [f"**{name}** (fully paired; label prior MAP {prior:.3f})",
             "", header, "|" + "---|" * (len(cols) + 2)]
    for m in (*PEERS, "dmh"):
        vals = [cell(m, b, t) for b, t, _ in cols]
        if all(v is None for v in vals):
            continue
        times = [x for x in fit[m] if x == x]
        t_mean = f"{sum(times) / len(times):.1f}" if times else "–"
        lines.append(f"| {m.upper()} | " + " | ".join("–" if v is None else f"{v:.3f}" for v in vals)
                     + f" | {t_mean} |")
    best = []
    for b, t, _ in cols:
        scored = [(cell(m, b, t), m) for m in BASELINES if cell(m, b, t) is not None]
        best.append(max(scored) if scored else None)
    lines.append("| best baseline | " + " | ".join("–" if x is None else f"{x[0]:.3f} ({x[1].upper()})" for x in best)
                 + " | |")
    lines.append("")
    for b, t, short in cols:
        vals = [cell(m, b, t) for m in PUBLISHED_ORDER]
        if any(v is None for v in vals):
            continue
        order = [m.upper() for _, m in sorted(zip(vals, PUBLISHED_ORDER, strict=True), reverse=True)]
        holds = all(vals[i] > vals[i + 1] for i in range(len(vals) - 1))
        verdict = "holds" if holds else "does not hold"
        lines.append(f"- {short} {b} bits: {' > '.join(order)} (published order {verdict})")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    args = parser.parse_args(argv)
    by_data = defaultdict(list)
    for path in args.runs:
        run = json.loads(path.read_text())
        by_data[dataset_name(run, path)].append(run)
    out = []
    for name, runs in by_data.items():
        out += table(name, runs) + [""]
    print("\n".join(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
