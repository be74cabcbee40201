"""Does the label-free score rank settings as test MAP does? Reads per-round diagnosis files of
``research/studies/quality_diagnose.py`` (every (setting, number of rounds) is one candidate) and reports,
per dataset / bits / paired ratio, the Spearman correlation over candidates between the held-out
pair score and the mean test MAP, and the test MAP lost by choosing on the label-free score
(regret). Test MAP is read here only to validate the criterion.

    python research/studies/quality_rank.py FILE.json [FILE.json ...] [--md OUT.md]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from dmh.selection import spearman


def candidates(files):
    rows = []
    for f in files:
        for res in json.loads(Path(f).read_text()):
            if res.get("paired_only"):
                continue
            for r in res["rounds"]:
                lf = r["heldout"]
                rows.append({
                    "data": Path(res["data"]).stem, "bits": res["n_bits"], "ratio": res["ratio"], "seed": res["seed"],
                    "setting": json.dumps(res["params"], sort_keys=True), "round": r["round"],
                    "mrr": lf["score"],
                    "mean_rank": -np.mean([lf[k]["mean_rank"] for k in ("image->text", "text->image")]),
                    "test_map": float(np.mean(list(r["map_test"].values()))),
                })
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--md")
    args = ap.parse_args(argv)
    rows = candidates(args.files)
    groups: dict = {}
    for r in rows:
        groups.setdefault((r["data"], r["bits"], r["ratio"], r["seed"]), []).append(r)
    lines = ["| data | bits | paired | seed | candidates | Spearman (MRR) | Spearman (-mean rank) | chosen by MRR: "
             "test MAP | best test MAP | regret |", "|---|---|---|---|---|---|---|---|---|---|"]
    for key in sorted(groups):
        g = groups[key]
        t = [c["test_map"] for c in g]
        rho = spearman([c["mrr"] for c in g], t)
        rho2 = spearman([c["mean_rank"] for c in g], t)
        chosen = max(g, key=lambda c: c["mrr"])
        best = max(t)
        f = lambda x: "n/a" if x is None else f"{x:.2f}"  # noqa: E731
        lines.append(f"| {key[0]} | {key[1]} | {key[2]:g} | {key[3]} | {len(g)} | {f(rho)} | {f(rho2)} | "
                     f"{chosen['test_map']:.3f} ({chosen['setting']}, round {chosen['round']}) | {best:.3f} | "
                     f"{best - chosen['test_map']:.3f} |")
    lines.append("")
    lines.append("| data | bits | paired | setting | round | held-out MRR | test MAP (mean of I->T, T->I) |")
    lines.append("|---|---|---|---|---|---|---|")
    for r in sorted(rows, key=lambda r: (r["data"], r["bits"], r["ratio"], r["setting"], r["round"])):
        lines.append(f"| {r['data']} | {r['bits']} | {r['ratio']:g} | {r['setting']} | {r['round']} | "
                     f"{r['mrr']:.4f} | {r['test_map']:.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.md:
        Path(args.md).write_text(text)


if __name__ == "__main__":
    main()
