"""Isolate GBE (research/log/quality.md): on one round of CLE features Y of the training set, MAP of Y itself
(cosine) and of the training codes that GBE variants make from it, beside the codes GBE starts from
(signs of random projections). Labels are used here for diagnosis only, never to choose. Beside
them: the label-free neighbourhood figure (at one or more relevance sizes, ``--targets``) and, per
code length, the balance of GBE's two gradients at the initial codes (research/log/quality.md section 17).

    python research/studies/quality_gbe_probe.py DATA --bits 16,64 [--ratio 0.5] [--seed 0] \
        [--variants 'perplexity 30,perplexity 30 + gamma 0.001'] [--targets 0.01,0.03] --out FILE.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from dmh import make_semi_paired
from dmh.report import atomic_write_text
from dmh.data import label_matrix
from dmh.diagnostics import _cosine, ranking_map
from dmh.methods import cle as cle_mod
from dmh.methods import gbe
from dmh.methods.dmh import sparse_view
from dmh.selection import code_health, neighbourhood_relevance

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the benchmarks' shared helpers
from _data import load_or_exit  # noqa: E402

VARIANTS = {
    "paper (clip)": {},
    "perplexity 30": dict(similarity="perplexity", perplexity=30.0),
    "perplexity 10": dict(similarity="perplexity", perplexity=10.0),
    "kernel_scale bits": dict(kernel_scale="bits"),
    "balance+decorrelation 1": dict(balance=1.0, decorrelation=1.0),
    "perplexity 30 + scale bits": dict(similarity="perplexity", perplexity=30.0, kernel_scale="bits"),
    "balance+decorrelation 0.1": dict(balance=0.1, decorrelation=0.1),
    "perplexity 30 + balance+decorrelation 0.1": dict(similarity="perplexity", perplexity=30.0, balance=0.1,
                                                      decorrelation=0.1),
    # t-SNE's P over the rows of Y scaled to unit length: neighbours by cosine, the geometry in which "MAP of
    # Y" is measured, instead of Euclidean distance (the rows' lengths vary by 25-50 % on the three sets)
    "perplexity 30 + unit rows": dict(similarity="perplexity", perplexity=30.0, unit_rows=True),
}
# "perplexity 30 + dof A": Student t with A degrees of freedom; A = "c-1" (code length - 1, as van der
# Maaten 2009 suggests for a c-dimensional embedding) or "c/16" or a number
DOF_PREFIX = "perplexity 30 + dof "
# "perplexity 30 + gamma G": DMH's default S^Y with GBE's quantization weight G (default 0.01)
GAMMA_PREFIX = "perplexity 30 + gamma "
# "perplexity 30 + exaggeration R": DMH's default S^Y with GBE's attraction weighted by R (DMH's gbe_exaggeration)
EXAGGERATION_PREFIX = "perplexity 30 + exaggeration "


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise SystemExit(f"quality_gbe_probe.py: error: --variants: {what} must be a number, got {text!r}") from None
    if not value > 0:
        raise SystemExit(f"quality_gbe_probe.py: error: --variants: {what} must be positive, got {text!r}")
    return value


def _variant(name: str, bits: int) -> dict:
    if name.startswith(DOF_PREFIX):
        spec = name[len(DOF_PREFIX):]
        dof = {"c-1": bits - 1.0, "c/16": bits / 16, "c/4": bits / 4}.get(spec)
        return dict(similarity="perplexity", perplexity=30.0,
                    kernel_dof=_number(spec, "degrees of freedom") if dof is None else dof)
    if name.startswith(GAMMA_PREFIX):
        return dict(similarity="perplexity", perplexity=30.0,
                    gamma=_number(name[len(GAMMA_PREFIX):], "gamma"))
    if name.startswith(EXAGGERATION_PREFIX):
        return dict(similarity="perplexity", perplexity=30.0,
                    exaggeration=_number(name[len(EXAGGERATION_PREFIX):], "exaggeration"))
    if name not in VARIANTS and name.startswith("perplexity "):  # "perplexity N": any perplexity
        return dict(similarity="perplexity", perplexity=_number(name.split(maxsplit=1)[1], "perplexity"))
    if name not in VARIANTS:
        raise SystemExit(f"quality_gbe_probe.py: error: --variants: unknown variant {name!r}; known: "
                         f"{', '.join(VARIANTS)}, 'perplexity N', '{DOF_PREFIX}A|c-1|c/4|c/16', '{GAMMA_PREFIX}G', "
                         f"'{EXAGGERATION_PREFIX}R'")
    kw = dict(VARIANTS[name])
    if kw.get("kernel_scale") == "bits":
        kw["kernel_scale"] = bits / 16
    return kw


def _gradient_balance(Y, H0, gamma=0.01) -> dict:
    """RMS per code entry of GBE's two gradients at the initial codes (DMH's default S^Y): the KL
    term's and the quantization term's at ``gamma`` (why ``DMH(gamma_scaling="bits")``)."""
    import torch

    Yt = torch.as_tensor(np.ascontiguousarray(Y), dtype=torch.float32)
    S = gbe.PairSimilarity(Yt, "perplexity", perplexity=30.0)
    H = torch.as_tensor(H0, dtype=torch.float32)
    _, kl = gbe.gbe_loss_and_grad(H, S, 0.0, with_loss=False)
    _, both = gbe.gbe_loss_and_grad(H, S, gamma, with_loss=False)
    rms_kl, rms_q = float(kl.pow(2).mean().sqrt()), float((both - kl).pow(2).mean().sqrt())
    return {"gamma": gamma, "kl_rms": rms_kl, "quantization_rms": rms_q, "ratio": rms_q / rms_kl}


def _map_all(S, L):
    rel = (L.astype(np.int32) @ L.T.astype(np.int32)) > 0
    return ranking_map(S, rel, np.eye(len(L), dtype=bool))


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("data")
    ap.add_argument("--bits", default="16,64")
    ap.add_argument("--ratio", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--scaling", choices=("feature", "auto"), default="feature",
                    help="CLE input: every feature standardised (the paper), or DMH's cle_scaling='auto'")
    ap.add_argument("--targets", default="0.01",
                    help="relevance sizes of the neighbourhood figure: the fraction of the objects the "
                         "queries average alike in both views (dmh.selection.neighbourhood_relevance); "
                         "the first is reported as 'neighbourhood', every one as 'neighbourhood@T'")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    for name in args.variants.split(","):  # before the (long) work: a bad variant is one error line
        _variant(name, 16)
    try:
        targets = [float(t) for t in args.targets.split(",")]
    except ValueError:
        ap.error(f"--targets: numbers separated by commas, got {args.targets!r}")
    if not all(0 < t < 0.25 for t in targets):
        ap.error(f"--targets: each must lie in (0, 0.25), got {args.targets!r}")
    data = load_or_exit(ap, args.data)
    train = data.train()
    if args.ratio < 1:
        train = make_semi_paired(train, args.ratio, random_state=args.seed)
    rng = np.random.default_rng(args.seed)
    masks = [train.image_mask, train.text_mask]
    views = []
    for raw, mask in zip((train.image, train.text), masks, strict=True):
        if args.scaling == "auto" and sparse_view(raw, mask):
            views.append(cle_mod.scale_view(raw, mask))
            continue
        mu, sd = raw[mask].mean(0), raw[mask].std(0)
        sd[sd < 1e-12] = 1
        views.append(cle_mod.scale_view((raw - mu) / sd, mask))
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Y = cle_mod.fit_cle(views, masks, d=512, k=3, lam=0.1, eta=0.01, max_iter=30, tol=1e-4,
                            complement_how="lle", q_method="procrustes", y_method="exact", w_reg=0.1,
                            neighbour_pool=30, rng=rng).Y
    L = label_matrix(train.labels)
    # label-free: relevant = among each other's k nearest in both raw views (research/log/quality.md section 10)
    eye = np.eye(train.n_objects, dtype=bool)
    full = train.paired_mask
    relevance = {}
    for t in targets:
        R, k_nb = neighbourhood_relevance(train.image[full], train.text[full], train.image[full], train.text[full],
                                          target=t)
        relevance[t] = (R & ~eye[np.ix_(full, full)], k_nb)

    def neighbourhood_maps(C):  # the codes of the fully described objects ranking each other
        S = C[full] @ C[full].T
        maps = {f"neighbourhood@{t:g}": ranking_map(S, R, eye[np.ix_(full, full)]) for t, (R, _) in relevance.items()}
        return {"neighbourhood": maps[f"neighbourhood@{targets[0]:g}"], **maps}
    res = {"data": args.data, "ratio": args.ratio, "scaling": args.scaling, "seed": args.seed,
           "neighbourhood_k": relevance[targets[0]][1],
           "neighbourhood_ks": {f"{t:g}": k for t, (_, k) in relevance.items()},
           "cle_seconds": time.perf_counter() - t0, "map_Y_cosine": _map_all(_cosine(Y, Y), L), "bits": {}}
    print(f"{args.data} ratio {args.ratio}: MAP of Y (cosine) {res['map_Y_cosine']:.3f}")
    for b in [int(x) for x in args.bits.split(",")]:
        row = {}
        H0 = gbe.init_codes(Y, b, "projection", np.random.default_rng(args.seed))
        C0 = np.where(H0 > 0, 1.0, -1.0)
        row["random projections (no GBE)"] = {"map": _map_all(C0 @ C0.T, L), **neighbourhood_maps(C0),
                                              **code_health(C0)}
        res.setdefault("gradient_balance", {})[b] = _gradient_balance(Y, H0)
        for name in args.variants.split(","):
            kw = _variant(name, b)
            Yv = Y / np.maximum(np.linalg.norm(Y, axis=1, keepdims=True), 1e-12) if kw.pop("unit_rows", False) else Y
            t0 = time.perf_counter()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                g = gbe.fit_gbe(Yv, b, **{"gamma": 0.01, **kw}, init="projection", max_iter=150, tol=1e-5, lr=0.05,
                                rng=np.random.default_rng(args.seed))
            C = g.codes.astype(np.float64)
            row[name] = {"map": _map_all(C @ C.T, L), **neighbourhood_maps(C),
                         "seconds": time.perf_counter() - t0, **code_health(C)}
        res["bits"][b] = row
        gb = res["gradient_balance"][b]
        print(f"  {b:3d} bits  at the initial codes: RMS gradient KL {gb['kl_rms']:.3g}, quantization (gamma "
              f"{gb['gamma']:g}) {gb['quantization_rms']:.3g}, ratio {gb['ratio']:.2f}")
        for name, r in row.items():
            nb = "  ".join(f"{r[f'neighbourhood@{t:g}']:.3f}" for t in targets)
            print(f"  {b:3d} bits  {name:28s} MAP {r['map']:.3f}  label-free neighbourhood {nb}  "
                  f"balance {r['bit_balance']:.3f}  |corr| {r['mean_abs_corr']:.3f}  distinct {r['distinct']:.3f}")
    out = Path(args.out)
    allres = json.loads(out.read_text()) if out.exists() else []
    allres.append(res)
    atomic_write_text(out, json.dumps(allres, indent=1))


if __name__ == "__main__":
    main()
