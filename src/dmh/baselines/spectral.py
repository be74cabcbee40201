"""Graph and eigenvector functions of the spectral baselines (CVH, IMH): k-NN heat-kernel affinity,
Laplacian, eigenvector sign fixing. Module-level so that tests can check them against naive references."""

from __future__ import annotations

import numpy as np
from scipy import sparse
from sklearn.neighbors import NearestNeighbors

__all__ = ["fix_column_signs", "knn_heat_affinity", "laplacian"]


def fix_column_signs(A: np.ndarray, *others: np.ndarray):
    """Flip columns so that the largest-magnitude entry of each column of ``A`` is positive.

    Eigenvectors are defined up to sign; fixing it makes codes reproducible across LAPACK builds
    whenever the eigenvalues are distinct. ``others`` (arrays with as many columns) get the same
    flips, so that coupled projections stay coupled.
    """
    idx = np.argmax(np.abs(A), axis=0)
    signs = np.sign(A[idx, np.arange(A.shape[1])])
    signs[signs == 0] = 1.0
    if not others:
        return A * signs
    return (A * signs, *(B * signs for B in others))


def knn_heat_affinity(X: np.ndarray, n_neighbors: int, sigma: float | None = None):
    """Symmetric k-NN affinity with heat-kernel weights.

    ``A_ij = exp(-||x_i - x_j||^2 / (2 sigma^2))`` when ``j`` is among the ``n_neighbors`` nearest
    neighbours of ``i`` or ``i`` among those of ``j`` (the usual "or" symmetrisation), else 0; no
    self-loops. ``sigma=None`` takes the mean distance of the points to their k-NN neighbours, a
    scale-free default (ties among equal distances are resolved by scikit-learn's search order).
    """
    n = X.shape[0]
    k = min(int(n_neighbors), n - 1)
    if k < 1:
        return sparse.csr_matrix((n, n))
    nn = NearestNeighbors(n_neighbors=k + 1).fit(X)
    dist, ind = nn.kneighbors(X)
    # drop each point itself (usually the first column; handle exact duplicates robustly)
    keep = ind != np.arange(n)[:, None]
    rows = np.repeat(np.arange(n), k + 1).reshape(n, k + 1)
    dist, ind, rows = dist[keep], ind[keep], rows[keep]
    # exactly k per row after removing self (if self was not returned, drop the farthest)
    counts = np.bincount(rows, minlength=n)
    if (counts > k).any():
        order = np.lexsort((dist, rows))
        dist, ind, rows = dist[order], ind[order], rows[order]
        rank = np.arange(rows.size) - np.repeat(np.cumsum(counts) - counts, counts)
        sel = rank < k
        dist, ind, rows = dist[sel], ind[sel], rows[sel]
    if sigma is None:
        sigma = float(dist.mean()) if dist.size else 1.0
        if sigma <= 0:
            sigma = 1.0
    w = np.exp(-(dist**2) / (2.0 * sigma**2))
    A = sparse.csr_matrix((w, (rows, ind)), shape=(n, n))
    return A.maximum(A.T).tocsr()


def laplacian(A: sparse.spmatrix) -> sparse.csr_matrix:
    """Unnormalised graph Laplacian ``D - A``."""
    deg = np.asarray(A.sum(axis=1)).ravel()
    return (sparse.diags(deg) - A).tocsr()
