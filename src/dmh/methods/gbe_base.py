"""What both GBE solvers share: the similarity kinds, t-SNE's calibrated P over the CLE features,
the paper's sign, the quantisation scale and a quiet CSR constructor (:mod:`dmh.methods.gbe` and
:mod:`dmh.methods.gbe_sampled` both build on it)."""

from __future__ import annotations

import warnings

import numpy as np
import torch

from ..errors import DataError, ParameterError

SIMILARITIES = ("clip", "shift", "raw", "perplexity")


def calibrated_conditionals(sq_dist: np.ndarray, perplexity: float, n_steps: int = 64) -> np.ndarray:
    """Rows ``exp(-beta_i d_ij) / sum_j``, each ``beta_i`` set by bisection so that the row's
    perplexity (exp of its entropy in nats) is ``perplexity`` (t-SNE's calibration)."""
    n = sq_dist.shape[0]
    target = np.log(perplexity)
    dist = sq_dist - sq_dist.min(1, keepdims=True)  # P is invariant to a per-row shift
    lo = np.zeros(n)
    hi = np.full(n, np.inf)
    beta = np.ones(n) / max(float(np.median(dist[:, -1])), 1e-12)
    Pc = None
    for _ in range(n_steps):
        W = np.exp(-dist * beta[:, None])
        Wsum = W.sum(1)
        Pc = W / Wsum[:, None]
        H = np.log(Wsum) + beta * (dist * Pc).sum(1)
        high = H > target  # too flat: sharpen
        lo = np.where(high, beta, lo)
        hi = np.where(high, hi, beta)
        beta = np.where(np.isinf(hi), beta * 2.0, (lo + hi) / 2.0)
    return Pc


def perplexity_similarity(Y: np.ndarray, perplexity: float = 30.0, n_steps: int = 64, device: str = "cpu"):
    """t-SNE's joint P over the ``3 * perplexity`` nearest neighbours of each row of ``Y``
    (Euclidean), as a symmetric scipy CSR matrix summing to 1 with a zero diagonal.
    ``device`` other than ``"cpu"``: the neighbour search runs on that torch device
    (:func:`dmh.methods.knn.knn_torch`, float32 distances) instead of scikit-learn's."""
    import scipy.sparse as sp
    from sklearn.neighbors import NearestNeighbors

    Y = np.asarray(Y, dtype=np.float64)
    n = Y.shape[0]
    if n < 3:
        raise DataError("similarity='perplexity' needs at least 3 objects")
    k = int(min(n - 1, max(1, round(3 * perplexity))))
    if device != "cpu":
        from .knn import knn_torch

        idx, sq = knn_torch(Y, Y, k, exclude_self=True, device=device, return_sq_dist=True)
    else:
        dist, idx = NearestNeighbors(n_neighbors=k + 1).fit(Y).kneighbors(Y)
        sq, idx = dist[:, 1:] ** 2, idx[:, 1:]
    Pc = calibrated_conditionals(sq, min(float(perplexity), k), n_steps)
    rows = np.repeat(np.arange(n), k)
    Pcond = sp.csr_matrix((Pc.ravel(), (rows, idx.ravel())), shape=(n, n))
    P = (Pcond + Pcond.T).tocsr()
    P.setdiag(0.0)
    P.eliminate_zeros()
    P = P / P.sum()
    return P.tocsr()


def _csr(crow, col, values, size):
    """A torch CSR matrix, without its one-time 'beta' warning (its products are exact)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        return torch.sparse_csr_tensor(crow, col, values, size=size, check_invariants=False)


def _quant_scale(n: int, quantization: str) -> float:
    if quantization == "mean":
        return 1.0 / n
    if quantization == "sum":
        return 1.0
    raise ParameterError(f"quantization must be 'mean' or 'sum', got {quantization!r}")


def sign_pm1(H: torch.Tensor) -> torch.Tensor:
    """The paper's sign (sign(0) = -1)."""
    return torch.where(H > 0, torch.ones_like(H), -torch.ones_like(H))
