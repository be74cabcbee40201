"""Does CLE in float32 change DMH's results on the small sets? Test MAP of DMH (default preset,
fully paired, the whole training set) with ``cle_dtype="float64"`` and ``"float32"``, same seeds.

    python research/studies/cle_dtype_map.py [--datasets uci-digits,wiki:../shared/data/wiki] [--bits 16]
        [--seeds 0,1,2] [--param KEY=VALUE ...] [--out cle_dtype_map.json]

Prints one JSON row per fit and, per dataset and task, the mean paired difference
(float32 - float64) with its standard deviation over the seeds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings

import numpy as np


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default="uci-digits")
    ap.add_argument("--bits", type=int, default=16)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    params = {}
    for item in args.param:
        key, _, value = item.partition("=")
        try:
            params[key] = json.loads(value)
        except json.JSONDecodeError:
            params[key] = value

    import dmh
    from dmh import DMH
    from dmh.evaluation import evaluate_model

    rows = []
    for name in args.datasets.split(","):
        data = dmh.load_dataset(name)
        train, q, db = data.train(), data.query(), data.database()
        for seed in (int(s) for s in args.seeds.split(",")):
            for dtype in ("float64", "float32"):
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    m = DMH(args.bits, random_state=seed, cle_dtype=dtype, **params).fit(train)
                s = evaluate_model(m, q, db)
                row = {"dataset": name.split(":")[0], "seed": seed, "cle_dtype": dtype,
                       "seconds": round(time.perf_counter() - t0, 1),
                       "i2t": round(s["image->text"]["map"], 4), "t2i": round(s["text->image"]["map"], 4),
                       "codes": m.codes_.copy()}
                rows.append(row)
                print(json.dumps({k: v for k, v in row.items() if k != "codes"}), flush=True)
    summary = []
    for name in dict.fromkeys(r["dataset"] for r in rows):
        mine = [r for r in rows if r["dataset"] == name]
        a = [r for r in mine if r["cle_dtype"] == "float64"]
        b = [r for r in mine if r["cle_dtype"] == "float32"]
        entry = {"dataset": name, "seeds": len(a),
                 "training_bits_differing": [round(float(np.mean(x["codes"] != y["codes"])), 4)
                                             for x, y in zip(a, b, strict=True)]}
        for task in ("i2t", "t2i"):
            d = np.array([y[task] - x[task] for x, y in zip(a, b, strict=True)])
            sd = float(d.std(ddof=1)) if d.size > 1 else 0.0
            entry[task] = {"float64": [x[task] for x in a], "float32": [y[task] for y in b],
                           "mean_diff": round(float(d.mean()), 4), "std_diff": round(sd, 4)}
        summary.append(entry)
        print(json.dumps(entry), flush=True)
    if args.out:
        from dmh.report import atomic_write_text

        runs = [{k: v for k, v in r.items() if k != "codes"} for r in rows]
        out = {"bits": args.bits, "params": params, "runs": runs, "summary": summary}
        atomic_write_text(args.out, json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
