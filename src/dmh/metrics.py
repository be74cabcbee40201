"""Retrieval metrics over hash codes.

Hamming ranking: for each query, the database is sorted by Hamming distance; **ties are broken by
database position** (a stable sort), so results are deterministic and do not depend on the sorting
algorithm. An item is relevant when it shares at least one label with the query (class ids are
treated as one-hot labels).

Average precision of one query over a ranking truncated at ``k`` (``k = None``: the whole
database)::

    AP@k = (1 / R_k) * sum_{r <= k} P(r) * rel(r)

where ``P(r)`` is the precision among the first ``r`` items and ``R_k`` the number of relevant
items among the first ``k``. A query with ``R_k = 0`` has AP 0 and stays in the mean (the
convention of the DCMH/SSAH evaluation code; dividing by anything else, e.g. the number of queries
plus a constant, is a known bug of one MATLAB toolkit).

Everything is computed in chunks of queries, so memory is O(chunk x n_database).
"""

from __future__ import annotations

import numpy as np

from ._validation import check_codes
from .data import label_matrix

__all__ = ["hamming_distance", "mean_average_precision", "average_precisions", "relevance"]


def _as_pm1(codes, name):
    return check_codes(codes, name).astype(np.float32)


def hamming_distance(query_codes, database_codes) -> np.ndarray:
    """Hamming distances (int32, shape (n_query, n_database)) between {-1,+1} codes."""
    q = _as_pm1(query_codes, "query_codes")
    d = _as_pm1(database_codes, "database_codes")
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"query codes have {q.shape[1]} bits, database codes {d.shape[1]}")
    return _hamming(q, d)


def _hamming(q: np.ndarray, d: np.ndarray) -> np.ndarray:
    # exact in float32 for up to 2**24 bits
    return np.rint((q.shape[1] - q @ d.T) * 0.5).astype(np.int32)


def relevance(query_labels, database_labels) -> np.ndarray:
    """Boolean (n_query, n_database): True where the two share at least one label."""
    q, d = _label_pair(query_labels, database_labels)
    return (q.astype(np.float32) @ d.T.astype(np.float32)) > 0


def _label_pair(query_labels, database_labels):
    ql, dl = np.asarray(query_labels), np.asarray(database_labels)
    if ql.ndim == 2 and ql.shape[1] == 1:
        ql = ql.reshape(-1)
    if dl.ndim == 2 and dl.shape[1] == 1:
        dl = dl.reshape(-1)
    if ql.ndim != dl.ndim:
        raise ValueError("query and database labels must both be class ids or both multi-hot")
    if ql.ndim == 1:
        both = label_matrix(np.concatenate([ql, dl]))
        return both[: ql.size], both[ql.size :]
    if ql.shape[1] != dl.shape[1]:
        raise ValueError(f"query labels have {ql.shape[1]} columns, database labels {dl.shape[1]}")
    return ql.astype(bool), dl.astype(bool)


def average_precisions(
    query_codes, database_codes, query_labels, database_labels, top_k: int | None = None, chunk_size: int = 256
) -> np.ndarray:
    """AP (or AP@k) of each query, shape (n_query,)."""
    q = _as_pm1(query_codes, "query_codes")
    d = _as_pm1(database_codes, "database_codes")
    if q.shape[1] != d.shape[1]:
        raise ValueError(f"query codes have {q.shape[1]} bits, database codes {d.shape[1]}")
    ql, dl = _label_pair(query_labels, database_labels)
    if ql.shape[0] != q.shape[0]:
        raise ValueError(f"{q.shape[0]} query codes but {ql.shape[0]} query labels")
    if dl.shape[0] != d.shape[0]:
        raise ValueError(f"{d.shape[0]} database codes but {dl.shape[0]} database labels")
    if d.shape[0] == 0:
        raise ValueError("the database is empty")
    n_db = d.shape[0]
    k = n_db if top_k is None else int(top_k)
    if k <= 0:
        raise ValueError(f"top_k must be positive, got {top_k}")
    k = min(k, n_db)
    qf, df = ql.astype(np.float32), dl.astype(np.float32)
    ranks = np.arange(1, k + 1, dtype=np.float64)
    out = np.empty(q.shape[0])
    for start in range(0, q.shape[0], chunk_size):
        stop = min(start + chunk_size, q.shape[0])
        dist = _hamming(q[start:stop], d)
        order = np.argsort(dist, axis=1, kind="stable")[:, :k]
        rel = (qf[start:stop] @ df.T > 0)
        rel = np.take_along_axis(rel, order, axis=1).astype(np.float64)
        hits = np.cumsum(rel, axis=1)
        n_rel = hits[:, -1]
        ap_sum = (rel * hits / ranks).sum(axis=1)
        out[start:stop] = np.divide(ap_sum, n_rel, out=np.zeros_like(ap_sum), where=n_rel > 0)
    return out


def mean_average_precision(
    query_codes, database_codes, query_labels, database_labels, top_k: int | None = None, chunk_size: int = 256
) -> float:
    """MAP over the whole database (``top_k=None``) or MAP@k; see the module docstring."""
    return float(
        average_precisions(query_codes, database_codes, query_labels, database_labels, top_k, chunk_size).mean()
    )
