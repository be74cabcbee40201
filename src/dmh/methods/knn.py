"""Exact brute-force k nearest neighbours: CLE's neighbour table (Eq. 22's neighbours, Eq. 5's
complement; :func:`find_neighbours`) on the CPU by float32 products in numpy, or from a view's Gram
matrix (:mod:`dmh.methods.cle_gram`), and on a torch device (a GPU, :func:`knn_torch`) for CLE
and for GBE's calibrated S^Y.

The CPU path is the reference; :func:`knn_torch` is only used when a fit runs with
``device="cuda"``, where the O(n^2 d) searches are the largest part of the work left on the CPU
(at 100,000 objects they are hours of one core's time). torch is imported inside that function,
so importing this module does not load it."""
from __future__ import annotations

import numpy as np

from ..errors import DataError


def rank_candidates(part: np.ndarray, dist: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's candidate indices ``part`` and their distances, sorted by distance then index
    (deterministic) and cut to the first ``k``."""
    order = np.lexsort((part, dist), axis=1)[:, :k]
    return np.take_along_axis(part, order, axis=1), np.take_along_axis(dist, order, axis=1)


def nearest_of_rows(D: np.ndarray, k: int) -> np.ndarray:
    """The ``k`` smallest entries' columns of each row of the distance block ``D``, ranked as
    :func:`rank_candidates` ranks them (``k`` at most ``D.shape[1]``)."""
    if k < D.shape[1]:
        part = np.argpartition(D, k - 1, axis=1)[:, :k]
    else:
        part = np.tile(np.arange(k), (D.shape[0], 1))
    return rank_candidates(part, np.take_along_axis(D, part, axis=1), k)[0]


def drop_self(idx: np.ndarray, *others: np.ndarray):
    """Drop each query's own index from its row of ``idx`` (query ``i`` is row ``i``; a duplicate
    may put it anywhere); a row without it (duplicates crowded it out) drops its last entry. The
    same positions are dropped from each array of ``others``. Returns ``idx`` (and ``others``)."""
    keep = idx != np.arange(idx.shape[0])[:, None]
    keep[keep.all(1), -1] = False
    shape = (idx.shape[0], idx.shape[1] - 1)
    out = [a[keep].reshape(shape) for a in (idx, *others)]
    return out[0] if not others else tuple(out)


#: extra candidates shortlisted by the float32 products when float64 distances are asked for
MARGIN = 8


def knn_torch(X_fit: np.ndarray, X_query: np.ndarray, n_neighbors: int, *, exclude_self: bool,
              device: str, chunk: int = 4096, return_sq_dist: bool = False):
    """The ``n_neighbors`` nearest rows of ``X_fit`` (Euclidean, float32 products on ``device``)
    for each row of ``X_query``: indices ``(n_query, n_neighbors)`` int64, nearest first and ties
    by index, as :func:`_knn`; with ``return_sq_dist`` also their squared distances,
    in float64: then the float32 products only shortlist ``MARGIN`` extra candidates, whose distances
    are recomputed in float64 from the rows' differences and ranked again, so that the result is
    that of a float64 search (as scikit-learn's) unless two distances tie to float64 precision.
    ``exclude_self`` drops each query's own row (``X_query is X_fit``)."""
    import torch

    extra = 1 if exclude_self else 0
    n = X_fit.shape[0]
    kk = min(n_neighbors + extra, n)
    kc = min(kk + MARGIN, n) if return_sq_dist else kk
    F = torch.as_tensor(np.ascontiguousarray(X_fit, dtype=np.float32), device=device)
    F64 = torch.as_tensor(np.asarray(X_fit, dtype=np.float64), device=device) if return_sq_dist else None
    f_sq = (F * F).sum(1)
    idx = np.empty((X_query.shape[0], kk), dtype=np.int64)
    dist = np.empty((X_query.shape[0], kk), dtype=np.float64) if return_sq_dist else None
    # a block of queries holds chunk x n float32 distances on the device: at most ~1 GiB
    chunk = int(max(64, min(chunk, 2**28 // max(n, 1))))
    for s in range(0, X_query.shape[0], chunk):
        Qc = torch.as_tensor(np.ascontiguousarray(X_query[s : s + chunk], dtype=np.float32), device=device)
        D = torch.addmm(f_sq[None, :], Qc, F.T, alpha=-2.0)  # squared distance less the query's norm
        vals, part = torch.topk(D, kc, dim=1, largest=False, sorted=False)
        del D
        if return_sq_dist:  # exact float64 distances of the shortlist, a few hundred rows at a time
            q64 = torch.as_tensor(np.asarray(X_query[s : s + chunk], dtype=np.float64), device=device)
            vals = torch.cat([((q64[a : a + 256, None, :] - F64[part[a : a + 256]]) ** 2).sum(-1)
                              for a in range(0, q64.shape[0], 256)])
        part, dp = rank_candidates(part.cpu().numpy(), vals.double().cpu().numpy(), kk)
        idx[s : s + Qc.shape[0]] = part
        if return_sq_dist:
            dist[s : s + Qc.shape[0]] = dp
    if exclude_self:
        return drop_self(idx, dist) if return_sq_dist else drop_self(idx)
    return (idx, dist) if return_sq_dist else idx


def _knn(X_fit: np.ndarray, X_query: np.ndarray, n_neighbors: int, exclude_self: bool,
         chunk: int = 2048, device: str = "cpu") -> np.ndarray:
    """Indices of the ``n_neighbors`` nearest rows of ``X_fit`` (Euclidean) for each query row,
    nearest first, ties by index; ``exclude_self`` drops the query itself (``X_query is X_fit``).
    Exact brute force with a float32 matrix product per block of queries; ``device`` other than
    ``"cpu"`` runs the products on that torch device (:func:`dmh.methods.knn.knn_torch`). A set
    searched among itself (``X_query is X_fit``, ``exclude_self``) from :data:`SYMMETRIC_MIN_N` rows
    on takes :func:`_knn_self_symmetric` (each pair of row blocks multiplied once)."""
    if device != "cpu":
        return knn_torch(X_fit, X_query, n_neighbors, exclude_self=exclude_self, device=device)
    if exclude_self and X_query is X_fit and X_fit.shape[0] >= SYMMETRIC_MIN_N:
        return _knn_self_symmetric(X_fit, n_neighbors)
    extra = 1 if exclude_self else 0
    kk = min(n_neighbors + extra, X_fit.shape[0])
    # each query row holds n float32 distances and n int64 partition indices: about 256 MiB per block
    chunk = int(max(64, min(chunk, 2**28 // (12 * max(X_fit.shape[0], 1)))))
    F = np.ascontiguousarray(X_fit, dtype=np.float32)
    f_sq = np.einsum("ij,ij->i", F, F)
    idx = np.empty((X_query.shape[0], kk), dtype=np.int64)
    for s in range(0, X_query.shape[0], chunk):
        Qc = np.ascontiguousarray(X_query[s : s + chunk], dtype=np.float32)
        D = f_sq[None, :] - 2.0 * (Qc @ F.T)  # squared distance up to the query's own norm
        idx[s : s + Qc.shape[0]] = nearest_of_rows(D, kk)
    return drop_self(idx) if exclude_self else idx


#: from this many objects on, a search of a set among itself computes each pair's product once
#: (:func:`_knn_self_symmetric`); below, every row block against all rows, the reference path
SYMMETRIC_MIN_N = 10_000


def _knn_self_symmetric(X: np.ndarray, n_neighbors: int, chunk: int = 2048) -> np.ndarray:
    """:func:`_knn` of ``X`` among itself (``exclude_self``) with half the products: the squared
    distances are symmetric, so each pair of row blocks ``(a, b)``, ``a <= b``, is multiplied once
    and serves the rows of both blocks. Each row keeps its best candidates over the blocks, ranked at
    the end by distance, then index. The same neighbours as :func:`_knn` except where two distances
    agree to float32 rounding (a product ``x_i'x_j`` and its transpose may round apart) or tie
    exactly at the cut (which of the equals stays may differ)."""
    n = X.shape[0]
    kk = min(n_neighbors + 1, n)
    F = np.ascontiguousarray(X, dtype=np.float32)
    f_sq = np.einsum("ij,ij->i", F, F)
    best_d = np.full((n, kk), np.inf, dtype=np.float32)
    best_i = np.zeros((n, kk), dtype=np.int64)
    starts = range(0, n, chunk)

    def keep(rows: slice, D: np.ndarray, offset: int) -> None:
        # the block's kk best per row joined with the row's best so far, the kk best of both kept
        k_blk = min(kk, D.shape[1])
        part = np.argpartition(D, k_blk - 1, axis=1)[:, :k_blk] if k_blk < D.shape[1] else \
            np.tile(np.arange(D.shape[1]), (D.shape[0], 1))
        cand_d = np.concatenate([best_d[rows], np.take_along_axis(D, part, axis=1)], axis=1)
        cand_i = np.concatenate([best_i[rows], part + offset], axis=1)
        top = np.argpartition(cand_d, kk - 1, axis=1)[:, :kk]
        best_d[rows] = np.take_along_axis(cand_d, top, axis=1)
        best_i[rows] = np.take_along_axis(cand_i, top, axis=1)

    for a in starts:
        ra = slice(a, min(a + chunk, n))
        for b in starts:
            if b < a:
                continue
            rb = slice(b, min(b + chunk, n))
            G = F[ra] @ F[rb].T
            keep(ra, f_sq[None, rb] - 2.0 * G, b)  # squared distances up to the query's own norm
            if b != a:
                keep(rb, f_sq[None, ra] - 2.0 * G.T, a)
    idx, _ = rank_candidates(best_i, best_d, kk)
    return drop_self(idx)


def _knn_gram(gram, fit_rows: np.ndarray, query_rows: np.ndarray, n_neighbors: int, exclude_self: bool,
              chunk: int = 2048) -> np.ndarray:
    """:func:`_knn` of the view's rows ``query_rows`` among its rows ``fit_rows`` from its Gram
    matrix (a :class:`dmh.methods.cle_gram.GramView`; float64 distances); indices into
    ``fit_rows``. ``exclude_self``: the two row sets are the same."""
    kk = min(n_neighbors + (1 if exclude_self else 0), fit_rows.size)
    idx = np.empty((query_rows.size, kk), dtype=np.int64)
    for s in range(0, query_rows.size, chunk):
        D = gram.sq_distances(query_rows[s : s + chunk], fit_rows)
        idx[s : s + D.shape[0]] = nearest_of_rows(D, kk)
    return drop_self(idx) if exclude_self else idx


def _merge_ranked(A: np.ndarray, B: np.ndarray, k: int, pool: int) -> np.ndarray:
    """Each row's ``k`` candidates from its two ranked lists: those in both first, by the sum of
    their ranks (a rank missing from one list counts as ``pool``), then index."""
    out = np.empty((A.shape[0], k), dtype=np.int64)
    for i in range(A.shape[0]):
        r1 = {j: r for r, j in enumerate(A[i])}
        r2 = {j: r for r, j in enumerate(B[i])}
        cands = set(r1) | set(r2)
        ordered = sorted(cands, key=lambda j: (not (j in r1 and j in r2), r1.get(j, pool) + r2.get(j, pool), j))
        out[i] = ordered[:k]
    return out


def paired_neighbours(Z1p: np.ndarray, Z2p: np.ndarray, k: int, pool: int, device: str = "cpu") -> np.ndarray:
    """k neighbours (indices into the paired set) of each paired object, from the intersection of
    its neighbours in both description spaces (see the module docstring for the fallback)."""
    n_m = Z1p.shape[0]
    pool = min(max(pool, k), n_m - 1)
    A = _knn(Z1p, Z1p, pool, exclude_self=True, device=device)
    B = _knn(Z2p, Z2p, pool, exclude_self=True, device=device)
    return _merge_ranked(A, B, k, pool)


def unpaired_neighbours(Zq: np.ndarray, Zp: np.ndarray, k: int, device: str = "cpu") -> np.ndarray:
    """k nearest paired objects (indices into the paired set) of each unpaired object."""
    return _knn(Zp, Zq, k, exclude_self=False, device=device)


def find_neighbours(Zs, masks, k: int, pool: int, device: str = "cpu", grams=None) -> np.ndarray:
    """Global neighbour table (n x k) of every object; all neighbours are paired objects.
    ``device``: where the distance products run (``"cpu"``: numpy; else a torch device).
    ``grams``: a :class:`dmh.methods.cle_gram.GramView` per view or ``None``; with both views'
    (on the CPU), the distances come from them (float64) instead of float32 products."""
    paired = masks[0] & masks[1]
    P = np.flatnonzero(paired)
    n_m = P.size
    if n_m < 2:
        raise DataError(f"CLE needs at least 2 paired objects, got {n_m}")
    k = min(k, n_m - 1)
    n = paired.size
    nbrs = np.empty((n, k), dtype=np.int64)
    if grams is not None and device == "cpu" and all(g is not None for g in grams):
        pool = min(max(pool, k), n_m - 1)
        A, B = (_knn_gram(g, P, P, pool, exclude_self=True) for g in grams)
        nbrs[P] = P[_merge_ranked(A, B, k, pool)]
        for v in (0, 1):
            only = np.flatnonzero(masks[v] & ~paired)
            if only.size:
                nbrs[only] = P[_knn_gram(grams[v], P, only, k, exclude_self=False)]
        return nbrs
    if n_m == n:  # fully paired: the views themselves, not copies of all their rows (gigabytes at 10^5)
        nbrs[:] = paired_neighbours(Zs[0], Zs[1], k, pool, device=device)
        return nbrs
    nbrs[P] = P[paired_neighbours(Zs[0][P], Zs[1][P], k, pool, device=device)]
    for v in (0, 1):
        only = np.flatnonzero(masks[v] & ~paired)
        if only.size:
            nbrs[only] = P[unpaired_neighbours(Zs[v][only], Zs[v][P], k, device=device)]
    return nbrs
