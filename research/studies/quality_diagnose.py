"""Per-round diagnosis of DMH fits (research/log/quality.md): label-free figures and the MAP of every
intermediate, on the training set minus held-out pairs (the held-out pairs give the label-free score).

    python research/studies/quality_diagnose.py DATA --bits 16,64 --ratio 1.0 --seed 0 --out FILE.json \
        [--param KEY=VALUE ...] [--paired-only] [--full]

``--paired-only`` trains on the paired objects of the semi-paired training set alone (the premise
check: do the unpaired objects help?). ``--full`` fits on the whole training set instead (table1's
protocol; no held-out pairs, so no label-free pair score). Test MAP is reported for diagnosis only.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

from dmh import DMH, make_semi_paired
from dmh.report import atomic_write_text
from dmh.report import jsonable
from dmh.diagnostics import diagnose, format_report
from dmh.selection import holdout_pairs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the benchmarks' shared helpers
from _data import int_list, load_or_exit, param_dict, results_file  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data")
    ap.add_argument("--bits", default="16,64")
    ap.add_argument("--ratio", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--param", action="append", default=[])
    ap.add_argument("--paired-only", action="store_true")
    ap.add_argument("--full", action="store_true", help="fit on the whole training set (table1's protocol)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    bits = int_list(ap, args.bits, "--bits")
    results = results_file(ap, args.out)
    params = param_dict(ap, args.param)
    data = load_or_exit(ap, args.data)
    train = data.train()
    if args.ratio < 1.0:
        train = make_semi_paired(train, args.ratio, random_state=args.seed)
    fit_data, held = (train, None) if args.full else holdout_pairs(train, random_state=args.seed)
    if args.paired_only:
        fit_data = fit_data.subset(fit_data.paired_mask.nonzero()[0])
    out_path = Path(args.out)
    for b in bits:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            m = DMH(b, random_state=args.seed, record_diagnostics=True, **params).fit(fit_data)
        fit_s = time.perf_counter() - t0
        rows = diagnose(m, fit_data, held, data.query(), data.database())
        print(f"## {args.data} {b} bits, paired {args.ratio:g}{' (paired only)' if args.paired_only else ''}, "
              f"seed {args.seed}, params {params}, fit {fit_s:.0f}s, {fit_data.summary()}")
        print(format_report(rows))
        results.append({"data": args.data, "n_bits": b, "ratio": args.ratio, "seed": args.seed, "params": params,
                        "protocol": "full" if args.full else "held-out pairs",
                        "paired_only": args.paired_only, "fit_seconds": fit_s, "rounds": rows})
        atomic_write_text(out_path, json.dumps(jsonable(results), indent=1))


if __name__ == "__main__":
    main()
