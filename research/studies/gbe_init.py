"""Benchmark: GBE's initial relaxed codes (``gbe_init``) and the MAP of the codes it ends with.

One DMH round's first two steps on the training set, fully paired: CLE on the standardised
inputs (the package defaults, d = 512), then GBE from each initialisation (150 Adam steps, the
defaults). Scores the training codes themselves, a third of the training objects querying all of
them (relevant = same label), so DAM and out-of-sample encoding play no part.

    python research/studies/gbe_init.py [--data-dir ../shared/data] [--bits 16 128] [--inits projection pca]

UCI digits is built in; Wikipedia runs when ``DATA_DIR/wiki/wiki_data.mat`` exists. Measured
(2 shared cores, seed 0), training codes' MAP:

    dataset      bits  projection  pca
    UCI digits     16  0.711       0.681
    UCI digits    128  0.602       0.318
    Wikipedia      16  0.487       0.492
    Wikipedia     128  0.489       0.253
"""

from __future__ import annotations

import argparse
import time
import warnings
from pathlib import Path

import numpy as np


def features(data, seed: int):
    from dmh.methods import cle

    masks = [np.ones(len(data.labels), bool)] * 2
    views = []
    for x, m in zip((data.image, data.text), masks, strict=True):
        sd = x.std(0)
        views.append(cle.scale_view((x - x.mean(0)) / np.where(sd > 0, sd, 1.0), m))
    return cle.fit_cle(views, masks, d=512, rng=np.random.default_rng(seed)).Y


def main(argv=None):
    from dmh import load_data
    from dmh.datasets import load_dataset
    from dmh.methods import gbe
    from dmh.metrics import mean_average_precision

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[2] / ".." / "shared" / "data"))
    ap.add_argument("--bits", type=int, nargs="+", default=[16, 128])
    ap.add_argument("--inits", nargs="+", default=["projection", "pca"])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    sets = [("UCI digits", lambda: load_dataset("uci-digits"))]
    wiki = Path(args.data_dir) / "wiki" / "wiki_data.mat"
    if wiki.exists():
        sets.append(("Wikipedia", lambda: load_data(wiki)))
    else:
        print(f"skipping Wikipedia: {wiki} not found")
    print("| dataset | bits | " + " | ".join(args.inits) + " |")
    print("|---|---:|" + "---:|" * len(args.inits))
    for name, load in sets:
        data = load().train()
        Y = features(data, args.seed)
        lab = data.labels
        q = np.arange(0, len(lab), 3)
        for c in args.bits:
            row = []
            for init in args.inits:
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    g = gbe.fit_gbe(Y, c, init=init, max_iter=150, tol=1e-5, rng=np.random.default_rng(args.seed))
                H = g.codes.astype(np.float32)
                row.append(f"{mean_average_precision(H[q], H, lab[q], lab):.3f} ({time.perf_counter() - t0:.0f} s)")
            print(f"| {name} | {c} | " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
