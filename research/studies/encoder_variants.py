"""DMH's encoders side by side on the leaderboard's cells: one fit per (paired ratio, bits, seed)
with ``encoder="auto"`` (the same networks and codes as the default fit: the encoder changes only
what encodes new objects), scored three ways, every metric of the harness:

* ``DMH``: every view by its network (the default; equal to the leaderboard's DMH cells),
* ``DMH (encoder auto)``: a sparse view by its ridge map,
* ``DMH (encoder auto, ridge_weight W)``: a sparse view by W x ridge + (1 - W) x network.

The training set of each cell is the harness's (``make_semi_paired(train, ratio, random_state=seed)``),
so the rows pair by seed with docs/results/peers (``research/studies/dmh_against_field.py``). Labels score the
records only (research/log/quality.md section 25).

    python research/studies/encoder_variants.py DATA --bits 16,32,64,128 --seeds 0,1,2,3,4 \
        --paired-ratios 1,0.5 [--weight 0.5] --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dmh import DMH, make_semi_paired, set_threads
from dmh.report import atomic_write_text
from dmh.evaluation import evaluate_model

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the benchmarks' shared helpers
from _data import int_list, load_or_exit, results_file  # noqa: E402

METRICS = ("map", "map@50", "precision@10")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data")
    parser.add_argument("--name", help="the dataset's name in the records (default: the file's stem)")
    parser.add_argument("--bits", default="16,32,64,128")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--paired-ratios", default="1,0.5")
    parser.add_argument("--weight", type=float, default=0.5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    bits = int_list(parser, args.bits, "--bits")
    seeds = int_list(parser, args.seeds, "--seeds", low=0, high=2**31)
    try:
        ratios = [float(r) for r in args.paired_ratios.split(",") if r.strip()]
    except ValueError:
        parser.error(f"--paired-ratios: expected comma-separated numbers, got {args.paired_ratios!r}")
    if not ratios or not all(0 < r <= 1 for r in ratios):
        parser.error(f"--paired-ratios: each must be in (0, 1], got {args.paired_ratios!r}")
    if not 0 < args.weight < 1:
        parser.error(f"--weight: must be between 0 and 1 (exclusive), got {args.weight}")
    records = results_file(parser, args.out)
    done = {(r["paired_ratio"], r["n_bits"], r["seed"]) for r in records}
    set_threads(args.threads)
    data = load_or_exit(parser, args.data)
    name = args.name or Path(args.data).stem
    query, db = data.query(), data.database()
    for ratio in ratios:
        for seed in seeds:
            train = make_semi_paired(data.train(), ratio, random_state=seed)
            for b in bits:
                if (ratio, b, seed) in done:
                    continue
                model = DMH(b, random_state=seed, encoder="auto").fit(train)
                ridges = model.ridge_encoders_
                rows = {"DMH": ({}, 1.0), "DMH (encoder auto)": (ridges, 1.0),
                        f"DMH (encoder auto, ridge_weight {args.weight:g})": (ridges, args.weight)}
                for label, (enc, weight) in rows.items():
                    model.ridge_encoders_, model.ridge_weight = enc, weight
                    for task, sc in evaluate_model(model, query, db).items():
                        records.append({"dataset": name, "method": label, "n_bits": b, "paired_ratio": ratio,
                                        "seed": seed, "task": task, **{m: float(sc[m]) for m in METRICS}})
                print(json.dumps({k: records[-1][k] for k in ("paired_ratio", "n_bits", "seed")}), flush=True)
                atomic_write_text(args.out, json.dumps(records, indent=1) + "\n")


if __name__ == "__main__":
    main()
