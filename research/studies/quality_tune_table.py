"""Markdown table of `dmh tune --test-map` records, one row per (data, bits, seed), two candidates
side by side with their paired differences (label-free held-out pair score and test MAP).

    python research/studies/quality_tune_table.py A_JSON B_JSON ... --base '{"cle_scaling": "feature"}' \
        --new '{"cle_scaling": "view"}'
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--base", required=True, help="candidate key of the reference setting (as dmh tune writes it)")
    ap.add_argument("--new", required=True, help="candidate key of the setting compared with it")
    args = ap.parse_args(argv)
    base, new = json.dumps(json.loads(args.base), sort_keys=True), json.dumps(json.loads(args.new), sort_keys=True)
    print("| data | bits | seed | score base | score new | diff | MAP I->T base/new | MAP T->I base/new | "
          "MAP mean diff |")
    print("|---|---|---|---|---|---|---|---|---|")
    for f in args.files:
        doc = json.loads(Path(f).read_text())
        name = Path(doc["config"]["data"]).stem
        cells = {}
        for r in doc["records"]:
            key = json.dumps(json.loads(r["candidate"]), sort_keys=True)
            cells[(r["n_bits"], r["seed"], key)] = r
        for b, s in sorted({(b, s) for b, s, _ in cells}):
            a, n = cells.get((b, s, base)), cells.get((b, s, new))
            if a is None or n is None:
                continue
            ta, tn = a["test_map"], n["test_map"]
            ma = (ta["image->text"] + ta["text->image"]) / 2
            mn = (tn["image->text"] + tn["text->image"]) / 2
            sa, sn = a["label_free"]["score"], n["label_free"]["score"]
            print(f"| {name} | {b} | {s} | {sa:.4f} | {sn:.4f} | {sn - sa:+.4f} | "
                  f"{ta['image->text']:.3f}/{tn['image->text']:.3f} | "
                  f"{ta['text->image']:.3f}/{tn['text->image']:.3f} | "
                  f"{mn - ma:+.3f} |")


if __name__ == "__main__":
    main()
