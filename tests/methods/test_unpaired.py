"""Options for the unpaired objects (dmh.methods.unpaired): their effect on a tiny semi-paired set,
no effect at all on fully paired data, and the paper preset unchanged."""

import numpy as np
import pytest

from dmh import DMH, make_semi_paired
from dmh.methods import cle, unpaired
from dmh.methods.dmh import PRESETS

TINY = dict(d=8, hidden_size=32, n_rounds=2, dam_epochs=3, cle_max_iter=5, gbe_max_iter=30, use_unpaired=True)
PAPER_UNPAIRED = dict(unpaired_complement="neighbours", unpaired_dam=True)
OPTIONS = (dict(unpaired_complement="ridge"), dict(unpaired_dam=False))
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _codes(model, data):
    return [model.encode(data.view(m), modality=m) for m in ("image", "text")]


def test_paper_preset_keeps_the_paper_behaviour(toy_data):
    assert {k: PRESETS["paper"][k] for k in PAPER_UNPAIRED} == PAPER_UNPAIRED
    semi = make_semi_paired(toy_data.train(), 0.5, random_state=0)
    a = DMH(8, random_state=3, preset="paper", **TINY).fit(semi)
    b = DMH(8, random_state=3, preset="default", **{**PRESETS["paper"], **TINY}).fit(semi)
    for x, y in zip(_codes(a, toy_data), _codes(b, toy_data), strict=True):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("option", OPTIONS)
def test_options_change_nothing_on_fully_paired_data(toy_data, option):
    """The options act on unpaired objects only: on fully paired data every value gives the codes
    of the paper's values, and so does the default preset (table 1's fully paired rows stay valid)."""
    train = toy_data.train()
    a = DMH(8, random_state=3, **TINY, **PAPER_UNPAIRED).fit(train)
    b = DMH(8, random_state=3, **TINY, **{**PAPER_UNPAIRED, **option}).fit(train)
    c = DMH(8, random_state=3, **TINY).fit(train)
    for m in (b, c):
        for x, y in zip(_codes(a, toy_data), _codes(m, toy_data), strict=True):
            assert np.array_equal(x, y)
        assert np.array_equal(a.codes_, m.codes_)


@pytest.mark.parametrize("option", OPTIONS)
def test_options_change_the_codes_on_semi_paired_data(toy_data, option):
    semi = make_semi_paired(toy_data.train(), 0.5, random_state=0)
    a = DMH(8, random_state=3, **TINY, **PAPER_UNPAIRED).fit(semi)
    b = DMH(8, random_state=3, **TINY, **{**PAPER_UNPAIRED, **option}).fit(semi)
    ca, cb = _codes(a, toy_data), _codes(b, toy_data)
    assert not all(np.array_equal(x, y) for x, y in zip(ca, cb, strict=True))
    c = DMH(8, random_state=3, **TINY, **{**PAPER_UNPAIRED, **option}).fit(semi)  # same seed, same codes
    assert all(np.array_equal(x, y) for x, y in zip(cb, _codes(c, toy_data), strict=True))


def test_ridge_complement_recovers_a_linear_cross_modal_map():
    rng = np.random.default_rng(1)
    n = 200
    X = rng.normal(size=(n, 5))
    T = X @ rng.normal(size=(5, 3)) + 0.01 * rng.normal(size=(n, 3))
    img, txt = np.ones(n, bool), np.ones(n, bool)
    txt[150:175] = False  # image-only
    img[175:] = False  # text-only
    Xz, Tz = np.where(img[:, None], X, 0.0), np.where(txt[:, None], T, 0.0)
    pred_x, pred_t = unpaired.ridge_complement([Xz, Tz], [img, txt])
    assert np.isnan(pred_t[:150]).all() and np.isnan(pred_t[175:]).all()
    assert np.abs(pred_t[150:175] - T[150:175]).max() < 0.1  # the map is linear: recovered
    assert np.isnan(pred_x[:175]).all() and np.isfinite(pred_x[175:]).all()


def test_ridge_complement_beats_neighbours_where_neighbours_mislead():
    """Image-only objects whose nearest image-space neighbours are dominated by noise dimensions:
    CLE's complemented texts are closer to the true (discarded) texts with the ridge map learned
    on the paired objects than with Eq. 5's neighbour average."""
    rng = np.random.default_rng(2)
    n, n_pair = 300, 150
    y = rng.integers(0, 2, n)
    image = np.c_[3.0 * (2 * y - 1), 3.0 * rng.normal(size=(n, 10))]
    text = np.c_[2 * y - 1, 0.1 * rng.normal(size=(n, 2))]
    img, txt = np.ones(n, bool), np.ones(n, bool)
    txt[n_pair:] = False  # the rest are image-only; their true texts are kept aside
    views = [cle.scale_view(image, img), cle.scale_view(text, txt)]
    truth = cle.scale_view(text, np.ones(n, bool))[~txt]
    err = {}
    for how in ("neighbours", "ridge"):
        given = unpaired.ridge_complement(views, [img, txt]) if how == "ridge" else None
        res = cle.fit_cle(views, [img, txt], d=4, max_iter=5, rng=np.random.default_rng(0), complement_given=given)
        err[how] = np.mean((res.Zbars[1][~txt] - truth) ** 2)
    assert err["ridge"] < 0.5 * err["neighbours"]


def _ridge_problem(rng, n, p, t):
    Z = rng.normal(size=(n, 8))
    return (Z @ rng.normal(size=(8, p)) + 0.5 * rng.normal(size=(n, p)),
            Z @ rng.normal(size=(8, t)) + 0.5 * rng.normal(size=(n, t)))


def test_gcv_alpha_chooses_as_ridgecv_and_the_one_penalty_fit_is_ridgecvs_model(monkeypatch):
    """The shortcut of ridge_complement: gcv_alpha picks RidgeCV's penalty from the grid, and RidgeCV
    over that penalty alone gives the grid's model bit for bit; noise levels move the choice over the
    grid, so several penalties are checked, not one."""
    from sklearn.linear_model import RidgeCV

    monkeypatch.setattr(unpaired, "GCV_MIN_WORK", 0)
    rng = np.random.default_rng(3)
    chosen = set()
    for noise in (0.01, 0.5, 3.0, 30.0):
        X, Y = _ridge_problem(rng, 60, 90, 7)
        Y = Y + noise * rng.normal(size=Y.shape)
        grid = [a * float(np.mean(np.sum(X * X, axis=1))) for a in unpaired.RIDGE_ALPHAS]
        full = RidgeCV(alphas=grid, fit_intercept=True).fit(X, Y)
        best = unpaired.gcv_alpha(X, Y, grid)
        assert best == full.alpha_
        one = RidgeCV(alphas=[best], fit_intercept=True).fit(X, Y)
        assert np.array_equal(one.coef_, full.coef_) and np.array_equal(one.intercept_, full.intercept_)
        chosen.add(best)
    assert len(chosen) >= 2
    # where it does not apply: more objects than features, a one-value grid, two equal candidates
    X, Y = _ridge_problem(rng, 90, 60, 7)
    assert unpaired.gcv_alpha(X, Y, grid) is None
    X, Y = _ridge_problem(rng, 60, 90, 7)
    assert unpaired.gcv_alpha(X, Y, grid[:1]) is None
    assert unpaired.gcv_alpha(X, Y, [1.0, 1.0]) is None


def _semi_paired_views(n=80):
    """Two views of a linear problem (120-d and 100-d) with 10 image-only and 10 text-only objects."""
    X, T = _ridge_problem(np.random.default_rng(4), n, 120, 100)
    img, txt = np.ones(n, bool), np.ones(n, bool)
    txt[50:60] = False
    img[60:70] = False
    return [np.where(img[:, None], X, 0.0), np.where(txt[:, None], T, 0.0)], img, txt


def test_ridge_complement_is_the_same_with_and_without_the_shortcut(monkeypatch):
    views, img, txt = _semi_paired_views()
    monkeypatch.setattr(unpaired, "GCV_MIN_WORK", 0)
    fast = unpaired.ridge_complement(views, [img, txt])
    monkeypatch.setattr(unpaired, "gcv_alpha", lambda *a: None)  # RidgeCV over the whole grid, as before
    plain = unpaired.ridge_complement(views, [img, txt])
    for a, b in zip(fast, plain, strict=True):
        assert np.array_equal(a, b, equal_nan=True)


def test_the_dual_solver_predicts_ridgecvs_model(monkeypatch):
    """ridge_predict_dual: RidgeCV's penalty and predictions (up to rounding), on problems whose noise
    moves the choice over the grid; None where the features are fewer than the objects."""
    from sklearn.linear_model import RidgeCV

    rng = np.random.default_rng(5)
    chosen = set()
    for noise in (0.01, 0.5, 3.0, 30.0):
        X, Y = _ridge_problem(rng, 60, 90, 7)
        Y = Y + noise * rng.normal(size=Y.shape) + 5.0  # an intercept to fit
        X_new = rng.normal(size=(9, 90))
        grid = [a * float(np.mean(np.sum(X * X, axis=1))) for a in unpaired.RIDGE_ALPHAS]
        full = RidgeCV(alphas=grid, fit_intercept=True).fit(X, Y)
        want = full.predict(X_new)
        got = unpaired.ridge_predict_dual(X, Y, grid, X_new)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * np.abs(want).max())
        one = unpaired.ridge_predict_dual(X, Y[:, 0], grid, X_new)  # one target: a vector, as RidgeCV's
        np.testing.assert_allclose(one, RidgeCV(alphas=grid).fit(X, Y[:, 0]).predict(X_new), rtol=1e-9, atol=1e-8)
        chosen.add(full.alpha_)
    assert len(chosen) >= 2
    X, Y = _ridge_problem(rng, 90, 60, 7)
    assert unpaired.ridge_predict_dual(X, Y, grid, X[:3]) is None


def test_ridge_complement_dual_agrees_with_sklearn():
    views, img, txt = _semi_paired_views()
    plain = unpaired.ridge_complement(views, [img, txt])
    dual = unpaired.ridge_complement(views, [img, txt], solver="dual")
    for a, b in zip(dual, plain, strict=True):
        assert np.array_equal(np.isnan(a), np.isnan(b))
        np.testing.assert_allclose(a[~np.isnan(a)], b[~np.isnan(b)], rtol=1e-9, atol=1e-9)
    with pytest.raises(ValueError, match="solver must be one of"):
        unpaired.ridge_complement(views, [img, txt], solver="svd")


def test_dmh_ridge_solver(toy_data, monkeypatch):
    semi = make_semi_paired(toy_data.train(), 0.5, random_state=0)
    params = {**TINY, "hidden_size": 64}  # refreshed features of 64-d: more than the 40 paired objects
    a = DMH(8, random_state=0, ridge_solver="sklearn", **params).fit(semi)
    calls = []
    dual = unpaired.ridge_predict_dual
    monkeypatch.setattr(unpaired, "ridge_predict_dual", lambda *args: calls.append(dual(*args)) or calls[-1])
    b = DMH(8, random_state=0, **params).fit(semi)  # "dual" is the default
    # round 1 (12-d and 9-d raw views: fewer features than pairs) falls back to RidgeCV; round 2 is dual
    assert len(calls) == 4 and [c is None for c in calls] == [True, True, False, False]
    # the same model up to rounding: the codes agree almost everywhere
    for ca, cb in zip(_codes(a, toy_data), _codes(b, toy_data), strict=True):
        assert np.mean(ca == cb) >= 0.95
    for bad in ("svd", None, 1):
        with pytest.raises(ValueError, match="ridge_solver must be one of"):
            DMH(8, ridge_solver=bad, **TINY).fit(semi)


def test_bad_values_are_refused(toy_data):
    semi = make_semi_paired(toy_data.train(), 0.5, random_state=0)
    for bad in (dict(unpaired_complement="mean"), dict(unpaired_dam="yes")):
        with pytest.raises(ValueError, match=next(iter(bad))):
            DMH(8, **TINY, **bad).fit(semi)
