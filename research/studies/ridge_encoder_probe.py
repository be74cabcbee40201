"""Which views should DMH encode by a ridge map instead of DAM's network? One fit per (bits, seed)
with the default settings; each view's codes from its network or from the ridge map that
``DMH(encoder="ridge")`` would fit (:mod:`dmh.methods.ridge_encoder`, penalty by GCV on the codes),
and test MAP of the four combinations, image->text and text->image. Labels are used for diagnosis
only (research/log/quality.md section 25).

    python research/studies/ridge_encoder_probe.py DATA --bits 64,128 --seeds 0 --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from dmh import DMH, mean_average_precision, set_threads
from dmh.report import atomic_write_text
from dmh.methods.ridge_encoder import fit_ridge_encoder

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the benchmarks' shared helpers
from _data import int_list, load_or_exit  # noqa: E402

VIEWS = ("image", "text")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data")
    parser.add_argument("--bits", default="64,128")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    bits = int_list(parser, args.bits, "--bits")
    seeds = int_list(parser, args.seeds, "--seeds", low=0, high=2**31)
    if not Path(args.out).parent.is_dir():
        parser.error(f"--out {args.out}: folder {Path(args.out).parent} does not exist")
    set_threads(args.threads)
    data = load_or_exit(parser, args.data)
    train, query, db = data.train(), data.query(), data.database()
    records = []
    for seed in seeds:
        for b in bits:
            model = DMH(b, random_state=seed).fit(train)
            codes = {}
            for v in VIEWS:
                mu, sd = model.scalers_[v]
                Z = (np.asarray(getattr(train, v), dtype=np.float64) - mu) / sd
                ridge = fit_ridge_encoder(lambda Z=Z: iter([Z]), model.codes_)

                def by_ridge(X, ridge=ridge, mu=mu, sd=sd):
                    return np.where(ridge.outputs((np.asarray(X, dtype=np.float64) - mu) / sd) >= 0, 1, -1)

                codes[("ridge", v)] = (by_ridge(getattr(query, v)), by_ridge(getattr(db, v)), ridge.alpha)
                codes[("network", v)] = (model.encode(getattr(query, v), v), model.encode(getattr(db, v), v), None)
            rec = {"data": args.data, "bits": b, "seed": seed,
                   "alpha": {v: codes[("ridge", v)][2] for v in VIEWS}}
            for im in ("network", "ridge"):
                for tx in ("network", "ridge"):
                    labels = (query.labels, db.labels)
                    i2t = mean_average_precision(codes[(im, "image")][0], codes[(tx, "text")][1], *labels)
                    t2i = mean_average_precision(codes[(tx, "text")][0], codes[(im, "image")][1], *labels)
                    rec[f"image {im}, text {tx}"] = [round(float(i2t), 4), round(float(t2i), 4)]
            print(json.dumps(rec), flush=True)
            records.append(rec)
            atomic_write_text(args.out, json.dumps(records, indent=1) + "\n")


if __name__ == "__main__":
    main()
