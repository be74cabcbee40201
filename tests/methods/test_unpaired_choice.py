"""``use_unpaired="auto"`` (dmh.methods.unpaired_choice): two candidate fits scored on held-out pairs
decide whether a semi-paired fit uses its unpaired objects; nothing changes on fully paired data."""

import numpy as np
import pytest

from dmh import DMH, load_model, make_semi_paired
from dmh.errors import ParameterError
from dmh.evaluation import data_fingerprint, make_cell
from dmh.methods.dmh import PRESETS
from dmh.selection import holdout_pairs, pair_retrieval_scores

TINY = dict(d=8, hidden_size=32, n_rounds=1, dam_epochs=2, cle_max_iter=5, gbe_max_iter=20)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _codes(model, data):
    return [model.encode(data.view(m), modality=m) for m in ("image", "text")]


def _same_codes(a, b, data):
    return all(np.array_equal(x, y) for x, y in zip(_codes(a, data), _codes(b, data), strict=True))


@pytest.fixture
def semi(toy_data):
    return make_semi_paired(toy_data.train(), 0.5, random_state=0)


def test_the_default_preset_chooses_and_the_paper_uses_every_object():
    assert PRESETS["default"]["use_unpaired"] == "auto" and PRESETS["paper"]["use_unpaired"] is True
    with pytest.raises(ParameterError, match="use_unpaired"):
        DMH(use_unpaired="sometimes").check_hyperparameters()


def test_auto_fits_the_side_the_held_out_pairs_score_higher(semi, toy_data):
    m = DMH(8, random_state=0, **TINY).fit(semi)
    choice = m.unpaired_choice_
    assert m.use_unpaired_ is choice["use"] is (choice["every_object"] >= choice["pairs_alone"])
    assert choice["n_heldout"] == holdout_pairs(semi)[1].n
    # the candidates are the same DMH on the data less the held-out pairs, scored on those pairs
    fit_data, held = holdout_pairs(semi, random_state=0)
    for use, name in ((True, "every_object"), (False, "pairs_alone")):
        c = DMH(8, random_state=0, use_unpaired=use, **TINY).fit(fit_data)
        s = pair_retrieval_scores(c.encode(held.image, modality="image"), c.encode(held.text, modality="text"))
        assert s["mrr"] == pytest.approx(choice[name])
    # and the model is the fit on all the data with the side chosen
    assert _same_codes(m, DMH(8, random_state=0, use_unpaired=m.use_unpaired_, **TINY).fit(semi), toy_data)


@pytest.mark.parametrize("pairs_win", [True, False])
def test_auto_follows_the_scores_either_way(semi, toy_data, monkeypatch, pairs_win):
    """Whichever side the held-out pairs prefer is the side fitted (the scores forced here)."""
    calls = []

    def scores(image_codes, text_codes):
        calls.append(1)
        # the first candidate fitted uses every object, the second the pairs alone
        return {"mrr": 0.2 if (len(calls) == 1) == pairs_win else 0.4}

    monkeypatch.setattr("dmh.selection.pair_retrieval_scores", scores)
    m = DMH(8, random_state=1, **TINY).fit(semi)
    assert len(calls) == 2 and m.use_unpaired_ is (not pairs_win)
    expected = DMH(8, random_state=1, use_unpaired=not pairs_win, **TINY).fit(semi)
    assert _same_codes(m, expected, toy_data)
    if pairs_win:
        assert m.codes_.shape[0] == semi.n_paired and "pairs alone" in m.unpaired_choice_["reason"]


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


def test_a_finished_cell_says_what_auto_chose(toy_data):
    from dmh.evaluation import plan_evaluation, run_cells

    tiny = {"dmh": {**TINY, "hidden_size": 16}}
    cells = plan_evaluation(toy_data, "toy", ["dmh"], [8], [1.0, 0.5], [0], tiny)
    entries = {e["cell"]["paired_ratio"]: e for e in run_cells(cells, {"data": toy_data})}
    assert "unpaired_choice" not in entries[1.0]  # nothing to choose
    choice = entries[0.5]["unpaired_choice"]
    assert choice["use"] is (choice["every_object"] >= choice["pairs_alone"])


def test_a_fit_too_large_is_refused_before_the_candidates(semi, monkeypatch):
    from dmh import errors
    from dmh.methods import unpaired_choice as module

    monkeypatch.setattr(errors, "_physical_memory", lambda: 1)
    monkeypatch.setattr(module, "choose", lambda *a: pytest.fail("the candidates ran before the memory check"))
    with pytest.raises(errors.ResourceError, match="DMH .* would need about"):
        DMH(8, random_state=0, **TINY).fit(semi)
