import numpy as np
import pytest

from dmh.peers.jdsh import dsdw_weighting, fit_distribution, jdsh_joint_similarity

from . import _helpers as h

PARAMS = {"epochs": 8, "image_hidden": (16,), "text_hidden": (16,), "batch_size": 16, "n_fit_batches": 5}


def _cos(a, b):
    return a @ b / np.linalg.norm(a) / np.linalg.norm(b)


def test_joint_similarity_matches_loops():
    rng = np.random.default_rng(2)
    Fi, Ft = rng.random((5, 4)), rng.random((5, 3))
    m = 5
    SI = np.array([[2 * _cos(Fi[i], Fi[j]) - 1 for j in range(m)] for i in range(m)])
    ST = np.array([[2 * _cos(Ft[i], Ft[j]) - 1 for j in range(m)] for i in range(m)])
    Sh = np.array([[_cos(SI[i], ST[j]) for j in range(m)] for i in range(m)])
    expected = np.array([[0.5 * SI[i, j] + 0.1 * ST[i, j] + 0.4 * (Sh[i, j] + Sh[j, i]) / 2 for j in range(m)]
                         for i in range(m)])
    np.testing.assert_allclose(jdsh_joint_similarity(Fi, Ft, 0.5, 0.1, 0.4), expected, atol=1e-12)


def test_dsdw_weighting_matches_definition():
    S = np.array([[-0.6, -0.2, 0.0], [0.3, 0.7, -0.55]])
    left, right, lo, hi, l1, l2 = -0.5, 0.2, -0.6, 0.7, 0.1, 0.2
    out = dsdw_weighting(S, left, right, lo, hi, l1, l2)
    for (i, j), s in np.ndenumerate(S):
        if s < left:
            want = (1 + l1 * np.exp(lo - s)) * s
        elif s > right:
            want = (1 + l2 * np.exp(s - hi)) * s
        else:
            want = s
        assert out[i, j] == pytest.approx(want)


def test_fit_distribution_on_a_known_sample():
    rng = np.random.default_rng(0)
    left = -np.abs(rng.normal(0, 0.05, 20000))
    right = np.abs(rng.normal(0, 0.2, 20000))
    d = fit_distribution(np.concatenate([left, right]) - 0.3)
    assert d["loc"] == pytest.approx(-0.3, abs=0.02)
    assert d["scale_left"] == pytest.approx(0.05, rel=0.2)
    assert d["scale_right"] == pytest.approx(0.2, rel=0.2)
    assert d["s_min"] < d["loc"] < d["s_max"]


def test_loss_decreases_and_distribution_is_saved(tmp_path):
    model = h.fit("jdsh", h.toy(), **PARAMS)
    assert model.loss_history_[-1] < model.loss_history_[0] - 0.05
    d = model.distribution_
    assert d["left"] < d["loc"] < d["right"]
    _, loaded = h.check_save_load("jdsh", PARAMS, tmp_path)
    assert loaded.distribution_ == pytest.approx(model.distribution_)


def test_codes():
    h.check_codes("jdsh", PARAMS)


def test_same_seed_same_codes():
    h.check_same_seed("jdsh", PARAMS)


def test_bad_input():
    h.check_bad_input("jdsh", PARAMS)
    with pytest.raises(ValueError, match="mu"):
        h.fit("jdsh", h.toy(), mu=0.0, **PARAMS)


def test_mirflickr_distribution_is_the_authors_constants():
    from dmh.peers.jdsh import MIRFLICKR_DISTRIBUTION

    model = h.fit("jdsh", h.toy(), distribution="mirflickr", **{**PARAMS, "epochs": 1})
    d = model.distribution_
    assert {k: d[k] for k in MIRFLICKR_DISTRIBUTION} == MIRFLICKR_DISTRIBUTION
    assert d["left"] == pytest.approx(-0.49 - 2 * 0.019) and d["right"] == pytest.approx(-0.49 + 4 * 0.088)
    with pytest.raises(ValueError, match="distribution"):
        h.fit("jdsh", h.toy(), distribution="nus", **PARAMS)
