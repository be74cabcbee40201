"""Held-out pairs: the split, and how well each held-out image and text find their own partner.

:func:`holdout_pairs` removes a seeded part of the paired training objects before fitting;
:func:`pair_retrieval_scores` then asks, for each held-out image, where its own text ranks among the
held-out texts by Hamming distance (and vice versa); :func:`pair_reciprocal_ranks` gives that per
pair, and :func:`mean_and_standard_error` the mean and standard error of two candidates' paired
differences. Ties in Hamming distance are common with short codes; every figure here is its
expectation under a uniformly random order within ties (a constant code gets the score of a random
ranking, never a lucky one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..data import CrossModalData
from ..errors import DataError, ParameterError

__all__ = ["RECALL_KS", "HeldOutPairs", "holdout_pairs", "mean_and_standard_error", "pair_reciprocal_ranks",
           "pair_retrieval_scores"]

#: recall@k of the true partner reported for these k
RECALL_KS = (1, 5, 10)


@dataclass(frozen=True)
class HeldOutPairs:
    """Paired objects removed from training: ``image[i]`` and ``text[i]`` describe the same object."""

    image: np.ndarray
    text: np.ndarray
    index: np.ndarray  # rows of the original data

    @property
    def n(self) -> int:
        return self.image.shape[0]


def holdout_pairs(data: CrossModalData, fraction: float = 0.15, min_count: int = 50, max_count: int = 500,
                  random_state=0) -> tuple[CrossModalData, HeldOutPairs]:
    """Split the paired objects of ``data``: a seeded ``fraction`` (at least ``min_count``, at most
    ``max_count``, never more than half of the pairs) is held out; the rest of ``data`` (all unpaired
    objects and the remaining pairs) is returned for fitting.

    Raises ``ValueError`` when fewer than 10 paired objects would be held out.
    """
    if not 0.0 < float(fraction) < 1.0:
        raise ParameterError(f"holdout fraction must lie in (0, 1), got {fraction}")
    paired = np.flatnonzero(data.paired_mask)
    n_hold = int(round(fraction * paired.size))
    n_hold = max(n_hold, int(min_count))
    n_hold = min(n_hold, int(max_count), paired.size // 2)
    if n_hold < 10:
        raise DataError(
            f"label-free selection needs paired training objects to hold out: the data hold {paired.size} "
            "pairs, too few to hold out 10"
        )
    rng = np.random.default_rng(random_state)
    held = np.sort(rng.choice(paired, size=n_hold, replace=False))
    keep = np.setdiff1d(np.arange(data.n_objects), held)
    fit_data = data.subset(keep)
    return fit_data, HeldOutPairs(image=data.image[held], text=data.text[held], index=held)


def pair_reciprocal_ranks(image_codes, text_codes) -> np.ndarray:
    """Per held-out pair (row ``i`` of both arrays one object): the expected reciprocal rank of its
    own partner by Hamming distance, the mean of the two directions (image->text, text->image),
    ties in random order. Its mean is :func:`pair_retrieval_scores`'s ``mrr``; per pair, it lets two
    models scored on the same pairs be compared with the spread of their paired difference."""
    D = _pair_distances(image_codes, text_codes)
    return (_expected_reciprocal_rank(*_tie_aware_partner_ranks(D))
            + _expected_reciprocal_rank(*_tie_aware_partner_ranks(D.T))) / 2.0


def _pair_distances(image_codes, text_codes) -> np.ndarray:
    """The Hamming distances of the held-out pairs' image codes (rows) to their text codes (columns;
    the diagonal holds the partners), after checking both arrays have one row per pair, at least 2."""
    from ..metrics import hamming_distance

    image_codes = np.asarray(image_codes)
    text_codes = np.asarray(text_codes)
    if image_codes.shape != text_codes.shape:
        raise DataError(f"image codes {image_codes.shape} and text codes {text_codes.shape} must have one row "
                         "per held-out pair and the same number of bits")
    if image_codes.shape[0] < 2:
        raise DataError("pair retrieval needs at least 2 held-out pairs")
    return hamming_distance(image_codes, text_codes)


def _tie_aware_partner_ranks(D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For a square distance matrix whose diagonal holds the true partners: the number of
    candidates strictly closer (``a``) and tied with the partner excluding itself (``t``), per row."""
    diag = np.diag(D)[:, None]
    a = (D < diag).sum(1)
    t = (D == diag).sum(1) - 1
    return a, t


def _expected_reciprocal_rank(a: np.ndarray, t: np.ndarray) -> np.ndarray:
    """E[1/rank] when the partner's rank is uniform on a+1 .. a+t+1."""
    # harmonic numbers: H(a+t+1) - H(a), divided by t+1
    from scipy.special import digamma

    return (digamma(a + t + 2.0) - digamma(a + 1.0)) / (t + 1.0)


def pair_retrieval_scores(image_codes, text_codes, ks: Sequence[int] = RECALL_KS, per_pair: bool = False) -> dict:
    """How well each image code retrieves its own text among all texts (``image->text``), and vice
    versa. Row ``i`` of both arrays is one object. Returns, per direction, the mean reciprocal
    rank (``mrr``), the mean rank divided by n (``mean_rank``, 0.5 for a random ranking) and
    ``recall@k``, all expectations under random order within Hamming ties; plus ``mrr`` (mean of the
    two directions) and ``mrr_random`` (the MRR of a random ranking, for reference). ``per_pair``
    adds ``pair_rr``, each pair's reciprocal rank averaged over the two directions
    (:func:`pair_reciprocal_ranks`' values, to 6 decimals: their mean is ``mrr``)."""
    D = _pair_distances(image_codes, text_codes)
    n = D.shape[0]
    out = {"n_pairs": int(n)}
    mrrs, rrs = [], []
    for name, M in (("image->text", D), ("text->image", D.T)):
        a, t = _tie_aware_partner_ranks(M)
        rr = _expected_reciprocal_rank(a, t)
        rrs.append(rr)
        rank = a + 1.0 + t / 2.0
        res = {"mrr": float(rr.mean()), "mean_rank": float(rank.mean() / n)}
        for k in ks:
            res[f"recall@{k}"] = float(np.clip((k - a) / (t + 1.0), 0.0, 1.0).mean())
        out[name] = res
        mrrs.append(res["mrr"])
    out["mrr"] = float(np.mean(mrrs))
    if per_pair:
        out["pair_rr"] = np.round((rrs[0] + rrs[1]) / 2.0, 6).tolist()
    out["mrr_random"] = float(_expected_reciprocal_rank(np.zeros(1), np.array([n - 1.0]))[0])
    return out


def mean_and_standard_error(differences) -> tuple[float, float]:
    """The mean of paired differences (one per held-out pair) and its standard error, their sample
    standard deviation over the square root of their number (NaN for fewer than two)."""
    d = np.asarray(differences, dtype=np.float64)
    se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("nan")
    return float(d.mean()), se


