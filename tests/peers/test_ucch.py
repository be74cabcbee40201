import numpy as np
import pytest
import torch

from dmh.peers.ucch import BinaryMemory, crl_loss, nce_loss

from . import _helpers as h

PARAMS = {"epochs": 12, "image_hidden": (16,), "text_hidden": (16,), "batch_size": 16, "n_negatives": 32,
          "lr": 1e-3}


def test_crl_loss_matches_loops():
    g = torch.Generator().manual_seed(0)
    u = torch.nn.functional.normalize(torch.randn(5, 4, generator=g), dim=1)
    v = torch.nn.functional.normalize(torch.randn(5, 4, generator=g), dim=1)
    margin, shift = 0.2, 1.0
    s = (u @ v.T).numpy().astype(np.float64)
    m = 5
    rows = cols = 0.0
    for i in range(m):
        c_row = [s[i, j] if s[i, j] >= s[i, i] - margin else s[i, j] - shift for j in range(m)]
        rows += -s[i, i] + np.log(sum(np.exp(x) for x in c_row)) + margin
        c_col = [s[j, i] if s[j, i] >= s[i, i] - margin else s[j, i] - shift for j in range(m)]
        cols += -s[i, i] + np.log(sum(np.exp(x) for x in c_col)) + margin
    expected = rows / m + cols / m
    assert float(crl_loss(u, v, margin, shift)) == pytest.approx(expected, rel=1e-5)


def test_memory_scores_and_update_match_definition():
    g = torch.Generator().manual_seed(1)
    mem = BinaryMemory(10, 4, g, "cpu")
    np.testing.assert_allclose(mem.memory.norm(dim=1).numpy(), 1.0, rtol=1e-6)
    u = torch.nn.functional.normalize(torch.randn(3, 4, generator=g), dim=1)
    v = torch.nn.functional.normalize(torch.randn(3, 4, generator=g), dim=1)
    idx = torch.tensor([2, 5, 7])
    g1 = torch.Generator().manual_seed(9)
    out_u, out_v = mem.scores(u, v, idx, 6, 2.0, g1, in_batch=False)
    g2 = torch.Generator().manual_seed(9)
    neg = torch.randint(0, 10, (3, 6), generator=g2)
    for i in range(3):
        cand = [int(idx[i])] + [int(j) for j in neg[i]]
        for col, j in enumerate(cand):
            b = torch.where(mem.memory[j] > 0, 1.0, -1.0)
            assert float(out_u[i, col]) == pytest.approx(float(b @ u[i]) / 2.0, abs=1e-6)
            assert float(out_v[i, col]) == pytest.approx(float(b @ v[i]) / 2.0, abs=1e-6)
    before = mem.memory.clone()
    mem.update(u, v, idx, 0.4)
    for i, j in enumerate(idx.tolist()):
        new = torch.nn.functional.normalize((u[i] + v[i]) / 2, dim=0)
        want = torch.nn.functional.normalize(0.4 * before[j] + 0.6 * new, dim=0)
        np.testing.assert_allclose(mem.memory[j].numpy(), want.numpy(), atol=1e-6)
    untouched = [j for j in range(10) if j not in idx.tolist()]
    np.testing.assert_array_equal(mem.memory[untouched].numpy(), before[untouched].numpy())
    # in-batch (warm-up) negatives: column 0 is the object itself
    out_u, _ = mem.scores(u, v, idx, 6, 1.0, g1, in_batch=True)
    assert out_u.shape == (3, 3)
    w = torch.where((u + v) / 2 > 0, 1.0, -1.0)
    np.testing.assert_allclose(out_u[:, 0].numpy(), (w * u).sum(1).numpy(), atol=1e-6)
    assert float(nce_loss(torch.tensor([[10.0, 0.0, 0.0]]))) < 1e-3


def test_loss_decreases_after_warmup():
    model = h.fit("ucch", h.toy(), **PARAMS)
    hist = model.loss_history_
    assert hist.shape == (12,)
    assert hist[-1] < hist[1]  # epoch 0 is the in-batch warm-up, on another scale


def test_codes():
    h.check_codes("ucch", PARAMS)


def test_same_seed_same_codes():
    h.check_same_seed("ucch", PARAMS)


def test_save_load(tmp_path):
    h.check_save_load("ucch", PARAMS, tmp_path)


def test_bad_input():
    h.check_bad_input("ucch", PARAMS)
    with pytest.raises(ValueError, match="lr_milestones"):
        h.fit("ucch", h.toy(), lr_milestones=(0,), **PARAMS)


def test_input_scaling_none_feeds_features_as_given():
    """``input_scaling="none"`` (the authors' setting) leaves the features as they are; ``"feature"``
    z-scores them with the training statistics; either is saved, so encoding applies the same."""
    data = h.toy()
    raw = h.fit("ucch", data, **PARAMS)
    z = h.fit("ucch", data, input_scaling="feature", **PARAMS)
    for m in ("image", "text"):
        mu, sd = raw.scalers_[m]
        np.testing.assert_array_equal(mu, 0.0)
        np.testing.assert_array_equal(sd, 1.0)
        X = data.view(m)
        np.testing.assert_allclose(z.scalers_[m][0], X.mean(0))
        np.testing.assert_allclose(z.scalers_[m][1], X.std(0))
    with pytest.raises(ValueError, match="input_scaling"):
        h.fit("ucch", data, input_scaling="rows", **PARAMS)
