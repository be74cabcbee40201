import numpy as np
import pytest

from dmh.peers.djsrh import DJSRH, cosine_similarity, djsrh_similarity

from . import _helpers as h

PARAMS = {"epochs": 30, "image_hidden": (16,), "text_hidden": (16,), "batch_size": 16}


def test_cosine_and_joint_similarity_match_loops():
    rng = np.random.default_rng(1)
    Fi, Ft = rng.random((5, 4)), rng.random((5, 3))
    beta, eta, mu = 0.7, 0.4, 1.5
    m = 5
    SI = np.empty((m, m))
    ST = np.empty((m, m))
    for i in range(m):
        for j in range(m):
            SI[i, j] = 2 * Fi[i] @ Fi[j] / np.linalg.norm(Fi[i]) / np.linalg.norm(Fi[j]) - 1
            ST[i, j] = 2 * Ft[i] @ Ft[j] / np.linalg.norm(Ft[i]) / np.linalg.norm(Ft[j]) - 1
    St = beta * SI + (1 - beta) * ST
    expected = np.empty((m, m))
    for i in range(m):
        for j in range(m):
            second = sum(St[i, k] * St[j, k] for k in range(m)) / m
            expected[i, j] = mu * ((1 - eta) * St[i, j] + eta * second)
    np.testing.assert_allclose(djsrh_similarity(Fi, Ft, beta, eta, mu), expected, atol=1e-12)
    np.testing.assert_allclose(cosine_similarity(np.zeros((2, 3))), 0.0)


def test_loss_decreases():
    model = h.fit("djsrh", h.toy(), **PARAMS)
    assert model.n_iter_ == PARAMS["epochs"] and model.loss_history_.shape == (PARAMS["epochs"],)
    assert model.loss_history_[-1] < 0.8 * model.loss_history_[0]


def test_codes():
    model = h.check_codes("djsrh", PARAMS)
    assert isinstance(model, DJSRH) and not model.uses_unpaired


def test_same_seed_same_codes():
    h.check_same_seed("djsrh", PARAMS)


def test_save_load(tmp_path):
    h.check_save_load("djsrh", PARAMS, tmp_path)


def test_bad_input():
    h.check_bad_input("djsrh", PARAMS)
    with pytest.raises(ValueError, match="beta"):
        h.fit("djsrh", h.toy(), beta=2.0, **PARAMS)
    with pytest.raises(ValueError, match="image_hidden"):
        h.fit("djsrh", h.toy(), **{**PARAMS, "image_hidden": (0,)})


def test_trains_on_paired_objects_only():
    from dmh.data import make_semi_paired

    data = make_semi_paired(h.toy(), 0.5, random_state=0)
    model = h.fit("djsrh", data, **PARAMS)
    assert model.n_train_ == data.n_paired == 32


def test_stopping_rule_is_label_free_and_stops():
    model = h.fit("djsrh", h.toy(), **{**PARAMS, "epochs": 200}, tol=0.5, patience=1)
    assert model.n_iter_ < 200
