"""FSH: simplex weights, fusion similarity against a naive loop."""

from __future__ import annotations

import numpy as np
import pytest

from dmh.baselines.fsh import _simplex_weights, fusion_similarity, knn_uniform

from .paired_toys import N_BITS, _fit


def test_fsh_weights_on_simplex_and_codes(fitted):
    m = fitted["fsh"]
    assert m.eta_.shape == (2,) and np.all(m.eta_ >= 0) and m.eta_.sum() == pytest.approx(1.0)
    assert set(np.unique(m.anchor_codes_)) <= {-1, 1}
    assert m.anchor_codes_.shape == (12, N_BITS)



def test_fusion_similarity_against_naive_loop():
    rng = np.random.default_rng(4)
    X = [rng.normal(size=(9, 3)), rng.normal(size=(9, 2))]
    anchors = [rng.normal(size=(5, 3)), rng.normal(size=(5, 2))]
    s, sig = 2, [1.3, 0.7]
    A = fusion_similarity(X, anchors, s, sig)
    for v in range(2):
        o = 1 - v
        for i in range(9):
            Ni = np.argsort(np.linalg.norm(anchors[v] - X[v][i], axis=1))[:s]
            for a in range(5):
                Na = np.argsort(np.linalg.norm(anchors[o] - anchors[o][a], axis=1))[:s]
                k = [np.exp(-np.sum((anchors[v][p] - anchors[v][q]) ** 2) / (2 * sig[v] ** 2))
                     for p in Ni for q in Na]
                assert A[v][i, a] == pytest.approx(np.mean(k))
    Z = knn_uniform(rng.normal(size=(4, 6)), 3)
    np.testing.assert_allclose(Z.sum(1), 1.0)


def test_simplex_weights_minimise_the_weighted_loss():
    L = np.array([3.0, 1.0])
    eta = _simplex_weights(L, 2.0)
    grid = np.linspace(0, 1, 2001)
    best = min(t**2 * L[0] + (1 - t) ** 2 * L[1] for t in grid)
    assert eta[0] ** 2 * L[0] + eta[1] ** 2 * L[1] <= best + 1e-12
    np.testing.assert_allclose(_simplex_weights(np.array([0.0, 2.0]), 2.0), [1.0, 0.0])


# ---------------------------------------------------------------------- FSH's automatic ridge
def test_fsh_effective_dof_is_the_trace_of_the_hat_matrix():
    from dmh.baselines.fsh import effective_dof

    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 8))
    for ridge in (1e-2, 1.0, 30.0):
        hat = X @ np.linalg.solve(X.T @ X + ridge * np.eye(8), X.T)
        assert effective_dof(np.linalg.eigvalsh(X.T @ X), ridge) == pytest.approx(np.trace(hat))


def test_fsh_auto_ridge_is_the_smallest_grid_value_within_the_dof_limit():
    from dmh.baselines.fsh import AUTO_RIDGES, auto_ridge, effective_dof

    rng = np.random.default_rng(1)
    few = rng.normal(size=(400, 5))  # d << n: the smallest ridge already qualifies
    assert auto_ridge(few) == AUTO_RIDGES[0]
    wide = rng.normal(size=(100, 80))  # d close to n: interpolation unless regularised
    ridge = auto_ridge(wide)
    s = np.linalg.eigvalsh(wide.T @ wide)
    assert ridge > AUTO_RIDGES[0] and effective_dof(s, ridge) <= 10
    smaller = AUTO_RIDGES[AUTO_RIDGES.index(ridge) - 1]
    assert effective_dof(s, smaller) > 10


def test_fsh_records_its_ridges_and_a_fixed_ridge_is_kept(fitted):
    m = fitted["fsh"]
    assert m.ridges_.shape == (2,) and np.all(m.ridges_ > 0)
    fixed = _fit("fsh", ridge=0.5)
    np.testing.assert_array_equal(fixed.ridges_, [0.5, 0.5])
    with pytest.raises(ValueError, match="ridge"):
        _fit("fsh", ridge="big")
