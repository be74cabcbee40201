"""The one pass over ranked Hamming distances behind every metric of :mod:`dmh.metrics`.

Inputs are checked here (codes, labels, the ``k`` and ``N`` values); :func:`_scan` then takes one
query at a time (its distance row, its relevance row, a stable radix sort of the distances, the
ranked positions of its relevant items) and turns the per-distance counts of a chunk of queries into
the tie-aware and hash-lookup metrics together (:func:`_bucket_metrics`). What each metric means and
its conventions: the docstring of :mod:`dmh.metrics`.
"""

from __future__ import annotations

import numbers
from collections.abc import Sequence

import numpy as np
from scipy.special import digamma

from ._validation import check_codes
from .data import label_matrix
from .errors import DataError, DataTypeError, ParameterError, ParameterTypeError
from .hamming import code_words as _words
from .hamming import popcount_into as _popcount_into
from .hamming import to_words as _to_words


#: query-database pairs processed at once
_PAIR_BUDGET = 1 << 21


# ---------------------------------------------------------------------------------------- inputs
def _code_pair(query_codes, database_codes):
    q = check_codes(query_codes, "query_codes")
    d = check_codes(database_codes, "database_codes")
    if q.shape[1] != d.shape[1]:
        raise DataError(f"query codes have {q.shape[1]} bits, database codes {d.shape[1]}")
    if q.shape[1] == 0:
        raise DataError("codes have 0 bits")
    return q, d


def _label_pair(query_labels, database_labels):
    ql, dl = np.asarray(query_labels), np.asarray(database_labels)
    if ql.ndim == 2 and ql.shape[1] == 1:
        ql = ql.reshape(-1)
    if dl.ndim == 2 and dl.shape[1] == 1:
        dl = dl.reshape(-1)
    if ql.ndim != dl.ndim or ql.ndim not in (1, 2):
        raise DataError(
            "query and database labels must both be class ids (n,) or both multi-hot (n, L), got "
            f"shapes {ql.shape} and {dl.shape}"
        )
    if ql.ndim == 1:
        both = label_matrix(np.concatenate([ql, dl]))
        return both[: ql.size], both[ql.size :]
    if ql.shape[1] != dl.shape[1]:
        raise DataError(f"query labels have {ql.shape[1]} columns, database labels {dl.shape[1]}")
    return ql.astype(bool), dl.astype(bool)


class _Relevance:
    """Relevance of one query row at a time: equal class ids, or multi-hot rows sharing a label."""

    def __init__(self, query_labels, database_labels):
        ql, dl = np.asarray(query_labels), np.asarray(database_labels)
        if ql.ndim == 2 and ql.shape[1] == 1:
            ql = ql.reshape(-1)
        if dl.ndim == 2 and dl.shape[1] == 1:
            dl = dl.reshape(-1)
        if ql.ndim == 1 and dl.ndim == 1:
            _, inverse = np.unique(np.concatenate([ql, dl]), return_inverse=True)
            self.kind, self.q, self.d = "ids", inverse[: ql.size], inverse[ql.size :]
            return
        q, d = _label_pair(ql, dl)
        if q.shape[1] <= 256:
            self.kind = "bits"
            self.q = _to_words(np.packbits(q, axis=1))
            self.d = np.ascontiguousarray(_to_words(np.packbits(d, axis=1)).T)  # (words, n)
            self._buf = np.empty(d.shape[0], dtype=np.uint64)
            self._tmp = np.empty(d.shape[0], dtype=bool)
        else:
            self.kind, self.q, self.d = "matmul", q.astype(np.float32), d.astype(np.float32)
            self._block = (-1, -1, None)

    def row(self, i: int, out: np.ndarray) -> np.ndarray:
        """Write the relevance of query ``i`` to every database item into ``out`` (bool (n,))."""
        if self.kind == "ids":
            return np.equal(self.d, self.q[i], out=out)
        if self.kind == "matmul":  # a block of queries at a time (BLAS)
            start, stop, block = self._block
            if not start <= i < stop:
                start = i
                stop = min(i + max(1, _PAIR_BUDGET // self.d.shape[0]), self.q.shape[0])
                block = (self.q[start:stop] @ self.d.T) > 0
                self._block = (start, stop, block)
            out[:] = block[i - start]
            return out
        q = self.q[i]
        np.bitwise_and(self.d[0], q[0], out=self._buf)
        np.not_equal(self._buf, 0, out=out)
        for w in range(1, q.size):
            np.bitwise_and(self.d[w], q[w], out=self._buf)
            np.not_equal(self._buf, 0, out=self._tmp)
            out |= self._tmp
        return out

    def __call__(self, start: int, stop: int) -> np.ndarray:
        n = self.d.shape[0] if self.kind == "matmul" else self.d.shape[-1]
        out = np.empty((stop - start, n), dtype=bool)
        for i in range(start, stop):
            self.row(i, out[i - start])
        return out


class _Distance:
    """Hamming distances of one query row at a time to every database code (cache-friendly)."""

    def __init__(self, q: np.ndarray, d: np.ndarray):
        self.n_bits = q.shape[1]
        self.q = _words(q)
        self.d = np.ascontiguousarray(_words(d).T)  # (words, n)
        self.dtype = np.uint8 if self.n_bits < 256 else np.uint16
        n = d.shape[0]
        self._xor = np.empty(n, dtype=np.uint64)
        self._tmp = np.empty(n, dtype=np.uint8) if self.q.shape[1] > 1 else None

    def row(self, i: int, out: np.ndarray) -> np.ndarray:
        q = self.q[i]
        if self._tmp is None:
            np.bitwise_xor(self.d[0], q[0], out=self._xor)
            return _popcount_into(self._xor, out)
        out[:] = 0
        for w in range(q.size):
            np.bitwise_xor(self.d[w], q[w], out=self._xor)
            out += _popcount_into(self._xor, self._tmp)
        return out


def _check_inputs(query_codes, database_codes, query_labels, database_labels):
    q, d = _code_pair(query_codes, database_codes)
    ql, dl = np.asarray(query_labels), np.asarray(database_labels)
    if ql.ndim == 0 or ql.shape[0] != q.shape[0]:
        raise DataError(f"{q.shape[0]} query codes but query labels of shape {ql.shape}")
    if dl.ndim == 0 or dl.shape[0] != d.shape[0]:
        raise DataError(f"{d.shape[0]} database codes but database labels of shape {dl.shape}")
    if d.shape[0] == 0:
        raise DataError("the database is empty (0 database codes)")
    if q.shape[0] == 0:
        raise DataError("there are no queries (0 query codes)")
    for name, lab in (("query_labels", ql), ("database_labels", dl)):
        if not (np.issubdtype(lab.dtype, np.number) or lab.dtype == np.bool_):
            raise DataTypeError(f"{name} must be numeric class ids or 0/1 multi-hot, got dtype {lab.dtype}")
    return q, d, _Relevance(ql, dl)


def _check_k(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterTypeError(f"{name} must be a positive integer, got {value!r}")
    if value <= 0:
        raise ParameterError(f"{name} must be positive, got {value}")
    return int(value)


def _check_ks(values, name: str) -> tuple[int, ...]:
    if isinstance(values, numbers.Integral) and not isinstance(values, bool):
        values = (values,)
    if not isinstance(values, Sequence | np.ndarray):
        raise ParameterTypeError(f"{name} must be a sequence of positive integers, got {values!r}")
    return tuple(_check_k(v, name) for v in values)


# ---------------------------------------------------------------------------------------- engine
def _scan(q, d, rel_of, *, top_ks=(), topn=(), rank=True, full=True, buckets=True, chunk_size=256):
    """One pass over the queries; returns a dict of per-query arrays and pooled sums.

    ``rank``: compute the position-tie-broken ranking (AP@k, TopN-precision; with ``full`` AP).
    ``buckets``: per-distance counts (tie-aware AP and TopN, PR by radius).

    Each query is handled on its own (distance row, relevance row, a stable radix sort of the
    distances, the ranked positions of its relevant items) with buffers of O(n_database) reused
    across queries; per-distance counts of ``chunk_size`` queries are then turned into metrics
    together.
    """
    n_bits, n_q, n = q.shape[1], q.shape[0], d.shape[0]
    b1 = n_bits + 1
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, numbers.Integral) or chunk_size < 1:
        raise ParameterError(f"chunk_size must be a positive integer, got {chunk_size!r}")
    dist_of = _Distance(q, d)
    cut_k = np.minimum(np.asarray(top_ks, dtype=np.int64), n)
    cut_n = np.minimum(np.asarray(topn, dtype=np.int64), n)
    out = {"n_relevant": np.zeros(n_q, np.int64)}
    if rank:
        out["ap"] = np.zeros(n_q)
        out["ap_at"] = np.zeros((n_q, cut_k.size))
        out["topn_hits"] = np.zeros((n_q, cut_n.size), np.int64)
    if buckets:
        out["ap_tie"] = np.zeros(n_q)
        out["topn_hits_tie"] = np.zeros((n_q, cut_n.size))
        out.update(
            pooled_hits=np.zeros(b1, np.int64),
            pooled_retrieved=np.zeros(b1, np.int64),
            pq_precision_sum=np.zeros(b1),
            pq_covered=np.zeros(b1, np.int64),
            pq_recall_sum=np.zeros(b1),
        )
    dist = np.empty(n, dtype=dist_of.dtype)
    rel = np.empty(n, dtype=bool)
    srel = np.empty(n, dtype=bool)
    sdist = np.empty(n, dtype=dist.dtype)
    levels = np.arange(b1, dtype=dist.dtype)
    ranks = np.arange(1, n + 1, dtype=np.float64)
    key = np.empty(n, dtype=np.uint8 if 2 * b1 <= 256 else np.int64)
    step = int(chunk_size)
    for start in range(0, n_q, step):
        stop = min(start + step, n_q)
        tot = np.empty((stop - start, b1), np.int64)
        r_cum = np.empty((stop - start, b1), np.int64)
        for i in range(start, stop):
            j = i - start
            dist_of.row(i, dist)
            rel_of.row(i, rel)
            if rank:
                order = np.argsort(dist, kind="stable")  # a radix sort: small integers
                np.take(rel, order, out=srel)
                np.take(dist, order, out=sdist)
                n_cum_row = np.searchsorted(sdist, levels, side="right")
                tot[j] = np.diff(n_cum_row, prepend=0)
                pos = np.flatnonzero(srel)  # 0-based ranked positions of the relevant items
                n_rel = pos.size
                # the m-th relevant item (m = 1, 2, ...) at ranked position p adds m / (p + 1)
                if full:
                    contrib = ranks[:n_rel] / (pos + 1.0)
                    out["ap"][i] = contrib.sum() / n_rel if n_rel else 0.0
                if cut_k.size:
                    r_k = np.searchsorted(pos, cut_k)
                    head = r_k.max()
                    csum = np.zeros(head + 1)
                    np.cumsum(ranks[:head] / (pos[:head] + 1.0), out=csum[1:])
                    out["ap_at"][i] = np.divide(csum[r_k], r_k, out=np.zeros(r_k.size), where=r_k > 0)
                if cut_n.size:
                    out["topn_hits"][i] = np.searchsorted(pos, cut_n)
                r_cum[j] = np.searchsorted(pos, n_cum_row)
            else:
                np.multiply(rel, b1, out=key, dtype=key.dtype, casting="unsafe")
                key += dist
                both = np.bincount(key, minlength=2 * b1)
                tot[j] = both[:b1] + both[b1:]
                r_cum[j] = np.cumsum(both[b1:])
                n_rel = r_cum[j, -1]
            out["n_relevant"][i] = n_rel
        if buckets:
            n_cum = np.cumsum(tot, axis=1)
            _bucket_metrics(out, start, stop, tot, n_cum, r_cum, out["n_relevant"][start:stop], cut_n)
    return out


def _bucket_metrics(out, start, stop, tot, n_cum, r_cum, n_rel, cut_n):
    """Metrics from per-distance counts: tie-aware AP and TopN, PR by radius."""
    relc = np.diff(r_cum, axis=1, prepend=0)
    n_before = n_cum - tot
    r_before = r_cum - relc
    # tie-aware AP: closed form per tie group (see the module docstring)
    has = relc > 0
    ng, rg = tot[has].astype(np.float64), relc[has].astype(np.float64)
    nb, rb = n_before[has].astype(np.float64), r_before[has].astype(np.float64)
    s1 = digamma(nb + ng + 1.0) - digamma(nb + 1.0)  # sum_{t=1}^{n} 1 / (N + t)
    b = np.divide(rg - 1.0, ng - 1.0, out=np.zeros_like(ng), where=ng > 1)
    # sum_t (a + b (t - 1)) / (N + t) = n b + (a - b (N + 1)) * s1, a = R_< + 1
    group = (rg / ng) * (ng * b + (rb + 1.0 - b * (nb + 1.0)) * s1)
    per_query = np.zeros(tot.shape)
    per_query[has] = group
    sums = per_query.sum(axis=1)
    out["ap_tie"][start:stop] = np.divide(sums, n_rel, out=np.zeros(sums.shape), where=n_rel > 0)
    # tie-aware TopN: expected hits among the first m = R_< + (m - N_<) r / n in the group holding m
    if cut_n.size:
        g = (n_cum[:, None, :] < cut_n[None, :, None]).sum(axis=2)  # (c, m) group index
        take = lambda a: np.take_along_axis(a, g, axis=1)  # noqa: E731
        n_g = take(tot).astype(np.float64)
        frac = np.divide(take(relc), n_g, out=np.zeros(n_g.shape), where=n_g > 0)
        out["topn_hits_tie"][start:stop] = take(r_before) + (cut_n[None, :] - take(n_before)) * frac
    # hash lookup within radius h: retrieved = n_cum[:, h], hits = r_cum[:, h]
    out["pooled_hits"] += r_cum.sum(axis=0)
    out["pooled_retrieved"] += n_cum.sum(axis=0)
    prec = np.divide(r_cum, n_cum, out=np.zeros(r_cum.shape), where=n_cum > 0)
    out["pq_precision_sum"] += prec.sum(axis=0)  # empty lookups add 0
    out["pq_covered"] += (n_cum > 0).sum(axis=0)
    with_rel = n_rel > 0
    out["pq_recall_sum"] += (r_cum[with_rel] / n_rel[with_rel, None]).sum(axis=0)
