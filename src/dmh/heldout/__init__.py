"""Label-free model selection's core: score a fit by how well held-out *pairs* find each other, and
choose among candidate fits by those scores.

Unlabeled data is the premise of DMH, so hyperparameters must never be chosen on query labels or
test MAP. What every training set of a cross-modal method does hold is pairs: an image and the text
that describes it. :func:`holdout_pairs` removes a seeded part of the paired training objects before
fitting; :func:`pair_retrieval_scores` then asks, for each held-out image, where its own text ranks
among the held-out texts by Hamming distance (and vice versa). A method that maps both modalities of
an object close together, while keeping different objects apart, ranks the true partner high.

:func:`code_health` adds figures that need no pairs at all; :func:`score_model` gathers both for a
fitted model (its ``score``: the mean reciprocal rank of the true partner over both directions).
:func:`search` fits candidates and chooses among them by a rule given as a parameter
(:func:`best_mean`, :func:`one_standard_error` or any callable).

This package sits below the methods (a method may choose on held-out pairs itself, as DMH's
``use_unpaired="auto"`` does); ``dmh tune``'s resumable grid and the analysis of its records are
:mod:`dmh.selection`, above the evaluation.
"""

from ._codes import (
    NEIGHBOURHOOD_MAX_DB,
    NEIGHBOURHOOD_STEP,
    NEIGHBOURHOOD_TARGET,
    code_health,
    neighbourhood_relevance,
    neighbourhood_scores,
    score_model,
)
from ._pairs import (
    RECALL_KS,
    HeldOutPairs,
    holdout_pairs,
    mean_and_standard_error,
    pair_reciprocal_ranks,
    pair_retrieval_scores,
)
from ._search import Scored, Scores, Search, best_mean, one_standard_error, pair_score, search

__all__ = [
    "NEIGHBOURHOOD_MAX_DB",
    "NEIGHBOURHOOD_STEP",
    "NEIGHBOURHOOD_TARGET",
    "RECALL_KS",
    "HeldOutPairs",
    "Scored",
    "Scores",
    "Search",
    "best_mean",
    "code_health",
    "holdout_pairs",
    "mean_and_standard_error",
    "neighbourhood_relevance",
    "neighbourhood_scores",
    "one_standard_error",
    "pair_reciprocal_ranks",
    "pair_retrieval_scores",
    "pair_score",
    "score_model",
    "search",
]
