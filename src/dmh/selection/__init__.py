"""Label-free model selection: choose a method's settings by how well held-out *pairs* find each other.

Unlabeled data is the premise of DMH, so hyperparameters must never be chosen on query labels or
test MAP. The scoring core (the held-out split, pair retrieval scores, code health, the search and its
rules) is :mod:`dmh.heldout`, low enough in the package for a method to choose with it itself; its
names are importable from here too. This package adds what ``dmh tune`` runs above the evaluation:
:func:`tune` fits a grid of candidate settings (grid x bits x seeds) in the one cell loop
(:func:`dmh.evaluation.run_cells`), resumable by each fit's key, and :func:`choose`,
:func:`summarize_candidates` and :func:`rank_correlations` read its records. The *score* used to choose is
``score_model(...)["score"]``: the mean reciprocal rank of the true partner, averaged over the two
directions.
"""

from ..heldout import (
    NEIGHBOURHOOD_MAX_DB,
    NEIGHBOURHOOD_STEP,
    NEIGHBOURHOOD_TARGET,
    RECALL_KS,
    HeldOutPairs,
    best_mean,
    code_health,
    holdout_pairs,
    mean_and_standard_error,
    neighbourhood_relevance,
    neighbourhood_scores,
    one_standard_error,
    pair_reciprocal_ranks,
    pair_retrieval_scores,
    score_model,
    search,
)
from ._records import (
    RecordScores,
    choose,
    load_records,
    paired_score_difference,
    rank_correlations,
    spearman,
    summarize_candidates,
)
from ._tune import TUNE, candidate_key, check_distinct_candidates, data_ident, fit_key, parse_grid, tune

__all__ = [
    "NEIGHBOURHOOD_MAX_DB",
    "NEIGHBOURHOOD_STEP",
    "NEIGHBOURHOOD_TARGET",
    "RECALL_KS",
    "TUNE",
    "HeldOutPairs",
    "RecordScores",
    "best_mean",
    "candidate_key",
    "check_distinct_candidates",
    "choose",
    "code_health",
    "data_ident",
    "fit_key",
    "holdout_pairs",
    "load_records",
    "mean_and_standard_error",
    "neighbourhood_relevance",
    "neighbourhood_scores",
    "one_standard_error",
    "pair_reciprocal_ranks",
    "pair_retrieval_scores",
    "paired_score_difference",
    "parse_grid",
    "rank_correlations",
    "score_model",
    "search",
    "spearman",
    "summarize_candidates",
    "tune",
]
