"""CCA-ITQ: the CCA directions against a direct generalized eigenproblem, the ITQ rotation against
its definition, the shared estimator interface, errors and persistence."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import linalg
from threadpoolctl import threadpool_limits

from dmh import CrossModalData
from dmh.base import BaseHasher
from dmh.baselines import cca
from dmh.peers import cca_itq as mod
from dmh.peers.cca_itq import CCAITQ, cca_directions, itq_rotation, quantization_loss
from dmh.registry import make_method


@pytest.fixture(autouse=True)
def _one_blas_thread():
    with threadpool_limits(limits=1):
        yield


def _data(n=120, d1=12, d2=9, seed=0, **masks):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, size=n)
    latent = rng.normal(size=(3, 4))[y] + 0.3 * rng.normal(size=(n, 4))
    image = latent @ rng.normal(size=(4, d1)) + 0.2 * rng.normal(size=(n, d1)) + 1.5
    text = np.abs(latent @ rng.normal(size=(4, d2)) + 0.2 * rng.normal(size=(n, d2)))
    return CrossModalData(image=image, text=text, labels=y, **masks)


def test_cca_directions_match_generalized_eigenproblem():
    rng = np.random.default_rng(1)
    n, di, dt, k, reg = 40, 5, 4, 3, 1e-2
    Z = rng.normal(size=(n, 2))
    Xi = Z @ rng.normal(size=(2, di)) + 0.5 * rng.normal(size=(n, di))
    Xt = Z @ rng.normal(size=(2, dt)) + 0.5 * rng.normal(size=(n, dt))
    Xi, Xt = Xi - Xi.mean(0), Xt - Xt.mean(0)
    Wi, Wt, rho, ridge = cca_directions(Xi, Xt, reg, k)
    # direct: [[0, Cit], [Cti, 0]] w = rho blockdiag(Cii + ri I, Ctt + rt I) w
    Cii, Ctt, Cit = Xi.T @ Xi / n, Xt.T @ Xt / n, Xi.T @ Xt / n
    ri, rt = reg * np.trace(Cii) / di, reg * np.trace(Ctt) / dt
    np.testing.assert_allclose(ridge, [ri, rt])
    A = np.block([[np.zeros((di, di)), Cit], [Cit.T, np.zeros((dt, dt))]])
    B = linalg.block_diag(Cii + ri * np.eye(di), Ctt + rt * np.eye(dt))
    evals, evecs = linalg.eigh(A, B)
    top = evals[::-1][:k]
    np.testing.assert_allclose(rho, top, rtol=1e-8, atol=1e-10)
    # directions: each stacked direction is an eigenvector with eigenvalue rho (up to scale)
    W = np.vstack([Wi, Wt])
    np.testing.assert_allclose(A @ W, (B @ W) * rho, atol=1e-9)
    # normalisation: W_v^T (C_vv + r I) W_v = I, W_i^T C_it W_t = diag(rho)
    np.testing.assert_allclose(Wi.T @ (Cii + ri * np.eye(di)) @ Wi, np.eye(k), atol=1e-9)
    np.testing.assert_allclose(Wt.T @ (Ctt + rt * np.eye(dt)) @ Wt, np.eye(k), atol=1e-9)
    np.testing.assert_allclose(Wi.T @ Cit @ Wt, np.diag(rho), atol=1e-9)
    # and agree with the eigh eigenvectors up to sign and scale (distinct eigenvalues)
    ref = evecs[:, ::-1][:, :k]
    for j in range(k):
        cos = abs(W[:, j] @ ref[:, j]) / (np.linalg.norm(W[:, j]) * np.linalg.norm(ref[:, j]))
        assert cos == pytest.approx(1.0, abs=1e-8)


def test_itq_loss_non_increasing_and_rotation_orthogonal():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(200, 6)) @ rng.normal(size=(6, 6))
    V -= V.mean(0)
    R, losses = itq_rotation(V, 30, np.random.default_rng(3))
    assert losses.shape == (31,)
    assert np.all(np.diff(losses) <= 1e-9 * losses[0])
    assert losses[-1] < losses[0]
    np.testing.assert_allclose(R.T @ R, np.eye(6), atol=1e-10)
    assert quantization_loss(V, R) == pytest.approx(losses[-1])


def test_fit_records_non_increasing_loss_and_orthogonal_rotation():
    model = CCAITQ(6, random_state=0).fit(_data())
    assert np.all(np.diff(model.quantization_losses_) <= 1e-9 * model.quantization_losses_[0])
    np.testing.assert_allclose(model.rotation_.T @ model.rotation_, np.eye(6), atol=1e-10)
    assert model.n_iter_ == 50 and model.quantization_losses_.shape == (51,)
    assert np.all(np.diff(model.correlations_) <= 1e-12)
    assert model.reg_ in mod.AUTO_REG_GRID and model.reg_scores_.shape == (len(mod.AUTO_REG_GRID),)


def test_codes_pm1_of_requested_length_and_registry():
    data = _data()
    model = make_method("cca-itq", n_bits=7, random_state=0).fit(data)
    assert isinstance(model, CCAITQ) and model.method_name == "cca-itq"
    for m in ("image", "text"):
        codes = model.encode(data.view(m)[:9], m)
        assert codes.shape == (9, 7) and codes.dtype == np.int8
        assert set(np.unique(codes)) <= {-1, 1}


def test_paired_codes_agree_more_than_chance():
    data = _data(n=300)
    model = CCAITQ(8, random_state=0).fit(data)
    agree = (model.encode(data.image, "image") == model.encode(data.text, "text")).mean()
    assert agree > 0.75


def test_same_seed_same_codes_other_seed_other_rotation():
    data = _data()
    a = CCAITQ(6, random_state=4).fit(data)
    b = CCAITQ(6, random_state=4).fit(data)
    c = CCAITQ(6, random_state=5).fit(data)
    for m in ("image", "text"):
        np.testing.assert_array_equal(a.encode(data.view(m), m), b.encode(data.view(m), m))
    assert not np.allclose(a.rotation_, c.rotation_)


def test_fixed_reg_and_unscaled_directions():
    data = _data()
    model = CCAITQ(5, reg=1e-4, corr_power=0.0, random_state=0).fit(data)
    assert model.reg_ == 1e-4 and model.reg_scores_.size == 0
    # unscaled: projected paired images have identity covariance before rotation (whitened CCA)
    Xi = data.image - model.means_["image"]
    P = Xi @ model.projections_["image"] @ model.rotation_.T
    cov = P.T @ P / len(Xi)
    np.testing.assert_allclose(np.diag(cov), 1.0, rtol=1e-2)


def test_more_bits_than_canonical_pairs():
    data = _data(n=100, d1=12, d2=5)
    model = CCAITQ(16, random_state=0).fit(data)
    assert model.correlations_.shape == (5,)
    codes = model.encode(data.text, "text")
    assert codes.shape == (100, 16)
    np.testing.assert_allclose(model.rotation_.T @ model.rotation_, np.eye(16), atol=1e-10)
    assert np.all(np.diff(model.quantization_losses_) <= 1e-9 * model.quantization_losses_[0])
    # every bit is used: no bit is constant over the training texts
    assert np.all(np.abs(codes.mean(0)) < 1)


def test_auto_reg_falls_back_with_few_pairs():
    model = CCAITQ(14, random_state=0).fit(_data(n=17, d1=20, d2=20))
    assert model.reg_ == cca.AUTO_FALLBACK_REG and model.reg_scores_.size == 0


def test_auto_reg_prefers_a_larger_ridge_when_views_outnumber_pairs():
    # 60 pairs of 40-d + 40-d views sharing a 2-d signal: a tiny ridge over-fits (held-out
    # correlations fall), so "auto" must not pick the smallest grid value
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(60, 2))
    image = Z @ rng.normal(size=(2, 40)) + rng.normal(size=(60, 40))
    text = Z @ rng.normal(size=(2, 40)) + rng.normal(size=(60, 40))
    model = CCAITQ(2, random_state=0).fit(CrossModalData(image=image, text=text))
    assert model.reg_ > mod.AUTO_REG_GRID[0]
    assert model.reg_scores_[int(np.argmax(model.reg_scores_))] > model.reg_scores_[0]


def test_save_load_round_trip(tmp_path):
    data = _data()
    model = CCAITQ(6, random_state=0).fit(data)
    path = model.save(tmp_path / "m.npz")
    back = BaseHasher.load(path)
    assert isinstance(back, CCAITQ) and back.get_params() == model.get_params()
    for m in ("image", "text"):
        np.testing.assert_array_equal(back.encode(data.view(m), m), model.encode(data.view(m), m))
    np.testing.assert_array_equal(back.quantization_losses_, model.quantization_losses_)
    assert back.reg_ == model.reg_


def test_uses_only_paired_objects():
    full = _data(n=150)
    mask = np.ones(150, bool)
    mask[100:125] = False
    tmask = np.ones(150, bool)
    tmask[125:] = False
    semi = CrossModalData(image=full.image, text=full.text, image_mask=mask, text_mask=tmask)
    paired = CrossModalData(image=full.image[:100], text=full.text[:100])
    a = CCAITQ(4, random_state=0).fit(semi)
    b = CCAITQ(4, random_state=0).fit(paired)
    assert CCAITQ.uses_unpaired is False
    np.testing.assert_allclose(a.projections_["image"], b.projections_["image"])


def test_errors():
    data = _data(n=20)
    with pytest.raises(ValueError, match="more paired objects than bits"):
        CCAITQ(20, reg=0.1).fit(data)
    with pytest.raises(ValueError, match="reg must be"):
        CCAITQ(4, reg="big").fit(data)
    with pytest.raises(ValueError, match="reg"):
        CCAITQ(4, reg=-1.0).fit(data)
    with pytest.raises(ValueError, match="n_iter"):
        CCAITQ(4, n_iter=-1).fit(data)
    with pytest.raises(ValueError, match="singular"):
        CCAITQ(4, reg=0.0).fit(_data(n=30, d1=40, d2=40))
    one = CrossModalData(image=np.ones((1, 3)), text=np.ones((1, 3)))
    with pytest.raises(ValueError, match="paired"):
        CCAITQ(1).fit(one)
