"""The deep peers' sparse first layer: a bag of words trains through the columns it touches, the same
function and gradients as the dense layer, and the fitted model is the plain one."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from dmh import CrossModalData, load_model  # noqa: E402
from dmh.peers import _deep  # noqa: E402
from dmh.registry import make_method  # noqa: E402


def bag_of_words(n=96, vocab=300, words=4, seed=0):
    """Image features near 4 cluster centres; texts of a few words drawn mostly from the cluster's."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(4), n // 4)
    image = np.abs(rng.normal(size=(4, 12))[y] * 3 + rng.normal(size=(n, 12)))
    text = np.zeros((n, vocab))
    for i, c in enumerate(y):
        own = rng.integers(c * 60, (c + 1) * 60, size=words - 1)
        text[i, own] = 1.0
        text[i, rng.integers(vocab)] = 1.0
    return CrossModalData(image=image, text=text, labels=y)


def test_active_columns_layer_matches_dense():
    rng = np.random.default_rng(0)
    x = torch.zeros(16, 200)
    for i in range(16):
        x[i, rng.choice(200, size=3, replace=False)] = torch.as_tensor(rng.random(3), dtype=torch.float32)
    dense = _deep.HashMLP(200, (32,), 8)
    sparse = _deep.HashMLP(200, (32,), 8)
    sparse.load_state_dict(dense.state_dict())
    sparse.use_sparse_input(True)
    assert sparse.body[0].weight_t.shape == (200, 32)
    out_d, out_s = dense(x), sparse(x)
    torch.testing.assert_close(out_s, out_d, rtol=1e-5, atol=1e-6)
    out_d.pow(2).sum().backward()
    out_s.pow(2).sum().backward()
    torch.testing.assert_close(sparse.body[0].weight_t.grad.t(), dense.body[0].weight.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sparse.body[0].bias.grad, dense.body[0].bias.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(sparse.body[2].weight.grad, dense.body[2].weight.grad, rtol=1e-5, atol=1e-6)
    # a dense batch takes the plain product through the transposed weight
    xd = torch.as_tensor(rng.random((4, 200)), dtype=torch.float32)
    torch.testing.assert_close(sparse(xd), dense(xd), rtol=1e-5, atol=1e-6)
    sparse.use_sparse_input(False)
    assert isinstance(sparse.body[0], torch.nn.Linear) and sparse.body[0].weight.shape == (32, 200)
    torch.testing.assert_close(sparse.state_dict()["body.0.weight"], dense.state_dict()["body.0.weight"])


def test_density_rule():
    assert _deep.is_sparse(torch.as_tensor(bag_of_words().text, dtype=torch.float32))
    assert not _deep.is_sparse(torch.ones(5, 10))
    assert not _deep.is_sparse(torch.zeros(0, 10))


@pytest.mark.parametrize("name", ["jdsh", "ucch"])
def test_sparse_path_fits_the_dense_model(name, monkeypatch, tmp_path):
    """The same seed on the sparse and the dense path gives the same codes (rounding aside), and the
    saved model reloads as the plain networks."""
    data = bag_of_words()
    params = {"epochs": 6, "image_hidden": (16,), "text_hidden": (64,), "batch_size": 16}
    taken = []
    real = _deep.HashMLP.use_sparse_input

    def spy(self, sparse):
        taken.append(sparse)
        real(self, sparse)

    monkeypatch.setattr(_deep.HashMLP, "use_sparse_input", spy)
    model = make_method(name, n_bits=16, random_state=0, **params).fit(data)
    assert taken[:2] == [False, True]  # image dense, text sparse
    monkeypatch.setattr(_deep, "is_sparse", lambda X: False)
    plain = make_method(name, n_bits=16, random_state=0, **params).fit(data)
    for m in ("image", "text"):
        a, b = model.encode(data.view(m), modality=m), plain.encode(data.view(m), modality=m)
        assert (a == b).mean() >= 0.99
        assert len(np.unique(a, axis=0)) >= 4  # the comparison is of codes that tell objects apart
    assert all(isinstance(net.body[0], torch.nn.Linear) for net in model.nets_.values())
    model.save(tmp_path / "m")
    again = load_model(tmp_path / "m")
    np.testing.assert_array_equal(again.encode(data.text, modality="text"), model.encode(data.text, modality="text"))
