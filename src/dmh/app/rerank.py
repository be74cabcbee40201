"""Re-ranking Hamming candidates by the real values whose signs are the codes.

A hashing model's codes are the signs of real-valued outputs (:meth:`dmh.base.BaseHasher.project`).
Two codes at the same Hamming distance from a query are tied, however different the values behind
them; with 64-bit codes and a model whose codes gather in few distinct values, tens of items can
share the distance of the 10th answer, and their order is arbitrary (the smaller id first). Like
faiss's refine step (``IndexRefine``), Weaviate's rescoring and Qdrant's oversampling, a search
that re-ranks asks the Hamming index for ``oversample * k`` candidates and orders them by the
cosine between the query's real values and each candidate's stored values, keeping the first
``k``.

The stored values are the rows of ``project`` scaled to unit length and kept as float16
(:func:`dmh.code_files.compact_values`, the code files' format: 2 bytes a bit, 128 bytes an item
at 64 bits): the cosine needs no length, and float16 keeps about three significant digits of each
coordinate.

:func:`rerank_order` is the one ordering used everywhere: the collection's search
(:class:`dmh.app.collection.Collection`) and the held-out pair score that decides whether a collection
re-ranks (:func:`reranked_pair_scores`).
"""

from __future__ import annotations

import numpy as np

from ..code_files import compact_values
from ..errors import DataError

__all__ = ["OVERSAMPLE", "compact_values", "cosine_to", "rerank_order", "reranked_pair_scores"]

#: candidates fetched from the Hamming index per answer wanted, then re-ranked
OVERSAMPLE = 10
#: the k of the held-out pair score's re-ranking (its candidates: ``OVERSAMPLE * PAIR_SCORE_K``)
PAIR_SCORE_K = 10


def _unit32(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, dtype=np.float32)
    norms = np.linalg.norm(v, axis=-1, keepdims=True)
    return v / np.where(norms > 0, norms, np.float32(1.0))


def cosine_to(query, rows) -> np.ndarray:
    """Cosine between one ``query`` (n_bits,) and each of ``rows`` (r, n_bits), in float32 (a
    zero vector has cosine 0 with everything)."""
    return _unit32(rows) @ _unit32(np.asarray(query).reshape(-1))


def rerank_order(scores, distances, ids) -> np.ndarray:
    """Positions of the candidates in re-ranked order: largest cosine ``scores`` first, then
    smaller Hamming ``distances``, then smaller ``ids`` (so equal values keep the index's order)."""
    return np.lexsort((np.asarray(ids), np.asarray(distances), -np.asarray(scores, dtype=np.float64)))


def reranked_pair_scores(image_values, text_values, *, oversample: int = OVERSAMPLE, k: int = PAIR_SCORE_K,
                         ks=(1, 5, 10)) -> dict:
    """:func:`dmh.heldout.pair_retrieval_scores` of a search that re-ranks: row ``i`` of both
    arrays (real values, before the sign) is one held-out pair. For each query, the first
    ``oversample * k`` of the other modality by ``(Hamming distance, row)`` are ordered by cosine
    (:func:`rerank_order`); the partner's rank is its place there, or, when it is not among them,
    after them, in expectation under a random order within its Hamming tie. Same keys as
    ``pair_retrieval_scores``."""
    from ..base import sign_codes
    from ..heldout._pairs import _expected_reciprocal_rank
    from ..metrics import hamming_distance

    iv = np.asarray(image_values, dtype=np.float64)
    tv = np.asarray(text_values, dtype=np.float64)
    if iv.shape != tv.shape or iv.ndim != 2:
        raise DataError(f"image values {iv.shape} and text values {tv.shape} must have one row per held-out pair "
                        "and the same number of bits")
    n = iv.shape[0]
    if n < 2:
        raise DataError("pair retrieval needs at least 2 held-out pairs")
    r = min(n, int(oversample) * int(k))
    D = hamming_distance(sign_codes(iv), sign_codes(tv)).astype(np.int64)
    C = compact_values(iv).astype(np.float32) @ compact_values(tv).astype(np.float32).T
    out = {"n_pairs": int(n), "candidates": int(r)}
    mrrs = []
    rows = np.arange(n)
    for name, dist, cos in (("image->text", D, C), ("text->image", D.T, C.T)):
        order = np.lexsort((np.broadcast_to(rows, dist.shape), dist), axis=1)
        cand = np.zeros(dist.shape, dtype=bool)
        np.put_along_axis(cand, order[:, :r], True, axis=1)
        own_d = dist[rows, rows][:, None]
        own_c = cos[rows, rows][:, None]
        inside = cand[rows, rows]
        # among the candidates: ahead are the larger cosines, and at an equal cosine the smaller
        # distance, then the smaller row (rerank_order); outside: after every candidate
        ahead_in = (cand & ((cos > own_c) | ((cos == own_c) & ((dist < own_d) | ((dist == own_d)
                                                                                  & (rows[None, :] < rows[:, None]))))))
        a_in = ahead_in.sum(1).astype(np.float64)
        out_c = ~cand
        a_out = r + (out_c & (dist < own_d)).sum(1)
        t_out = (out_c & (dist == own_d)).sum(1) - 1
        a = np.where(inside, a_in, a_out).astype(np.float64)
        t = np.where(inside, 0.0, t_out).astype(np.float64)
        rr = _expected_reciprocal_rank(a, t)
        res = {"mrr": float(rr.mean()), "mean_rank": float((a + 1.0 + t / 2.0).mean() / n)}
        for kk in ks:
            res[f"recall@{kk}"] = float(np.clip((kk - a) / (t + 1.0), 0.0, 1.0).mean())
        out[name] = res
        mrrs.append(res["mrr"])
    out["mrr"] = float(np.mean(mrrs))
    return out
