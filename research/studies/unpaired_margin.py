"""What the margin of ``use_unpaired="auto"`` changed: per semi-paired DMH cell of a leaderboard run,
the choice the rule made (every object, or the pairs alone), the held-out pairs' difference in
standard errors, and the choice the rule before it (``unpaired_margin=0``: the higher score) makes
from the same two candidate fits; where the two differ, the test MAP of each side (recorded to
check the rule, never read by it).

    python research/studies/unpaired_margin.py --new OUT_1/cells.json OUT_2/cells.json \\
        --old OLD/metrics.json [--out F.json]

``--new``: the ``cells.json`` of the run with the margin (they keep each cell's ``unpaired_choice``);
``--old``: the leaderboard's ``metrics.json`` from before it, whose DMH (50%) cells ran the rule
before (``git show REV:docs/results/peers/metrics.json``). The side the old rule took there is the
side the margin-0 rule takes from the new run's recorded scores (the same split, the same candidate
fits), so where the two rules agree the two records are the same fit.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics

from dmh.report import atomic_write_text

TASKS = ("image->text", "text->image")


def new_cells(paths):
    out = {}
    for path in paths:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        for entry in doc["cells"]:
            cell, choice = entry["cell"], entry.get("unpaired_choice")
            if cell["method"] != "dmh" or cell.get("pairs_only") or cell["paired_ratio"] >= 1.0 or not choice:
                continue
            maps = {r["task"]: r["map"] for r in entry["records"]}
            out[(cell["dataset"], cell["n_bits"], cell["seed"])] = (choice, maps)
    return out


def old_maps(path):
    with open(path, encoding="utf-8") as f:
        records = json.load(f)["records"]
    out = collections.defaultdict(dict)
    for r in records:
        if r["method"] == "DMH" and r["paired_ratio"] == 0.5:
            out[(r["dataset"], r["n_bits"], r["seed"])][r["task"]] = r["map"]
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--new", nargs="+", required=True)
    ap.add_argument("--old", required=True)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    new, old = new_cells(args.new), old_maps(args.old)
    rows, per_set = [], collections.defaultdict(collections.Counter)
    for key in sorted(new):
        choice, maps = new[key]
        ahead = choice["every_object"] - choice["pairs_alone"]
        se = choice["difference_se"]
        before = ahead >= 0  # the rule before the margin, on the same candidates
        row = {"dataset": key[0], "n_bits": key[1], "seed": key[2], "use": choice["use"], "before": before,
               "ahead": ahead, "se": se, "z": ahead / se if se else None, "margin": choice["margin"]}
        counts = per_set[key[0]]
        counts["cells"] += 1
        counts["every object (margin)"] += choice["use"]
        counts["every object (before)"] += before
        if before != choice["use"] and key in old:
            # the two sides' test MAP, mean of both directions: the new fit and the old one
            mine = statistics.mean(maps[t] for t in TASKS)
            theirs = statistics.mean(old[key][t] for t in TASKS)
            row["map_change"] = mine - theirs
            counts["changed"] += 1
            counts["changed, MAP up"] += mine > theirs
        rows.append(row)
    print("| dataset | bits | seed | every object ahead by (SE) | z | margin 1 | margin 0 | MAP change |")
    print("|---|---:|---:|---|---:|---|---|---:|")
    for r in rows:
        side = {True: "every object", False: "pairs alone"}
        change = f"{r['map_change']:+.4f}" if "map_change" in r else ""
        z = f"{r['z']:+.2f}" if r["z"] is not None else "-"
        print(f"| {r['dataset']} | {r['n_bits']} | {r['seed']} | {r['ahead']:+.4f} ({r['se']:.4f}) | {z} | "
              f"{side[r['use']]} | {side[r['before']]} | {change} |")
    print()
    for name, c in sorted(per_set.items()):
        changes = [r["map_change"] for r in rows if r["dataset"] == name and "map_change" in r]
        mean = f", mean MAP change {statistics.mean(changes):+.4f}" if changes else ""
        print(f"{name}: {c['cells']} cells; every object {c['every object (margin)']} with the margin, "
              f"{c['every object (before)']} before; changed {c['changed']}, MAP up in {c['changed, MAP up']}{mean}")
    if args.out:
        atomic_write_text(args.out, json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
