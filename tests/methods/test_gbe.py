"""GBE (Algorithm 2): the blockwise loss and gradient against dense autograd references."""

import math

import numpy as np
import pytest
import torch

from dmh.methods import gbe, gbe_sampled


def _setup(n=40, d=7, c=6, seed=0, kind="clip", chunk=1024, cache=2**30):
    g = torch.Generator().manual_seed(seed)
    Y = torch.randn(n, d, generator=g, dtype=torch.float64) + 0.3
    H = torch.randn(n, c, generator=g, dtype=torch.float64)
    S = gbe.PairSimilarity(Y, kind, chunk_size=chunk, cache_bytes=cache)
    return Y, H, S


def _dense_p(Y, kind):
    G = Y @ Y.T
    n = Y.shape[0]
    off = ~torch.eye(n, dtype=torch.bool)
    if kind == "clip":
        G = G.clamp(min=0)
    elif kind == "shift":
        G = G - G[off].min()
    G = G.masked_fill(~off, 0.0)
    return G / G.sum()


@pytest.mark.parametrize("kind", ["clip", "shift"])
@pytest.mark.parametrize("quantization", ["mean", "sum"])
def test_gradient_equals_autograd_of_the_loss(kind, quantization):
    Y, H, S = _setup(kind=kind)
    P = _dense_p(Y, kind)
    assert torch.allclose(S.cache, P)
    assert abs(float(P.sum()) - 1.0) < 1e-12 and float(P.min()) >= 0
    Hr = H.clone().requires_grad_()
    ref = gbe.gbe_loss_dense(Hr, P, gamma=0.3, quantization=quantization)
    ref.backward()
    loss, grad = gbe.gbe_loss_and_grad(H, S, gamma=0.3, quantization=quantization, chunk_size=7)
    assert abs(loss - float(ref)) < 1e-10
    assert torch.allclose(grad, Hr.grad, atol=1e-12, rtol=1e-9)


@pytest.mark.parametrize("dof,scale", [(3.0, 1.0), (15.0, 2.0), (0.5, 1.0)])
def test_gradient_with_kernel_degrees_of_freedom_equals_autograd(dof, scale):
    """Student t with ``dof`` degrees of freedom (a probe of research/log/quality.md section 9; 1 = the paper's)."""
    Y, H, S = _setup(kind="clip")
    P = _dense_p(Y, "clip")
    Hr = H.clone().requires_grad_()
    ref = gbe.gbe_loss_dense(Hr, P, gamma=0.3, kernel_dof=dof, kernel_scale=scale)
    ref.backward()
    loss, grad = gbe.gbe_loss_and_grad(H, S, gamma=0.3, chunk_size=7, kernel_dof=dof, kernel_scale=scale)
    assert abs(loss - float(ref)) < 1e-10
    assert torch.allclose(grad, Hr.grad, atol=1e-12, rtol=1e-9)
    _, grad1 = gbe.gbe_loss_and_grad(H, S, gamma=0.3, chunk_size=7)
    assert not torch.allclose(grad, grad1)


def test_kl_part_is_eq26():
    Y, H, S = _setup()
    P = S.cache
    _, grad = gbe.gbe_loss_and_grad(H, S, gamma=0.0)
    n = H.shape[0]
    D = 0.25 * torch.cdist(H, H) ** 2
    K = 1 / (1 + D)
    K.fill_diagonal_(0)
    Q = K / K.sum()
    i = 5
    eq26 = sum((P[i, j] - Q[i, j]) * K[i, j] * (H[i] - H[j]) for j in range(n) if j != i)
    assert torch.allclose(grad[i], eq26, atol=1e-12)


def test_chunked_and_unchunked_agree_with_and_without_cache():
    Y, H, S_full = _setup(n=53, chunk=1000)
    _, _, S_nocache = _setup(n=53, chunk=5, cache=0)
    assert S_nocache.cache is None
    l1, g1 = gbe.gbe_loss_and_grad(H, S_full, 0.1, chunk_size=1000)
    l2, g2 = gbe.gbe_loss_and_grad(H, S_nocache, 0.1, chunk_size=4)
    assert abs(l1 - l2) < 1e-10 and torch.allclose(g1, g2, atol=1e-13)


def test_raw_similarity_refuses_negative_inner_products():
    Y = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    with pytest.raises(ValueError, match="negative"):
        gbe.PairSimilarity(Y, "raw")
    with pytest.raises(ValueError, match="similarity must be"):
        gbe.PairSimilarity(Y, "cosine")


def test_fit_gbe_lowers_the_loss_and_is_deterministic():
    rng = np.random.default_rng(0)
    centers = rng.normal(size=(3, 10)) * 3
    Y = centers[np.repeat(np.arange(3), 20)] + rng.normal(size=(60, 10))
    a = gbe.fit_gbe(Y, 8, max_iter=60, check_every=5, rng=1, dtype=torch.float64)
    b = gbe.fit_gbe(Y, 8, max_iter=60, check_every=5, rng=1, dtype=torch.float64)
    assert np.array_equal(a.codes, b.codes)
    assert set(np.unique(a.codes)) <= {-1, 1} and a.codes.shape == (60, 8)
    first, last = a.loss[0][1], a.loss[-1][1]
    assert last < first
    # objects of the same cluster end up closer in Hamming space than objects of different ones
    y = np.repeat(np.arange(3), 20)
    ham = (8 - a.codes.astype(int) @ a.codes.T.astype(int)) / 2
    same = ham[y[:, None] == y[None, :]].mean()
    diff = ham[y[:, None] != y[None, :]].mean()
    assert same < diff


def test_paper_sign_maps_zero_to_minus_one():
    assert gbe.sign_pm1(torch.tensor([0.0, 1e-9, -2.0])).tolist() == [-1.0, 1.0, -1.0]


@pytest.mark.parametrize("how", ["pca", "projection", "random"])
def test_initial_codes(how):
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(60, 8)) @ np.diag([5.0, 3, 2, 1, 0.5, 0.2, 0.1, 0.05])
    H = gbe.init_codes(Y, 12, how, np.random.default_rng(1))
    assert H.shape == (60, 12) and np.isfinite(H).all()
    assert np.array_equal(H, gbe.init_codes(Y, 12, how, np.random.default_rng(1)))  # seeded
    if how == "projection":
        # every column is a linear function of the centred features, overall scale one
        Yc = Y - Y.mean(0)
        coef, *_ = np.linalg.lstsq(Yc, H, rcond=None)
        np.testing.assert_allclose(Yc @ coef, H, atol=1e-8)
        assert H.std() == pytest.approx(1.0)
        assert np.all(H.std(0) > 0.05)  # no bit is left to noise, unlike PCA beyond the rank
    if how == "pca":
        assert H[:, 0].std() == pytest.approx(1.0) and np.all(H.std(0)[8:] < 0.05)
    with pytest.raises(ValueError, match="gbe_init must be"):
        gbe.init_codes(Y, 4, "lsh", rng)


@pytest.mark.parametrize("kind", ["clip", "shift"])
def test_sampled_solver_is_exact_when_every_pair_is_a_neighbour(kind):
    # with n - 1 neighbours every draw lands on a neighbour (weight 0): the estimate is the exact sum
    Y, H, S = _setup(n=30, kind=kind)
    Ss = gbe_sampled.SampledSimilarity(Y, kind, n_neighbors=29, chunk_size=7)
    J = gbe_sampled.draw_columns(30, 5, 11, torch.Generator().manual_seed(0))
    l1, g1 = gbe.gbe_loss_and_grad(H, S, 0.2)
    l2, g2 = gbe_sampled.gbe_loss_and_grad_sampled(H, Ss, J, 0.2, chunk_size=11)
    assert l2 == pytest.approx(l1, rel=1e-10)
    torch.testing.assert_close(g2, g1, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["clip", "perplexity"])
def test_sampled_solver_is_exact_when_the_draws_cover_every_pair(kind):
    # every block draws each object once (weight n / m = 1): the estimate is the exact sum
    n = 37
    Y, H, _ = _setup(n=n)
    S = gbe.PairSimilarity(Y, kind, perplexity=3.0)
    Ss = gbe_sampled.SampledSimilarity(Y, kind, n_neighbors=4, chunk_size=7, perplexity=3.0)
    if kind == "perplexity":  # the neighbours are P's nonzeros, a different number per row
        deg = (S.block(0, n) > 0).sum(1)
        assert Ss.degree.tolist() == deg.tolist() and int(deg.max()) < n - 1 and int(deg.min()) < int(deg.max())
        assert Ss.plogp == pytest.approx(S.plogp, rel=1e-12)
    J = torch.arange(n).repeat(-(-n // 11), 1)
    for q in ("mean", "sum"):
        l1, g1 = gbe.gbe_loss_and_grad(H, S, 0.2, q)
        l2, g2 = gbe_sampled.gbe_loss_and_grad_sampled(H, Ss, J, 0.2, q, chunk_size=11)
        assert l2 == pytest.approx(l1, rel=1e-10)
        torch.testing.assert_close(g2, g1, rtol=1e-9, atol=1e-12)


def test_neighbour_lookup_by_bitmap_and_by_sorted_keys_is_p_pattern(monkeypatch):
    # drawn pairs are looked up in a bitmap of P's nonzeros, or above BITMAP_MAX_BYTES among its
    # sorted keys: both give P's pattern, pair by pair
    n = 41
    Y, _, _ = _setup(n=n)
    want = gbe.PairSimilarity(Y, "perplexity", perplexity=3.0).block(0, n) > 0
    key = torch.arange(n)[:, None] * n + torch.arange(n)[None, :]
    by_bits = gbe_sampled.SampledSimilarity(Y, "perplexity", perplexity=3.0)
    assert by_bits.bitmap is not None and by_bits.keys is None
    monkeypatch.setattr(gbe_sampled, "BITMAP_MAX_BYTES", 0)
    by_keys = gbe_sampled.SampledSimilarity(Y, "perplexity", perplexity=3.0)
    assert by_keys.bitmap is None
    assert torch.equal(by_bits.is_neighbour(key), want) and torch.equal(by_keys.is_neighbour(key), want)
    assert 0 < int(want.sum()) < n * (n - 1)


def test_cpu_fit_with_sparse_p_takes_all_blocks_at_once(monkeypatch):
    # on a CPU the approximate solver with the sparse P runs the batched step, and its fit follows
    # the block loop's (the same draws and estimates, summed in another order)
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(90, 6))
    calls = []
    batched = gbe_sampled.gbe_loss_and_grad_sampled_batched
    monkeypatch.setattr(gbe_sampled, "gbe_loss_and_grad_sampled_batched",
                        lambda *a, **k: calls.append(1) or batched(*a, **k))
    kw = dict(similarity="perplexity", solver="approx", perplexity=5.0, chunk_size=16, max_iter=30, tol=0.0)
    got = gbe.fit_gbe(Y, 8, rng=np.random.default_rng(1), dtype=torch.float64, **kw)
    assert calls
    monkeypatch.setattr(gbe_sampled, "gbe_loss_and_grad_sampled_batched", gbe_sampled.gbe_loss_and_grad_sampled)
    ref = gbe.fit_gbe(Y, 8, rng=np.random.default_rng(1), dtype=torch.float64, **kw)
    np.testing.assert_allclose(got.relaxed, ref.relaxed, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(got.codes, ref.codes)


@pytest.mark.parametrize("kind", ["clip", "shift", "perplexity"])
@pytest.mark.parametrize("quantization", ["mean", "sum"])
def test_batched_sampled_gradient_equals_the_block_loop(kind, quantization):
    # the batched form (all blocks at once, one synchronisation: a GPU's, and a CPU's for the sparse
    # P) computes the same estimates from the same draws as the block loop; n = 53 leaves a partial
    # last block of 6 rows
    n, chunk = 53, 8
    Y, H, _ = _setup(n=n)
    Ss = gbe_sampled.SampledSimilarity(Y, kind, n_neighbors=4, chunk_size=chunk, perplexity=3.0)
    J = gbe_sampled.draw_columns(n, 9, chunk, torch.Generator().manual_seed(3))
    J[0, :3] = torch.tensor([0, 1, 2])  # the block's own rows are drawn too (they count zero)
    for with_loss in (True, False):
        l1, g1 = gbe_sampled.gbe_loss_and_grad_sampled(H, Ss, J, 0.2, quantization, chunk, with_loss=with_loss)
        l2, g2 = gbe_sampled.gbe_loss_and_grad_sampled_batched(H, Ss, J, 0.2, quantization, chunk, with_loss=with_loss)
        if with_loss:
            assert l2 == pytest.approx(l1, rel=1e-10)
        else:
            assert math.isnan(l1) and math.isnan(l2)
        torch.testing.assert_close(g2, g1, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("kind", ["clip", "perplexity"])
def test_sampled_gradient_is_unbiased(kind):
    Y, H, _ = _setup(n=50)
    S = gbe.PairSimilarity(Y, kind, perplexity=3.0)
    Ss = gbe_sampled.SampledSimilarity(Y, kind, n_neighbors=3, perplexity=3.0)
    _, g_exact = gbe.gbe_loss_and_grad(H, S, 0.0)
    gen = torch.Generator().manual_seed(1)
    # the normaliser enters as 1/Z, so single draws are biased by O(var Z / Z^2); averaged over many
    # draws the estimate must come close to the exact gradient, much closer than one draw does
    gs = [gbe_sampled.gbe_loss_and_grad_sampled(H, Ss, gbe_sampled.draw_columns(50, 40, 16, gen), 0.0, chunk_size=16)[1]
          for _ in range(400)]
    err = float((sum(gs) / len(gs) - g_exact).norm() / g_exact.norm())
    one = float((gs[0] - g_exact).norm() / g_exact.norm())
    assert err < 0.04 and err < one / 8


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("kind", ["clip", "perplexity"])
def test_approx_solver_lowers_the_exact_loss_and_is_reproducible(kind):
    g = torch.Generator().manual_seed(0)
    centres = torch.randn(4, 10, generator=g, dtype=torch.float64) * 3
    Y = (centres.repeat_interleave(50, 0) + torch.randn(200, 10, generator=g, dtype=torch.float64)).numpy()
    S = gbe.PairSimilarity(torch.as_tensor(Y), kind, perplexity=10.0)
    H0 = gbe.init_codes(Y, 8, "projection", np.random.default_rng(0))
    kw = dict(similarity=kind, perplexity=10.0, H_init=H0, solver="approx", n_neighbors=5, n_samples=10,
              max_iter=80, rng=2, dtype=torch.float64)
    a = gbe.fit_gbe(Y, 8, **kw)
    b = gbe.fit_gbe(Y, 8, **kw)
    assert np.array_equal(a.relaxed, b.relaxed)
    l0, _ = gbe.gbe_loss_and_grad(torch.as_tensor(H0), S, 0.01)
    l1, _ = gbe.gbe_loss_and_grad(torch.as_tensor(a.relaxed), S, 0.01)
    assert l1 < l0 - 0.05
    # the clusters separate in Hamming space
    y = np.repeat(np.arange(4), 50)
    ham = (8 - a.codes.astype(int) @ a.codes.T.astype(int)) / 2
    assert ham[y[:, None] == y[None, :]].mean() < ham[y[:, None] != y[None, :]].mean() - 1


def test_solver_argument_checked():
    Y = np.random.default_rng(0).normal(size=(20, 4))
    with pytest.raises(ValueError, match="gbe_solver"):
        gbe.fit_gbe(Y, 4, solver="fast")
    for extra in (dict(kernel_scale=2.0), dict(balance=0.1), dict(decorrelation=0.1), dict(kernel_dof=4.0)):
        with pytest.raises(ValueError, match="gbe_solver='approx' supports kernel_scale 1"):
            gbe.fit_gbe(Y, 4, solver="approx", similarity="perplexity", perplexity=3.0, **extra)


def test_auto_solver_switches_at_approx_min_n_for_both_similarities(monkeypatch):
    Y = np.random.default_rng(0).normal(size=(40, 5))
    used = []

    def counted(real):
        return lambda *a, **k: used.append(1) or real(*a, **k)

    for name in ("gbe_loss_and_grad_sampled", "gbe_loss_and_grad_sampled_batched"):  # the loop or all blocks at once
        monkeypatch.setattr(gbe_sampled, name, counted(getattr(gbe_sampled, name)))
    for kind in ("clip", "perplexity"):
        for min_n, approx in ((41, False), (40, True)):
            monkeypatch.setattr(gbe, "APPROX_MIN_N", min_n)
            used.clear()
            gbe.fit_gbe(Y, 4, similarity=kind, perplexity=5.0, max_iter=3, rng=0, solver="auto")
            assert bool(used) == approx
            used.clear()
            gbe.fit_gbe(Y, 4, similarity=kind, perplexity=5.0, max_iter=3, rng=0, solver="auto", balance=0.1)
            assert not used


@pytest.mark.cuda
@pytest.mark.parametrize("solver", ["exact", "approx"])
@pytest.mark.parametrize("kind", ["clip", "perplexity"])
def test_cuda_matches_cpu(solver, kind):
    Y = np.random.default_rng(0).normal(size=(300, 12)) + 0.2
    kw = dict(solver=solver, max_iter=40, rng=0, dtype=torch.float64, n_neighbors=10, n_samples=20,
              similarity=kind, perplexity=10.0)
    a = gbe.fit_gbe(Y, 8, device="cpu", **kw)
    b = gbe.fit_gbe(Y, 8, device="cuda", **kw)
    np.testing.assert_allclose(b.relaxed, a.relaxed, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("dof,scale", [(1.0, 1.0), (3.0, 2.0)])
def test_sparse_p_is_read_at_its_nonzeros_and_the_gradient_is_exact(dof, scale):
    """The calibrated P is kept as its nonzeros (no n x n matrix); the step reads it there and
    gives the loss and gradient of the dense formula (autograd)."""
    n = 45
    Y, H, _ = _setup(n=n)
    S = gbe.PairSimilarity(Y, "perplexity", perplexity=4.0, chunk_size=7)
    assert S.cache is None
    P = S.block(0, n)
    want = torch.as_tensor(gbe.perplexity_similarity(Y.numpy(), 4.0).toarray())
    torch.testing.assert_close(P, want, rtol=1e-12, atol=1e-15)
    Hr = H.clone().requires_grad_()
    ref = gbe.gbe_loss_dense(Hr, P, gamma=0.3, kernel_dof=dof, kernel_scale=scale)
    ref.backward()
    loss, grad = gbe.gbe_loss_and_grad(H, S, gamma=0.3, chunk_size=7, kernel_dof=dof, kernel_scale=scale)
    assert loss == pytest.approx(float(ref), rel=1e-12)
    torch.testing.assert_close(grad, Hr.grad, rtol=1e-9, atol=1e-12)


def test_cosine_schedule_decays_the_step_and_settles():
    rng = np.random.default_rng(0)
    Y = rng.normal(size=(3, 10))[np.repeat(np.arange(3), 20)] * 3 + rng.normal(size=(60, 10))
    steps = []

    class Spy(torch.optim.Adam):
        def step(self, closure=None):
            steps.append(self.param_groups[0]["lr"])
            return super().step(closure)

    real = torch.optim.Adam
    try:
        torch.optim.Adam = Spy
        a = gbe.fit_gbe(Y, 8, similarity="perplexity", perplexity=5.0, lr=0.5, max_iter=40, tol=0.0,
                        rng=1, dtype=torch.float64, schedule="cosine")
    finally:
        torch.optim.Adam = real
    assert steps[0] == pytest.approx(0.5) and all(x > y for x, y in zip(steps, steps[1:], strict=False))
    assert steps[-1] < 0.01
    b = gbe.fit_gbe(Y, 8, similarity="perplexity", perplexity=5.0, lr=0.5, max_iter=40, tol=0.0,
                    rng=1, dtype=torch.float64, schedule="cosine")
    assert np.array_equal(a.codes, b.codes) and a.loss[-1][1] < a.loss[0][1]
    with pytest.raises(ValueError, match="gbe_schedule must be"):
        gbe.fit_gbe(Y, 8, schedule="linear")


@pytest.mark.parametrize("kind", ["clip", "perplexity"])
@pytest.mark.parametrize("rho", [2.0, 0.5])
def test_exaggeration_scales_the_attraction_and_is_the_gradient_of_its_loss(kind, rho):
    """``exaggeration`` rho: the loss rho * KL + (1 - rho) log Z and its exact gradient (autograd), in
    both solvers (the sampled one exact when the draws cover every pair); rho = 1 is the paper's."""
    n = 37
    Y, H, _ = _setup(n=n)
    S = gbe.PairSimilarity(Y, kind, perplexity=3.0, chunk_size=7)
    P = S.block(0, n) if kind == "perplexity" else _dense_p(Y, kind)
    Hr = H.clone().requires_grad_()
    ref = gbe.gbe_loss_dense(Hr, P, gamma=0.3, exaggeration=rho)
    ref.backward()
    plain = gbe.gbe_loss_and_grad(H, S, gamma=0.3, chunk_size=7)
    S.exaggeration = rho
    loss, grad = gbe.gbe_loss_and_grad(H, S, gamma=0.3, chunk_size=7)
    assert loss == pytest.approx(float(ref), rel=1e-10)
    torch.testing.assert_close(grad, Hr.grad, rtol=1e-9, atol=1e-12)
    assert not torch.allclose(grad, plain[1])
    Ss = gbe_sampled.SampledSimilarity(Y, kind, n_neighbors=4, chunk_size=7, perplexity=3.0)
    Ss.exaggeration = rho
    J = torch.arange(n).repeat(-(-n // 11), 1)
    for sampled in (gbe_sampled.gbe_loss_and_grad_sampled, gbe_sampled.gbe_loss_and_grad_sampled_batched):
        l2, g2 = sampled(H, Ss, J, 0.3, chunk_size=11)
        assert l2 == pytest.approx(loss, rel=1e-10)
        torch.testing.assert_close(g2, grad, rtol=1e-9, atol=1e-12)


def test_exaggeration_one_is_the_paper_loss_and_bad_values_are_refused():
    rng = np.random.default_rng(0)
    Y = rng.standard_normal((60, 5))
    kw = dict(similarity="perplexity", perplexity=5.0, max_iter=20, rng=0, init="projection")
    a = gbe.fit_gbe(Y, 8, **kw)
    b = gbe.fit_gbe(Y, 8, exaggeration=1.0, **kw)
    np.testing.assert_array_equal(a.relaxed, b.relaxed)
    c = gbe.fit_gbe(Y, 8, exaggeration=2.0, **kw)
    assert not np.array_equal(a.relaxed, c.relaxed)
    for bad in (0, -1.0, float("nan"), float("inf"), "2", True):
        with pytest.raises(ValueError, match="gbe_exaggeration must be a positive number"):
            gbe.fit_gbe(Y, 8, exaggeration=bad, **kw)
