"""Whether a DMH fit uses its unpaired objects, chosen on held-out pairs (``use_unpaired="auto"``).

The unpaired objects of a semi-paired set help DMH on some data and hurt it on other data
(docs/quality.md: they help on UCI digits and fashion, and hurt on Wikipedia, where the missing
descriptions that CLE complements are poor). No label says which; the pairs do. :func:`choose_unpaired`
holds out a seeded share of the pairs (:func:`dmh.heldout.holdout_pairs`, the share ``dmh tune``
holds out) and, in the held-out pair search (:func:`dmh.heldout.search`), fits the same DMH twice on
the rest, once on every object and once on the pairs alone, and asks of each how well the held-out
images and texts find their own partners by Hamming distance (the mean reciprocal rank over both
directions, as :func:`dmh.heldout.pair_retrieval_scores` gives it).
Every object is used only where the held-out pairs say it helps: where its score is ahead of the
pairs alone's by more than ``margin`` standard errors of the paired difference (per held-out pair,
the difference of the two candidates' reciprocal ranks; :func:`dmh.heldout.pair_reciprocal_ranks`).
Within that margin the pairs alone are used: the simpler model of the two (no imputed view, half
the objects or fewer) and the cheaper fit, as the one-standard-error rule of model selection
(:func:`dmh.heldout.one_standard_error`, the search's rule here) takes the simplest model within one
standard error of the best (Breiman et al. 1984; Hastie, Tibshirani
and Friedman, *The Elements of Statistical Learning*, 7.10). DMH's default preset takes
``margin=1`` (``DMH(unpaired_margin=...)``); ``margin=0`` is the rule before it: the higher score
wins, a tie goes to every object (the paper's premise).

The two candidate fits are full fits on about 85% of the pairs, so a semi-paired fit under
``"auto"`` costs the fit itself plus one fit on every object and one on the pairs alone (the latter
the cheaper: it has only the pairs). A fully paired set has nothing to choose and costs nothing
more; a set with too few pairs to hold out 10 uses every object.
"""

from __future__ import annotations

import copy
import numbers
import time
import warnings
from dataclasses import asdict, dataclass

import numpy as np

from ..data import CrossModalData
from ..errors import DataError, ParameterError
from ..heldout import best_mean, holdout_pairs, one_standard_error, search

__all__ = ["UnpairedChoice", "choose_unpaired", "seed_of"]

#: the two candidates, as :func:`dmh.heldout.search` names them
EVERY_OBJECT, PAIRS_ALONE = "every object", "pairs alone"


@dataclass(frozen=True)
class UnpairedChoice:
    """What ``use_unpaired="auto"`` chose and why: ``use`` (fit on every object or not), the held-out
    pairs' score of each candidate (``every_object``, ``pairs_alone``: mean reciprocal rank of the
    true partner, ``None`` where nothing was fitted), how many pairs were held out, the seconds the
    two candidate fits took, ``reason`` in words, the standard error of the paired difference of the
    two scores (``difference_se``) and the ``margin`` in standard errors the rule asked for."""

    use: bool
    every_object: float | None
    pairs_alone: float | None
    n_heldout: int
    seconds: float
    reason: str
    difference_se: float | None = None
    margin: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


def seed_of(random_state) -> int:
    """An integer seed for the candidate fits and the held-out split: ``random_state`` itself when an
    integer, drawn from a copy of a generator (the final fit's stream stays as it was), else fresh."""
    if isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool):
        return int(random_state)
    if isinstance(random_state, np.random.Generator):
        return int(copy.deepcopy(random_state).integers(2**31))
    if isinstance(random_state, np.random.RandomState):
        return int(copy.deepcopy(random_state).randint(2**31))
    return int(np.random.default_rng().integers(2**31))


def choose_unpaired(model, data: CrossModalData, margin: float = 0.0) -> UnpairedChoice:
    """Whether ``model`` (a DMH, its ``use_unpaired`` aside) should fit ``data`` on every object:
    two candidate fits on ``data`` less its held-out pairs, scored on those pairs; every object only
    where its score is ahead by more than ``margin`` standard errors of the paired difference
    (``margin=0``: ahead or equal). See the module docstring."""
    margin = float(margin)
    if not margin >= 0.0:
        raise ParameterError(f"unpaired_margin must be a non-negative number of standard errors, got {margin}")
    if data.is_fully_paired:
        return UnpairedChoice(True, None, None, 0, 0.0, "every object is paired: nothing to choose", None, margin)
    seed = seed_of(model.random_state)
    try:
        fit_data, held = holdout_pairs(data, random_state=seed)  # dmh tune's share: 15%, 50 to 500 pairs
    except DataError:
        return UnpairedChoice(True, None, None, 0, 0.0,
                              f"{data.n_paired} pairs, too few to hold out 10: every object (the paper's)",
                              None, margin)
    # one fit per candidate even where the model's codes are made of blocks (``block_bits``): the
    # choice is about the data, and every block's fit sees the same data
    params = {**model.get_params(deep=False), "random_state": seed, "verbose": False, "record_diagnostics": False,
              "block_bits": None}

    def fitted(use: bool):
        def fit(fit_data):
            candidate = type(model)(**{**params, "use_unpaired": use})
            with warnings.catch_warnings():  # the fit on all the data warns for itself
                warnings.simplefilter("ignore")
                candidate.fit(fit_data)
            return candidate

        return fit

    # the pairs alone are the simpler candidate; margin 0 is the higher score, a tie to every object
    rule = one_standard_error(margin, simplest=(PAIRS_ALONE, EVERY_OBJECT)) if margin > 0.0 else best_mean
    t0 = time.perf_counter()
    found = search({EVERY_OBJECT: fitted(True), PAIRS_ALONE: fitted(False)}, fit_data, held, rule=rule)
    seconds = time.perf_counter() - t0
    scores = found.scores.means  # the mean reciprocal rank over both directions
    _, se = found.scores.difference(EVERY_OBJECT, PAIRS_ALONE)
    use = found.chosen == EVERY_OBJECT
    if margin > 0.0:
        rule_words = f"every object only when ahead by more than {margin:g} x its standard error {se:.4f}"
    else:
        rule_words = "the higher score"
    side = "every object" if use else "the pairs alone"
    reason = (f"{held.n} held-out pairs: {side} (mean reciprocal rank {scores[EVERY_OBJECT]:.4f} every object, "
              f"{scores[PAIRS_ALONE]:.4f} pairs alone; {rule_words})")
    return UnpairedChoice(use, scores[EVERY_OBJECT], scores[PAIRS_ALONE], held.n, seconds, reason, se, margin)
