"""Exact top-k by range search (dmh._topk, the faiss backend of HammingIndex) against the numpy
backend's brute force: every code length, heavy ties, ids unrelated to insertion order."""

import numpy as np
import pytest

from dmh import _topk
from dmh.index import HammingIndex, available_backends

from .conftest import skip_unless

pytestmark = skip_unless("faiss" in available_backends(), "faiss", "faiss-cpu is not installed")


def clustered_codes(rng, n, n_bits, n_centres=30, flip=0.05):
    """{-1,+1} codes around a few centres: many exact duplicates and ties at every distance."""
    centres = np.where(rng.random((n_centres, n_bits)) > 0.5, 1, -1).astype(np.int8)
    codes = centres[rng.integers(0, n_centres, n)]
    flips = rng.random(codes.shape) < flip
    return np.where(flips, -codes, codes).astype(np.int8)


def assert_same(a, b, queries, k):
    da, ia = a.search(queries, k)
    db, ib = b.search(queries, k)
    np.testing.assert_array_equal(da, db)
    np.testing.assert_array_equal(ia, ib)


@pytest.mark.parametrize("n_bits", [8, 16, 24, 32, 40, 64, 72, 128, 136])
def test_range_topk_equals_brute_force_every_length(n_bits):
    # more codes than the radius sample, so the radius is estimated (not exact)
    rng = np.random.default_rng(n_bits)
    n = _topk.SAMPLE_SIZE + 3000
    codes = np.concatenate([clustered_codes(rng, n // 2, n_bits),
                            np.where(rng.random((n - n // 2, n_bits)) > 0.5, 1, -1).astype(np.int8)])
    ids = rng.permutation(3 * n)[:n]
    queries = np.concatenate([clustered_codes(rng, 12, n_bits), codes[:4],
                              np.where(rng.random((8, n_bits)) > 0.5, 1, -1)])
    a = HammingIndex(n_bits, backend="numpy").add(codes, ids)
    b = HammingIndex(n_bits, backend="faiss").add(codes, ids)
    for k in (1, 100, 2500):
        assert_same(a, b, queries, k)


def test_small_index_uses_exact_radius_and_k_equal_n():
    rng = np.random.default_rng(7)
    codes = clustered_codes(rng, 500, 32)
    a = HammingIndex(32, backend="numpy").add(codes)
    b = HammingIndex(32, backend="faiss").add(codes)
    queries = clustered_codes(rng, 25, 32)
    for k in (3, 499, 500, 600):
        assert_same(a, b, queries, k)


def test_poor_radius_estimates_are_retried(monkeypatch):
    """First radii made too small (a tiny sample, then 4 less): the retries must still give the
    exact answer, and they must have happened."""
    monkeypatch.setattr(_topk, "SAMPLE_SIZE", 40)
    estimate = _topk.estimate_radius

    def too_small(sample_dist, n, k, n_bits, factor=1.0):
        radius = estimate(sample_dist, n, k, n_bits, factor)
        return np.maximum(radius - 4, 0) if factor == 1.0 else radius

    monkeypatch.setattr(_topk, "estimate_radius", too_small)
    calls = []
    real = HammingIndex._faiss_range_raw

    def spy(self, padded, radius):
        calls.append((padded.shape[0], radius))
        return real(self, padded, radius)

    monkeypatch.setattr(HammingIndex, "_faiss_range_raw", spy)
    rng = np.random.default_rng(11)
    codes = np.where(rng.random((5000, 64)) > 0.5, 1, -1).astype(np.int8)
    queries = np.where(rng.random((200, 64)) > 0.5, 1, -1).astype(np.int8)
    a = HammingIndex(64, backend="numpy").add(codes)
    b = HammingIndex(64, backend="faiss").add(codes)
    assert_same(a, b, queries, 50)
    assert sum(n for n, _ in calls) > len(queries), "no query needed a second range search"


def test_estimate_radius_is_exact_on_the_whole_database():
    rng = np.random.default_rng(2)
    dist = rng.integers(0, 17, size=(6, 300))
    radius = _topk.estimate_radius(dist, 300, 37, 16)
    np.testing.assert_array_equal(radius, np.sort(dist, axis=1)[:, 36])


@pytest.mark.parametrize("code_size, size", [(1, 4), (2, 4), (3, 4), (5, 8), (8, 8), (9, 16), (17, 20),
                                             (21, 32), (33, 64), (65, 72), (100, 104)])
def test_padded_size(code_size, size):
    assert _topk.padded_size(code_size) == size
