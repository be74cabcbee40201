"""Retrieval metrics over hash codes: Hamming ranking (MAP, MAP@k, tie-aware MAP, TopN-precision)
and hash lookup (precision and recall within a Hamming radius).

Conventions
-----------
**Relevance.** A database item is relevant to a query when the two share at least one label.
Labels are class ids ``(n,)`` or multi-hot ``(n, L)``; both sides must use the same form.

**Ranking.** For each query the database is sorted by Hamming distance; **ties are broken by
database position** (a stable sort), so results are deterministic and do not depend on the sorting
algorithm. Hamming distances take only the values ``0..n_bits``, so many items tie: with 16-bit
codes and a database of 20,000 items each distance value holds hundreds of them, and a ranking
metric then depends partly on the order of the database. The *tie-aware* variants remove that
dependence (see below).

**Average precision** of one query over the ranking truncated at ``k`` (``k = None``: the whole
database, ``k = n_database``)::

    AP@k = (1 / R_k) * sum_{r <= k} P(r) * rel(r)

where ``rel(r)`` is 1 when the item at rank ``r`` is relevant, ``P(r)`` the precision among the
first ``r`` items and ``R_k`` the number of relevant items among the first ``k``. A query with
``R_k = 0`` has AP 0 **and stays in the mean** (the convention of the DCMH/SSAH evaluation code,
which the DMH paper's MAP@50 of Table 7 follows; dividing by anything else, e.g. the number of
queries plus a constant, is a known bug of one MATLAB toolkit). Another normalisation in use
divides by ``min(R, k)`` (``R`` = relevant items in the whole database), so that a query is
penalised for relevant items it failed to bring into the top ``k``; it is *not* the one computed
here, and its values are lower or equal. For ``k = None`` both agree (``R_k = R``).

**Tie-aware AP** (:func:`average_precisions_tie_aware`) is the expected AP over the whole
database when the items at equal Hamming distance are ranked in uniformly random order, computed
exactly in closed form per tie group (the expected-precision argument of McSherry & Najork,
"Computing information retrieval performance measures efficiently in the presence of tied
scores", ECIR 2008). For a tie group of ``n`` items, ``r`` of them relevant, preceded by ``N``
items of which ``R_<`` are relevant, a relevant item lands at each group position ``t = 1..n``
with probability ``1/n`` and then has in expectation ``R_< + 1 + (t - 1)(r - 1)/(n - 1)``
relevant items at or above it, so the group adds::

    (r / n) * sum_{t=1}^{n} (R_< + 1 + (t - 1)(r - 1)/(n - 1)) / (N + t)

which is evaluated with digamma functions (``sum_t 1/(N + t) = psi(N + n + 1) - psi(N + 1)``).
As ``R`` does not depend on the order, the expectation of AP is this sum over groups divided by
``R``. Queries with ``R = 0`` have tie-aware AP 0, as above.

**TopN-precision** at ``N``: the share of relevant items among the first ``N`` of the ranking
(position tie-break), averaged over queries; ``N`` larger than the database is clipped to the
database size. A tie-aware version (expected precision under random order within ties) is
reported beside it.

**Hash lookup.** Retrieved within radius ``h`` = every item at Hamming distance ``<= h``, for
``h = 0..n_bits``. Two forms of the precision-recall curve:

* *pooled* (the default: key ``"pr_radius"``): precision = total hits / total retrieved, recall =
  total hits / total relevant, sums over all queries. It needs no convention for a query that
  retrieves nothing (that query adds 0 to both sums), each point is one ratio of counts, and recall
  grows monotonically with ``h``; precision is ``None`` at a radius where no query retrieves
  anything.
* *per-query* (key ``"pr_radius_per_query"``): precision and recall are computed for each query and
  averaged. A query that retrieves nothing within ``h`` has no precision there; it is **left out of
  the precision mean at that radius**, and ``coverage[h]`` reports the share of queries that did
  retrieve something (so a precision resting on few queries is visible). Recall is averaged over the
  queries with at least one relevant item in the database.

**Precision within Hamming radius 2** (``"precision@radius2"``): the per-query precision at
``h = 2`` averaged over *all* queries, counting a query that retrieves nothing as precision 0 (the
usual convention for this number, which penalises empty lookups); the pooled value is reported as
``"precision@radius2_pooled"``. With fewer than 2 bits the radius is ``n_bits``.

Memory: queries are processed in chunks (at most ``chunk_size`` queries and about 2**21
query-database pairs at a time), so memory is O(chunk x n_database), independent of the number of
queries. Distances are XOR + popcount over 64-bit words; the position-tie-broken ranking is a
stable radix sort of the small-integer distances; every metric that needs only how many items
(and how many relevant ones) sit at each distance uses those per-distance counts.
That one pass over the queries, shared by every metric here, is :mod:`dmh._ranking`.
"""

from __future__ import annotations

import numbers

import numpy as np

from ._ranking import _check_inputs, _check_k, _check_ks, _code_pair, _label_pair, _scan
from .errors import ParameterError, ParameterTypeError
from .hamming import code_words as _words
from .hamming import hamming_words as _hamming_words

__all__ = [
    "hamming_distance",
    "relevance",
    "average_precisions",
    "mean_average_precision",
    "average_precisions_tie_aware",
    "mean_average_precision_tie_aware",
    "topn_precision",
    "pr_curve_by_radius",
    "precision_within_radius",
    "evaluate_retrieval",
    "DEFAULT_TOPN",
]

#: the N of the TopN-precision curve unless told otherwise
DEFAULT_TOPN = (1, 10, 50, 100, 200, 300, 400, 500, 600, 700, 800, 900, 1000)


def hamming_distance(query_codes, database_codes) -> np.ndarray:
    """Hamming distances (int32, shape (n_query, n_database)) between {-1,+1} codes."""
    q, d = _code_pair(query_codes, database_codes)
    return _hamming_words(_words(q), _words(d), q.shape[1]).astype(np.int32)


def relevance(query_labels, database_labels) -> np.ndarray:
    """Boolean (n_query, n_database): True where the two share at least one label."""
    q, d = _label_pair(query_labels, database_labels)
    return (q.astype(np.float32) @ d.T.astype(np.float32)) > 0


def _ratio(num, den):
    num, den = np.asarray(num, dtype=np.float64), np.asarray(den, dtype=np.float64)
    return [float(a / b) if b > 0 else None for a, b in zip(num, den, strict=True)]


# ---------------------------------------------------------------------------------------- public
def average_precisions(query_codes, database_codes, query_labels, database_labels, top_k: int | None = None,
                       chunk_size: int = 256) -> np.ndarray:
    """AP (``top_k=None``) or AP@k of each query, shape (n_query,); see the module docstring."""
    q, d, rel = _check_inputs(query_codes, database_codes, query_labels, database_labels)
    if top_k is None:
        return _scan(q, d, rel, rank=True, buckets=False, chunk_size=chunk_size)["ap"]
    k = _check_k(top_k, "top_k")
    return _scan(q, d, rel, top_ks=(k,), full=False, buckets=False, chunk_size=chunk_size)["ap_at"][:, 0]


def mean_average_precision(query_codes, database_codes, query_labels, database_labels, top_k: int | None = None,
                           chunk_size: int = 256) -> float:
    """MAP over the whole database (``top_k=None``) or MAP@k; see the module docstring.

    For one query, rank the database by Hamming distance (ties by database position) and let
    ``p_1 < p_2 < ...`` be the 0-based ranked positions of its ``R`` relevant items:
    ``AP = (1 / R) * sum_m m / (p_m + 1)`` (0 when ``R = 0``); MAP is the mean of AP over queries.
    That sum is the one line ``contrib = ranks[:n_rel] / (pos + 1.0)`` of :func:`dmh._ranking._scan`, which
    computes every ranking metric in one pass over the queries.
    """
    return float(
        average_precisions(query_codes, database_codes, query_labels, database_labels, top_k, chunk_size).mean()
    )


def average_precisions_tie_aware(
    query_codes, database_codes, query_labels, database_labels, chunk_size: int = 256
) -> np.ndarray:
    """Expected AP of each query over the whole database when items at equal Hamming distance are
    ranked in uniformly random order (exact closed form; see the module docstring)."""
    q, d, rel = _check_inputs(query_codes, database_codes, query_labels, database_labels)
    return _scan(q, d, rel, rank=False, buckets=True, chunk_size=chunk_size)["ap_tie"]


def mean_average_precision_tie_aware(
    query_codes, database_codes, query_labels, database_labels, chunk_size: int = 256
) -> float:
    """Mean of :func:`average_precisions_tie_aware`."""
    return float(
        average_precisions_tie_aware(query_codes, database_codes, query_labels, database_labels, chunk_size).mean()
    )


def topn_precision(
    query_codes,
    database_codes,
    query_labels,
    database_labels,
    n=DEFAULT_TOPN,
    *,
    tie_aware: bool = False,
    chunk_size: int = 256,
) -> np.ndarray:
    """Mean precision of the first ``N`` retrieved, one value per ``N`` in ``n`` (``N`` is clipped
    to the database size). ``tie_aware``: expected precision under random order within ties."""
    q, d, rel = _check_inputs(query_codes, database_codes, query_labels, database_labels)
    ns = _check_ks(n, "n")
    cut = np.minimum(np.asarray(ns), d.shape[0])
    if tie_aware:
        s = _scan(q, d, rel, topn=ns, rank=False, buckets=True, chunk_size=chunk_size)
        return (s["topn_hits_tie"] / cut).mean(axis=0)
    s = _scan(q, d, rel, topn=ns, rank=True, buckets=False, chunk_size=chunk_size)
    return (s["topn_hits"] / cut).mean(axis=0)


def pr_curve_by_radius(
    query_codes,
    database_codes,
    query_labels,
    database_labels,
    *,
    form: str = "pooled",
    chunk_size: int = 256,
) -> dict:
    """Precision and recall of hash lookup within Hamming radius ``0..n_bits``.

    ``form="pooled"`` (default) or ``"per_query"``; see the module docstring for both and for
    queries that retrieve nothing. Returns ``{"radius", "precision", "recall"}`` (lists; ``None``
    where undefined) plus ``"coverage"`` for the per-query form.
    """
    if form not in ("pooled", "per_query"):
        raise ParameterError(f"form must be 'pooled' or 'per_query', got {form!r}")
    q, d, rel = _check_inputs(query_codes, database_codes, query_labels, database_labels)
    s = _scan(q, d, rel, rank=False, buckets=True, chunk_size=chunk_size)
    return _pr_dict(s, q.shape[1], q.shape[0])[form]


def precision_within_radius(
    query_codes,
    database_codes,
    query_labels,
    database_labels,
    radius: int = 2,
    *,
    chunk_size: int = 256,
) -> float:
    """Mean over all queries of the precision within Hamming distance ``<= radius``, a query that
    retrieves nothing counting as 0 (see the module docstring)."""
    q, d, rel = _check_inputs(query_codes, database_codes, query_labels, database_labels)
    if isinstance(radius, bool) or not isinstance(radius, numbers.Integral):
        raise ParameterTypeError(f"radius must be an integer, got {radius!r}")
    if not 0 <= radius <= q.shape[1]:
        raise ParameterError(f"radius must be between 0 and n_bits={q.shape[1]}, got {radius}")
    s = _scan(q, d, rel, rank=False, buckets=True, chunk_size=chunk_size)
    return float(s["pq_precision_sum"][radius] / q.shape[0])


def _pr_dict(s, n_bits, n_q):
    radius = list(range(n_bits + 1))
    total_rel = s["n_relevant"].sum()
    n_with_rel = int((s["n_relevant"] > 0).sum())
    pooled = {
        "form": "pooled",
        "radius": radius,
        "precision": _ratio(s["pooled_hits"], s["pooled_retrieved"]),
        "recall": _ratio(s["pooled_hits"], np.full(n_bits + 1, total_rel)),
    }
    per_query = {
        "form": "per_query",
        "radius": radius,
        "precision": _ratio(s["pq_precision_sum"], s["pq_covered"]),
        "recall": _ratio(s["pq_recall_sum"], np.full(n_bits + 1, n_with_rel)),
        "coverage": (s["pq_covered"] / n_q).tolist(),
    }
    return {"pooled": pooled, "per_query": per_query}


def evaluate_retrieval(
    query_codes,
    database_codes,
    query_labels,
    database_labels,
    *,
    top_k=(50,),
    topn=DEFAULT_TOPN,
    curves: bool = True,
    chunk_size: int = 256,
    precision_at=(10,),
) -> dict:
    """Every retrieval metric of one query set against one database, in one pass.

    Returns a JSON-serialisable dict (plain floats and lists; ``None`` where a value is undefined)::

        n_query, n_database, n_bits
        map                      MAP over the whole database (position tie-break)
        map_tie_aware            expected MAP under random order within ties
        map@K                    one key per K in top_k (AP@K normalised by R_K)
        precision@N              one key per N in precision_at: share of relevant items among the
                                 first N answers (position tie-break, as ``map``), mean over queries
        precision@radius2        per-query precision within radius 2, empty lookups = 0
        precision@radius2_pooled pooled precision within radius 2
        topn                     {"n", "precision", "precision_tie_aware"}     (if curves)
        pr_radius                {"form": "pooled", "radius", "precision", "recall"}   (if curves)
        pr_radius_per_query      {"form": "per_query", ..., "coverage"}      (if curves)

    For a cross-modal task pass the codes of one modality as queries and of the other as the
    database, e.g. image->text: ``encode(images, "image")`` against ``encode(texts, "text")``.
    """
    q, d, rel = _check_inputs(query_codes, database_codes, query_labels, database_labels)
    ks = _check_ks(top_k, "top_k") if top_k is not None else ()
    ns = _check_ks(topn, "topn") if curves and topn is not None else ()
    ps = _check_ks(precision_at, "precision_at") if precision_at is not None else ()
    scan_ns = tuple(dict.fromkeys((*ns, *ps)))  # the scalar precisions come from the same TopN counts
    s = _scan(q, d, rel, top_ks=ks, topn=scan_ns, rank=True, buckets=True, chunk_size=chunk_size)
    n_q, n_bits = q.shape[0], q.shape[1]
    r2 = min(2, n_bits)
    pr = _pr_dict(s, n_bits, n_q)
    result = {
        "n_query": int(n_q),
        "n_database": int(d.shape[0]),
        "n_bits": int(n_bits),
        "map": float(s["ap"].mean()),
        "map_tie_aware": float(s["ap_tie"].mean()),
    }
    for j, k in enumerate(ks):
        result[f"map@{k}"] = float(s["ap_at"][:, j].mean())
    cut_all = np.minimum(np.asarray(scan_ns, dtype=np.int64), d.shape[0])
    for n in ps:
        j = scan_ns.index(n)
        result[f"precision@{n}"] = float((s["topn_hits"][:, j] / cut_all[j]).mean())
    result["precision@radius2"] = float(s["pq_precision_sum"][r2] / n_q)
    result["precision@radius2_pooled"] = pr["pooled"]["precision"][r2]
    if curves:
        j = [scan_ns.index(n) for n in ns]
        cut = cut_all[j]
        result["topn"] = {
            "n": list(ns),
            "precision": (s["topn_hits"][:, j] / cut).mean(axis=0).tolist() if ns else [],
            "precision_tie_aware": (s["topn_hits_tie"][:, j] / cut).mean(axis=0).tolist() if ns else [],
        }
        result["pr_radius"] = pr["pooled"]
        result["pr_radius_per_query"] = pr["per_query"]
    return result
