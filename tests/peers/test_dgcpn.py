import numpy as np
import pytest

from dmh.peers.dgcpn import dgcpn_similarity, neighbour_weights

from . import _helpers as h

PARAMS = {"epochs": 8, "image_hidden": (16,), "text_hidden": (16,), "batch_size": 16}


def _cos(a, b):
    return a @ b / np.linalg.norm(a) / np.linalg.norm(b)


def test_similarity_matches_loops():
    rng = np.random.default_rng(3)
    n, k, a1, a2, c = 6, 3, 0.2, 0.3, 4 / 3
    Fi, Ft = rng.random((n, 4)), rng.random((n, 3))
    Sp = np.array([[a1 * _cos(Ft[i], Ft[j]) + (1 - a1) * _cos(Fi[i], Fi[j]) for j in range(n)] for i in range(n)])
    P = np.zeros((n, n))
    for i in range(n):
        keep = sorted(range(n), key=lambda j: -Sp[i, j])[:k]
        for j in keep:
            P[i, j] = max(Sp[i, j], 0.0)
        P[i] /= P[i].sum()
    expected = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            coherence = c * k * sum(P[i, m] * P[j, m] for m in range(n))
            expected[i, j] = 2 * ((1 - a2) * Sp[i, j] + a2 * coherence) - 1
    np.testing.assert_allclose(neighbour_weights(Sp, k), P, atol=1e-12)
    np.testing.assert_allclose(dgcpn_similarity(Fi, Ft, a1, a2, k, c), expected, atol=1e-12)


def test_neighbour_weights_rows_sum_to_one():
    S = np.random.default_rng(0).random((7, 7))
    P = neighbour_weights(S, 2)
    np.testing.assert_allclose(P.sum(1), 1.0)
    assert ((P > 0).sum(1) == 2).all()


def test_loss_decreases():
    model = h.fit("dgcpn", h.toy(), **PARAMS)
    assert model.loss_history_[-1] < 0.9 * model.loss_history_[0]
    assert model.n_neighbours_ == round(0.15 * 64)


def test_codes():
    h.check_codes("dgcpn", PARAMS)


def test_same_seed_same_codes():
    h.check_same_seed("dgcpn", PARAMS)


def test_save_load(tmp_path):
    model, loaded = h.check_save_load("dgcpn", PARAMS, tmp_path)
    assert loaded.n_neighbours_ == model.n_neighbours_


def test_bad_input():
    h.check_bad_input("dgcpn", PARAMS)
    with pytest.raises(ValueError, match="knn_fraction"):
        h.fit("dgcpn", h.toy(), knn_fraction=0.0, **PARAMS)
