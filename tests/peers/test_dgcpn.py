import copy
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from dmh.peers.dgcpn import DGCPN, dgcpn_loss, dgcpn_similarity, neighbour_weights

from . import _helpers as h

PARAMS = {"epochs": 6, "image_hidden": (16,), "text_hidden": (16,), "batch_size": 16}


def signed_toy():
    """Signed features: cosines spread over [-1, 1]. (On the non-negative toy every cosine is high,
    S is positive almost everywhere and one shared code is DGCPN's optimum.)"""
    return h.toy(positive=False)


def _cos(a, b):
    return a @ b / np.linalg.norm(a) / np.linalg.norm(b)


def test_similarity_matches_loops():
    """The authors' construction: each row drops its n - k smallest entries and its largest, the
    rest normalised to sum 1; coherence = scale P P^T with scale = coherence_scale * k."""
    rng = np.random.default_rng(3)
    n, k, a1, a2, c = 7, 4, 0.2, 0.3, 2.0
    Fi, Ft = rng.random((n, 4)), rng.random((n, 3))
    Sp = np.array([[a1 * _cos(Ft[i], Ft[j]) + (1 - a1) * _cos(Fi[i], Fi[j]) for j in range(n)] for i in range(n)])
    P = np.zeros((n, n))
    for i in range(n):
        ranked = sorted(range(n), key=lambda j: Sp[i, j])  # ascending
        for j in ranked[n - k:n - 1]:  # the k largest less the largest
            P[i, j] = Sp[i, j]
        P[i] /= P[i].sum()
    expected = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            coherence = c * k * sum(P[i, m] * P[j, m] for m in range(n))
            expected[i, j] = 2 * ((1 - a2) * Sp[i, j] + a2 * coherence) - 1
    np.testing.assert_allclose(neighbour_weights(Sp, k), P, atol=1e-12)
    np.testing.assert_allclose(dgcpn_similarity(Fi, Ft, a1, a2, k, c), expected, atol=1e-12)
    # the largest entry of each row (the object itself) is not its own neighbour
    assert (np.diag(neighbour_weights(Sp, k)) == 0).all()


def test_neighbour_weights_rows_sum_to_one_or_zero():
    S = np.random.default_rng(0).random((7, 7))
    P = neighbour_weights(S, 3)
    np.testing.assert_allclose(P.sum(1), 1.0)
    assert ((P > 0).sum(1) == 2).all()
    assert not neighbour_weights(-S, 3).any()  # rows whose kept entries do not sum to > 0 stay zero


def test_loss_matches_loops():
    g = torch.Generator().manual_seed(0)
    m, bits = 5, 4
    ci, ct = torch.randn(m, bits, generator=g), torch.randn(m, bits, generator=g)
    S = torch.rand(m, m, generator=g) * 2 - 1
    K, dw, cw = 1.5, 0.7, 1.3
    bi = (ci / ci.norm(dim=1, keepdim=True)).double().numpy()
    bt = (ct / ct.norm(dim=1, keepdim=True)).double().numpy()
    s = S.double().numpy()
    def dot(a, b):
        return float(a @ b)

    def mse(f, g_):
        return sum((f(i, j) - g_(i, j)) ** 2 for i in range(m) for j in range(m)) / m ** 2

    def off(f):
        return (lambda i, j: 0.0 if i == j else f(i, j))
    def ii(i, j):
        return dot(bi[i], bi[j])
    def tt(i, j):
        return dot(bt[i], bt[j])
    def it(i, j):
        return dot(bi[i], bt[j])
    def target(i, j):
        return s[i, j]
    pair = sum((dot(bi[i], bt[i]) - K) ** 2 for i in range(m)) / m
    dis = mse(off(tt), off(target)) + mse(off(it), off(target)) + mse(off(ii), off(target))
    cons = mse(it, ii) + mse(it, tt) + mse(ii, tt) + mse(it, lambda i, j: it(j, i))
    expected = pair + dw * dis + cw * cons
    assert float(dgcpn_loss(ci, ct, S, K, dw, cw)) == pytest.approx(expected, rel=1e-5)


def test_three_step_update_matches_reference():
    """One batch: both networks on L(c_I, c_T); then, from a new forward pass, the image network on
    L(c_I, sign c_T) and the text network on L(sign c_I, c_T), each an SGD step of its own."""
    from dmh.peers import _deep

    model = DGCPN(8, dropout=0.0, image_hidden=(6,), text_hidden=(5,))
    nets = _deep.make_nets({"image": 4, "text": 3}, {"image": (6,), "text": (5,)}, 8, 0, torch.device("cpu"))
    ref = copy.deepcopy(nets)
    lr = {"image": 0.05, "text": 0.1}
    opts = {m: torch.optim.SGD(nets[m].parameters(), lr=lr[m]) for m in nets}
    g = torch.Generator().manual_seed(1)
    xi, xt = torch.rand(6, 4, generator=g), torch.rand(6, 3, generator=g)
    S = torch.rand(6, 6, generator=g) * 2 - 1
    first = model._update(SimpleNamespace(nets=nets, opts=opts), xi, xt, S)

    def sgd(net, loss, rate):
        grads = torch.autograd.grad(loss, list(net.parameters()))
        with torch.no_grad():
            for w, gw in zip(net.parameters(), grads, strict=True):
                w -= rate * gw

    def L(a, b):
        return dgcpn_loss(a, b, S)
    loss = L(ref["image"](xi), ref["text"](xt))
    gi = torch.autograd.grad(loss, list(ref["image"].parameters()), retain_graph=True)
    gt = torch.autograd.grad(loss, list(ref["text"].parameters()))
    with torch.no_grad():
        for net, grads in ((ref["image"], gi), (ref["text"], gt)):
            for w, gw in zip(net.parameters(), grads, strict=True):
                w -= lr["image" if net is ref["image"] else "text"] * gw
    ci, ct = ref["image"](xi), ref["text"](xt)
    ci_sign = ci.detach().sign()
    sgd(ref["image"], L(ci, ct.detach().sign()), lr["image"])
    sgd(ref["text"], L(ci_sign, ct), lr["text"])
    assert first == pytest.approx(float(loss.detach()))
    for m in nets:
        for a, b in zip(nets[m].parameters(), ref[m].parameters(), strict=True):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), atol=1e-6)


def test_architecture_dropout_and_text_init():
    model = h.fit("dgcpn", signed_toy(), **{**PARAMS, "epochs": 1})
    for m in ("image", "text"):
        assert any(isinstance(layer, torch.nn.Dropout) and layer.p == 0.5 for layer in model.nets_[m].body)
    # the authors' N(0, 0.3^2) text hash layer (a few steps leave its spread near 0.3), PyTorch's default elsewhere
    assert model.nets_["text"].body[-1].weight.std() > 0.2
    assert model.nets_["image"].body[-1].weight.std() < 0.2


def test_loss_decreases():
    model = h.fit("dgcpn", signed_toy(), **PARAMS)
    assert model.loss_history_[-1] < 0.9 * model.loss_history_[0]
    assert model.n_neighbours_ == round(0.4 * 64)


def test_codes():
    h.check_codes("dgcpn", PARAMS, signed_toy())


def test_same_seed_same_codes():
    h.check_same_seed("dgcpn", PARAMS, signed_toy())


def test_save_load(tmp_path):
    model, loaded = h.check_save_load("dgcpn", PARAMS, tmp_path, signed_toy())
    assert loaded.n_neighbours_ == model.n_neighbours_


def test_bad_input():
    h.check_bad_input("dgcpn", PARAMS)
    with pytest.raises(ValueError, match="knn_fraction"):
        h.fit("dgcpn", h.toy(), knn_fraction=0.0, **PARAMS)
    with pytest.raises(ValueError, match="dropout"):
        h.fit("dgcpn", h.toy(), dropout=1.0, **PARAMS)
