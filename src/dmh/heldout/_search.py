"""One search over candidate fits on held-out pairs, with the rule that chooses among them a parameter.

:func:`search` fits each candidate on the data less the held-out pairs, scores it on those pairs (by
default :func:`pair_score`: each held-out pair's reciprocal rank of its true partner, averaged over
both directions) and hands the scores to a *rule*, as scikit-learn's ``GridSearchCV(refit=callable)``
takes its choice from a function of the search's results. A rule is any callable
``rule(scores: Scores) -> name``; two are here:

- :func:`best_mean`: the highest mean score, a tie to the candidate listed first;
- :func:`one_standard_error`: the simplest candidate whose score is within ``margin`` standard errors
  of the best one's, the standard error that of their difference paired by held-out pair (the
  one-standard-error rule of model selection: Breiman et al. 1984; Hastie, Tibshirani and Friedman,
  *The Elements of Statistical Learning*, 7.10).

Its users, each with its rule: DMH's ``use_unpaired="auto"`` (:mod:`dmh.methods.unpaired_choice`: one
standard error, the pairs alone the simpler), ``dmh build --method auto`` (:mod:`dmh.app.collection._auto`:
the best mean of the score each candidate's search would serve) and ``dmh tune``
(:func:`dmh.selection.choose`: the best mean over its fits, read from their records).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ..data import CrossModalData
from ..errors import DataError, ParameterError
from ._pairs import HeldOutPairs, mean_and_standard_error, pair_reciprocal_ranks

__all__ = ["Scored", "Scores", "Search", "best_mean", "one_standard_error", "pair_score", "search"]


@dataclass(frozen=True)
class Scored:
    """One candidate's result: its ``mean`` score (``None`` where it could not be fitted, ``error``
    saying why), each held-out pair's score (``per_pair``, where the scorer gives them), the scorer's
    other figures (``details``) and the seconds its fit took."""

    mean: float | None
    per_pair: np.ndarray | None = None
    details: dict = field(default_factory=dict)
    seconds: float = 0.0
    error: str | None = None


class Scores:
    """What a rule reads: the candidates (``names``, in the order listed), each one's ``mean(name)``
    and ``difference(a, b)``: ``a``'s lead over ``b`` paired by held-out pair and its standard error,
    ``None`` where the per-pair scores are not known. ``per_pair``: each candidate's scores on one set
    of held-out pairs (the same pairs, in the same order)."""

    def __init__(self, means: Mapping[str, float], per_pair: Mapping[str, np.ndarray] | None = None):
        if not means:
            raise DataError("no finished candidates to choose from")
        self.means = dict(means)
        self.per_pair = None if per_pair is None else {k: np.asarray(v, dtype=np.float64) for k, v in per_pair.items()}

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.means)

    def mean(self, name: str) -> float:
        return self.means[name]

    def difference(self, a: str, b: str) -> tuple[float, float] | None:
        if self.per_pair is None or a not in self.per_pair or b not in self.per_pair:
            return None
        return mean_and_standard_error(self.per_pair[a] - self.per_pair[b])


def best_mean(scores: Scores) -> str:
    """The rule of the highest mean score; a tie goes to the candidate listed first."""
    return max(scores.names, key=scores.mean)


def one_standard_error(margin: float = 1.0, simplest: Sequence[str] | None = None) -> Callable[[Scores], str]:
    """The rule of the simplest candidate within ``margin`` standard errors of the best: of the
    candidates simpler than the best-scoring one (:func:`best_mean`), the first in ``simplest``
    (names, simplest first; default: the order listed) that the best is not ahead of by more than
    ``margin`` standard errors of their paired difference; the best one where none is, or where the
    per-pair scores are not known."""
    margin = float(margin)
    if not margin >= 0.0:
        raise ParameterError(f"margin must be a non-negative number of standard errors, got {margin}")

    def rule(scores: Scores) -> str:
        best = best_mean(scores)
        for name in (scores.names if simplest is None else simplest):
            if name == best:
                break
            d = scores.difference(best, name) if name in scores.means else None
            if d is not None and not d[0] > margin * d[1]:
                return name
        return best

    return rule


def pair_score(model, held: HeldOutPairs) -> Scored:
    """The default score of :func:`search`: each held-out pair's reciprocal rank of its own partner by
    Hamming distance (both directions averaged, :func:`pair_reciprocal_ranks`), and their mean."""
    rr = pair_reciprocal_ranks(model.encode(held.image, modality="image"), model.encode(held.text, modality="text"))
    return Scored(float(rr.mean()), per_pair=rr)


@dataclass(frozen=True)
class Search:
    """What :func:`search` found: the ``chosen`` candidate (``None`` where none could be fitted), each
    candidate's result (``results``, in the order listed) and what the rule read (``scores``)."""

    chosen: str | None
    results: dict[str, Scored]
    scores: Scores | None


def search(candidates: Mapping[str, Callable[[CrossModalData], object]], fit_data: CrossModalData,
           held: HeldOutPairs, *, rule: Callable[[Scores], str] = best_mean,
           score: Callable[[object, HeldOutPairs], Scored] = pair_score, known: Mapping[str, Scored] | None = None,
           skip: tuple[type[Exception], ...] = (),
           on_scored: Callable[[str, Scored], None] | None = None) -> Search:
    """Fit each candidate (``candidates``: name -> a function that fits one on the data it is given
    and returns it) on ``fit_data``, score it on the held-out pairs ``held`` (``score(model, held)``,
    default :func:`pair_score`) and choose by ``rule``. Candidates in ``known`` (earlier results, e.g.
    of an interrupted run) are not fitted again. A fit that raises one of ``skip`` leaves its candidate
    out (its result's ``error`` says why). ``on_scored(name, result)`` runs as each candidate's result
    is known, in the order listed. The per-pair scores reach the rule only where every candidate has
    them."""
    results: dict[str, Scored] = {}
    for name, fit in candidates.items():
        if known is not None and name in known:
            results[name] = known[name]
        else:
            t0 = time.perf_counter()
            try:
                model = fit(fit_data)
            except skip as exc:  # this candidate cannot learn from these data: the others still can
                results[name] = Scored(None, error=" ".join(str(exc).split()))
            else:
                seconds = time.perf_counter() - t0
                results[name] = replace(score(model, held), seconds=seconds)
                del model
        if on_scored is not None:
            on_scored(name, results[name])
    finished = {n: r for n, r in results.items() if r.mean is not None}
    if not finished:
        return Search(None, results, None)
    per_pair = None
    if all(r.per_pair is not None for r in finished.values()):
        per_pair = {n: r.per_pair for n, r in finished.items()}
    scores = Scores({n: r.mean for n, r in finished.items()}, per_pair)
    return Search(rule(scores), results, scores)
