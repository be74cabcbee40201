"""Isolate CLE (research/log/quality.md section 8): MAP of CLE's features Y (cosine, training
objects against each other) for CLE settings, beside the same figure for regularised CCA's
projection of the same data (the first stage of CCA-ITQ), and optionally the MAP of the training
codes GBE makes from each Y (calibrated S^Y, t-SNE's P over Y, or P fused with each view's own P).
Labels are used here for diagnosis only, never to choose.

    python research/studies/quality_cle_probe.py DATA --variants none:512:3,none:64:3 [--gbe-bits 16,64]
        [--similarity y,fused] [--seed 0] --out FILE.json

With ``--gbe-bits`` GBE also codes CCA's fused projection (in place of CLE's Y); ``--variants ''``
runs CCA alone.

A variant is ``PRE:d:k``: ``PRE`` is ``none`` (the views as the paper preset gives them to CLE:
standardised per feature, then :func:`dmh.methods.cle.scale_view`), ``centre`` (only centred, then
``scale_view``: each feature keeps its scale relative to the others of its view) or a relative
ridge ``r`` (each standardised view whitened first, ``Z U (Lambda + r tr(C)/d_v)^-1/2`` in its
covariance eigenbasis, as regularised CCA does).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from scipy import linalg

from dmh.report import atomic_write_text
from dmh.baselines.cca import cca_directions, select_cca_ridge
from dmh.baselines.fitting import centre
from dmh.data import label_matrix
from dmh.diagnostics import _cosine, ranking_map
from dmh.methods import cle as cle_mod
from dmh.methods import gbe

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the benchmarks' shared helpers
from _data import int_list, load_or_exit, results_file  # noqa: E402


def _map_all(S, L):
    rel = (L.astype(np.int32) @ L.T.astype(np.int32)) > 0
    return ranking_map(S, rel, np.eye(len(L), dtype=bool))


def _whiten(Z, reg):
    Zc = Z - Z.mean(0)
    s, U = linalg.eigh(Zc.T @ Zc / Zc.shape[0])
    s = np.maximum(s, 0.0)
    return Zc @ (U / np.sqrt(s + reg * s.sum() / Z.shape[1]))


def _gbe_codes(Y, bits, P_extra, seed, max_iter=150):
    """GBE (calibrated S^Y) on Y; with ``P_extra`` the P of Y is averaged with the views' P."""
    original = gbe.perplexity_similarity
    if P_extra:
        def fused(Yn, p, n_steps=64, device="cpu"):
            return (original(Yn, p, n_steps, device=device) + sum(P_extra)) / (1 + len(P_extra))
        gbe.perplexity_similarity = fused
    try:
        g = gbe.fit_gbe(Y, bits, gamma=0.01, init="projection", max_iter=max_iter, tol=1e-5, lr=0.05,
                        rng=np.random.default_rng(seed), similarity="perplexity", perplexity=30.0)
    finally:
        gbe.perplexity_similarity = original
    return g.codes.astype(np.float64)


def _parse_variant(ap, spec: str) -> tuple[str, int, int]:
    """``PRE:d:k`` checked before any work (see the module docstring)."""
    parts = spec.split(":")
    try:
        pre, d, k = parts[0], int(parts[1]), int(parts[2])
        if len(parts) != 3 or d < 1 or k < 1 or (pre not in ("none", "centre") and not float(pre) > 0):
            raise ValueError
    except (ValueError, IndexError):
        ap.error(f"--variants: {spec!r} is not PRE:d:k (PRE none, centre or a positive ridge; d, k >= 1)")
    return pre, d, k


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--variants", default="none:512:3,none:64:3")
    ap.add_argument("--gbe-bits", default="", help="comma-separated code lengths for the GBE probe (empty: none)")
    ap.add_argument("--similarity", default="y", help="y (P over Y) and/or fused (P over Y and each view)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gbe-max-iter", type=int, default=150, help="GBE steps of the probe (the measured runs: 150)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    bits = int_list(ap, args.gbe_bits, "--gbe-bits") if args.gbe_bits else []
    specs = [spec for spec in args.variants.split(",") if spec]  # empty: CCA (and the views) only
    variants = [_parse_variant(ap, spec) for spec in specs]
    sims = args.similarity.split(",")
    if set(sims) - {"y", "fused"}:
        ap.error(f"--similarity: each must be y or fused, got {args.similarity!r}")
    allres = results_file(ap, args.out)
    train = load_or_exit(ap, args.data).train()
    L = label_matrix(train.labels)
    masks = [train.image_mask, train.text_mask]
    std = []
    for raw, mask in zip((train.image, train.text), masks, strict=True):
        mu, sd = raw[mask].mean(0), raw[mask].std(0)
        sd[sd < 1e-12] = 1
        std.append((raw - mu) / sd)
    res = {"data": args.data, "seed": args.seed, "n": int(train.n_objects), "cca": {}, "views": {}, "cle": {}}
    # CCA-ITQ's first stage: ridge chosen by held-out canonical correlation (no labels), directions scaled by rho
    paired = train.paired_mask
    r_max = min(128, std[0].shape[1], std[1].shape[1])
    reg, _ = select_cca_ridge(std[0][paired], std[1][paired], min(16, r_max), np.random.default_rng(args.seed))
    Xi, _ = centre(std[0][paired])
    Xt, _ = centre(std[1][paired])
    Lp = label_matrix(train.labels[paired])
    for k in sorted({min(16, r_max), min(64, r_max), r_max}):
        Wi, Wt, rho, _ = cca_directions(Xi, Xt, reg, k)
        Pi, Pt = Xi @ Wi * rho, Xt @ Wt * rho
        row = {"reg": reg, "fused": _map_all(_cosine(Pi + Pt, Pi + Pt), Lp),
               "image->text": _map_all(_cosine(Pi, Pt), Lp), "gbe": {}}
        for b in bits:  # GBE's codes from CCA's fused projection in place of CLE's Y (paired objects)
            C = _gbe_codes(Pi + Pt, b, [], args.seed, args.gbe_max_iter)
            row["gbe"][f"y {b}"] = _map_all(C @ C.T, Lp)
        res["cca"][f"k={k}"] = row
        gtxt = "  ".join(f"GBE {key} bits {v:.4f}" for key, v in row["gbe"].items())
        print(f"CCA (reg {reg:g}) {k:3d} directions: MAP fused {row['fused']:.4f}  "
              f"image->text {row['image->text']:.4f}  {gtxt}", flush=True)
    for name, Z in zip(("image", "text"), std, strict=True):
        Zc = Z - Z.mean(0)
        res["views"][name] = _map_all(_cosine(Zc, Zc), L)
    print(f"views alone (cosine): image {res['views']['image']:.4f}  text {res['views']['text']:.4f}")
    for spec, (pre, d, k) in zip(specs, variants, strict=True):
        if pre == "none":
            Zs = std
        elif pre == "centre":
            Zs = [np.asarray(Z, dtype=np.float64) for Z in (train.image, train.text)]
        else:
            Zs = [_whiten(Z, float(pre)) for Z in std]
        views = [cle_mod.scale_view(Z, m) for Z, m in zip(Zs, masks, strict=True)]
        sv = np.linalg.svd(np.hstack(views), compute_uv=False) ** 2
        top = float(sv[: min(64, sv.size)].sum() / sv.sum())  # joint variance in the top 64 directions
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            Y = cle_mod.fit_cle(views, masks, d=d, k=k, rng=np.random.default_rng(args.seed)).Y
            row = {"map_Y": _map_all(_cosine(Y, Y), L), "cle_seconds": time.perf_counter() - t0,
                   "joint_variance_top64": top, "gbe": {}}
            for sim in sims:
                extra = [gbe.perplexity_similarity(v, 30.0) for v in views] if sim == "fused" else []
                for b in bits:
                    C = _gbe_codes(Y, b, extra, args.seed, args.gbe_max_iter)
                    row["gbe"][f"{sim} {b}"] = _map_all(C @ C.T, L)
        res["cle"][spec] = row
        gtxt = "  ".join(f"GBE {key} bits {v:.4f}" for key, v in row["gbe"].items())
        print(f"CLE {spec:12s} MAP of Y {row['map_Y']:.4f}  ({row['cle_seconds']:.1f} s, top-64 joint variance "
              f"{top:.2f})  {gtxt}", flush=True)
    allres.append(res)
    atomic_write_text(Path(args.out), json.dumps(allres, indent=1))


if __name__ == "__main__":
    main()
