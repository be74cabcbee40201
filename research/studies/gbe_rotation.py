"""Would a rotation before the sign help GBE's codes? (research/log/quality.md, section 24.)

GBE's loss is ``KL(S^Y || S^H(Hh)) + gamma q(Hh)``; its KL part depends on distances between the
relaxed codes only, so any rotation ``Hh R`` keeps it, while the quantization error
``||Hh R - sign(Hh R)||^2`` changes. ITQ (Gong and Lazebnik, 2011) finds the rotation that minimises
that error by alternating sign and orthogonal Procrustes. This probe fits CLE once on the training
set (DMH's first-round inputs), GBE with DMH's default settings, and reports the MAP (labels for
diagnosis only) of the relaxed codes' cosine ranking, of their signs, and of the signs after ITQ's
rotation, with the quantization error per bit and the share of bits the rotation flips.

    python research/studies/gbe_rotation.py DATA --bits 16,64,128 [--seed 0] [--out FILE.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path

import numpy as np

from dmh.report import atomic_write_text
from dmh.data import label_matrix
from dmh.diagnostics import _cosine, ranking_map
from dmh.methods import cle as cle_mod
from dmh.methods import gbe
from dmh.methods.dmh import sparse_view

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the benchmarks' shared helpers
from _data import load_or_exit  # noqa: E402


def itq_rotation(V: np.ndarray, iters: int = 50) -> np.ndarray:
    """ITQ's orthogonal rotation of ``V`` (n x c) towards the corners of the hypercube, from the identity."""
    R = np.eye(V.shape[1])
    for _ in range(iters):
        B = np.where(V @ R > 0, 1.0, -1.0)
        U, _, Wt = np.linalg.svd(B.T @ V)
        R = (U @ Wt).T
    return R


def _map_all(S, L):
    rel = (L.astype(np.int32) @ L.T.astype(np.int32)) > 0
    return ranking_map(S, rel, np.eye(len(L), dtype=bool))


def _signs(V):
    return np.where(V > 0, 1.0, -1.0)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("data")
    ap.add_argument("--bits", default="16,64,128")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    train = load_or_exit(ap, args.data).train()
    masks = [train.image_mask, train.text_mask]
    views = []
    for raw, mask in zip((train.image, train.text), masks, strict=True):  # DMH's cle_scaling="auto"
        if sparse_view(raw, mask):
            views.append(cle_mod.scale_view(raw, mask))
            continue
        mu, sd = raw[mask].mean(0), raw[mask].std(0)
        sd[sd < 1e-12] = 1
        views.append(cle_mod.scale_view((raw - mu) / sd, mask))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Y = cle_mod.fit_cle(views, masks, d=512, k=3, lam=0.1, eta=0.01, max_iter=30, tol=1e-4, complement_how="lle",
                            q_method="procrustes", y_method="exact", w_reg=0.1, neighbour_pool=30,
                            rng=np.random.default_rng(args.seed)).Y
    L = label_matrix(train.labels)
    res = {"data": args.data, "seed": args.seed, "map_Y_cosine": _map_all(_cosine(Y, Y), L), "bits": {}}
    print(f"{args.data}: MAP of Y (cosine) {res['map_Y_cosine']:.4f}")
    for b in (int(x) for x in args.bits.split(",")):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            g = gbe.fit_gbe(Y, b, gamma=0.01, similarity="perplexity", perplexity=30.0, init="projection", lr=0.5,
                            max_iter=80, tol=5e-4, schedule="cosine", rng=np.random.default_rng(args.seed))
        H = np.asarray(g.relaxed, dtype=np.float64)
        HR = H @ itq_rotation(H)
        C, CR = _signs(H), _signs(HR)
        Hn = H / np.maximum(np.linalg.norm(H, axis=1, keepdims=True), 1e-12)
        row = {"map_relaxed_cosine": _map_all(Hn @ Hn.T, L), "map_sign": _map_all(C @ C.T, L),
               "map_rotated_sign": _map_all(CR @ CR.T, L),
               "quantization_per_bit": float(np.mean(np.sum((H - C) ** 2, 1)) / b),
               "rotated_quantization_per_bit": float(np.mean(np.sum((HR - CR) ** 2, 1)) / b),
               "mean_abs_relaxed": float(np.abs(H).mean()), "bits_flipped": float(np.mean(C != CR))}
        res["bits"][b] = row
        print(f"  {b:3d} bits: relaxed (cosine) {row['map_relaxed_cosine']:.4f}  sign {row['map_sign']:.4f}  "
              f"rotated sign {row['map_rotated_sign']:.4f}  quantization/bit {row['quantization_per_bit']:.3f} -> "
              f"{row['rotated_quantization_per_bit']:.3f}  bits flipped {row['bits_flipped']:.3f}")
    if args.out:
        out = Path(args.out)
        allres = json.loads(out.read_text()) if out.exists() else []
        atomic_write_text(out, json.dumps([*allres, res], indent=1))


if __name__ == "__main__":
    main()
