"""HammingIndex: both backends against a brute-force reference, ties broken by id, round trips."""

import numpy as np
import pytest

from dmh.index import (
    HammingIndex,
    available_backends,
    load_codes,
    pack_codes,
    save_codes,
    unpack_codes,
)

from .conftest import skip_unless

BACKENDS = available_backends()
needs_faiss = skip_unless("faiss" in BACKENDS, "faiss", "faiss-cpu is not installed")


def random_codes(rng, n, n_bits):
    return np.where(rng.random((n, n_bits)) > 0.5, 1, -1).astype(np.int8)


def brute_force(queries, codes, ids):
    """Per query: (distances, ids) of every stored code ordered by (distance, id)."""
    out = []
    for q in queries:
        dist = (q[None, :] != codes).sum(axis=1)
        order = np.lexsort((ids, dist))
        out.append((dist[order], ids[order]))
    return out


@pytest.fixture
def data():
    rng = np.random.default_rng(0)
    codes = random_codes(rng, 300, 16)
    ids = rng.permutation(10_000)[:300]  # ids unrelated to insertion order
    queries = np.concatenate([random_codes(rng, 20, 16), codes[:3]])  # exact matches too
    return codes, ids, queries


def test_pack_unpack_round_trip():
    rng = np.random.default_rng(1)
    codes = random_codes(rng, 5, 24)
    packed = pack_codes(codes)
    assert packed.dtype == np.uint8 and packed.shape == (5, 3)
    np.testing.assert_array_equal(unpack_codes(packed, 24), codes)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("k", [1, 7, 50, 300, 310])
def test_search_matches_brute_force_with_id_tie_break(data, backend, k):
    codes, ids, queries = data
    index = HammingIndex(16, backend=backend).add(codes, ids)
    dist, got = index.search(queries, k)
    assert dist.dtype == np.int32 and got.dtype == np.int64 and dist.shape == (len(queries), k)
    for i, (d_ref, id_ref) in enumerate(brute_force(queries, codes, ids)):
        m = min(k, len(codes))
        np.testing.assert_array_equal(dist[i, :m], d_ref[:m])
        np.testing.assert_array_equal(got[i, :m], id_ref[:m])
        assert (got[i, m:] == -1).all() and (dist[i, m:] == -1).all()


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("radius", [0, 1, 3, 16])
def test_range_search_matches_brute_force(data, backend, radius):
    codes, ids, queries = data
    index = HammingIndex(16, backend=backend).add(codes, ids)
    lims, dist, got = index.range_search(queries, radius)
    assert lims.shape == (len(queries) + 1,) and lims[0] == 0 and lims[-1] == dist.size == got.size
    for i, (d_ref, id_ref) in enumerate(brute_force(queries, codes, ids)):
        keep = d_ref <= radius
        np.testing.assert_array_equal(dist[lims[i] : lims[i + 1]], d_ref[keep])
        np.testing.assert_array_equal(got[lims[i] : lims[i + 1]], id_ref[keep])


@needs_faiss
def test_backends_identical_on_heavy_ties():
    """8 bits, 2000 codes: every distance value holds many codes; faiss must be re-sorted by id."""
    rng = np.random.default_rng(3)
    codes = random_codes(rng, 2000, 8)
    queries = random_codes(rng, 40, 8)
    a = HammingIndex(8, backend="numpy").add(codes)
    b = HammingIndex(8, backend="faiss").add(codes)
    for k in (1, 10, 100, 999):
        da, ia = a.search(queries, k)
        db, ib = b.search(queries, k)
        np.testing.assert_array_equal(da, db)
        np.testing.assert_array_equal(ia, ib)
    for radius in (0, 2, 8):
        for x, y in zip(
            a.range_search(queries, radius), b.range_search(queries, radius), strict=True
        ):
            np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_packed_input_equals_pm1_input(data, backend):
    codes, ids, queries = data
    a = HammingIndex(16, backend=backend).add(codes, ids)
    b = HammingIndex(16, backend=backend).add(pack_codes(codes), ids)
    for x, y in zip(a.search(queries, 9), b.search(pack_codes(queries), 9), strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("backend", BACKENDS)
def test_remove_ids_and_default_ids(data, backend):
    codes, _, queries = data
    index = HammingIndex(16, backend=backend).add(codes[:100])
    index.add(codes[100:150])
    np.testing.assert_array_equal(index.ids, np.arange(150))
    assert index.remove_ids([3, 5, 7, 9999]) == 3
    assert index.ntotal == 147
    keep = np.setdiff1d(np.arange(150), [3, 5, 7])
    for (d, i), (d_ref, id_ref) in zip(
        zip(*index.search(queries, 20), strict=True),
        brute_force(queries, codes[keep], keep),
        strict=True,
    ):
        np.testing.assert_array_equal(d, d_ref[:20])
        np.testing.assert_array_equal(i, id_ref[:20])
    index.add(codes[:1])  # next default id follows the largest held
    assert index.ids[-1] == 150


@pytest.mark.parametrize("backend", BACKENDS)
def test_save_load_round_trip(tmp_path, data, backend):
    codes, ids, queries = data
    index = HammingIndex(16, backend=backend).add(codes, ids)
    path = index.save(tmp_path / "x.dmhidx")
    assert not list(tmp_path.glob(".*tmp"))  # atomic write left nothing behind
    loaded = HammingIndex.load(path)
    assert loaded.backend == index.backend and loaded.n_bits == 16 and loaded.code_size == 2
    np.testing.assert_array_equal(loaded.codes, index.codes)
    np.testing.assert_array_equal(loaded.ids, index.ids)
    for x, y in zip(index.search(queries, 12), loaded.search(queries, 12), strict=True):
        np.testing.assert_array_equal(x, y)
    other = HammingIndex.load(path, backend="numpy")
    for x, y in zip(index.range_search(queries, 4), other.range_search(queries, 4), strict=True):
        np.testing.assert_array_equal(x, y)


def test_load_rejects_other_files(tmp_path):
    np.savez(tmp_path / "a.npz", codes=np.zeros((2, 2), np.uint8))
    with pytest.raises(ValueError, match="no __meta__ header"):
        HammingIndex.load(tmp_path / "a.npz")
    (tmp_path / "b.dmhidx").write_text("hello")
    with pytest.raises(ValueError, match="not a dmh index file"):
        HammingIndex.load(tmp_path / "b.dmhidx")
    with pytest.raises(FileNotFoundError, match="index file not found"):
        HammingIndex.load(tmp_path / "missing.dmhidx")


def test_code_file_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    codes = random_codes(rng, 6, 8)
    save_codes(tmp_path / "c.npz", codes, ids=[5, 4, 3, 2, 1, 0], modality="text")
    got, ids = load_codes(tmp_path / "c.npz")
    np.testing.assert_array_equal(got, codes)
    assert ids.tolist() == [5, 4, 3, 2, 1, 0]


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda: HammingIndex(12), ValueError, "multiple of 8"),
        (lambda: HammingIndex(0), ValueError, "n_bits must be"),
        (lambda: HammingIndex(16, backend="gpu"), ValueError, "backend must be one of"),
        (
            lambda: HammingIndex(16).add(np.ones((3, 8), np.int8)),
            ValueError,
            "8 bits, the index holds n_bits=16",
        ),
        (lambda: HammingIndex(16).add(np.ones((3, 3), np.uint8)), ValueError, "code_size=2"),
        (lambda: HammingIndex(16).add(np.ones((3, 16), np.uint8)), ValueError, "unpacked 0/1 bits"),
        (lambda: HammingIndex(16).add(np.zeros((3, 16), np.int8)), ValueError, "-1 and \\+1"),
        (lambda: HammingIndex(16).add(np.ones((3, 16), np.uint16)), TypeError, "dtype uint16"),
        (lambda: HammingIndex(16).add(np.ones((3, 16)), ids=[1, 1, 2]), ValueError, "repeated"),
        (
            lambda: HammingIndex(16).add(np.ones((3, 16)), ids=[-1, 0, 2]),
            ValueError,
            "non-negative",
        ),
        (lambda: HammingIndex(16).search(np.ones((1, 16)), 3), ValueError, "index is empty"),
        (
            lambda: HammingIndex(16).add(np.ones((3, 16))).search(np.ones((1, 16)), 0),
            ValueError,
            "k must be",
        ),
        (
            lambda: HammingIndex(16).add(np.ones((3, 16))).search(np.ones((1, 16)), 2.5),
            TypeError,
            "k must be",
        ),
        (
            lambda: HammingIndex(16).add(np.ones((3, 16))).range_search(np.ones((1, 16)), 17),
            ValueError,
            "radius must be between 0 and 16",
        ),
        (
            lambda: HammingIndex(16).add(np.ones((3, 16))).range_search(np.ones((1, 16)), -1),
            ValueError,
            "radius must be between",
        ),
    ],
)
def test_bad_input_names_the_problem(call, error, message):
    with pytest.raises(error, match=message):
        call()


@needs_faiss
def test_faiss_candidate_growth_over_batches():
    """Many queries (several sample-distance chunks), k far below the tie group size."""
    rng = np.random.default_rng(5)
    codes = random_codes(rng, 3000, 8)
    queries = random_codes(rng, 1500, 8)  # > one faiss batch
    a = HammingIndex(8, backend="numpy").add(codes)
    b = HammingIndex(8, backend="faiss").add(codes)
    for x, y in zip(a.search(queries, 5), b.search(queries, 5), strict=True):
        np.testing.assert_array_equal(x, y)
