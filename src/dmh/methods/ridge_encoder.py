"""A linear encoder for one view (``DMH(encoder="ridge")`` or ``"auto"``): a ridge regression from the
view's inputs as the networks see them (standardised; a sparse view scaled as a whole under
``dam_scaling="auto"``) to the final codes GBE gave its training objects, used in place of DAM's
network to encode new objects of that view.

The penalty is chosen by generalised cross-validation (Golub, Heath and Wahba 1979) on the codes
themselves, so labels play no part: with the Gram matrix ``G = Z'Z`` of the standardised inputs
(``d x d``, accumulated over blocks of rows) and its eigenvectors, the residual sum of squares and the
degrees of freedom of every candidate penalty follow from ``d x d`` and ``d x c`` quantities alone, so
the choice costs one eigendecomposition whatever the number of objects. The inputs are centred over
the view's training objects (:class:`~dmh.methods.dam_inputs.Standardised`), so the intercept is
the codes' mean.

On the shared sets a sparse view (a bag of words) gains category MAP and loses some of the held-out
pair score; a dense view loses MAP (docs/quality.md)."""

from __future__ import annotations

import numpy as np

from ..errors import DataError

__all__ = ["ALPHAS", "MAX_FEATURES", "RidgeEncoder", "fit_ridge_encoder"]

#: the widest view the ridge map takes: its d x d Gram matrix is decomposed once (8192 features: 512
#: MiB in float64; a 2,000-d view of 3,000 rows and 128 bits took 2.5 s on 2 cores)
MAX_FEATURES = 8192

#: candidate penalties, as multiples of the mean eigenvalue of ``Z'Z`` (so the grid means the same
#: on any number of objects and features): 1e-4 .. 1e3
ALPHAS = np.logspace(-4, 3, 22)


class RidgeEncoder:
    """``Z @ coef + intercept`` for standardised inputs ``Z``; ``alpha`` is the penalty chosen."""

    def __init__(self, coef: np.ndarray, intercept: np.ndarray, alpha: float):
        self.coef = np.asarray(coef, dtype=np.float32)
        self.intercept = np.asarray(intercept, dtype=np.float32)
        self.alpha = float(alpha)

    def outputs(self, Z: np.ndarray) -> np.ndarray:
        return np.asarray(Z, dtype=np.float32) @ self.coef + self.intercept


def fit_ridge_encoder(blocks, codes: np.ndarray, alphas=ALPHAS) -> RidgeEncoder:
    """Ridge from standardised inputs to ``codes`` (n x c, +-1), penalty by GCV.

    ``blocks``: a callable that gives the n x d standardised inputs as consecutive blocks of rows
    (read once: one pass accumulates ``Z'Z`` and ``Z'H``)."""
    H = np.asarray(codes, dtype=np.float64)
    n, c = H.shape
    mean = H.mean(axis=0)
    Hc = H - mean
    G = C = None
    zsum = None
    start = 0
    for block in blocks():
        B = np.asarray(block, dtype=np.float64)
        rows = Hc[start : start + B.shape[0]]
        start += B.shape[0]
        G = B.T @ B if G is None else G + B.T @ B
        C = B.T @ rows if C is None else C + B.T @ rows
        zsum = B.sum(0) if zsum is None else zsum + B.sum(0)
    if start != n:
        raise DataError(f"the input blocks hold {start} rows, the codes {n}")
    # the inputs are centred over these rows up to float32 rounding: centre their Gram matrix exactly
    # (Z'Hc needs nothing, Hc being centred), so that the intercept below is exact
    zmean = zsum / n
    G = G - n * np.outer(zmean, zmean)
    lam, V = np.linalg.eigh(G)
    lam = np.clip(lam, 0.0, None)
    P = V.T @ C  # d x c
    P2 = (P * P).sum(axis=1)  # per eigen-direction, summed over the outputs
    total = float((Hc * Hc).sum())
    scale = max(float(lam.mean()), 1e-12)
    best = None
    for a in np.asarray(alphas, dtype=np.float64) * scale:
        inv = 1.0 / (lam + a)
        rss = total - float((P2 * (2.0 * inv - lam * inv * inv)).sum())
        df = float((lam * inv).sum()) + 1.0  # + the intercept
        if df >= n:
            continue
        gcv = max(rss, 0.0) / (n * (1.0 - df / n) ** 2)
        if best is None or gcv < best[0]:
            best = (gcv, a)
    if best is None:  # fewer objects than degrees of freedom at every penalty: take the largest
        best = (None, float(alphas[-1]) * scale)
    a = best[1]
    coef = V @ (P / (lam + a)[:, None])
    intercept = mean - zmean @ coef
    return RidgeEncoder(coef, intercept, a / scale)
