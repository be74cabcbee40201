"""Label-free figures of a fitted model's codes: :func:`code_health` (bit balance, bit correlation,
distinct codes: no pairs needed), :func:`neighbourhood_scores` (retrieval into the training pairs,
judged by :func:`neighbourhood_relevance`) and :func:`score_model`, which gathers them beside the
held-out pairs' retrieval score.
"""

from __future__ import annotations

import numpy as np

from ..data import CrossModalData
from ..errors import DataError
from ._pairs import HeldOutPairs, pair_retrieval_scores

__all__ = ["NEIGHBOURHOOD_MAX_DB", "NEIGHBOURHOOD_STEP", "NEIGHBOURHOOD_TARGET", "code_health",
           "neighbourhood_relevance", "neighbourhood_scores", "score_model"]

#: :func:`neighbourhood_relevance`: the database objects it compares with at most, and the share of
#: them by which it widens each view's neighbourhood (and the mean count of objects alike in both
#: views it widens them to reach, as a share of the database)
NEIGHBOURHOOD_MAX_DB = 5000
NEIGHBOURHOOD_STEP = 0.02
NEIGHBOURHOOD_TARGET = 0.01


def _ranked(S: np.ndarray) -> np.ndarray:
    """Column indices of each row, largest entry first (ties by column index)."""
    return np.lexsort((np.broadcast_to(np.arange(S.shape[1]), S.shape), -S), axis=1)


def _top_k(order: np.ndarray, k: int) -> np.ndarray:
    """Boolean mask of each row's first ``k`` columns in ``order`` (from :func:`_ranked`)."""
    out = np.zeros(order.shape, dtype=bool)
    np.put_along_axis(out, order[:, :k], True, axis=1)
    return out


def _cosine(A, B):
    """Cosine similarity of the rows of ``A`` and ``B`` (a zero row gives 0)."""
    A = A / np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-12)
    B = B / np.maximum(np.linalg.norm(B, axis=1, keepdims=True), 1e-12)
    return A @ B.T


def neighbourhood_relevance(query_image, query_text, db_image, db_text,
                            target: float = NEIGHBOURHOOD_TARGET) -> tuple[np.ndarray, int]:
    """Label-free relevance of database objects to held-out objects (both fully described): ``j``
    is relevant to ``i`` when it is among ``i``'s ``k`` nearest database objects in *both* views
    (cosine of the raw features, centred on the database). Two objects whose images and whose
    texts are both alike most likely show the same kind of thing; one view alone is not trusted (a
    SIFT histogram or a short title is a poor judge of meaning on its own). ``k`` starts at
    :data:`NEIGHBOURHOOD_STEP` of the database (at least 10) and widens by as much until the
    held-out objects average ``target`` (:data:`NEIGHBOURHOOD_TARGET`) of it (at least 5) alike in both views,
    at most a quarter of it: where one view's neighbourhoods say little, the two agree rarely.
    Returns the boolean (n_query, n_db) matrix and the k used."""
    n = np.asarray(db_image).shape[0]

    def ranked_cosine(query, db):  # cosine of the features centred on the database
        db = np.asarray(db, dtype=np.float64)
        centre = db.mean(0)
        return _ranked(_cosine(np.asarray(query, dtype=np.float64) - centre, db - centre))

    oi, ot = ranked_cosine(query_image, db_image), ranked_cosine(query_text, db_text)
    step = max(10, int(NEIGHBOURHOOD_STEP * n))
    target = max(5.0, target * n)
    k = min(step, n)
    while True:
        R = _top_k(oi, k) & _top_k(ot, k)
        if R.sum(1).mean() >= target or k + step > max(step, n // 4):
            return R, k
        k += step


def neighbourhood_scores(model, held: HeldOutPairs, train: CrossModalData, held_codes=None) -> dict:
    """Retrieval from the held-out objects into the paired training objects (at most
    :data:`NEIGHBOURHOOD_MAX_DB`, evenly spaced), judged by :func:`neighbourhood_relevance`: the
    protocol of test MAP (queries against the training set as database) with relevance that needs
    no labels. Per direction the tie-aware MAP (expected AP under random order within Hamming
    ties), their mean (``map``), the k used and the mean number of relevant objects per query.
    Where pair retrieval (MRR) rewards finding the very partner among the held-out objects, this
    rewards placing the objects that both views call alike near each query. ``held_codes``: the
    held-out objects' (image, text) codes when the caller has them already."""
    from ..metrics import average_precisions_tie_aware

    paired = np.flatnonzero(train.paired_mask)
    if paired.size > NEIGHBOURHOOD_MAX_DB:
        paired = paired[np.linspace(0, paired.size - 1, NEIGHBOURHOOD_MAX_DB).astype(int)]
    db_image, db_text = train.image[paired], train.text[paired]
    R, k = neighbourhood_relevance(held.image, held.text, db_image, db_text)
    eye = np.eye(paired.size, dtype=bool)  # one-hot "labels" of the database: relevance is then R itself
    if held_codes is None:
        held_codes = (model.encode(held.image, modality="image"), model.encode(held.text, modality="text"))
    qi, qt = held_codes
    di, dt = model.encode(db_image, modality="image"), model.encode(db_text, modality="text")
    out = {"k": int(k), "n_db": int(paired.size), "mean_relevant": float(R.sum(1).mean())}
    maps = []
    for name, q, d in (("image->text", qi, dt), ("text->image", qt, di)):
        v = float(average_precisions_tie_aware(q, d, R, eye).mean())
        out[name] = v
        maps.append(v)
    out["map"] = float(np.mean(maps))
    return out


def code_health(codes) -> dict:
    """Label-free figures of a set of {-1,+1} codes (rows = objects): ``bit_balance`` (mean over bits
    of ``1 - |mean|``: 1 = every bit splits the objects in half, 0 = constant bits), ``max_imbalance``
    (largest ``|mean|``), ``mean_abs_corr`` (mean absolute correlation between distinct bits; constant
    bits count as 0) and ``distinct`` (fraction of distinct codes)."""
    C = np.asarray(codes, dtype=np.float64)
    if C.ndim != 2 or C.shape[0] < 2:
        raise DataError(f"code_health needs a 2-D array with at least 2 rows, got shape {C.shape}")
    means = C.mean(0)
    c = C.shape[1]
    corr_mean = 0.0
    if c > 1:
        sd = C.std(0)
        ok = sd > 0
        Z = np.zeros_like(C)
        Z[:, ok] = (C[:, ok] - means[ok]) / sd[ok]
        R = Z.T @ Z / C.shape[0]
        off = ~np.eye(c, dtype=bool)
        corr_mean = float(np.abs(R[off]).mean())
    distinct = np.unique(C > 0, axis=0).shape[0] / C.shape[0]
    return {
        "bit_balance": float(1.0 - np.abs(means).mean()),
        "max_imbalance": float(np.abs(means).max()),
        "mean_abs_corr": corr_mean,
        "distinct": float(distinct),
    }


def score_model(model, held: HeldOutPairs, train: CrossModalData | None = None, per_pair: bool = False) -> dict:
    """Label-free score of a fitted model: pair retrieval on the held-out pairs (``score`` = their
    mean MRR over both directions), and code health of the held-out codes of each modality (and of
    the training objects' codes when ``train`` is given, with then the neighbourhood figure of
    :func:`neighbourhood_scores`, reported beside the score, not used to choose). ``per_pair`` adds
    ``pair_rr``, each held-out pair's reciprocal rank (:func:`pair_retrieval_scores`, in the pairs'
    order; their mean is ``score``), from which :func:`dmh.selection.choose` gives the standard error of the
    difference between two candidates scored on the same pairs."""
    from ..base import encode_checked

    ci, ct = encode_checked(model, held.image, "image"), encode_checked(model, held.text, "text")
    out = pair_retrieval_scores(ci, ct, per_pair=per_pair)
    out["score"] = out["mrr"]
    if train is not None and train.paired_mask.sum() >= 2:
        out["neighbourhood"] = neighbourhood_scores(model, held, train, held_codes=(ci, ct))
    out["health_image"] = code_health(ci)
    out["health_text"] = code_health(ct)
    if train is not None:
        for m in ("image", "text"):
            out[f"health_train_{m}"] = code_health(model.encode(train.view(m), modality=m))
    return out

