"""The Milvus code store answers exactly as HammingIndex (ties by id), in milvus-lite."""

import warnings

import numpy as np
import pytest

from dmh.app.store import parse_store
from dmh.index import HammingIndex

from ..conftest import import_or_skip, needs

import_or_skip("pymilvus", "milvus")
try:
    with warnings.catch_warnings():  # milvus-lite 2.5 imports the deprecated pkg_resources
        warnings.simplefilter("ignore", UserWarning)
        import milvus_lite  # noqa: F401
except Exception as exc:  # pragma: no cover - depends on the install
    needs("milvus", f"milvus-lite not importable ({exc}); pip install -e '.[milvus]'")

from dmh.app.store import milvus as store_mod  # noqa: E402
from dmh.app.store.milvus import MilvusCodeStore  # noqa: E402


@pytest.fixture(scope="module")
def lite_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("milvus")


def _codes(rng, n, n_bits):
    return np.where(rng.random((n, n_bits)) < 0.5, 1, -1).astype(np.int8)


@pytest.fixture(scope="module")
def filled(lite_dir):
    """16-bit codes (many ties at every distance) under shuffled, gappy ids, in both stores."""
    rng = np.random.default_rng(0)
    codes = _codes(rng, 1500, 16)
    ids = rng.permutation(10_000)[:1500]
    store = MilvusCodeStore(lite_dir / "codes.db", "filled", n_bits=16)
    store.add(codes, ids)
    index = HammingIndex(16, backend="numpy").add(codes, ids)
    queries = _codes(rng, 40, 16)
    yield store, index, queries
    store.close()


@pytest.mark.parametrize("k", [1, 7, 100, 1500, 2000])
def test_search_equals_hamming_index(filled, k):
    store, index, queries = filled
    d_s, i_s = store.search(queries, k)
    d_h, i_h = index.search(queries, k)
    np.testing.assert_array_equal(d_s, d_h)
    np.testing.assert_array_equal(i_s, i_h)  # ties ordered by id, as HammingIndex
    assert (i_s[:, 1500:] == -1).all()


@pytest.mark.parametrize("radius", [0, 4, 7, 16])
def test_range_search_equals_hamming_index(filled, radius):
    store, index, queries = filled
    for a, b in zip(store.range_search(queries, radius), index.range_search(queries, radius), strict=True):
        np.testing.assert_array_equal(a, b)


def test_results_complete_beyond_milvus_limit(filled, monkeypatch):
    """With Milvus's per-search limit made tiny, ties and range hits beyond it are still all found
    (the id range is split until each part fits)."""
    store, index, queries = filled
    monkeypatch.setattr(store_mod, "MAX_TOPK", 32)
    lims_s, d_s, i_s = store.range_search(queries[:5], 6)
    lims_h, d_h, i_h = index.range_search(queries[:5], 6)
    assert np.diff(lims_h).max() > 32  # the case under test happens
    np.testing.assert_array_equal(lims_s, lims_h)
    np.testing.assert_array_equal(i_s, i_h)
    np.testing.assert_array_equal(store.search(queries[:5], 20)[1], index.search(queries[:5], 20)[1])


def test_add_remove_reopen(lite_dir):
    rng = np.random.default_rng(1)
    codes = _codes(rng, 50, 32)
    path = lite_dir / "codes.db"  # one milvus-lite file (one embedded server) for the module
    store = MilvusCodeStore(path, "reopen", n_bits=32)
    store.add(codes[:30])  # default ids 0..29
    store.add(codes[30:])  # then 30..49, after the largest id held
    assert len(store) == 50
    with pytest.raises(ValueError, match="already in the store"):
        store.add(codes[:2], [3, 100])
    with pytest.raises(ValueError, match="32 bits|n_bits=32"):
        store.add(np.ones((2, 16), dtype=np.int8))
    assert store.remove_ids([0, 1, 999]) == 2
    store.close()
    again = MilvusCodeStore(path, "reopen")
    assert again.n_bits == 32 and len(again) == 48
    index = HammingIndex(32).add(codes[2:], np.arange(2, 50))
    np.testing.assert_array_equal(again.search(codes[:5], 10)[1], index.search(codes[:5], 10)[1])
    with pytest.raises(ValueError, match="holds 32-bit codes"):
        MilvusCodeStore(path, "reopen", n_bits=64)
    again.close()


def test_clear_errors(lite_dir):
    with pytest.raises(ValueError, match="give n_bits"):
        MilvusCodeStore(lite_dir / "codes.db", "absent")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        MilvusCodeStore(lite_dir / "no" / "such" / "x.db", "c", n_bits=8)
    with pytest.raises(ValueError, match="local mode only support BIN_FLAT|BIN_IVF_FLAT"):
        MilvusCodeStore(lite_dir / "codes.db", "ivf", n_bits=8, index="ivf")
    empty = MilvusCodeStore(lite_dir / "codes.db", "empty", n_bits=8)
    with pytest.raises(ValueError, match="empty"):
        empty.search(np.ones((1, 8), dtype=np.int8), 1)
    empty.close()


def test_parse_store():
    assert parse_store(None).kind == "local" and parse_store("local").kind == "local"
    assert parse_store("milvus").uri is None
    assert parse_store("milvus:/x/c.db").uri == "/x/c.db"
    assert parse_store("milvus:http://h:19530").uri == "http://h:19530"
    for bad in ("faiss", "milvus:", "milvus:c.txt"):
        with pytest.raises(ValueError, match="^store "):
            parse_store(bad)


def test_cli_index_into_milvus_and_search(tmp_path, lite_dir):
    """dmh index --store milvus:FILE.db, then dmh search milvus:FILE.db answers as the local index."""
    import json

    from dmh.cli import main
    from dmh.index import save_codes

    rng = np.random.default_rng(5)
    codes = _codes(rng, 300, 24)
    save_codes(tmp_path / "codes.npz", codes, rng.permutation(1000)[:300])
    save_codes(tmp_path / "queries.npz", codes[:10], np.arange(10))
    db = f"milvus:{lite_dir / 'codes.db'}"
    assert main(["index", str(tmp_path / "codes.npz"), "--out", str(tmp_path / "a.dmhidx")]) == 0
    assert main(["index", str(tmp_path / "codes.npz"), "--store", db, "--collection", "cli"]) == 0
    assert main(["index", str(tmp_path / "codes.npz"), "--store", db, "--collection", "cli"]) == 2  # exists
    assert main(["index", str(tmp_path / "codes.npz"), "--store", db, "--collection", "cli", "--replace"]) == 0
    results = []
    for index in (str(tmp_path / "a.dmhidx"), db):
        for how in (["--k", "12"], ["--radius", "8"]):
            out = tmp_path / "hits.json"
            args = ["search", index, "--codes", str(tmp_path / "queries.npz"), *how, "--out", str(out)]
            assert main([*args, "--collection", "cli"] if index == db else args) == 0
            results.append(json.loads(out.read_text())["results"])
    assert results[0] == results[2] and results[1] == results[3]
    assert main(["index", str(tmp_path / "codes.npz"), "--store", "milvus"]) == 2  # no .db file named


def test_collection_in_milvus_answers_as_local(tmp_path, shapes_collection):
    """dmh build --store milvus (milvus-lite in the folder): searches, "more like this", dmh add and
    the served API answer exactly as the collection with local index files."""
    import shutil

    from dmh.app.collection import Collection, add_to_collection
    from dmh.datasets.shapes import make_shapes

    from ..conftest import build_shapes_collection

    col_m = build_shapes_collection(tmp_path, store="milvus")
    assert (col_m / "store.json").is_file() and not (col_m / "images.dmhidx").exists()
    local, milvus = Collection(shapes_collection), Collection(col_m)
    assert type(milvus.indexes["images"]).__name__ == "MilvusCodeStore"
    assert milvus.summary() == local.summary()

    def answers(col):
        return [
            [(h.id, h.distance) for h in hits]
            for hits in (
                col.search_text("a red circle", 15),
                col.search_text("a blue square on the left", 20, "texts"),
                col.similar(3, 10),
                col.search_image(col.items[5]["image"], 12),
            )
        ]

    assert answers(milvus) == answers(local)
    # both re-rank the candidates by the values kept in the collection folder, and by Hamming alone
    # they answer alike too
    assert milvus.reranks and local.reranks
    assert answers(Collection(col_m, rerank=False)) == answers(Collection(shapes_collection, rerank=False))
    assert any(h.score is not None for h in milvus.search_text("a red circle", 15))
    # the served API on the Milvus collection
    import_or_skip("starlette", "serve")
    import_or_skip("httpx", "test")
    from starlette.testclient import TestClient

    from dmh.app.server import create_app

    with TestClient(create_app(col_m)) as client:
        body = client.get("/api/search", params={"q": "a red circle", "k": 15}).json()
    assert [(x["id"], x["distance"]) for x in body["results"]] == answers(local)[0]
    # add: new items reach the Milvus collections as they reach the local indexes
    copy = tmp_path / "local-copy"
    shutil.copytree(shapes_collection, copy)
    more, captions = make_shapes(tmp_path / "more", 6, caption_ratio=1.0, extra_captions=0, seed=7)
    for col in (copy, col_m):
        assert add_to_collection(col, more, captions, progress=False, log=lambda m: None) == 6
    a, b = Collection(copy), Collection(col_m)
    assert len(b.indexes["images"]) == 54 and answers(a) == answers(b)
