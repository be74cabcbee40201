"""The lasso (FISTA) and the dictionary update against their optimality conditions and constraints."""

from __future__ import annotations

import numpy as np

from dmh.baselines import sparse_coding as _common


def test_lasso_fista_meets_optimality_conditions():
    rng = np.random.default_rng(0)
    D = _common.project_rows_to_ball(rng.normal(size=(12, 6)))
    X = rng.normal(size=(5, 6))
    lam = 0.4
    S = _common.lasso_fista(X, D, lam, max_iter=5000, tol=1e-12)
    # subgradient conditions of ||x - s D||^2 + lam |s|_1:  2 (x - s D) D' = lam * sign(s) on the
    # support, and |2 (x - s D) D'| <= lam off it
    corr = 2.0 * (X - S @ D) @ D.T
    on = S != 0
    np.testing.assert_allclose(corr[on], lam * np.sign(S[on]), atol=1e-5)
    assert np.all(np.abs(corr[~on]) <= lam + 1e-5)


def test_lasso_fista_never_worse_than_its_start():
    rng = np.random.default_rng(1)
    D = rng.normal(size=(20, 5))
    X = rng.normal(size=(8, 5))
    S0 = rng.normal(size=(8, 20)) * 0.01
    S = _common.lasso_fista(X, D, 0.5, S0=S0, max_iter=2)
    assert np.all(_common.lasso_objective(X, S, D, 0.5) <= _common.lasso_objective(X, S0, D, 0.5))


def test_dictionary_update_respects_constraint_and_decreases():
    rng = np.random.default_rng(2)
    X, S = rng.normal(size=(30, 4)), rng.normal(size=(30, 6))
    S[:, 5] = 0.0  # an unused atom stays where it is
    B0 = _common.project_rows_to_ball(rng.normal(size=(6, 4)))
    B = _common.update_dictionary_rows(X, S, B0, n_sweeps=10)
    assert np.linalg.norm(B, axis=1).max() <= 1.0 + 1e-12
    np.testing.assert_array_equal(B[5], B0[5])
    assert np.sum((X - S @ B) ** 2) <= np.sum((X - S @ B0) ** 2)
    # against a generic constrained solver on one atom: the block update is exact
    from scipy.optimize import minimize

    E = X - S @ B - np.outer(S[:, 0], -B[0])  # residual without atom 0's contribution
    res = minimize(lambda b: np.sum((E - np.outer(S[:, 0], b)) ** 2), B[0],
                   constraints=[{"type": "ineq", "fun": lambda b: 1.0 - b @ b}])
    assert np.sum((E - np.outer(S[:, 0], B[0])) ** 2) <= res.fun + 1e-6
