import numpy as np
import pytest
import torch

from dmh.methods import dam


def _problem(n=200, d=10, bits=8, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)).astype(np.float32)
    H = np.where(X @ rng.normal(size=(d, bits)) > 0, 1.0, -1.0).astype(np.float32)  # learnable codes
    torch.manual_seed(seed)
    return dam.make_net("image", d, bits, (32,)), X, H


def _train(net, X, H, **kw):
    agreement = []
    losses, _ = dam.train_net(net, X, H, epochs=kw.pop("epochs", 30), lr=1e-2, batch_size=32,
                              generator=torch.Generator().manual_seed(0), agreement=agreement, **kw)
    return losses, agreement


def test_agreement_recorded_and_rising():
    net, X, H = _problem()
    losses, agreement = _train(net, X, H, epochs=8)
    assert len(losses) == len(agreement) == 8
    assert all(0.0 <= a <= 1.0 for a in agreement)
    assert agreement[-1] > agreement[0] and agreement[-1] > 0.9


def test_agreement_rule_stops_when_gain_is_small():
    net, X, H = _problem()
    _, agreement = _train(net, X, H, epochs=200, agree_tol=0.01)
    assert 2 <= len(agreement) < 200
    gains = np.diff(agreement)
    assert gains[-1] < 0.01 and np.all(gains[:-1] >= 0.01)


def test_agreement_rule_first_epoch_against_reference():
    net, X, H = _problem()
    _train(net, X, H, epochs=30)
    # a network that already reproduces its targets stops after one pass when it is back at the
    # agreement it had reached before ...
    _, agreement = _train(net, X, H, epochs=30, agree_tol=1e-3, agree_ref=0.5)
    assert len(agreement) == 1
    # ... and goes on while below it
    net2, X2, H2 = _problem(seed=1)
    _, agreement = _train(net2, X2, H2, epochs=30, agree_tol=1e-3, agree_ref=1.0)
    assert len(agreement) > 1


def test_fixed_epochs_without_rule():
    net, X, H = _problem()
    losses, agreement = _train(net, X, H, epochs=5)
    assert len(losses) == 5


@pytest.mark.parametrize("modality", ["image", "text"])
def test_lean_kernels_same_outputs_and_gradients(modality):
    rng = np.random.default_rng(0)
    X = torch.as_tensor(rng.normal(size=(16, 120)).astype(np.float32))
    H = torch.as_tensor(np.sign(rng.normal(size=(16, 8))).astype(np.float32))
    outs, grads = {}, {}
    for lean in (False, True):
        torch.manual_seed(0)
        net = dam.make_net(modality, 120, 8, (32,))
        net.lean = lean
        assert all(m.lean == lean for m in net.modules() if isinstance(m, dam.LRN))
        out = net(X)
        ((out - H) ** 2).sum(1).mean().backward()
        outs[lean] = out.detach()
        grads[lean] = {k: p.grad.clone() for k, p in net.named_parameters()}
    torch.testing.assert_close(outs[True], outs[False], rtol=1e-5, atol=1e-6)
    assert grads[False].keys() == grads[True].keys()
    for k in grads[False]:
        torch.testing.assert_close(grads[True][k], grads[False][k], rtol=1e-4, atol=1e-6)
    if modality == "text":
        assert grads[True]["fusion.scale"].abs().sum() > 0  # the pooled channels do get their gradient


def test_lean_lrn_matches_torch():
    x = torch.relu(torch.as_tensor(np.random.default_rng(0).normal(size=(8, 300)).astype(np.float32)) * 30)
    plain, lean = dam.LRN(5, 1e-4, 0.75, 2.0), dam.LRN(5, 1e-4, 0.75, 2.0)
    lean.lean = True
    torch.testing.assert_close(lean(x), plain(x))


def test_lean_fusion_text_shorter_than_every_kernel():
    torch.manual_seed(0)
    net = dam.make_net("text", 4, 8, (16,))  # no pooled channel at all
    net.lean = True
    X = np.random.default_rng(0).normal(size=(20, 4)).astype(np.float32)
    losses, _ = dam.train_net(net, X, np.ones((20, 8), np.float32), epochs=2, lr=1e-2, batch_size=8,
                              generator=torch.Generator().manual_seed(0))
    assert len(losses) == 2


@pytest.mark.parametrize("modality", ["image", "text"])
def test_lean_hidden_weight_gradient_kept_in_place_and_accumulates(modality):
    """The first hidden layer's weight gradient goes into one kept buffer (no fresh 64 MiB tensor
    per step at paper scale) and still behaves as autograd's: it accumulates over backward passes
    and equals the plain network's after a zeroing."""
    rng = np.random.default_rng(1)
    X = torch.as_tensor(rng.normal(size=(16, 120)).astype(np.float32))
    H = torch.as_tensor(np.sign(rng.normal(size=(16, 8))).astype(np.float32))
    torch.manual_seed(0)
    plain = dam.make_net(modality, 120, 8, (32,))
    lean = dam.make_net(modality, 120, 8, (32,))
    lean.load_state_dict(plain.state_dict())
    lean.lean = True

    def step(net):
        ((net(X) - H) ** 2).sum(1).mean().backward()

    step(plain)
    step(lean)
    first = lean.body[0].weight
    buffer = first.grad.data_ptr()
    step(plain)  # second pass without zeroing: autograd accumulates
    step(lean)
    torch.testing.assert_close(first.grad, plain.body[0].weight.grad, rtol=1e-4, atol=1e-6)
    assert first.grad.data_ptr() == buffer
    lean.zero_grad(set_to_none=False)
    plain.zero_grad(set_to_none=True)
    step(plain)
    step(lean)
    assert first.grad.data_ptr() == buffer
    torch.testing.assert_close(first.grad, plain.body[0].weight.grad, rtol=1e-4, atol=1e-6)


@pytest.mark.parametrize(("modality", "d"), [("image", 120), ("text", 120), ("text", 3)])
def test_kept_gradient_marked_zero_trains_bit_for_bit_as_written_zeros(modality, d, monkeypatch):
    """Training marks the kept first-layer gradient as zero instead of writing zeros (the next
    product overwrites it): the trained weights are those of zeroing every gradient in place, bit
    for bit, also where the network takes autograd's own path (text too short to pool)."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(70, d)).astype(np.float32)
    H = np.sign(rng.normal(size=(70, 8))).astype(np.float32)

    def trained():
        torch.manual_seed(0)
        net = dam.make_net(modality, d, 8, (32,))
        net.lean = True
        dam.train_net(net, X, H, epochs=3, lr=1e-2, batch_size=16, generator=torch.Generator().manual_seed(0))
        return net

    marked = trained()
    kept = marked.kept_grad_weight
    assert (kept is None) == (d == 3)
    monkeypatch.setattr(dam, "_zero_grads", lambda opt, kept: opt.zero_grad(set_to_none=False))
    written = trained()
    for (name, a), b in zip(marked.state_dict().items(), written.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("modality", ["image", "text"])
@pytest.mark.parametrize("lean", [False, True])
def test_bf16_products_close_to_float32_and_state_stays_float32(modality, lean):
    """``precision="bfloat16"``: the first layer's products in bfloat16; outputs and gradients
    follow float32 to bfloat16's rounding (8 bits of mantissa), every parameter and gradient is
    float32, and outputs without gradients (codes, features) are the float32 network's exactly."""
    rng = np.random.default_rng(2)
    X = torch.as_tensor(rng.normal(size=(32, 200)).astype(np.float32))
    H = torch.as_tensor(np.sign(rng.normal(size=(32, 8))).astype(np.float32))
    outs, grads = {}, {}
    for precision in ("float32", "bfloat16"):
        torch.manual_seed(0)
        net = dam.make_net(modality, 200, 8, (64,))
        net.lean = lean
        net.precision = precision
        assert net.precision == precision
        out = net(X)
        ((out - H) ** 2).sum(1).mean().backward()
        outs[precision] = out.detach()
        grads[precision] = {k: p.grad.clone() for k, p in net.named_parameters()}
        assert all(p.dtype == torch.float32 and p.grad.dtype == torch.float32 for p in net.parameters())
        with torch.no_grad():
            outs[precision + "-nograd"] = net(X)
    assert torch.equal(outs["float32-nograd"], outs["bfloat16-nograd"])
    assert not torch.equal(outs["float32"], outs["bfloat16"])  # the bfloat16 path did run
    torch.testing.assert_close(outs["bfloat16"], outs["float32"], rtol=0, atol=2e-2)
    for k, g in grads["float32"].items():
        rel = float((grads["bfloat16"][k] - g).norm() / g.norm().clamp_min(1e-12))
        assert rel < 0.1, (k, rel)  # 2-5 % here: the gradients sum 32 rows that largely cancel


def test_bf16_weight_gradient_buffers_kept_and_accumulate():
    """The bfloat16 path keeps its buffers across steps (the training loop sets gradients to None,
    the next backward puts the same float32 buffer back) and accumulates as autograd does."""
    rng = np.random.default_rng(3)
    X = torch.as_tensor(rng.normal(size=(16, 120)).astype(np.float32))
    H = torch.as_tensor(np.sign(rng.normal(size=(16, 8))).astype(np.float32))
    torch.manual_seed(0)
    net = dam.make_net("image", 120, 8, (32,))
    net.precision = "bfloat16"
    assert not net.keeps_weight_grad

    def step():
        ((net(X) - H) ** 2).sum(1).mean().backward()

    first = net.body[0].weight
    step()
    once = first.grad.clone()
    buffer = first.grad.data_ptr()
    step()  # no zeroing: accumulates
    torch.testing.assert_close(first.grad, 2 * once, rtol=1e-2, atol=1e-6)
    net.zero_grad(set_to_none=True)
    step()
    assert first.grad.data_ptr() == buffer
    torch.testing.assert_close(first.grad, once)
    with pytest.raises(ValueError, match="precision"):
        net.precision = "float16"


def test_bf16_training_learns_and_repeats():
    """A bfloat16 fit learns the codes as the float32 one does and repeats bit for bit."""
    runs = []
    for _ in range(2):
        net, X, H = _problem()
        net.precision = "bfloat16"
        losses, agreement = _train(net, X, H)
        runs.append((losses, dam.net_outputs(net, X)))
    assert runs[0][0] == runs[1][0] and np.array_equal(runs[0][1], runs[1][1])
    net, X, H = _problem()
    losses32, _ = _train(net, X, H)
    assert runs[0][0][-1] < 0.5 * runs[0][0][0]
    assert runs[0][0][-1] < 2 * losses32[-1] + 0.05


def _bag_of_words(n=96, d=300, words=4, seed=0):
    """A standardised binary bag of words: each column its base value plus a few entries."""
    rng = np.random.default_rng(seed)
    X = np.zeros((n, d))
    for i in range(n):
        X[i, rng.choice(d, words, replace=False)] = 1.0
    mu, sd = X.mean(0), X.std(0)
    sd[sd < 1e-12] = 1.0
    return ((X - mu) / sd).astype(np.float32)


@pytest.mark.parametrize("modality", ["image", "text"])
@pytest.mark.parametrize("fusion_bias", [0.0, 0.4, -0.3])
def test_sparse_input_same_outputs_and_gradients_as_dense(modality, fusion_bias):
    """``use_sparse_input``: a standardised bag of words trains from its few entries; outputs and
    every gradient (the first layer's, the fusion's scales and biases, whatever their signs) are
    the dense network's up to rounding, and the weight gradient accumulates like autograd's."""
    X = torch.as_tensor(_bag_of_words())
    H = torch.sign(torch.randn(X.shape[0], 8, generator=torch.Generator().manual_seed(1)))
    torch.manual_seed(0)
    dense = dam.make_net(modality, X.shape[1], 8, (32,))
    if modality == "text":
        with torch.no_grad():
            dense.fusion.bias.fill_(fusion_bias)
            dense.fusion.scale.copy_(torch.tensor([1.0, -0.5, 2.0, 0.7, 1.3]))
    sparse = dam.make_net(modality, X.shape[1], 8, (32,))
    sparse.load_state_dict(dense.state_dict())
    base = dam.column_base(X)
    assert base is not None
    sparse.use_sparse_input(base)
    assert sparse.sparse_input and sparse.kept_grad_weight is sparse.body[0].weight_t

    for _ in range(2):  # the second backward accumulates
        for net in (dense, sparse):
            ((net(X) - H) ** 2).sum(1).mean().backward()
    torch.testing.assert_close(sparse(X), dense(X))
    torch.testing.assert_close(sparse.body[0].weight_t.grad.t(), dense.body[0].weight.grad, rtol=1e-4, atol=1e-6)
    torch.testing.assert_close(sparse.body[0].bias.grad, dense.body[0].bias.grad, rtol=1e-4, atol=1e-6)
    if modality == "text":
        for name in ("scale", "bias"):
            torch.testing.assert_close(getattr(sparse.fusion, name).grad, getattr(dense.fusion, name).grad,
                                       rtol=1e-4, atol=1e-6)
    # the state is an nn.Linear's throughout, and the plain layer comes back with the same weights
    assert sparse.state_dict()["body.0.weight"].shape == dense.body[0].weight.shape
    sparse.use_sparse_input(None)
    assert not sparse.sparse_input and type(sparse.body[0]) is torch.nn.Linear
    for (name, a), b in zip(sparse.state_dict().items(), dense.state_dict().values(), strict=True):
        assert torch.equal(a, b), name


def test_training_takes_the_sparse_path_only_for_a_lean_network_over_a_sparse_input():
    X, Xd = _bag_of_words(), np.random.default_rng(0).normal(size=(96, 300)).astype(np.float32)
    H = np.sign(np.random.default_rng(1).normal(size=(96, 8))).astype(np.float32)
    assert dam.column_base(torch.as_tensor(Xd)) is None
    for data, lean, expected in ((X, True, True), (X, False, False), (Xd, True, False)):
        torch.manual_seed(0)
        net = dam.make_net("text", 300, 8, (32,))
        net.lean = lean
        dam.train_net(net, data, H, epochs=1, lr=1e-2, batch_size=32, generator=torch.Generator().manual_seed(0))
        assert net.sparse_input is expected
    # trained the sparse way or the dense way: the same losses up to rounding
    runs = []
    for base in (True, False):
        torch.manual_seed(0)
        net = dam.make_net("text", 300, 8, (32,))
        net.lean = True
        if not base:
            net.use_sparse_input = lambda b: None  # keep it dense
        losses, _ = dam.train_net(net, X, H, epochs=3, lr=1e-2, batch_size=32,
                                  generator=torch.Generator().manual_seed(0))
        runs.append(losses)
    np.testing.assert_allclose(runs[0], runs[1], rtol=1e-4)


def test_contrastive_term_pulls_outputs_toward_their_partners():
    """``contrastive`` > 0 with ``partner``: the network also learns to pick each paired row's
    partner among the batch's (InfoNCE); rows without a partner (NaN) only copy their codes."""
    net0, X, H = _problem(n=128, d=10, bits=8)
    rng = np.random.default_rng(5)
    partner = rng.normal(size=(128, 8)).astype(np.float32)  # targets unrelated to the codes
    partner[::4] = np.nan
    state = {k: v.clone() for k, v in net0.state_dict().items()}
    pt = torch.nn.functional.normalize(torch.as_tensor(np.nan_to_num(partner)), dim=1)
    rows = torch.as_tensor(~np.isnan(partner).any(1))

    def nce_after(weight):
        net = dam.make_net("image", 10, 8, (32,))
        net.load_state_dict(state)
        dam.train_net(net, X, H, epochs=20, lr=1e-2, batch_size=32, generator=torch.Generator().manual_seed(0),
                      partner=partner, contrastive=weight)
        with torch.no_grad():
            return float(dam._info_nce(net(torch.as_tensor(X)), pt, rows))

    assert nce_after(2.0) < nce_after(0.0) - 0.5
    assert float(dam._info_nce(torch.ones(4, 8), pt[:4], torch.tensor([True, False, False, False]))) == 0.0
