"""CVH, IMH and CMFH: closed-form solutions and updates checked against their definitions, the
shared estimator interface, and real-data sanity checks (skipped where the data are absent)."""

import warnings
from pathlib import Path

import numpy as np
import pytest
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import Ridge
from threadpoolctl import threadpool_limits

import dmh
from dmh import CrossModalData, make_semi_paired
from dmh.baselines import _utils_a as U
from dmh.baselines import cmfh as cmfh_mod
from dmh.baselines import cvh as cvh_mod
from dmh.baselines import imh as imh_mod
from dmh.baselines.cmfh import CMFH
from dmh.baselines.cvh import CVH
from dmh.baselines.imh import IMH
from dmh.methods import make_method

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
WIKI = DATA / "wiki" / "wiki_data.mat"
UCI = DATA / "uci_handwritten" / "uci_all.mat"
CLASSES = {"cvh": CVH, "imh": IMH, "cmfh": CMFH}


@pytest.fixture(autouse=True)
def _one_blas_thread():
    # small problems: multi-threaded BLAS only adds contention on a shared 2-core machine
    with threadpool_limits(limits=1):
        yield


def _views(n=90, d1=12, d2=9, n_clusters=3, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, n_clusters, size=n)
    latent = rng.normal(size=(n_clusters, 4))[y] + 0.3 * rng.normal(size=(n, 4))
    image = latent @ rng.normal(size=(4, d1)) + 0.2 * rng.normal(size=(n, d1)) + 1.5
    text = latent @ rng.normal(size=(4, d2)) + 0.2 * rng.normal(size=(n, d2)) - 0.7
    return image, text, y


def _data(n=90, seed=0, **kw):
    image, text, y = _views(n=n, seed=seed, **kw)
    return CrossModalData(image=image, text=text, labels=y)


def _fit(name, data, n_bits=8, **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return CLASSES[name](n_bits, random_state=0, **params).fit(data)


# ---------------------------------------------------------------------- the shared interface
@pytest.mark.parametrize("name", sorted(CLASSES))
def test_registry_lookup(name):
    model = make_method(name, n_bits=16)
    assert isinstance(model, CLASSES[name]) and model.n_bits == 16
    assert model.method_name == name


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_codes_are_pm1_with_requested_length(name):
    data = _data()
    model = _fit(name, data, n_bits=10)
    for modality in ("image", "text"):
        codes = model.encode(getattr(data, modality)[:7], modality)
        assert codes.shape == (7, 10) and codes.dtype == np.int8
        assert set(np.unique(codes)) <= {-1, 1}


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_same_seed_same_codes(name):
    data = _data()
    a, b = _fit(name, data), _fit(name, data)
    for m in ("image", "text"):
        np.testing.assert_array_equal(a.encode(getattr(data, m), m), b.encode(getattr(data, m), m))


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_save_load_round_trip(name, tmp_path):
    data = _data()
    model = _fit(name, data)
    loaded = dmh.load_model(model.save(tmp_path / f"{name}.npz"))
    assert type(loaded) is type(model) and loaded.get_params() == model.get_params()
    for m in ("image", "text"):
        X = getattr(data, m)
        np.testing.assert_array_equal(loaded.encode(X, m), model.encode(X, m))
        np.testing.assert_allclose(loaded.project(X, m), model.project(X, m))


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_one_modality_absent_is_an_error(name):
    image, text, _ = _views()
    no_text = CrossModalData(image=image, text=text, text_mask=np.zeros(len(image), bool))
    with pytest.raises(ValueError, match="needs both modalities"):
        CLASSES[name](4).fit(no_text)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_no_paired_object_is_an_error(name):
    image, text, _ = _views(n=40)
    half = np.arange(40) < 20  # first half image-only, second half text-only
    data = CrossModalData(image=image, text=text, image_mask=half, text_mask=~half)
    with pytest.raises(ValueError, match="paired objects"):
        CLASSES[name](4).fit(data)


def test_cvh_needs_more_paired_objects_than_bits():
    data = _data(n=8)
    with pytest.raises(ValueError, match="at least 9 paired objects"):
        CVH(8).fit(data)
    CVH(7).fit(data)  # 8 > 7 is enough
    with pytest.raises(ValueError, match="at most d_image"):
        CVH(30).fit(_data(n=60, d1=12, d2=9))


def test_imh_needs_more_images_than_bits():
    image, text, _ = _views(n=30)
    image_mask = np.arange(30) < 6  # 6 images (all paired), 30 texts
    data = CrossModalData(image=image, text=text, image_mask=image_mask)
    with pytest.raises(ValueError, match="more observed images than bits"):
        IMH(6).fit(data)
    IMH(5).fit(data)


def test_cmfh_fits_with_fewer_pairs_than_bits_as_documented():
    model = _fit("cmfh", _data(n=5), n_bits=8)
    assert model.projections_["image"].shape == (12, 8)


def test_paired_only_methods_ignore_unpaired_objects():
    image, text, y = _views(n=80)
    paired = CrossModalData(image=image[:50], text=text[:50])
    rng = np.random.default_rng(1)
    extra_img = rng.normal(size=(30, image.shape[1]))
    extra_txt = rng.normal(size=(30, text.shape[1]))
    both = CrossModalData(
        image=np.vstack([image[:50], extra_img, np.zeros_like(extra_img)]),
        text=np.vstack([text[:50], np.zeros_like(extra_txt), extra_txt]),
        image_mask=np.r_[np.ones(80, bool), np.zeros(30, bool)],
        text_mask=np.r_[np.ones(50, bool), np.zeros(30, bool), np.ones(30, bool)],
    )
    for name in ("cvh", "cmfh"):
        a, b = _fit(name, paired), _fit(name, both)
        np.testing.assert_array_equal(a.encode(image, "image"), b.encode(image, "image"))
        np.testing.assert_array_equal(a.encode(text, "text"), b.encode(text, "text"))


def test_imh_uses_unpaired_objects():
    semi = make_semi_paired(_data(n=80), 0.5, random_state=0)
    assert semi.n_image_only > 0
    base = _fit("imh", semi)
    image = semi.image.copy()
    image[semi.image_mask & ~semi.text_mask] += 3.0  # move the image-only objects
    moved = CrossModalData(image=image, text=semi.text, image_mask=semi.image_mask,
                           text_mask=semi.text_mask)
    changed = _fit("imh", moved)
    assert not np.allclose(base.projections_["image"], changed.projections_["image"])


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_training_means_are_stored_and_used(name):
    data = _data()
    model = _fit(name, data)
    np.testing.assert_allclose(model.means_["image"], data.image.mean(0))
    np.testing.assert_allclose(model.means_["text"], data.text.mean(0))
    # projections of the training views are zero-mean: the fit-time mean is subtracted
    np.testing.assert_allclose(model.project(data.image, "image").mean(0), 0, atol=1e-10)


# ---------------------------------------------------------------------- CVH
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


# ---------------------------------------------------------------------- IMH
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
    Xi, _ = U.centre(semi.image[idx_i])
    Xt, _ = U.centre(semi.text[idx_t])
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


def test_knn_heat_affinity_matches_a_naive_loop():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(25, 3))
    A = U.knn_heat_affinity(X, 3, sigma=0.9).toarray()
    D = np.linalg.norm(X[:, None] - X[None], axis=2)
    naive = np.zeros_like(D)
    for i in range(len(X)):
        for j in np.argsort(D[i])[1:4]:
            naive[i, j] = naive[j, i] = np.exp(-D[i, j] ** 2 / (2 * 0.9**2))
    np.testing.assert_allclose(A, naive, atol=1e-12)
    L = U.laplacian(U.knn_heat_affinity(X, 3)).toarray()
    np.testing.assert_allclose(L.sum(1), 0, atol=1e-12)
    np.testing.assert_allclose(L, L.T)


# ---------------------------------------------------------------------- CMFH
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


# ---------------------------------------------------------------------- real data
def _map_both(model, q, db):
    mp = dmh.mean_average_precision
    return (mp(model.encode(q.image, "image"), model.encode(db.text, "text"), q.labels, db.labels),
            mp(model.encode(q.text, "text"), model.encode(db.image, "image"), q.labels, db.labels))


@pytest.mark.skipif(not WIKI.exists(), reason=f"real data file absent: {WIKI}")
def test_wiki_cvh_and_cmfh_beat_chance():
    data = dmh.load_dataset(WIKI)
    tr, q, db = data.train(), data.query(), data.database()
    # random codes give about sum_c p_c^2 ~ 0.11 on Wikipedia's 10 classes
    i2t, t2i = _map_both(CVH(16).fit(tr), q, db)
    assert i2t > 0.13 and t2i > 0.13
    i2t, t2i = _map_both(CMFH(16, random_state=0).fit(tr), q, db)
    assert i2t > 0.18 and t2i > 0.16


@pytest.mark.skipif(not UCI.exists(), reason=f"real data file absent: {UCI}")
def test_uci_digits_all_methods_well_above_prior():
    data = dmh.load_dataset(UCI)
    tr, q, db = data.train(), data.query(), data.database()
    small = tr.subset(np.arange(1000))  # keep IMH's dense eigenproblem fast
    for model, train in ((CVH(16), tr), (IMH(16), small), (CMFH(16, random_state=0), tr)):
        i2t, t2i = _map_both(model.fit(train), q, db)
        assert i2t > 0.2 and t2i > 0.2, (model.method_name, i2t, t2i)


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
