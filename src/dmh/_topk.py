"""Exact Hamming top-k ordered by ``(distance, id)``, from range searches at an estimated radius.

A heap top-k (``faiss.IndexBinaryFlat.search``) pays for heap updates on every code and returns
ties in an order of its own. Hamming distances take only ``n_bits + 1`` values, so the ``k``
nearest codes of a query are exactly "every code at distance ``<= r``, the first ``k`` of them
in ``(distance, id)`` order", for any radius ``r`` whose range holds at least ``k`` codes. This
module

1. estimates, per query, the smallest such radius from the histogram of its distances to a fixed
   sample of the database (evenly spaced positions; the whole database when it is small, which
   gives the exact radius),
2. runs one range search per distinct radius (a plain threshold test per code, several times
   cheaper than a heap update, and multi-threaded by faiss over queries),
3. re-runs, at a larger radius, the few queries whose range held fewer than ``k`` codes (the
   estimate is a sample's: the answer is exact either way, a retry only costs time),
4. sorts each query's hits by ``(distance, id rank)`` and keeps the first ``k``.

Codes are zero-padded to a byte count that faiss has a specialised popcount kernel for (4, 8, 16,
20, 32, 64 bytes, else a multiple of 8): padding bits are 0 in every code, so distances are
unchanged, and 16-bit codes padded to 4 bytes search about 4x faster than at 2 bytes.
"""

from __future__ import annotations

import numpy as np

__all__ = ["padded_size", "pad_codes", "sample_positions", "estimate_radius", "topk_from_ranges"]

#: database codes in the radius-estimation sample
SAMPLE_SIZE = 8192
#: range-search hits held in memory at once (estimated), per batch of queries
HIT_BUDGET = 1 << 23
_FAST_SIZES = (4, 8, 16, 20, 32, 64)


def padded_size(code_size: int) -> int:
    """The smallest byte count ``>= code_size`` with a specialised faiss Hamming kernel."""
    for size in _FAST_SIZES:
        if code_size <= size:
            return size
    return -(-code_size // 8) * 8


def pad_codes(packed: np.ndarray, size: int) -> np.ndarray:
    """Packed uint8 codes ``(n, code_size)`` zero-padded to ``(n, size)`` bytes (C-contiguous)."""
    n, code_size = packed.shape
    if code_size == size:
        return np.ascontiguousarray(packed)
    out = np.zeros((n, size), dtype=np.uint8)
    out[:, :code_size] = packed
    return out


def sample_positions(n: int, size: int = SAMPLE_SIZE) -> np.ndarray:
    """Evenly spaced database positions (all of them when ``n <= size``)."""
    if n <= size:
        return np.arange(n)
    return np.unique(np.linspace(0, n - 1, size).astype(np.int64))


def estimate_radius(sample_dist: np.ndarray, n: int, k: int, n_bits: int, factor: float = 1.0) -> np.ndarray:
    """Per query, the smallest radius whose range is expected to hold ``>= k`` codes.

    ``sample_dist``: distances ``(n_q, m)`` from the queries to ``m`` sampled database codes. When
    ``m == n`` (the whole database) the radius is exact: the ``k``-th smallest distance. Otherwise
    the target count in the sample is ``factor * (t + 2 sqrt(t) + 1)`` with ``t = k m / n``, a
    margin of two Poisson standard deviations so that few queries need a second search.
    """
    n_q, m = sample_dist.shape
    if m == n:
        target = k
    else:
        t = k * m / n
        target = int(np.ceil(factor * (t + 2.0 * np.sqrt(t) + 1.0)))
    if target > m:
        return np.full(n_q, n_bits, dtype=np.int64)
    # the target-th smallest sample distance: the smallest radius holding `target` sampled codes
    return np.partition(sample_dist, target - 1, axis=1)[:, target - 1].astype(np.int64)


def topk_from_ranges(range_search, queries: np.ndarray, radius: np.ndarray, k: int, n: int, n_bits: int,
                     rank: np.ndarray, retry_radius) -> tuple[np.ndarray, np.ndarray]:
    """The exact ``k`` nearest database positions of each query, ordered by ``(distance, rank)``.

    Parameters
    ----------
    range_search : callable
        ``range_search(queries, r) -> (lims, distances, positions)``: every database code within
        distance ``<= r`` of each query, in CSR form, in any order within a query.
    queries : ndarray
        The queries in the form ``range_search`` takes (rows are selected from it).
    radius : ndarray of int
        First radius tried per query (e.g. from :func:`estimate_radius`).
    k, n, n_bits : int
        Neighbours wanted (``k <= n``), database size, code length.
    rank : ndarray of int64
        Tie-break key of each database position (the rank of its id).
    retry_radius : callable
        ``retry_radius(query_rows, tried_radius) -> larger radius`` for queries whose range held
        fewer than ``k`` codes; at ``n_bits`` every code is in range, so the loop ends.

    Returns ``(distances, positions)``: int32 and int64 arrays ``(n_q, k)``.
    """
    n_q = queries.shape[0]
    out_d = np.empty((n_q, k), dtype=np.int32)
    out_p = np.empty((n_q, k), dtype=np.int64)
    todo = np.arange(n_q)
    radius = np.minimum(np.asarray(radius, dtype=np.int64), n_bits)
    while todo.size:
        failed = []
        for r in np.unique(radius[todo]):
            group = todo[radius[todo] == r]
            # batches small enough that their hits stay within the memory budget
            step = max(1, HIT_BUDGET // max(1, k * 4))
            for start in range(0, group.size, step):
                sel = group[start:start + step]
                lims, dist, pos = range_search(queries[sel], int(r))
                counts = np.diff(lims)
                ok = counts >= k
                failed.append(sel[~ok])
                if ok.any():
                    d, p = _first_k(lims, dist, pos, ok, k, n, n_bits, rank)
                    out_d[sel[ok]] = d
                    out_p[sel[ok]] = p
        todo = np.concatenate(failed) if failed else np.zeros(0, dtype=np.int64)
        if todo.size:
            new = np.asarray(retry_radius(todo, radius[todo]), dtype=np.int64)
            radius[todo] = np.minimum(np.maximum(new, radius[todo] + 1), n_bits)
    return out_d, out_p


def _first_k(lims, dist, pos, ok, k, n, n_bits, rank):
    """Sort the hits of the rows in ``ok`` by (distance, rank) and keep the first ``k`` of each."""
    counts = np.diff(lims)
    keep = np.repeat(ok, counts)
    rows = np.repeat(np.cumsum(ok) - 1, counts)[keep]  # row index among the ok rows
    d = dist[keep].astype(np.int64)
    p = pos[keep].astype(np.int64)
    n_rows = int(ok.sum())
    span = (n_bits + 1) * n
    if n_rows * span < 2**62:
        order = np.argsort(rows * span + d * n + rank[p], kind="stable")
    else:  # pragma: no cover - astronomically large index
        order = np.lexsort((rank[p], d, rows))
    starts = np.concatenate([[0], np.cumsum(counts[ok])[:-1]])
    take = (starts[:, None] + np.arange(k)).ravel()
    idx = order[take]
    return d[idx].reshape(n_rows, k).astype(np.int32), p[idx].reshape(n_rows, k)
