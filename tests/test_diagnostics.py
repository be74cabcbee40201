"""Per-round diagnostics of DMH and the options beyond the paper."""

import numpy as np
import pytest

from dmh import DMH, make_semi_paired
from dmh.diagnostics import diagnose, format_report, model_at_round, ranking_map
from dmh.methods import gbe
from dmh.methods.dmh import PRESETS
from dmh.methods.dmh_options import ONE_PROBLEM
from dmh.selection import holdout_pairs

TINY = dict(d=8, hidden_size=32, n_rounds=2, dam_epochs=3, cle_max_iter=5, gbe_max_iter=30, use_unpaired=True)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def test_ranking_map_against_a_hand_computed_case():
    scores = np.array([[3.0, 2.0, 1.0, 0.0]])
    rel = np.array([[True, False, True, False]])
    assert ranking_map(scores, rel) == pytest.approx((1 + 2 / 3) / 2)
    excl = np.array([[True, False, False, False]])
    assert ranking_map(scores, rel, excl) == pytest.approx(0.5)  # the relevant one is now at rank 2


def test_round_snapshots_equal_shorter_fits(toy_data):
    semi = make_semi_paired(toy_data.train(), 0.5, random_state=0)
    m2 = DMH(8, random_state=0, record_diagnostics=True, **TINY).fit(semi)
    m1 = DMH(8, random_state=0, **{**TINY, "n_rounds": 1}).fit(semi)
    r0, r1 = model_at_round(m2, 0), model_at_round(m2, 1)
    for modality in ("image", "text"):
        X = getattr(toy_data, modality)
        assert np.array_equal(r0.encode(X, modality), m1.encode(X, modality))
        assert np.array_equal(r1.encode(X, modality), m2.encode(X, modality))
    with pytest.raises(ValueError, match="record_diagnostics"):
        model_at_round(m1, 0)


def test_diagnose_reports_every_round(toy_data):
    fit, held = holdout_pairs(toy_data.train(), 0.2, min_count=10)
    m = DMH(8, random_state=0, record_diagnostics=True, **TINY).fit(fit)
    rows = diagnose(m, fit, held, toy_data.query(), toy_data.database())
    assert [r["round"] for r in rows] == [1, 2]
    for r in rows:
        assert 0 < r["heldout"]["score"] <= 1 and 0 <= r["gbe_health"]["bit_balance"] <= 1
        assert 0 <= r["map_Y"]["paired"] <= 1 and 0 <= r["map_gbe"]["paired"] <= 1
        assert set(r["map_test"]) == {"image->text", "text->image"}
        assert 0.5 <= r["dam_agreement"]["image"] <= 1
    assert format_report(rows).count("\n") == 3


def test_paper_preset_is_the_options_switched_off(toy_data):
    assert PRESETS["paper"] == dict(similarity="clip", perplexity=30.0, dam_stop="fixed", dam_lean=False,
                                    cle_dtype="float64", unpaired_complement="neighbours",
                                    unpaired_dam=True, use_unpaired=True, unpaired_margin=0.0, cle_scaling="feature",
                                    encoder="network",
                                    gamma_scaling="none",
                                    gbe_lr=0.05,
                                    gbe_max_iter=150, gbe_tol=1e-5, gbe_schedule="constant", cle_gram=False,
                                    dam_agree_target=None, gbe_exaggeration=1.0, gbe_block_bits=ONE_PROBLEM,
                                    dam_scaling="feature")
    train = toy_data.train()
    a = DMH(8, random_state=1, preset="paper", **TINY).fit(train)
    b = DMH(8, random_state=1, preset="default", **{**PRESETS["paper"], **TINY}).fit(train)
    assert np.array_equal(a.encode(toy_data.image, "image"), b.encode(toy_data.image, "image"))
    with pytest.raises(ValueError, match="preset"):
        DMH(8, preset="nope").fit(train)
    with pytest.raises(ValueError, match="gbe_schedule"):
        DMH(8, gbe_schedule="linear").fit(train)


@pytest.mark.parametrize("variant", [dict(similarity="perplexity", perplexity=5.0),
                                     dict(dam_stop="agreement", dam_lean=True), dict(gamma_scaling="bits")])
def test_options_run(toy_data, variant):
    m = DMH(8, random_state=0, **{**TINY, **variant}).fit(toy_data.train())
    assert set(np.unique(m.codes_)) <= {-1, 1}


def test_perplexity_similarity_is_calibrated():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(200, 5))
    P = gbe.perplexity_similarity(Y, perplexity=10.0)
    assert P.sum() == pytest.approx(1.0) and abs(P - P.T).max() < 1e-15 and P.diagonal().max() == 0
    d2 = np.random.default_rng(1).random((7, 30)) * 5
    Pc = gbe.calibrated_conditionals(d2, 10.0)
    ent = -(Pc * np.log(Pc)).sum(1)
    assert np.allclose(np.exp(ent), 10.0, rtol=1e-4) and np.allclose(Pc.sum(1), 1.0)
    # sharper where neighbours are closer: the nearest neighbour gets the largest weight
    assert (Pc.argmax(1) == d2.argmin(1)).all()
