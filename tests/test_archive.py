"""Property-style test over every loader: random truncations and byte flips of valid data, model,
index and code files give either a clean :class:`dmh.errors.FileFormatError` naming the file, or a
load equal to the original (a flip in bytes that no reader looks at, e.g. a zip timestamp). Seeded and
bounded: a fixed number of mutations per file."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dmh import CrossModalData
from dmh.base import load_model
from dmh.errors import FileFormatError
from dmh.index import HammingIndex, load_codes, pack_codes, save_codes
from dmh.io import load_data, save_data

N_MUTATIONS = 40


def _data():
    rng = np.random.default_rng(0)
    return CrossModalData(image=rng.normal(size=(30, 5)), text=rng.normal(size=(30, 4)),
                          labels=rng.integers(0, 3, 30), name="d")


def _mutations(blob: bytes, seed: int):
    """(kind, bytes): truncations at random lengths, then single-byte flips at random offsets."""
    rng = np.random.default_rng(seed)
    for n in rng.integers(0, len(blob), N_MUTATIONS // 2):
        yield f"truncated to {n}", blob[:n]
    for pos in rng.integers(0, len(blob), N_MUTATIONS // 2):
        b = bytearray(blob)
        b[pos] ^= int(rng.integers(1, 256))
        yield f"byte {pos} flipped", bytes(b)


def _check_all(path, blob, load, same, seed):
    for kind, mutated in _mutations(blob, seed):
        path.write_bytes(mutated)
        try:
            loaded = load(path)
        except FileFormatError as exc:
            assert str(path) in str(exc), (kind, exc)
            assert "\n" not in str(exc) and "pickle" not in str(exc).lower(), (kind, exc)
            continue
        assert same(loaded), f"{kind}: loaded without error but differs from the original"


def _same_data(a, b):
    return (np.array_equal(a.image, b.image) and np.array_equal(a.text, b.text)
            and np.array_equal(a.labels, b.labels) and np.array_equal(a.query_idx, b.query_idx)
            and np.array_equal(a.train_idx, b.train_idx) and np.array_equal(a.database_idx, b.database_idx))


@pytest.mark.parametrize("suffix", [".npz", ".mat"])
def test_damaged_data_files(tmp_path, suffix):
    data = _data()
    good = save_data(data, tmp_path / f"good{suffix}")
    ref = load_data(good)
    _check_all(tmp_path / f"bad{suffix}", good.read_bytes(), load_data, lambda d: _same_data(d, ref), seed=1)


def test_damaged_mat73_files(tmp_path):
    import h5py
    data = _data()
    good = tmp_path / "good.mat"
    with h5py.File(good, "w") as f:  # MATLAB v7.3 stores column-major: transposed on disk
        f["image"] = data.image.T
        f["text"] = data.text.T
        f["labels"] = data.labels.astype(np.float64)
    ref = load_data(good)
    # HDF5 stores raw data without a checksum: a flipped data byte cannot be detected by any reader,
    # so here a load must only have the original structure (the shapes of everything)
    def same_shapes(d):
        return (d.image.shape, d.text.shape, d.labels.shape) == (ref.image.shape, ref.text.shape, ref.labels.shape)

    _check_all(tmp_path / "bad.mat", good.read_bytes(), load_data, same_shapes, seed=2)


@pytest.mark.parametrize("method", ["cvh", "dmh"])
def test_damaged_model_files(tmp_path, method):
    from dmh.methods import get_method_class

    data = _data()
    params = {"n_rounds": 1, "hidden_size": 8, "d": 6, "dam_epochs": 1, "cle_max_iter": 2,
              "gbe_max_iter": 3} if method == "dmh" else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = get_method_class(method)(n_bits=4, random_state=0, **params).fit(data)
    good = model.save(tmp_path / "good.npz")
    codes = model.encode(data.image, "image"), model.encode(data.text, "text")

    def same(m):
        return (np.array_equal(m.encode(data.image, "image"), codes[0])
                and np.array_equal(m.encode(data.text, "text"), codes[1]))

    _check_all(tmp_path / "bad.npz", good.read_bytes(), load_model, same, seed=3)


def test_damaged_index_and_code_files(tmp_path):
    rng = np.random.default_rng(0)
    codes = np.where(rng.random((20, 16)) > 0.5, 1, -1).astype(np.int8)
    ids = np.arange(100, 120)
    good_codes = save_codes(tmp_path / "codes.npz", codes, ids, modality="image")
    _check_all(tmp_path / "bad_codes.npz", good_codes.read_bytes(), load_codes,
               lambda r: np.array_equal(r[0], codes) and np.array_equal(r[1], ids), seed=4)
    good_index = HammingIndex(16, backend="numpy").add(codes, ids).save(tmp_path / "index.dmhidx")
    _check_all(tmp_path / "bad.dmhidx", good_index.read_bytes(), HammingIndex.load,
               lambda ix: np.array_equal(ix.codes, pack_codes(codes)) and np.array_equal(ix.ids, ids), seed=5)
