"""CLE (Algorithm 1): each update checked against its definition (Eq. 6)."""

import numpy as np
import pytest

from dmh.methods import cle, cle_gram, cle_solver


def _problem(n=60, d1=14, d2=11, frac_paired=0.6, seed=0):
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, 5))
    Z1 = base @ rng.normal(size=(5, d1)) + 0.1 * rng.normal(size=(n, d1))
    Z2 = base @ rng.normal(size=(5, d2)) + 0.1 * rng.normal(size=(n, d2))
    n_m = int(frac_paired * n)
    m1 = np.ones(n, bool)
    m2 = np.ones(n, bool)
    half = (n - n_m) // 2
    m2[n_m : n_m + half] = False  # image-only
    m1[n_m + half :] = False  # text-only
    Zs = [cle.scale_view(Z1, m1), cle.scale_view(Z2, m2)]
    return Zs, [m1, m2], rng


def _state(Zs, masks, rng, d=6, k=3):
    n = masks[0].size
    nbrs = cle.find_neighbours(Zs, masks, k, pool=10)
    Y = rng.normal(size=(n, d))
    w = cle.lle_weights(Y, nbrs)
    Zbars = [cle.complement(Z, m, nbrs, w) for Z, m in zip(Zs, masks, strict=True)]
    Qs = [cle.q_update(Zb, Y, None) for Zb in Zbars]
    return nbrs, Y, w, Zbars, Qs


@pytest.mark.parametrize("d", [6, 20])  # 20 > d_v: orthonormal rows (the Wikipedia-text case)
def test_q_update_satisfies_constraint_and_does_not_increase_objective(d):
    Zs, masks, rng = _problem()
    nbrs, Y, w, Zbars, _ = _state(Zs, masks, rng, d=d)
    Wm = cle.weight_matrix(nbrs, w, Y.shape[0])
    for Zb in Zbars:
        d_v = Zb.shape[1]
        Q0 = cle.polar(rng.normal(size=(d_v, d)))
        Q1 = cle.q_update(Zb, Y, Q0)
        gram = Q1.T @ Q1 if d_v >= d else Q1 @ Q1.T
        assert np.allclose(gram, np.eye(min(d_v, d)), atol=1e-10)
        f = lambda Q, Zb=Zb: np.sum((Zb - Y @ Q.T) ** 2)  # noqa: E731
        assert f(Q1) <= f(Q0) + 1e-9
        if d_v >= d:  # Procrustes is the exact minimiser: no random feasible Q does better
            for _ in range(20):
                assert f(Q1) <= f(cle.polar(rng.normal(size=(d_v, d)))) + 1e-9
    Qs = [cle.q_update(Zb, Y, None) for Zb in Zbars]
    assert np.isfinite(cle.cle_objective(Zbars, Qs, Wm, Y, 0.1, 0.01))


def test_w_rows_sum_to_one_and_w_update_minimises_local_term():
    Zs, masks, rng = _problem()
    nbrs, Y, _, _, _ = _state(Zs, masks, rng)
    w = cle.lle_weights(Y, nbrs, w_reg=0.0)  # Eq. 22 exactly
    assert np.allclose(w.sum(1), 1.0)
    assert np.allclose(cle.lle_weights(Y, nbrs).sum(1), 1.0)
    n = Y.shape[0]
    loc = lambda w_: np.sum((Y - cle.weight_matrix(nbrs, w_, n) @ Y) ** 2)  # noqa: E731
    for _ in range(10):  # any other weights summing to one do no better
        other = rng.normal(size=w.shape)
        other /= other.sum(1, keepdims=True)
        assert loc(w) <= loc(other) + 1e-9
    assert loc(w) <= loc(np.full_like(w, 1.0 / w.shape[1])) + 1e-12
    # with w_reg > 0 each row minimises ||B_i w||^2 + w_reg tr(A_i) ||w||^2 over sum-to-one weights
    wr = cle.lle_weights(Y, nbrs, w_reg=0.1)
    Bt = Y[:, None, :] - Y[nbrs]
    A = np.einsum("nkd,nld->nkl", Bt, Bt)
    tr = np.trace(A, axis1=1, axis2=2)

    def ridge(w_):
        return np.einsum("nk,nkl,nl->n", w_, A, w_) + 0.1 * tr * np.sum(w_ * w_, axis=1)

    for _ in range(10):
        other = rng.normal(size=w.shape)
        other /= other.sum(1, keepdims=True)
        assert np.all(ridge(wr) <= ridge(other) + 1e-9)


def test_w_is_regularised_when_singular():
    Y = np.zeros((4, 3))
    Y[1] = Y[2] = [1.0, 0, 0]  # two identical neighbours: A_0 is singular
    Y[3] = [0, 1.0, 0]
    nbrs = np.array([[1, 2, 3], [0, 2, 3], [0, 1, 3], [0, 1, 2]])
    w = cle.lle_weights(Y, nbrs)
    assert np.isfinite(w).all() and np.allclose(w.sum(1), 1.0)
    assert np.isclose(w[0, 0], w[0, 1])  # the two identical neighbours share their weight


@pytest.mark.parametrize("d", [6, 20])
def test_exact_y_update_is_the_minimiser(d):
    Zs, masks, rng = _problem()
    nbrs, Y, w, Zbars, Qs = _state(Zs, masks, rng, d=d)
    Wm = cle.weight_matrix(nbrs, w, Y.shape[0])
    Y1 = cle.y_update_exact(Zbars, Qs, Wm, Y, 0.1, 0.01)
    f = lambda Y_: cle.cle_objective(Zbars, Qs, Wm, Y_, 0.1, 0.01)  # noqa: E731
    assert f(Y1) <= f(Y) + 1e-12
    for _ in range(5):  # a local perturbation never helps
        assert f(Y1) <= f(Y1 + 1e-3 * rng.normal(size=Y1.shape)) + 1e-12
    # gradient of Eq. 6 vanishes at the solution
    n = Y.shape[0]
    IW = np.eye(n) - Wm.toarray()
    grad = sum((Y1 @ Q.T - Z) @ Q for Z, Q in zip(Zbars, Qs, strict=True)) / n
    grad += 2 * 0.1 / n * IW.T @ IW @ Y1 + 2 * 0.01 * Y1
    assert np.abs(grad).max() < 1e-7


@pytest.mark.parametrize("lam", [0.1, 1000.0])  # 1000: fig5's largest lambda, an ill-conditioned system
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_exact_y_update_solves_the_linear_system(lam, dtype):
    # Y A + 2 lam M Y = rhs, solved directly in its Kronecker form (A (x) I + 2 lam I (x) M) vec Y
    Zs, masks, rng = _problem(n=40)
    nbrs, Y, w, Zbars, Qs = _state(Zs, masks, rng, d=5)
    n, d = Y.shape
    Wm = cle.weight_matrix(nbrs, w, n)
    A = sum(Q.T @ Q for Q in Qs) + 2 * 0.01 * n * np.eye(d)
    IW = np.eye(n) - Wm.toarray()
    K = np.kron(A, np.eye(n)) + 2 * lam * np.kron(np.eye(d), IW.T @ IW)
    rhs = sum(Z @ Q for Z, Q in zip(Zbars, Qs, strict=True))
    want = np.linalg.solve(K, rhs.reshape(-1, order="F")).reshape(n, d, order="F")
    if dtype == np.float32:
        got = cle.y_update_exact([Z.astype(dtype) for Z in Zbars], Qs, Wm.astype(dtype), Y.astype(dtype), lam, 0.01)
        # stops at relative residual LOWP_CG_TOL; at lam = 1000 float32's rounding of the products
        # (eps * ||K|| * ||Y||) leaves the true residual near 5e-4 (the plain iteration's too)
        assert got.dtype == np.float32
        res = K @ got.astype(np.float64).reshape(-1, order="F") - rhs.reshape(-1, order="F")
        assert np.linalg.norm(res) < (3 * cle.LOWP_CG_TOL if lam < 1 else 1e-3) * np.linalg.norm(rhs)
    else:
        got = cle.y_update_exact(Zbars, Qs, Wm, Y, lam, 0.01)
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-7 * np.abs(want).max())


def _cg_lowp_as_before(A, IW, IWt, lam, rhs, Y, max_iter, tol, diagonal=False):
    """:func:`cle_solver._cg_lowp` as it was written before its temporaries were trimmed (the reference)."""
    def op(Y):
        out = Y * A if diagonal else Y @ A
        out += (2.0 * lam) * (IWt @ (IW @ Y))
        return out

    stop = tol * tol * max(cle_solver._sq(rhs), np.finfo(float).tiny)
    R = rhs
    R -= op(Y)
    P = R.copy()
    rr = cle_solver._sq(R)
    for _ in range(max_iter):
        if rr <= stop:
            break
        AP = op(P)
        alpha = rr / cle_solver._dot(P, AP)
        Y += alpha * P
        R -= alpha * AP
        rr_new = cle_solver._sq(R)
        P *= rr_new / rr
        P += R
        rr = rr_new
    return Y


@pytest.mark.parametrize("lam", [0.1, 1000.0])  # the plain and the eigenbasis iteration
def test_float32_y_update_is_bit_for_bit_what_it_was(lam, monkeypatch):
    # the float32 path keeps fewer n x d arrays alive at once; its values must not change
    Zs, masks, rng = _problem(n=300)
    nbrs, Y, w, Zbars, Qs = _state(Zs, masks, rng, d=5)
    Wm = cle.weight_matrix(nbrs, w, Y.shape[0]).astype(np.float32)
    Zbars, Y = [Z.astype(np.float32) for Z in Zbars], Y.astype(np.float32)
    Zbars[0][:3] = -0.0  # exact (negative) zeros in the right-hand side: sum() makes them +0.0
    got = cle.y_update_exact(Zbars, Qs, Wm, Y, lam, 0.01)
    monkeypatch.setattr(cle_solver, "CG_BLOCK_ROWS", 64)  # the operator's sparse product by several blocks of rows
    assert np.array_equal(cle.y_update_exact(Zbars, Qs, Wm, Y, lam, 0.01).view(np.uint32), got.view(np.uint32))
    Y_own = Y.copy()
    in_place = cle.y_update_exact(Zbars, Qs, Wm, Y_own, lam, 0.01, overwrite=True)
    assert np.array_equal(in_place.view(np.uint32), got.view(np.uint32))
    assert (in_place is Y_own) == (lam < cle.ROTATE_MIN_LAM)  # the plain iteration updates Y0 in place
    monkeypatch.setattr(cle_solver, "_cg_lowp", _cg_lowp_as_before)
    monkeypatch.setattr(cle_solver, "_sum_products", lambda Zs, Qs: sum(Z @ Q for Z, Q in zip(Zs, Qs, strict=True)))
    want = cle.y_update_exact(Zbars, Qs, Wm, Y, lam, 0.01)
    assert got.dtype == np.float32 and np.array_equal(got.view(np.uint32), want.view(np.uint32))


def test_jacobi_update_matches_eq25():
    Zs, masks, rng = _problem()
    nbrs, Y, w, Zbars, Qs = _state(Zs, masks, rng)
    n = Y.shape[0]
    Wm = cle.weight_matrix(nbrs, w, n)
    lam, eta = 0.1, 0.01
    Y1 = cle.y_update_jacobi(Zbars, Qs, Wm, Y, lam, eta)
    i = 7
    lhs = sum(Q.T @ Zb[i] for Zb, Q in zip(Zbars, Qs, strict=True)) + 2 * lam * (w[i] @ Y[nbrs[i]])
    M = sum(Q.T @ Q for Q in Qs) + 2 * (lam + eta * n) * np.eye(Y.shape[1])
    assert np.allclose(Y1[i], np.linalg.solve(M, lhs))


def test_complement_fills_exactly_the_missing_rows():
    Zs, masks, rng = _problem()
    nbrs, Y, w, _, _ = _state(Zs, masks, rng)
    for Z, m in zip(Zs, masks, strict=True):
        Zb = cle.complement(Z, m, nbrs, w)
        assert np.array_equal(Zb[m], Z[m])  # observed rows untouched
        miss = np.flatnonzero(~m)
        assert miss.size > 0
        for i in miss:
            assert m[nbrs[i]].all()  # neighbours are paired objects, so z_j exists
            assert np.allclose(Zb[i], w[i] @ Z[nbrs[i]])
        Z0 = cle.complement(Z, m, nbrs, w, "zero")
        assert np.all(Z0[~m] == 0) and np.array_equal(Z0[m], Z[m])


def test_neighbours_follow_the_paper():
    Zs, masks, _ = _problem()
    nbrs = cle.find_neighbours(Zs, masks, 3, pool=10)
    paired = masks[0] & masks[1]
    assert paired[nbrs].all()  # every neighbour is a paired object
    P = np.flatnonzero(paired)
    assert all(i not in nbrs[i] for i in P)  # never itself
    # an image-only object's neighbours are its nearest paired objects in the image space
    i = np.flatnonzero(masks[0] & ~masks[1])[0]
    dist = np.linalg.norm(Zs[0][P] - Zs[0][i], axis=1)
    assert set(nbrs[i]) == set(P[np.argsort(dist)[:3]])
    # a paired object: if its intersection is big enough, all neighbours are in both top lists
    p = P[0]
    d1 = np.argsort(np.linalg.norm(Zs[0][P] - Zs[0][p], axis=1))[1:11]
    d2 = np.argsort(np.linalg.norm(Zs[1][P] - Zs[1][p], axis=1))[1:11]
    common = set(P[d1]) & set(P[d2])
    if len(common) >= 3:
        assert set(nbrs[p]) <= common


def test_fit_cle_records_objective_and_each_step_descends():
    Zs, masks, rng = _problem()
    res = cle.fit_cle(Zs, masks, d=6, k=3, max_iter=15, tol=1e-12, rng=0)
    # on semi-paired data, the default regularised W keeps CLE from drifting (see lle_weights)
    obj = np.array(res.objective)
    assert obj[-1] < 1.05 * obj[1]
    assert len(res.objective) == res.n_iter and np.isfinite(res.objective).all()
    # without missing modalities the complement step is inert, so the whole iteration descends
    full = [np.ones(50, bool), np.ones(50, bool)]
    rng = np.random.default_rng(0)
    Zf = [cle.scale_view(rng.normal(size=(50, 8)), full[0]), cle.scale_view(rng.normal(size=(50, 7)), full[1])]
    with pytest.warns(Warning):
        r2 = cle.fit_cle(Zf, full, d=5, k=3, max_iter=10, tol=0.0, rng=0, w_reg=0.0)
    obj = np.array(r2.objective)
    assert np.all(np.diff(obj) <= 1e-10 * np.abs(obj[:-1]))


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("frac_paired", [1.0, 0.6])
def test_float32_cle_follows_float64(frac_paired):
    # the large-n path: views, Y and the conjugate gradients in float32, sums in float64
    rng = np.random.default_rng(1)
    n = 300
    base = rng.normal(size=(n, 6)) + np.repeat(rng.normal(size=(5, 6)) * 3, n // 5, axis=0)
    Z1 = base @ rng.normal(size=(6, 40)) + 0.3 * rng.normal(size=(n, 40))
    Z2 = base @ rng.normal(size=(6, 25)) + 0.3 * rng.normal(size=(n, 25))
    m1 = np.ones(n, bool)
    m2 = np.ones(n, bool)
    m2[int(frac_paired * n):] = False
    v64 = [cle.scale_view(Z1, m1), cle.scale_view(Z2, m2)]
    v32 = [cle.scale_view(Z1, m1, np.float32), cle.scale_view(Z2, m2, np.float32)]
    for a, b in zip(v64, v32, strict=True):
        assert b.dtype == np.float32
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)
    a = cle.fit_cle(v64, [m1, m2], d=16, rng=0, max_iter=8)
    b = cle.fit_cle(v32, [m1, m2], d=16, rng=0, max_iter=8, dtype=np.float32)
    assert b.Y.dtype == np.float32 and a.Y.dtype == np.float64 and a.n_iter == b.n_iter
    np.testing.assert_allclose(b.objective, a.objective, rtol=1e-5)
    # S^Y sees Y through its inner products (Y is defined up to rotation; both start alike)
    Ga, Gb = a.Y @ a.Y.T, b.Y.astype(np.float64) @ b.Y.T.astype(np.float64)
    assert np.linalg.norm(Gb - Ga) < 1e-4 * np.linalg.norm(Ga)


def test_scale_view_float32_same_values_whether_rows_are_sliced_or_gathered():
    rng = np.random.default_rng(1)
    Z = (rng.normal(size=(40, 6)) * 3 + 1).astype(np.float32)
    every = cle.scale_view(Z, np.ones(40, bool), np.float32)  # slices of rows
    padded = np.concatenate([Z, np.full((1, 6), 7, np.float32)])
    gathered = cle.scale_view(padded, np.arange(41) < 40, np.float32)  # the observed rows gathered
    assert np.array_equal(every.view(np.uint32), gathered[:40].view(np.uint32)) and not gathered[40].any()


def test_scale_view_float32_in_place():
    rng = np.random.default_rng(0)
    Z = rng.normal(size=(50, 7)).astype(np.float32) * 5 + 2
    observed = np.ones(50, bool)
    observed[:5] = False
    ref = cle.scale_view(Z, observed)
    out = cle.scale_view(Z, observed, np.float32, inplace=True)
    assert out is Z  # no second array
    np.testing.assert_allclose(out, ref, atol=1e-6)
    assert np.all(out[:5] == 0) and np.mean(np.sum(out[5:].astype(float) ** 2, 1)) == pytest.approx(1.0, rel=1e-5)
    Z64 = rng.normal(size=(10, 3))
    assert cle.scale_view(Z64, np.ones(10, bool), np.float32, inplace=True) is not Z64  # a dtype change copies


def _wide_problem(n=80, frac_paired=1.0, seed=0):
    """Views with more features than objects (CLE's view of the networks' hidden features)."""
    rng = np.random.default_rng(seed)
    base = rng.normal(size=(n, 6))
    Z1 = base @ rng.normal(size=(6, 150)) + 0.3 * rng.normal(size=(n, 150))
    Z2 = base @ rng.normal(size=(6, 120)) + 0.3 * rng.normal(size=(n, 120))
    m1, m2 = np.ones(n, bool), np.ones(n, bool)
    m2[int(frac_paired * n):] = False
    return [cle.scale_view(Z1, m1), cle.scale_view(Z2, m2)], [m1, m2]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("case", ["paired", "given", "zero"])
def test_gram_path_follows_the_direct_path(case):
    """A view held by its Gram matrix gives the iterates of the view itself, up to rounding."""
    from dmh.methods import unpaired

    Zs, masks = _wide_problem(frac_paired=1.0 if case == "paired" else 0.7)
    kw = dict(d=16, rng=0, max_iter=6, tol=0.0, complement_how="zero" if case == "zero" else "lle")
    if case == "given":
        kw["complement_given"] = unpaired.ridge_complement(Zs, masks)
    a = cle.fit_cle(Zs, masks, gram=False, **kw)
    b = cle.fit_cle(Zs, masks, **kw)  # auto: both views are wider than their 80 objects
    assert all(Q is not None for Q in a.Qs) and all(Q is None for Q in b.Qs)
    np.testing.assert_allclose(b.objective, a.objective, rtol=1e-10)
    assert np.array_equal(a.nbrs, b.nbrs)
    Ga, Gb = a.Y @ a.Y.T, b.Y @ b.Y.T
    assert np.linalg.norm(Gb - Ga) < 1e-9 * np.linalg.norm(Ga)


def test_gram_path_only_where_it_applies():
    Zs, masks = _wide_problem(frac_paired=0.7)
    # Eq. 5's neighbour complement changes the missing rows every iteration: the direct form
    res = cle.fit_cle(Zs, masks, d=16, rng=0, max_iter=2, tol=1.0)
    assert res.Qs[0] is None and res.Qs[1] is not None  # view 0 has nothing missing
    # a view narrower than its objects: the direct form, unless asked for
    narrow, full = _problem(n=60, frac_paired=1.0)[:2]
    assert all(Q is not None for Q in cle.fit_cle(narrow, full, d=6, rng=0, max_iter=2, tol=1.0).Qs)
    assert all(Q is None for Q in cle.fit_cle(narrow, full, d=6, rng=0, max_iter=2, tol=1.0, gram=True).Qs)
    assert cle_gram.worth_it(4096, 2000, 512) and not cle_gram.worth_it(1000, 2000, 512)
    assert not cle_gram.worth_it(4096, 300, 512)  # fewer objects than d
