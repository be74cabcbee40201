"""LSSH, STMH and FSH: objectives, constraints, codes, seeds, errors, persistence, registry,
their numerical helpers against naive references, and a real-data sanity check."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone
from sklearn.exceptions import ConvergenceWarning

import dmh
from dmh import CrossModalData
from dmh.baselines import _common
from dmh.baselines.fsh import FSH, _simplex_weights, fusion_similarity, knn_uniform
from dmh.baselines.lssh import LSSH, lssh_objective
from dmh.baselines.stmh import STMH, top_m_indicator, top_m_margin
from dmh.methods import make_method

SHARED_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
UCI = SHARED_DATA / "uci_handwritten" / "uci_all.mat"

N_BITS = 8

# small settings so that every fit takes a fraction of a second
FAST = {
    "lssh": dict(n_atoms=24, max_iter=6, lasso_max_iter=20),
    "stmh": dict(max_iter=15),
    "fsh": dict(n_anchors=12, n_neighbors=4, max_iter=30),
}
CLASSES = {"lssh": LSSH, "stmh": STMH, "fsh": FSH}


def _toy(n=90, seed=0, image_mask=None, text_mask=None):
    rng = np.random.default_rng(seed)
    c = 3
    y = np.arange(n) % c
    image = rng.normal(size=(c, 10))[y] * 2 + rng.normal(size=(n, 10))
    text = np.abs(rng.normal(size=(c, 7))[y] * 2 + rng.normal(size=(n, 7)))
    return CrossModalData(image=image, text=text, labels=y, image_mask=image_mask,
                          text_mask=text_mask)


def _fit(name, data=None, **params):
    kw = dict(FAST[name], random_state=0)
    kw.update(params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return CLASSES[name](N_BITS, **kw).fit(_toy() if data is None else data)


@pytest.fixture(scope="module")
def fitted():
    return {name: _fit(name) for name in CLASSES}


METHODS = list(CLASSES)


# ---------------------------------------------------------------------- shared behaviour
@pytest.mark.parametrize("name", METHODS)
def test_objective_never_increases(fitted, name):
    obj = np.asarray(fitted[name].objective_)
    assert obj.size >= 2 and np.all(np.isfinite(obj))
    assert np.all(np.diff(obj) <= 1e-9 * np.abs(obj[:-1])), obj
    assert fitted[name].n_iter_ >= 1


@pytest.mark.parametrize("name", METHODS)
def test_codes_are_pm1_with_requested_length(fitted, name):
    data = _toy(seed=1, n=30)
    for modality in ("image", "text"):
        codes = fitted[name].encode(getattr(data, modality), modality)
        assert codes.shape == (30, N_BITS) and codes.dtype == np.int8
        assert set(np.unique(codes)) <= {-1, 1}


@pytest.mark.parametrize("name", METHODS)
def test_same_seed_same_codes(fitted, name):
    again = _fit(name)
    data = _toy(seed=2, n=25)
    for modality in ("image", "text"):
        X = getattr(data, modality)
        np.testing.assert_array_equal(fitted[name].encode(X, modality), again.encode(X, modality))


@pytest.mark.parametrize("name", METHODS)
def test_trains_on_paired_objects_only(name):
    """Semi-paired data give the same model as their paired part alone (unpaired rows ignored)."""
    n = 110
    image_mask = np.ones(n, bool)
    text_mask = np.ones(n, bool)
    image_mask[90:100] = False
    text_mask[100:] = False
    semi = _toy(n=n, image_mask=image_mask, text_mask=text_mask)
    paired = semi.subset(np.flatnonzero(semi.paired_mask))
    assert CLASSES[name].uses_unpaired is False
    a, b = _fit(name, semi), _fit(name, paired)
    X = _toy(seed=3, n=20)
    for modality in ("image", "text"):
        M = getattr(X, modality)
        np.testing.assert_array_equal(a.encode(M, modality), b.encode(M, modality))


@pytest.mark.parametrize("name", METHODS)
def test_one_modality_absent_is_an_error(name):
    n = 40
    data = _toy(n=n, text_mask=np.zeros(n, bool))
    with pytest.raises(ValueError, match="needs both modalities"):
        CLASSES[name](N_BITS, **FAST[name]).fit(data)


@pytest.mark.parametrize("name", METHODS)
def test_too_few_pairs_is_an_error(name):
    n = 40
    image_mask = np.ones(n, bool)
    text_mask = np.zeros(n, bool)
    text_mask[:5] = True  # 5 pairs: fewer than the 8 bits (and than FSH's 12 anchors)
    data = _toy(n=n, image_mask=image_mask, text_mask=text_mask)
    with pytest.raises(ValueError, match="paired objects only and needs at least"):
        CLASSES[name](N_BITS, **FAST[name]).fit(data)


@pytest.mark.parametrize("name", METHODS)
def test_save_load_round_trip(fitted, name, tmp_path):
    model = fitted[name]
    path = model.save(tmp_path / f"{name}.npz")
    loaded = dmh.load_model(path)
    assert type(loaded) is type(model)
    assert loaded.get_params() == model.get_params()
    data = _toy(seed=4, n=30)
    for modality in ("image", "text"):
        X = getattr(data, modality)
        np.testing.assert_array_equal(loaded.encode(X, modality), model.encode(X, modality))
        np.testing.assert_allclose(loaded.project(X, modality), model.project(X, modality))
    assert loaded.objective_ == pytest.approx(model.objective_)


@pytest.mark.parametrize("name", METHODS)
def test_registry_and_sklearn_contract(name):
    model = make_method(name, n_bits=16)
    assert isinstance(model, CLASSES[name]) and model.n_bits == 16
    assert model.method_name == name
    assert clone(model).get_params() == model.get_params()
    assert not hasattr(model, "n_bits_")


@pytest.mark.parametrize("name", METHODS)
def test_max_iter_reached_warns(name):
    params = dict(FAST[name], max_iter=1, tol=0.0, random_state=0)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        model = CLASSES[name](N_BITS, **params).fit(_toy())
    assert model.n_iter_ == 1


@pytest.mark.parametrize("name", METHODS)
def test_bad_hyperparameter_is_a_clear_error(name):
    bad = {"lssh": {"mu": -1.0}, "stmh": {"lambda_": 1.5}, "fsh": {"n_neighbors": 50}}[name]
    with pytest.raises(ValueError, match=next(iter(bad))):
        CLASSES[name](N_BITS, **dict(FAST[name], **bad)).fit(_toy())


# ---------------------------------------------------------------------- per-method constraints
def test_lssh_norm_constraints_and_objective(fitted):
    m = fitted["lssh"]
    for name in ("dictionary_", "text_basis_", "latent_map_"):
        assert np.linalg.norm(getattr(m, name), axis=1).max() <= 1.0 + 1e-9, name
    # PCA basis is orthonormal, and its size is capped by the number of bits
    P = m.image_components_
    assert P.shape == (10, N_BITS)
    np.testing.assert_allclose(P.T @ P, np.eye(N_BITS), atol=1e-10)


def test_lssh_objective_matches_definition():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    S, B = rng.normal(size=(6, 5)), rng.normal(size=(5, 4))
    U, A, R = rng.normal(size=(2, 3)), rng.normal(size=(6, 2)), rng.normal(size=(5, 2))
    naive = 0.0
    for i in range(6):
        naive += np.sum((X[i] - S[i] @ B) ** 2) + 0.3 * np.abs(S[i]).sum()
        naive += 0.5 * np.sum((Y[i] - A[i] @ U) ** 2) + 2.0 * np.sum((A[i] - S[i] @ R) ** 2)
    got = lssh_objective(X, Y, S, B, U, A, R, lambda_=0.3, mu=0.5, gamma=2.0)
    assert got == pytest.approx(naive)


def test_lssh_paired_codes():
    m = _fit("lssh")
    data = _toy(seed=5, n=12)
    codes = m.encode_paired(data.image, data.text)
    assert codes.shape == (12, N_BITS) and set(np.unique(codes)) <= {-1, 1}
    with pytest.raises(ValueError, match="pairs"):
        m.encode_paired(data.image[:5], data.text)


def test_stmh_every_code_has_m_topics(fitted):
    m = fitted["stmh"]
    assert m.n_active_ == N_BITS // 2
    G = m.train_indicators_
    assert set(np.unique(G)) <= {0.0, 1.0}
    np.testing.assert_array_equal(G.sum(1), m.n_active_)
    data = _toy(seed=6, n=40)
    for modality in ("image", "text"):
        codes = m.encode(getattr(data, modality), modality)
        np.testing.assert_array_equal((codes == 1).sum(1), m.n_active_)


def test_stmh_text_codes_are_nearest_topics(fitted):
    m = fitted["stmh"]
    X = _toy(seed=7, n=15).text
    d = ((X[:, None, :] - m.topic_centres_[None]) ** 2).sum(-1)
    for i in range(X.shape[0]):
        nearest = set(np.argsort(d[i])[: m.n_active_])
        assert nearest == set(np.flatnonzero(m.encode(X[i : i + 1], "text")[0] == 1))


def test_fsh_weights_on_simplex_and_codes(fitted):
    m = fitted["fsh"]
    assert m.eta_.shape == (2,) and np.all(m.eta_ >= 0) and m.eta_.sum() == pytest.approx(1.0)
    assert set(np.unique(m.anchor_codes_)) <= {-1, 1}
    assert m.anchor_codes_.shape == (12, N_BITS)


# ---------------------------------------------------------------------- numerical helpers
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


def test_top_m_helpers_against_naive():
    rng = np.random.default_rng(3)
    C = rng.normal(size=(7, 6))
    G = top_m_indicator(C, 2)
    for i in range(7):
        assert set(np.flatnonzero(G[i])) == set(np.argsort(C[i])[:2])
    M = top_m_margin(C, 3)
    for i in range(7):
        assert set(np.flatnonzero(M[i] > 0)) == set(np.argsort(-C[i])[:3])


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


# ---------------------------------------------------------------------- real data
@pytest.mark.skipif(not UCI.exists(), reason=f"shared real data absent: {UCI}")
@pytest.mark.parametrize("name", METHODS)
def test_uci_digits_well_above_chance(name):
    """On the UCI two-view digits (10 balanced classes: chance MAP ~0.1) every method retrieves
    across views far better than chance. A 600-pair training subset keeps the test fast."""
    data = dmh.load_dataset(UCI)
    train = data.train().subset(np.arange(600))
    query = data.query().subset(np.arange(200))
    params = {"lssh": dict(n_atoms=128, max_iter=4), "stmh": {}, "fsh": {}}[name]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        model = make_method(name, n_bits=16, random_state=0, **params).fit(train)
    i2t = dmh.mean_average_precision(model.encode(query.image, "image"),
                                     model.encode(train.text, "text"), query.labels, train.labels)
    t2i = dmh.mean_average_precision(model.encode(query.text, "text"),
                                     model.encode(train.image, "image"), query.labels, train.labels)
    assert i2t > 0.2 and t2i > 0.2, (i2t, t2i)


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
