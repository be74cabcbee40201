"""``use_unpaired="auto"`` (dmh.methods.unpaired_choice): two candidate fits scored on held-out pairs
decide whether a semi-paired fit uses its unpaired objects (only when they are ahead by more than
``unpaired_margin`` standard errors); nothing changes on fully paired data."""

import numpy as np
import pytest

from dmh import DMH, load_model, make_semi_paired
from dmh.errors import ParameterError
from dmh.evaluation import data_fingerprint, make_cell
from dmh.heldout import holdout_pairs, pair_reciprocal_ranks, pair_retrieval_scores
from dmh.methods.dmh import PRESETS

TINY = dict(d=8, hidden_size=32, n_rounds=1, dam_epochs=2, cle_max_iter=5, gbe_max_iter=20)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _codes(model, data):
    return [model.encode(data.view(m), modality=m) for m in ("image", "text")]


def _rule(choice):
    """The side the margin rule takes from a recorded choice's figures."""
    ahead = choice["every_object"] - choice["pairs_alone"]
    if choice["margin"] > 0:
        return ahead > choice["margin"] * choice["difference_se"]
    return ahead >= 0


def _same_codes(a, b, data):
    return all(np.array_equal(x, y) for x, y in zip(_codes(a, data), _codes(b, data), strict=True))


@pytest.fixture
def semi(toy_data):
    return make_semi_paired(toy_data.train(), 0.5, random_state=0)


def test_the_default_preset_chooses_and_the_paper_uses_every_object():
    assert PRESETS["default"]["use_unpaired"] == "auto" and PRESETS["paper"]["use_unpaired"] is True
    assert PRESETS["default"]["unpaired_margin"] == 1.0
    with pytest.raises(ParameterError, match="use_unpaired"):
        DMH(use_unpaired="sometimes").check_hyperparameters()
    with pytest.raises(ParameterError, match="unpaired_margin"):
        DMH(unpaired_margin=-1).check_hyperparameters()


def test_auto_fits_the_side_the_held_out_pairs_score_higher(semi, toy_data):
    m = DMH(8, random_state=0, **TINY).fit(semi)
    choice = m.unpaired_choice_
    assert choice["margin"] == 1.0 and choice["difference_se"] > 0
    assert m.use_unpaired_ is choice["use"] is _rule(choice)
    assert choice["n_heldout"] == holdout_pairs(semi)[1].n
    # the candidates are the same DMH on the data less the held-out pairs, scored on those pairs
    fit_data, held = holdout_pairs(semi, random_state=0)
    per_pair = {}
    for use, name in ((True, "every_object"), (False, "pairs_alone")):
        c = DMH(8, random_state=0, use_unpaired=use, **TINY).fit(fit_data)
        codes = c.encode(held.image, modality="image"), c.encode(held.text, modality="text")
        assert pair_retrieval_scores(*codes)["mrr"] == pytest.approx(choice[name])
        per_pair[use] = pair_reciprocal_ranks(*codes)
        assert per_pair[use].mean() == pytest.approx(choice[name])
    diff = per_pair[True] - per_pair[False]
    assert choice["difference_se"] == pytest.approx(diff.std(ddof=1) / np.sqrt(diff.size))
    # and the model is the fit on all the data with the side chosen
    assert _same_codes(m, DMH(8, random_state=0, use_unpaired=m.use_unpaired_, **TINY).fit(semi), toy_data)


def _force_scores(monkeypatch, every_object, pairs_alone):
    """The held-out pairs' reciprocal ranks of the two candidates forced: the first candidate fitted
    uses every object, the second the pairs alone."""
    calls = []

    def per_pair(image_codes, text_codes):
        calls.append(1)
        return np.asarray(every_object if len(calls) == 1 else pairs_alone, dtype=float)

    monkeypatch.setattr("dmh.heldout._search.pair_reciprocal_ranks", per_pair)
    return calls


@pytest.mark.parametrize("pairs_win", [True, False])
def test_auto_follows_the_scores_either_way(semi, toy_data, monkeypatch, pairs_win):
    """Whichever side the held-out pairs prefer clearly is the side fitted (the scores forced here)."""
    low, high = np.full(20, 0.2) + np.arange(20) * 1e-3, np.full(20, 0.4) + np.arange(20) * 1e-3
    calls = _force_scores(monkeypatch, low if pairs_win else high, high if pairs_win else low)
    m = DMH(8, random_state=1, **TINY).fit(semi)
    assert len(calls) == 2 and m.use_unpaired_ is (not pairs_win)
    expected = DMH(8, random_state=1, use_unpaired=not pairs_win, **TINY).fit(semi)
    assert _same_codes(m, expected, toy_data)
    if pairs_win:
        assert m.codes_.shape[0] == semi.n_paired and "pairs alone" in m.unpaired_choice_["reason"]


class _Stub:
    """A model for :func:`choose` alone: its fits cost nothing (the scores are forced)."""

    def __init__(self, **params):
        self.params = params
        self.random_state = params.get("random_state", 0)

    def get_params(self, deep=False):
        return dict(self.params)

    def fit(self, data):
        return self

    def encode(self, x, modality):
        return np.ones((x.shape[0], 8), dtype=np.int8)


@pytest.mark.parametrize("margin, uses_every_object", [(1.0, False), (0.5, True), (0.0, True)])
def test_every_object_is_used_only_when_ahead_by_the_margin(semi, monkeypatch, margin, uses_every_object):
    """Every object ahead by 0.8 standard errors of the paired difference: within the default margin
    (1), so the pairs alone; a margin of 0.5, or 0 (the rule before the margin: the higher score
    wins), takes every object."""
    from dmh.methods.unpaired_choice import choose_unpaired as choose

    rng = np.random.default_rng(0)
    pairs_alone = rng.uniform(0.05, 0.5, 100)
    noise = rng.normal(0.0, 0.05, 100)
    noise -= noise.mean()
    step = 0.8 * noise.std(ddof=1) / np.sqrt(100)  # the mean difference: 0.8 standard errors
    _force_scores(monkeypatch, pairs_alone + noise + step, pairs_alone)
    choice = choose(_Stub(random_state=1), semi, margin=margin)
    assert choice.every_object - choice.pairs_alone == pytest.approx(0.8 * choice.difference_se)
    assert choice.use is uses_every_object and choice.margin == margin


def test_a_tie_goes_to_the_pairs_alone_under_a_margin_and_to_every_object_without(semi, monkeypatch):
    from dmh.methods.unpaired_choice import choose_unpaired as choose

    same = np.linspace(0.05, 0.5, 50)
    for margin, use in ((1.0, False), (0.0, True)):
        _force_scores(monkeypatch, same, same)
        assert choose(_Stub(random_state=1), semi, margin=margin).use is use
    with pytest.raises(ValueError, match="margin"):
        choose(_Stub(), semi, margin=-1)


def test_pair_reciprocal_ranks_are_the_mrr_per_pair():
    rng = np.random.default_rng(3)
    image, text = (rng.choice(np.array([-1, 1], dtype=np.int8), (30, 8)) for _ in range(2))
    rr = pair_reciprocal_ranks(image, text)
    assert rr.shape == (30,) and np.all((rr > 0) & (rr <= 1))
    assert rr.mean() == pytest.approx(pair_retrieval_scores(image, text)["mrr"])
    assert np.allclose(pair_retrieval_scores(image, text, per_pair=True)["pair_rr"], rr, atol=5e-7)  # dmh tune's
    assert "pair_rr" not in pair_retrieval_scores(image, text)
    distinct = np.where((np.arange(30)[:, None] >> np.arange(8)) & 1, 1, -1).astype(np.int8)
    assert np.allclose(pair_reciprocal_ranks(distinct, distinct), 1.0)  # each partner alone at distance 0


def test_fully_paired_data_fit_as_before_with_nothing_chosen(toy_data):
    train = toy_data.train()
    m = DMH(8, random_state=3, **TINY).fit(train)
    assert m.use_unpaired_ is True and m.unpaired_choice_ is None
    assert _same_codes(m, DMH(8, random_state=3, use_unpaired=True, **TINY).fit(train), toy_data)


def test_too_few_pairs_to_hold_out_use_every_object(toy_data):
    semi = make_semi_paired(toy_data.train(), 0.2, random_state=0)  # 16 pairs: 8 could be held out
    m = DMH(8, random_state=0, **TINY).fit(semi)
    assert m.use_unpaired_ is True and "too few" in m.unpaired_choice_["reason"]
    assert m.unpaired_choice_["every_object"] is None


def test_a_generator_seed_leaves_the_final_fit_as_it_would_be(semi, toy_data):
    """The candidates draw their seed from a copy of a Generator: the fit itself consumes the same
    stream as a fit with the chosen side given."""
    m = DMH(8, random_state=np.random.default_rng(5), **TINY).fit(semi)
    other = DMH(8, random_state=np.random.default_rng(5), use_unpaired=m.use_unpaired_, **TINY).fit(semi)
    assert _same_codes(m, other, toy_data)


def test_the_choice_is_saved_and_checked_on_load(semi, toy_data, tmp_path):
    m = DMH(8, random_state=0, **TINY).fit(semi)
    m2 = load_model(m.save(tmp_path / "m.npz"))
    assert m2.use_unpaired_ is m.use_unpaired_ and m2.unpaired_choice_ == m.unpaired_choice_
    assert m2.use_unpaired is None and m2.options_.use_unpaired == "auto"
    with pytest.raises(ParameterError, match="use_unpaired"):
        m2._set_extra_meta({**m._extra_meta(), "use_unpaired": "yes"})


def test_cell_keys_hold_auto_only_where_objects_are_unpaired(toy_data):
    """A fully paired or pairs-only cell's key is the key it had before "auto" (use_unpaired does
    nothing there); a semi-paired cell's key names "auto", so no earlier result is taken for it."""
    fp = data_fingerprint(toy_data, "toy")
    base = dict(dataset="toy", fingerprint=fp, method="dmh", params={}, n_bits=8, seed=0)
    assert "use_unpaired" not in make_cell(**base, paired_ratio=1.0)["params"]
    assert "use_unpaired" not in make_cell(**base, paired_ratio=0.5, pairs_only=True)["params"]
    assert make_cell(**base, paired_ratio=0.5)["params"]["use_unpaired"] == "auto"
    pinned = make_cell(**{**base, "params": {"use_unpaired": True}}, paired_ratio=0.5)
    assert "use_unpaired" not in pinned["params"]  # the value every earlier result ran with
    full = make_cell(**{**base, "params": {"use_unpaired": True}}, paired_ratio=1.0)
    assert full["key"] == make_cell(**base, paired_ratio=1.0)["key"]


def test_the_margin_enters_a_key_only_where_auto_chooses(toy_data):
    """``unpaired_margin`` acts only under "auto" on semi-paired data: there the default's margin
    (1) is in the key, so results of the rule before it (margin 0, left out of keys) are not reused
    for it; cells that pin ``use_unpaired`` or are fully paired keep their keys."""
    fp = data_fingerprint(toy_data, "toy")
    base = dict(dataset="toy", fingerprint=fp, method="dmh", params={}, n_bits=8, seed=0)
    assert make_cell(**base, paired_ratio=0.5)["params"]["unpaired_margin"] == 1.0
    before = make_cell(**{**base, "params": {"unpaired_margin": 0}}, paired_ratio=0.5)["params"]
    assert "unpaired_margin" not in before and before["use_unpaired"] == "auto"
    for params, ratio, pairs_only in (({}, 1.0, False), ({}, 0.5, True), ({"use_unpaired": True}, 0.5, False),
                                      ({"use_unpaired": False, "unpaired_margin": 3}, 0.5, False)):
        cell = make_cell(**{**base, "params": params}, paired_ratio=ratio, pairs_only=pairs_only)
        assert "unpaired_margin" not in cell["params"], (params, ratio)


def test_a_finished_cell_says_what_auto_chose(toy_data):
    from dmh.evaluation import plan_evaluation, run_cells

    tiny = {"dmh": {**TINY, "hidden_size": 16}}
    cells = plan_evaluation(toy_data, "toy", ["dmh"], [8], [1.0, 0.5], [0], tiny)
    entries = {e["cell"]["paired_ratio"]: e for e in run_cells(cells, {"data": toy_data})}
    assert "unpaired_choice" not in entries[1.0]  # nothing to choose
    choice = entries[0.5]["unpaired_choice"]
    assert choice["use"] is _rule(choice)


def test_a_fit_too_large_is_refused_before_the_candidates(semi, monkeypatch):
    from dmh import errors
    from dmh.methods import unpaired_choice as module

    monkeypatch.setattr(errors, "_physical_memory", lambda: 1)
    monkeypatch.setattr(module, "choose_unpaired", lambda *a, **k: pytest.fail("the candidates ran before the memory check"))
    with pytest.raises(errors.ResourceError, match="DMH .* would need about"):
        DMH(8, random_state=0, **TINY).fit(semi)
