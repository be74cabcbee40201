"""IMH: the regression residual and the constrained minimum, against their definitions."""


import numpy as np
import pytest
from scipy import linalg
from sklearn.linear_model import Ridge

from dmh import make_semi_paired
from dmh.baselines import fitting
from dmh.baselines import imh as imh_mod
from dmh.baselines import spectral as U
from dmh.baselines.imh import IMH

from .linear_toys import _data


def test_regression_residual_matrix_matches_ridge():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(30, 5)), rng.normal(size=(30, 3))
    B = imh_mod.regression_residual_matrix(X, 0.7)
    ridge = Ridge(alpha=0.7, fit_intercept=False).fit(X, Y)
    expected = np.sum((X @ ridge.coef_.T - Y) ** 2) + 0.7 * np.sum(ridge.coef_**2)
    assert np.trace(Y.T @ B @ Y) == pytest.approx(expected, rel=1e-10)
    np.testing.assert_allclose(imh_mod.ridge_weights(X, Y, 0.7), ridge.coef_.T, atol=1e-10)


def _imh_problem(mu):
    semi = make_semi_paired(_data(n=60), 0.5, random_state=3)
    idx_i, idx_t = np.flatnonzero(semi.image_mask), np.flatnonzero(semi.text_mask)
    paired = np.flatnonzero(semi.paired_mask)
    pi, pt = np.searchsorted(idx_i, paired), np.searchsorted(idx_t, paired)
    Xi, _ = fitting.centre(semi.image[idx_i])
    Xt, _ = fitting.centre(semi.text[idx_t])
    Li = U.laplacian(U.knn_heat_affinity(Xi, 4)).toarray()
    Lt = U.laplacian(U.knn_heat_affinity(Xt, 4)).toarray()
    return Xi, Xt, Li, Lt, pi, pt


@pytest.mark.parametrize("mu", [0.5, 100.0, np.inf])
def test_imh_solution_is_the_constrained_minimum(mu):
    Xi, Xt, Li, Lt, pi, pt = _imh_problem(mu)
    beta, lam, k = 0.8, 1.3, 5
    Y1, Y2, evals = imh_mod.imh_solve(Xi, Xt, Li, Lt, pi, pt, k, beta, lam, mu)
    np.testing.assert_allclose(Y1.T @ Y1, np.eye(k), atol=1e-10)  # Y^(1)T Y^(1) = I
    np.testing.assert_allclose(Y1.sum(0), 0, atol=1e-10)  # balanced
    if np.isinf(mu):
        np.testing.assert_allclose(Y2[pt], Y1[pi], atol=1e-10)  # hard inter-media constraint
    best = imh_mod.imh_objective([Xi, Xt], [Y1, Y2], [Li, Lt], (pi, pt), beta, lam, mu)
    assert best == pytest.approx(evals.sum(), rel=1e-7)
    rng = np.random.default_rng(0)
    for _ in range(5):  # any feasible (Y1, Y2) is no better
        R = rng.normal(size=Y1.shape)
        R -= R.mean(0)
        R = linalg.orth(R)
        R2 = np.zeros_like(Y2)
        R2[pt] = R[pi]
        other = imh_mod.imh_objective([Xi, Xt], [R, R2], [Li, Lt], (pi, pt), beta, lam, mu)
        assert other >= best - 1e-9
    # Y2 is optimal for the given Y1: perturbing it does not help
    other = imh_mod.imh_objective([Xi, Xt], [Y1, Y2 + 1e-3 * rng.normal(size=Y2.shape)], [Li, Lt],
                                  (pi, pt), beta, lam, mu)
    assert other >= best - 1e-12


def test_imh_model_objective_and_projection():
    data = make_semi_paired(_data(n=60), 0.5, random_state=3)
    model = IMH(5, lambda_=1.3, beta=0.8, n_neighbors=4).fit(data)
    Xi, Xt, Li, Lt, pi, pt = _imh_problem(1e10)
    _, _, evals = imh_mod.imh_solve(Xi, Xt, Li, Lt, pi, pt, 5, 0.8, 1.3, 1e10)
    assert model.objective_ == pytest.approx(evals.sum(), rel=1e-9)
