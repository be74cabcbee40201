"""Exact brute-force k nearest neighbours on a torch device (a GPU), for the neighbour searches
of CLE (Eq. 22's neighbours, Eq. 5's complement) and of GBE's calibrated S^Y.

The CPU path of those stages stays in numpy/scikit-learn (its results are the reference); this
module is only used when a fit runs with ``device="cuda"``, where the O(n^2 d) searches are the
largest part of the work left on the CPU (at 100,000 objects they are hours of one core's time).
torch is imported inside the function, so importing this module does not load it."""
from __future__ import annotations

import numpy as np


def rank_candidates(part: np.ndarray, dist: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's candidate indices ``part`` and their distances, sorted by distance then index
    (deterministic) and cut to the first ``k``."""
    order = np.lexsort((part, dist), axis=1)[:, :k]
    return np.take_along_axis(part, order, axis=1), np.take_along_axis(dist, order, axis=1)


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
    by index, as :func:`dmh.methods.cle._knn`; with ``return_sq_dist`` also their squared distances,
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
