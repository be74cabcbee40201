"""How many of GBE's code bits each DMH round changes (research/log/quality.md, section 22).

    python research/studies/round_flips.py DATA BITS SEED OUT.json [--rounds 3]

Fits DMH (defaults, ``n_rounds=--rounds``) on the training set less ``dmh tune``'s held-out pairs
(same split for the same seed) with ``record_diagnostics=True`` and writes the share of the
training codes' bits that differ between consecutive rounds, and each network's bit agreement with
the codes per pass. No labels are read.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from dmh import DMH
from dmh.report import atomic_write_text
from dmh.selection import holdout_pairs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the benchmarks' shared helpers
from _data import load_or_exit  # noqa: E402


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data")
    ap.add_argument("bits", type=int)
    ap.add_argument("seed", type=int)
    ap.add_argument("out")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    data = load_or_exit(ap, args.data)
    fit_data, _ = holdout_pairs(data.train(), random_state=args.seed)
    model = DMH(n_bits=args.bits, random_state=args.seed, n_rounds=args.rounds, record_diagnostics=True, n_threads=1)
    model.fit(fit_data)
    codes = [r["codes"] for r in model.rounds_]
    flips = [float(np.mean(codes[i] != codes[i - 1])) for i in range(1, len(codes))]
    hist = model.history_
    result = {"data": args.data, "bits": args.bits, "seed": args.seed, "n_rounds": args.rounds, "flips": flips,
              "agree_img": hist.get("dam_image_agreement"), "agree_txt": hist.get("dam_text_agreement")}
    print(json.dumps({k: result[k] for k in ("data", "bits", "seed", "flips")}))
    atomic_write_text(args.out, json.dumps(result))


if __name__ == "__main__":
    main()
