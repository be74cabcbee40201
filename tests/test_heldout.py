"""The one held-out pair search (dmh.heldout.search) and its rules: best mean, one standard error, a callable."""

import numpy as np
import pytest

from dmh import CrossModalData
from dmh.errors import DataError, DmhError
from dmh.heldout import (
    HeldOutPairs,
    Scored,
    Scores,
    best_mean,
    mean_and_standard_error,
    one_standard_error,
    search,
)


def _scores(**per_pair):
    return Scores({k: float(np.mean(v)) for k, v in per_pair.items()}, per_pair)


def test_best_mean_takes_the_highest_mean_and_a_tie_goes_to_the_first_listed():
    assert best_mean(Scores({"a": 0.2, "b": 0.5, "c": 0.1})) == "b"
    assert best_mean(Scores({"a": 0.5, "b": 0.5})) == "a" and best_mean(Scores({"b": 0.5, "a": 0.5})) == "b"
    with pytest.raises(DataError, match="no finished candidates"):
        Scores({})


def test_one_standard_error_takes_the_simplest_candidate_within_the_margin_of_the_best():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.1, 0.5, 100)
    noise = rng.normal(0.0, 0.05, 100)
    noise -= noise.mean()
    se = noise.std(ddof=1) / np.sqrt(100)
    # the best ("big") is ahead of "small" by 0.8 standard errors and of "tiny" by 10
    s = _scores(big=base + noise + 0.8 * se, small=base, tiny=base + noise + 0.8 * se - 10 * se)
    lead, lead_se = s.difference("big", "small")
    assert lead == pytest.approx(0.8 * se) and lead_se == pytest.approx(se)
    assert (lead, lead_se) == mean_and_standard_error(s.per_pair["big"] - s.per_pair["small"])
    assert best_mean(s) == "big"
    assert one_standard_error(1.0, simplest=("tiny", "small", "big"))(s) == "small"  # tiny is too far behind
    assert one_standard_error(0.5, simplest=("tiny", "small", "big"))(s) == "big"  # small is too, at half an SE
    assert one_standard_error(1.0, simplest=("big", "small", "tiny"))(s) == "big"  # the best is the simplest
    assert one_standard_error(1.0)(s) == "big"  # by default the first listed is the simplest: the best here
    # without per-pair scores nothing is known to be within a standard error: the best
    assert one_standard_error(1.0, simplest=("small", "big"))(Scores(s.means)) == "big"
    with pytest.raises(ValueError, match="margin"):
        one_standard_error(-1.0)


class _Coder:
    """A "model" whose codes are given: rows of ``codes`` for the held-out pairs (image and text alike)."""

    def __init__(self, codes):
        self.codes = codes

    def encode(self, X, modality):
        return self.codes[X[:, 0].astype(int)]


def _held(n=30):
    rows = np.arange(n, dtype=float)[:, None]
    return HeldOutPairs(image=rows, text=rows, index=np.arange(n))


def test_search_fits_scores_and_chooses_by_the_rule_it_is_given():
    held = _held()
    distinct = np.where((np.arange(30)[:, None] >> np.arange(8)) & 1, 1, -1).astype(np.int8)
    half = distinct.copy()
    half[15:] = 1  # the second half share one code: their partners are found only by chance
    fits, seen = [], []
    data = CrossModalData(image=np.zeros((3, 1)), text=np.zeros((3, 1)))

    def fit(codes, name):
        def run(fit_data):
            assert fit_data is data
            fits.append(name)
            if codes is None:
                raise DmhError(f"{name}  cannot\nfit")
            return _Coder(codes)
        return run

    candidates = {"half": fit(half, "half"), "broken": fit(None, "broken"), "all": fit(distinct, "all")}
    found = search(candidates, data, held, on_scored=lambda n, r: seen.append(n), skip=(DmhError,))
    assert found.chosen == "all" and found.results["all"].mean == 1.0 and fits == seen == list(candidates)
    assert found.results["broken"].mean is None and found.results["broken"].error == "broken cannot fit"
    assert found.scores.names == ("half", "all") and found.scores.per_pair is not None
    assert np.allclose(found.results["half"].per_pair[:15], 1.0)
    # a rule is any callable of the scores (scikit-learn's refit=callable): here the worst
    worst = search(candidates, data, held, rule=lambda s: min(s.names, key=s.mean), skip=(DmhError,))
    assert worst.chosen == "half"
    # known results are not fitted again; the per-pair scores reach the rule only where every candidate has them
    fits.clear()
    again = search(candidates, data, held, known={"half": Scored(0.7)}, skip=(DmhError,))
    assert fits == ["broken", "all"] and again.chosen == "all" and again.scores.per_pair is None
    assert again.scores.means["half"] == 0.7
    # nothing fitted: nothing chosen; an error not listed in skip is not swallowed
    none = search({"broken": fit(None, "broken")}, data, held, skip=(DmhError,))
    assert none.chosen is None and none.scores is None
    with pytest.raises(DmhError):
        search({"broken": fit(None, "broken")}, data, held)


def test_tune_choice_takes_a_rule():
    """dmh tune's choice over its records is the best mean; another rule reads the same records,
    the paired difference of two candidates over every (seed, pair)."""
    import json

    from dmh.selection import RecordScores, choose

    def rec(candidate, seed, rr):
        return {"candidate": candidate, "params": json.loads(candidate), "seed": seed, "n_bits": 16,
                "paired_ratio": 1.0, "label_free": {"score": float(np.mean(rr)), "pair_rr": list(rr)}}

    rng = np.random.default_rng(1)
    base = rng.uniform(0.1, 0.5, 50)
    noise = rng.normal(0.0, 0.05, 50)
    noise -= noise.mean()  # ahead by 0.001, a fraction of the standard error (about 0.007)
    recs = [rec('{"a": 1}', 0, base + noise + 0.001), rec('{"a": 0}', 0, base)]
    assert choose(recs)["candidate"] == '{"a": 1}'
    assert RecordScores(recs).difference('{"a": 1}', '{"a": 0}')[0] == pytest.approx(0.001)
    within = choose(recs, rule=one_standard_error(1.0, simplest=('{"a": 0}', '{"a": 1}')))
    assert within["candidate"] == '{"a": 0}' and within["others"][0]["candidate"] == '{"a": 1}'
