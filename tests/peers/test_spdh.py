"""SPDH (reconstructed): the bit update and the alternation never increase the objective, the
anchor affinities against their definition, the shared interface, errors and persistence."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from dmh import CrossModalData, make_semi_paired
from dmh.base import BaseHasher
from dmh.peers import spdh as mod
from dmh.peers.spdh import SPDH, anchor_affinity, spdh_objective, update_bits
from dmh.registry import make_method

FAST = dict(n_anchors=30, n_nearest=3, max_iter=8)


@pytest.fixture(autouse=True)
def _one_blas_thread():
    with threadpool_limits(limits=1):
        yield


def _data(n=120, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 3
    latent = rng.normal(size=(3, 4))[y] + 0.3 * rng.normal(size=(n, 4))
    image = latent @ rng.normal(size=(4, 10)) + 0.2 * rng.normal(size=(n, 10))
    text = np.abs(latent @ rng.normal(size=(4, 8)) + 0.2 * rng.normal(size=(n, 8)))
    return CrossModalData(image=image, text=text, labels=y)


def _fit(data=None, n_bits=6, **kw):
    params = dict(FAST, random_state=0)
    params.update(kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return SPDH(n_bits, **params).fit(_data() if data is None else data)


def test_anchor_affinity_definition():
    rng = np.random.default_rng(0)
    X, anchors = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    Z = anchor_affinity(X, anchors, 2)
    D = np.sqrt(((X[:, None] - anchors[None]) ** 2).sum(-1))
    nearest = np.sort(D, axis=1)[:, :2]
    sigma = nearest.mean()
    for i in range(7):
        idx = np.argsort(D[i])[:2]
        w = np.exp(-D[i, idx] ** 2 / (2 * sigma**2))
        expect = np.zeros(5)
        expect[idx] = w / w.sum()
        np.testing.assert_allclose(Z[i], expect)
    np.testing.assert_allclose(Z.sum(1), 1.0)


def _problem(seed=0, n=40, k=5):
    rng = np.random.default_rng(seed)
    rows = [np.arange(0, 30), np.concatenate([np.arange(0, 20), np.arange(30, n)])]
    Xs = [rng.normal(size=(r.size, d)) for r, d in zip(rows, (6, 4), strict=True)]
    B = np.where(rng.normal(size=(n, k)) > 0, 1.0, -1.0)
    Us = [rng.normal(size=(k, X.shape[1])) * 0.3 for X in Xs]
    Ws = [rng.normal(size=(X.shape[1], k)) * 0.3 for X in Xs]
    Z = np.abs(rng.normal(size=(n, 8)))
    Z /= Z.sum(1, keepdims=True)
    A = mod._graph_factor(Z)
    return B, Xs, rows, Us, Ws, A


@pytest.mark.parametrize("seed", range(5))
def test_bit_sweep_never_increases_objective(seed):
    B, Xs, rows, Us, Ws, A = _problem(seed)
    for alpha, beta in [(0.0, 1.0), (1.0, 1.0), (5.0, 0.1)]:
        before = spdh_objective(B, Xs, rows, Us, Ws, A, alpha, beta, 0.1)
        B2 = update_bits(B, Xs, rows, Us, Ws, A, alpha, beta)
        after = spdh_objective(B2, Xs, rows, Us, Ws, A, alpha, beta, 0.1)
        assert after <= before + 1e-9
        assert set(np.unique(B2)) <= {-1.0, 1.0}


def test_bit_update_exact_without_graph():
    # alpha = 0: each bit's update is the exact coordinate minimiser; check one bit by brute force
    B, Xs, rows, Us, Ws, A = _problem(1, n=6, k=2)
    rows = [np.arange(6), np.arange(6)]
    rng = np.random.default_rng(2)
    Xs = [rng.normal(size=(6, 3)), rng.normal(size=(6, 2))]
    Us = [rng.normal(size=(2, 3)), rng.normal(size=(2, 2))]
    Ws = [rng.normal(size=(3, 2)), rng.normal(size=(2, 2))]
    B2 = update_bits(B, Xs, rows, Us, Ws, A, 0.0, 1.0)
    # after the sweep, bit 1 (the last updated) is optimal given bit 0
    best = min(
        (spdh_objective(np.column_stack([B2[:, 0], np.array(c)]), Xs, rows, Us, Ws, A, 0.0, 1.0, 0.0), c)
        for c in np.array(np.meshgrid(*[[-1.0, 1.0]] * 6)).reshape(6, -1).T.tolist()
    )
    got = spdh_objective(B2, Xs, rows, Us, Ws, A, 0.0, 1.0, 0.0)
    assert got == pytest.approx(best[0])


def test_objective_non_increasing_per_alternation_semi_paired():
    data = make_semi_paired(_data(), 0.5, random_state=0)
    model = _fit(data)
    assert model.n_iter_ >= 2
    assert np.all(np.diff(model.objective_) <= 1e-9 * model.objective_[0])
    assert model.objective_[-1] < model.objective_[0]


def test_codes_pm1_registry_and_training_codes():
    data = _data()
    model = make_method("spdh", n_bits=7, random_state=0, **FAST)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(data)
    assert isinstance(model, SPDH) and model.method_name == "spdh" and SPDH.uses_unpaired
    for m in ("image", "text"):
        codes = model.encode(data.view(m)[:9], m)
        assert codes.shape == (9, 7) and codes.dtype == np.int8
        assert set(np.unique(codes)) <= {-1, 1}
    assert model.codes_.shape == (data.n_objects, 7)


def test_paired_codes_agree_more_than_chance():
    data = _data(n=240)
    model = _fit(data, n_bits=8, max_iter=10)
    agree = (model.encode(data.image, "image") == model.encode(data.text, "text")).mean()
    assert agree > 0.7


def test_unpaired_objects_change_the_model():
    full = make_semi_paired(_data(), 0.5, random_state=0)
    paired_only = full.subset(np.flatnonzero(full.paired_mask))
    a, b = _fit(full), _fit(paired_only)
    assert not np.allclose(a.projections_["image"], b.projections_["image"])


def test_same_seed_same_codes():
    data = make_semi_paired(_data(), 0.5, random_state=1)
    a, b = _fit(data, random_state=3), _fit(data, random_state=3)
    for m in ("image", "text"):
        np.testing.assert_array_equal(a.encode(data.view(m), m), b.encode(data.view(m), m))


def test_save_load_round_trip(tmp_path):
    data = _data()
    model = _fit(data)
    back = BaseHasher.load(model.save(tmp_path / "s.npz"))
    assert isinstance(back, SPDH) and back.get_params() == model.get_params()
    for m in ("image", "text"):
        np.testing.assert_array_equal(back.encode(data.view(m), m), model.encode(data.view(m), m))
    np.testing.assert_array_equal(back.objective_, model.objective_)


def test_convergence_warning_when_max_iter_reached():
    with pytest.warns(ConvergenceWarning, match="max_iter=1"):
        SPDH(4, max_iter=1, tol=0.0, n_anchors=30, random_state=0).fit(_data())


def test_errors():
    data = _data()
    with pytest.raises(ValueError, match="more anchor pairs than bits"):
        _fit(data, n_bits=6, n_anchors=5)
    with pytest.raises(ValueError, match="more training objects than bits"):
        _fit(_data(n=10), n_bits=12)
    with pytest.raises(ValueError, match="beta"):
        _fit(data, beta=0.0)
    with pytest.raises(ValueError, match="n_nearest"):
        _fit(data, n_nearest=0)
    img_only = CrossModalData(image=data.image, text=data.text,
                              text_mask=np.zeros(data.n_objects, bool))
    with pytest.raises(ValueError, match="needs both modalities"):
        _fit(img_only)
    mask = np.zeros(data.n_objects, bool)
    mask[0] = True
    one_pair = CrossModalData(image=data.image, text=data.text, image_mask=mask | (np.arange(120) < 60),
                              text_mask=mask | (np.arange(120) >= 60))
    with pytest.raises(ValueError, match="paired"):
        _fit(one_pair)
