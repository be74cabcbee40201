"""A DMH variant's cells against the leaderboard's field, won / tied / lost per (dataset, paired
ratio, bits, direction) by :mod:`dmh.experiments.outcomes` (paired by seed), beside the same
counts of the leaderboard's own DMH row and the variant's paired difference from it.

    python research/studies/dmh_against_field.py --field docs/results/peers/metrics.json \
        --variant RESULTS.json [--row LABEL] [--metric map] [--versus 'DMH (pairs only)']

``--variant``: a ``dmh evaluate --out`` file, an experiment's ``metrics.json`` or ``cells.json`` or the records of
``research/studies/encoder_variants.py``; ``--row`` names the row under study among its records (default: the
DMH records). Where that file also holds a row ``DMH`` (the default, from the same fits), it is the
base the variant is paired with, else the leaderboard's ``DMH`` row. The field: every method of
the leaderboard at the same dataset and paired ratio, the rows named ``DMH ...`` excepted.
"""

from __future__ import annotations

import argparse
import collections
import json
import statistics

from dmh.experiments.outcomes import field_outcome, outcome_counts_text, paired_outcome

TASKS = {"image->text": "I->T", "text->image": "T->I"}


def records(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    if isinstance(doc, list):  # research/studies/encoder_variants.py
        return doc
    if "cells" in doc:  # an experiment's cells.json (finished cells so far)
        return [r for entry in doc["cells"] for r in entry["records"]]
    return doc["records"] if "records" in doc else doc["results"]


def cells(recs, metric, keep):
    out = collections.defaultdict(lambda: collections.defaultdict(dict))
    for r in recs:
        if keep(r["method"]):
            out[(r["dataset"], r["paired_ratio"], r["n_bits"], r["task"])][r["method"]][r["seed"]] = r[metric]
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--field", required=True)
    ap.add_argument("--variant", required=True)
    ap.add_argument("--row", default="dmh", help="the row under study (case-insensitive)")
    ap.add_argument("--metric", default="map")
    ap.add_argument("--versus", default=None,
                    help="also count the row against this row of the field alone, e.g. 'DMH (pairs only)'")
    args = ap.parse_args(argv)
    field_recs = records(args.field)
    if field_recs and args.metric not in field_recs[0]:
        numeric = sorted(k for k, v in field_recs[0].items() if isinstance(v, float))
        ap.error(f"--metric {args.metric!r}: not in {args.field}'s records (they have {', '.join(numeric)})")
    field = cells(field_recs, args.metric, lambda m: True)
    recs = records(args.variant)
    variant = cells(recs, args.metric, lambda m: m.lower() == args.row.lower())
    own_base = cells(recs, args.metric, lambda m: m == "DMH") if args.row != "DMH" else {}
    if not variant:
        ap.error(f"--variant {args.variant}: no records of the row {args.row!r}")
    counts = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    print(f"{args.metric}: {args.row} and DMH ({'the same fits' if own_base else 'the leaderboard'}) against every "
          f"other method of the leaderboard (paired by seed)")
    print("| dataset | paired | bits | task | variant | DMH | variant - DMH | variant vs field | DMH vs field "
          "| lost to |")
    print("|---|---:|---:|---|---:|---:|---:|---|---|---|")
    for key in sorted(variant):
        own = next(iter(variant[key].values()))
        row = field.get(key, {})
        base = own_base[key]["DMH"] if key in own_base else row.get("DMH", {})
        rivals = {m: v for m, v in row.items() if not m.startswith("DMH")}
        if not rivals or not base:
            continue
        fv, fb = field_outcome(own, rivals), field_outcome(base, rivals)
        d = paired_outcome(own, base)
        counts[key[:2]]["variant"][fv.outcome] += 1
        counts[key[:2]]["DMH"][fb.outcome] += 1
        if args.versus and row.get(args.versus):
            counts[key[:2]]["versus"][paired_outcome(own, row[args.versus]).outcome] += 1
            counts[key[:2]]["DMH versus"][paired_outcome(base, row[args.versus]).outcome] += 1
        print(f"| {key[0]} | {key[1]:g} | {key[2]} | {TASKS.get(key[3], key[3])} | "
              f"{statistics.mean(own.values()):.4f} | {statistics.mean(base.values()):.4f} | "
              f"{d.diff:+.4f} ({d.outcome}) | {fv.outcome} | {fb.outcome} | {', '.join(fv.lost_to) or '-'} |")
    for (dataset, ratio), c in sorted(counts.items()):
        print(f"{dataset}, paired {ratio:g}: variant {outcome_counts_text(c['variant'])}; "
              f"DMH {outcome_counts_text(c['DMH'])}")
        if c["versus"]:
            print(f"    against {args.versus}: variant {outcome_counts_text(c['versus'])}; "
                  f"DMH {outcome_counts_text(c['DMH versus'])}")


if __name__ == "__main__":
    main()
