"""Regularised canonical correlation analysis of two paired views, shared by CVH and CCA-ITQ:
the leading canonical directions for a ridge relative to each view's mean variance, and the
label-free choice of that ridge from held-out training pairs."""

from __future__ import annotations

import numpy as np
from scipy import linalg

from .._validation import NON_NEGATIVE, Options
from ..errors import DataError
from .fitting import centre, paired_views
from .spectral import fix_column_signs

__all__ = [
    "AUTO_FALLBACK_REG", "AUTO_HOLDOUT", "AUTO_REG_GRID", "REG", "cca_directions", "centred_pairs",
    "select_cca_ridge",
]

#: relative ridges tried by ``reg="auto"``
AUTO_REG_GRID = (1e-4, 1e-3, 1e-2, 1e-1, 1.0)
#: fraction of the paired objects held out by ``reg="auto"``
AUTO_HOLDOUT = 0.2
#: ridge of ``reg="auto"`` when the pairs are too few to hold some out (Gong et al.'s code's value)
AUTO_FALLBACK_REG = 1e-4
#: the values CVH's and CCA-ITQ's ``reg`` may take: ``"auto"`` or a relative ridge >= 0
REG = [Options("auto"), NON_NEGATIVE]


class _CCABasis:
    """Eigenbases of both views' covariances, reusable for any ridge (the ridge only shifts the
    eigenvalues), and the cross-covariance expressed in them."""

    def __init__(self, Xi: np.ndarray, Xt: np.ndarray):
        n = Xi.shape[0]
        self.si, self.Ui = linalg.eigh(Xi.T @ Xi / n)
        self.st, self.Ut = linalg.eigh(Xt.T @ Xt / n)
        self.si = np.maximum(self.si, 0.0)
        self.st = np.maximum(self.st, 0.0)
        self.K = self.Ui.T @ (Xi.T @ Xt / n) @ self.Ut
        self.di, self.dt = Xi.shape[1], Xt.shape[1]

    def ridge(self, reg: float) -> tuple[float, float]:
        return reg * self.si.sum() / self.di, reg * self.st.sum() / self.dt

    def directions(self, reg: float, k: int):
        ri, rt = self.ridge(reg)
        li, lt = self.si + ri, self.st + rt
        # relative threshold: a rounding-level eigenvalue of a rank-deficient covariance is singular
        if li.min() <= 1e-12 * max(li.max(), 1e-300) or lt.min() <= 1e-12 * max(lt.max(), 1e-300):
            raise np.linalg.LinAlgError("singular covariance")
        a, b = 1.0 / np.sqrt(li), 1.0 / np.sqrt(lt)
        P, s, Qt = linalg.svd(a[:, None] * self.K * b[None, :], full_matrices=False)
        Wi = self.Ui @ (a[:, None] * P[:, :k])
        Wt = self.Ut @ (b[:, None] * Qt[:k].T)
        return Wi, Wt, s[:k], np.array([ri, rt])


def cca_directions(Xi: np.ndarray, Xt: np.ndarray, reg: float, k: int):
    """The ``k`` leading regularised canonical directions of two centred, paired views.

    Returns ``(W_i, W_t, rho, ridge)``: ``W_v`` (d_v, k) with ``W_v^T (C_vv + r_v I) W_v = I``,
    ``W_i^T C_it W_t = diag(rho)``, ``rho`` descending, ``ridge = (r_i, r_t)`` with
    ``r_v = reg * trace(C_vv) / d_v`` (covariances normalised by ``n``). Column signs are fixed
    (largest-magnitude entry of each stacked direction positive).
    """
    Wi, Wt, rho, ridge = _CCABasis(Xi, Xt).directions(reg, k)
    W = fix_column_signs(np.vstack([Wi, Wt]))
    return W[: Xi.shape[1]], W[Xi.shape[1]:], rho, ridge


def select_cca_ridge(Xi: np.ndarray, Xt: np.ndarray, k: int, rng: np.random.Generator,
                     owner: str = "CCA", grid=AUTO_REG_GRID, holdout: float = AUTO_HOLDOUT):
    """The relative ridge of ``grid`` whose ``k`` canonical directions, fitted on a seeded
    ``1 - holdout`` share of the paired rows ``(Xi, Xt)`` (uncentred), reach the highest mean
    correlation on the held-out pairs. No labels are used. Returns ``(reg, scores)`` (``-inf``
    where a ridge leaves a covariance singular). With too few pairs to hold any out (fewer than 2
    held out, or no more than ``k`` left to fit) it returns :data:`AUTO_FALLBACK_REG` and no scores.
    """
    n = Xi.shape[0]
    n_hold = int(round(holdout * n))
    if n_hold < 2 or n - n_hold <= k:
        return AUTO_FALLBACK_REG, np.empty(0)
    perm = rng.permutation(n)
    hold, fit = perm[:n_hold], perm[n_hold:]
    Fi, mi = centre(Xi[fit])
    Ft, mt = centre(Xt[fit])
    Hi, Ht = Xi[hold] - mi, Xt[hold] - mt
    basis = _CCABasis(Fi, Ft)
    scores = np.full(len(grid), -np.inf)
    for j, reg in enumerate(grid):
        try:
            Wi, Wt, _, _ = basis.directions(reg, k)
        except np.linalg.LinAlgError:
            continue
        scores[j] = float(np.mean(_column_correlations(Hi @ Wi, Ht @ Wt)))
    if not np.isfinite(scores).any():
        raise DataError(f"{owner}: every ridge of {tuple(grid)} leaves a covariance singular")
    return float(grid[int(np.argmax(scores))]), scores


def centred_pairs(data, n_bits: int, reg, rng: np.random.Generator, owner: str, n_directions: int | None = None):
    """What CVH and CCA-ITQ fit on: the paired training objects of ``data``, each view centred with
    its mean, and the relative ridge, ``reg`` itself or, with ``reg="auto"``, the one
    :func:`select_cca_ridge` picks for ``n_directions`` (default ``n_bits``) directions from the
    uncentred pairs. Returns ``(Xi, Xt, means, reg, scores)`` (``scores`` empty for a fixed ridge).
    No more paired objects than ``n_bits`` is a :class:`DataError`."""
    Xi_raw, Xt_raw = paired_views(data, owner, n_bits + 1,
                                  f"{n_bits} bits from centred views need more paired objects than bits")
    scores = np.empty(0)
    if reg == "auto":
        reg, scores = select_cca_ridge(Xi_raw, Xt_raw, n_bits if n_directions is None else n_directions, rng, owner)
    Xi, mean_i = centre(Xi_raw)
    Xt, mean_t = centre(Xt_raw)
    return Xi, Xt, {"image": mean_i, "text": mean_t}, float(reg), scores


def _column_correlations(A: np.ndarray, B: np.ndarray) -> np.ndarray:
    """Pearson correlation of each column of ``A`` with the same column of ``B`` (0 where constant)."""
    A = A - A.mean(axis=0)
    B = B - B.mean(axis=0)
    den = np.sqrt((A * A).sum(axis=0) * (B * B).sum(axis=0))
    num = (A * B).sum(axis=0)
    return np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
