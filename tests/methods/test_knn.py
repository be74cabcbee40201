"""The torch neighbour search used on a GPU (dmh.methods.knn) against the CPU references: run here
on torch's CPU device, which executes the same code as on CUDA."""
import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from dmh.methods import gbe, knn
from dmh.methods.knn import knn_torch


@pytest.mark.parametrize("exclude_self", [True, False])
def test_indices_match_the_numpy_search(exclude_self):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 7))
    X[10] = X[11]  # a duplicate pair: each is the other's nearest, at distance 0
    Q = X if exclude_self else rng.normal(size=(50, 7))
    ref = knn._knn(X, Q, 6, exclude_self=exclude_self)
    got = knn_torch(X, Q, 6, exclude_self=exclude_self, device="cpu", chunk=64)  # several blocks
    # where the two copies tie at the last place either may be kept (both searches are exact)
    tie = np.isin(ref[:, -1], [10, 11]) & (np.isin(ref, [10, 11]).sum(1) == 1)
    np.testing.assert_array_equal(got[~tie], ref[~tie])
    np.testing.assert_array_equal(got[tie][:, :-1], ref[tie][:, :-1])
    assert np.isin(got[tie][:, -1], [10, 11]).all()
    if exclude_self:
        assert 10 not in got[10] and 11 in got[10]
    # the same through the CPU entry point
    np.testing.assert_array_equal(knn._knn(X, Q, 6, exclude_self=exclude_self, device="cpu"), ref)


def test_float64_distances_match_scikit_learn():
    rng = np.random.default_rng(1)
    Y = rng.normal(size=(400, 16)) + 3.0  # an offset makes float32 products lose digits
    dist, ref = NearestNeighbors(n_neighbors=31).fit(Y).kneighbors(Y)
    idx, sq = knn_torch(Y, Y, 30, exclude_self=True, device="cpu", return_sq_dist=True)
    np.testing.assert_array_equal(idx, ref[:, 1:])
    np.testing.assert_allclose(sq, dist[:, 1:] ** 2, rtol=1e-12)


def test_perplexity_similarity_is_the_same_through_the_torch_search(monkeypatch):
    Y = np.random.default_rng(2).normal(size=(250, 10))
    ref = gbe.perplexity_similarity(Y, 10.0)
    import dmh.methods.knn as knn_mod

    calls = []
    real = knn_mod.knn_torch

    def on_cpu(*a, **kw):  # the GPU branch, run on torch's CPU device
        calls.append(kw["device"])
        return real(*a, **{**kw, "device": "cpu"})

    monkeypatch.setattr(knn_mod, "knn_torch", on_cpu)
    got = gbe.perplexity_similarity(Y, 10.0, device="cuda")
    assert calls == ["cuda"]
    np.testing.assert_array_equal(got.indices, ref.indices)
    np.testing.assert_allclose(got.toarray(), ref.toarray(), rtol=1e-10, atol=1e-15)


@pytest.mark.cuda
def test_cle_neighbours_on_cuda_match_the_cpu():
    rng = np.random.default_rng(3)
    Zs = [rng.normal(size=(500, 40)), rng.normal(size=(500, 30))]
    masks = [np.ones(500, bool), np.ones(500, bool)]
    masks[0][:100] = False  # text-only objects
    np.testing.assert_array_equal(knn.find_neighbours(Zs, masks, 3, 10, device="cuda"),
                                  knn.find_neighbours(Zs, masks, 3, 10))


def test_drop_self_removes_the_query_or_else_the_last_entry():
    from dmh.methods.knn import drop_self

    idx = np.array([[0, 5, 6], [7, 1, 8], [3, 4, 9]])  # rows 0 and 1 hold themselves, row 2 does not
    dist = np.arange(9.0).reshape(3, 3)
    got, d = drop_self(idx, dist)
    np.testing.assert_array_equal(got, [[5, 6], [7, 8], [3, 4]])
    np.testing.assert_array_equal(d, [[1, 2], [3, 5], [6, 7]])


@pytest.mark.parametrize(("n", "k"), [(300, 6), (130, 40)])
def test_symmetric_self_search_matches_the_row_block_search(n, k, monkeypatch):
    # from SYMMETRIC_MIN_N objects on, a set's search among itself multiplies each pair of row blocks
    # once; the neighbours are the reference search's (several blocks, a partial last one; k above
    # a block's width in the second case)
    rng = np.random.default_rng(2)
    X = rng.normal(size=(n, 9))
    X[10] = X[11]  # a duplicate pair: each is the other's nearest, at distance 0
    ref = knn._knn(X, X, k, exclude_self=True)
    got = knn._knn_self_symmetric(X, k, chunk=32)
    np.testing.assert_array_equal(got, ref)
    monkeypatch.setattr(knn, "SYMMETRIC_MIN_N", n)  # the entry point takes it from that size on
    calls = []
    monkeypatch.setattr(knn, "_knn_self_symmetric", lambda *a, **kw: calls.append(1) or got)
    assert knn._knn(X, X, k, exclude_self=True) is got and calls
    knn._knn(X, X.copy(), k, exclude_self=True)  # another array: the row-block search
    monkeypatch.setattr(knn, "SYMMETRIC_MIN_N", n + 1)
    knn._knn(X, X, k, exclude_self=True)
    assert len(calls) == 1
