"""CMFH: the objective never increases, each block update is its minimiser, bad hyperparameters."""


import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

from dmh.baselines import cmfh as cmfh_mod
from dmh.baselines.cmfh import CMFH

from .linear_toys import _data, _fit, _views


def test_cmfh_objective_never_increases():
    model = _fit("cmfh", _data(), n_bits=6, max_iter=50, tol=0.0)
    obj = model.objective_
    assert obj.size == model.n_iter_ + 1 == 51
    assert np.all(np.diff(obj) <= 1e-9 * np.abs(obj[:-1]))


def test_cmfh_each_block_update_is_its_minimiser():
    image, text, _ = _views(n=50)
    X1, X2 = (image - image.mean(0)).T, (text - text.mean(0)).T
    lam, mu, gamma, k = 0.3, 5.0, 0.1, 4
    rng = np.random.default_rng(0)
    V = rng.normal(size=(k, 50))
    P1, P2 = rng.normal(size=(k, 12)), rng.normal(size=(k, 9))
    U2 = rng.normal(size=(9, k))
    f = lambda U1, U2, V, P1, P2: cmfh_mod.cmfh_objective(X1, X2, U1, U2, V, P1, P2, lam, mu, gamma)  # noqa: E731
    U1 = rng.normal(size=(12, k))
    prev = f(U1, U2, V, P1, P2)
    # U1: zero gradient at the update, objective not increased
    U1 = cmfh_mod.update_U(X1, V, lam, gamma)
    g = -2 * lam * (X1 - U1 @ V) @ V.T + 2 * gamma * U1
    assert np.abs(g).max() < 1e-8 and f(U1, U2, V, P1, P2) <= prev
    prev = f(U1, U2, V, P1, P2)
    U2 = cmfh_mod.update_U(X2, V, 1 - lam, gamma)
    g = -2 * (1 - lam) * (X2 - U2 @ V) @ V.T + 2 * gamma * U2
    assert np.abs(g).max() < 1e-8 and f(U1, U2, V, P1, P2) <= prev
    prev = f(U1, U2, V, P1, P2)
    V = cmfh_mod.update_V(X1, X2, U1, U2, P1, P2, lam, mu, gamma)
    g = (-2 * lam * U1.T @ (X1 - U1 @ V) - 2 * (1 - lam) * U2.T @ (X2 - U2 @ V)
         + 2 * mu * (2 * V - P1 @ X1 - P2 @ X2) + 2 * gamma * V)
    assert np.abs(g).max() < 1e-8 and f(U1, U2, V, P1, P2) <= prev
    prev = f(U1, U2, V, P1, P2)
    P1 = cmfh_mod.update_P(V, cmfh_mod.hash_solver(X1, mu, gamma))
    g = -2 * mu * (V - P1 @ X1) @ X1.T + 2 * gamma * P1
    assert np.abs(g).max() < 1e-8 and f(U1, U2, V, P1, P2) <= prev


def test_cmfh_max_iter_warns_and_records_n_iter():
    with pytest.warns(ConvergenceWarning, match="did not converge in 2 iterations"):
        model = CMFH(6, max_iter=2, tol=0.0, random_state=0).fit(_data())
    assert model.n_iter_ == 2 and model.objective_.size == 3


@pytest.mark.parametrize("params", [{"lambda_": 1.5}, {"mu": 0}, {"gamma": -1}, {"max_iter": 0}])
def test_cmfh_bad_hyperparameters(params):
    with pytest.raises(ValueError):
        CMFH(4, **params).fit(_data())


def test_cmfh_auto_hash_ridge_keeps_the_papers_value_unless_it_interpolates():
    from dmh.baselines.fsh import effective_dof

    rng = np.random.default_rng(0)
    narrow = rng.normal(size=(5, 300))  # d << n: gamma / mu already regularises enough
    assert cmfh_mod.auto_hash_ridge(narrow, 1e-4) == 1e-4
    wide = 7.0 * rng.normal(size=(80, 100))  # d close to n: 1e-4 would interpolate
    r = cmfh_mod.auto_hash_ridge(wide, 1e-4)
    s = np.linalg.eigvalsh(wide.T @ wide)
    assert r > 1e-4 and effective_dof(s, r) <= 10
    # scale-free: scaling the features scales the ridge by the square
    assert cmfh_mod.auto_hash_ridge(3.0 * wide, 1e-4) == pytest.approx(9.0 * r)


def test_cmfh_hash_ridge_none_is_the_papers_objective():
    data = _data()
    a = _fit("cmfh", data, n_bits=6, hash_ridge=None)
    np.testing.assert_allclose(a.hash_ridges_, [1e-4, 1e-4])
    b = _fit("cmfh", data, n_bits=6, hash_ridge=0.5, max_iter=30, tol=0.0)
    np.testing.assert_allclose(b.hash_ridges_, [0.5, 0.5])
    assert np.all(np.diff(b.objective_) <= 1e-9 * abs(b.objective_[0]))
    with pytest.raises(ValueError, match="hash_ridge"):
        _fit("cmfh", data, hash_ridge="big")
