"""CVH: the generalized eigenproblem, its normalisation and the ridge, against their definitions."""


import numpy as np
import pytest
from scipy import linalg

from dmh import CrossModalData
from dmh.baselines import cvh as cvh_mod
from dmh.baselines.cvh import CVH

from .linear_toys import _data, _views


def test_cvh_generalized_eigenproblem_and_its_normalisation():
    data = _data(n=70)
    model = CVH(6, reg=1e-3).fit(data)
    Xi, Xt = data.image - model.means_["image"], data.text - model.means_["text"]
    P, Q, ridge = cvh_mod.cvh_eigenproblem(Xi, Xt, 1e-3)
    np.testing.assert_allclose(ridge, model.ridge_)
    A = np.vstack([model.projections_["image"], model.projections_["text"]])
    np.testing.assert_allclose(A.T @ Q @ A, np.eye(6), atol=1e-9)  # the constraint
    np.testing.assert_allclose(P @ A, Q @ A * model.eigenvalues_, atol=1e-9)  # the eigen-equation
    assert np.all(np.diff(model.eigenvalues_) >= -1e-12)
    # the objective from its definition: (1/n) sum_{k != k'} sum_i ||y_i^k - y_i^k'||^2 + ridges
    Ai, At = model.projections_["image"], model.projections_["text"]
    n = len(Xi)
    d = 2 * np.sum((Xi @ Ai - Xt @ At) ** 2) / n
    d += 2 * (ridge[0] * np.sum(Ai**2) + ridge[1] * np.sum(At**2))
    assert d == pytest.approx(model.objective_, rel=1e-9)
    # no other feasible projection does better
    rng = np.random.default_rng(0)
    for _ in range(5):
        R = rng.normal(size=A.shape)
        R = R @ np.linalg.inv(np.linalg.cholesky(R.T @ Q @ R)).T  # R^T Q R = I
        assert np.trace(R.T @ P @ R) >= model.objective_ - 1e-9


def test_cvh_without_ridge_is_cca():
    image, text, _ = _views(n=200, d1=6, d2=5)
    model = CVH(4, reg=0.0).fit(CrossModalData(image=image, text=text))
    Xi, Xt = image - image.mean(0), text - text.mean(0)
    n = len(Xi)
    Cii, Ctt, Cit = Xi.T @ Xi / n, Xt.T @ Xt / n, Xi.T @ Xt / n
    Ai, At = model.projections_["image"], model.projections_["text"]
    np.testing.assert_allclose(Ai.T @ Cii @ Ai + At.T @ Ctt @ At, np.eye(4), atol=1e-9)
    # naive canonical correlations: singular values of Cii^-1/2 Cit Ctt^-1/2
    wi, wt = linalg.inv(linalg.sqrtm(Cii)).real, linalg.inv(linalg.sqrtm(Ctt)).real
    rho = linalg.svdvals(wi @ Cit @ wt)
    np.testing.assert_allclose(model.eigenvalues_, 2 * (1 - rho[:4]), atol=1e-8)


def test_cvh_ridge_keeps_singular_directions_out_of_the_top():
    # rows summing to one (histograms): the all-ones direction has zero variance after centring
    image, text, _ = _views(n=100, d1=8, d2=6)
    text = np.exp(text) / np.exp(text).sum(1, keepdims=True)
    model = CVH(3).fit(CrossModalData(image=image, text=text))
    assert model.eigenvalues_.min() > 1e-3  # no spurious zero-objective direction
    # the text projections do real work: their training outputs have spread
    assert np.all(model.project(text, "text").std(0) > 1e-6)
