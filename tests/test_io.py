import os

import h5py
import numpy as np
import pytest
import scipy.io as sio

from dmh import CrossModalData, load_data, save_data
from dmh.datasets import load_dataset
from dmh.errors import DataError, DataFileError, DmhError

from .conftest import WIKI, requires_file


def _make(n=30, seed=0):
    rng = np.random.default_rng(seed)
    return CrossModalData(
        image=rng.normal(size=(n, 5)), text=rng.normal(size=(n, 4)),
        labels=rng.integers(0, 2, size=(n, 3)), text_mask=np.arange(n) % 5 != 0,
        train_idx=np.arange(20), query_idx=np.arange(20, 30), database_idx=np.arange(20),
    )


@pytest.mark.parametrize("suffix", [".npz", ".mat"])
def test_generic_round_trip(tmp_path, suffix):
    d = _make()
    path = save_data(d, tmp_path / f"d{suffix}")
    e = load_data(path)
    for key in ("image", "text", "labels", "image_mask", "text_mask", "train_idx", "query_idx", "database_idx"):
        assert np.array_equal(getattr(d, key), getattr(e, key)), key


def test_class_id_labels_survive_mat_round_trip(tmp_path):
    d = CrossModalData(image=np.ones((4, 2)), text=np.ones((4, 2)), labels=[0, 1, 2, 1])
    e = load_data(save_data(d, tmp_path / "d.mat"))
    assert np.array_equal(e.labels, [0, 1, 2, 1])


def test_missing_split_gets_seeded_default(tmp_path):
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "d.npz", image=rng.normal(size=(50, 3)), text=rng.normal(size=(50, 2)))
    a, b = load_data(tmp_path / "d.npz"), load_data(tmp_path / "d.npz")
    assert a.query_idx.size == 10 and a.database_idx.size == 40 and a.train_idx.size == 40
    assert np.array_equal(a.query_idx, b.query_idx)


def test_v73_toolkit_layout(tmp_path):
    rng = np.random.default_rng(1)
    path = tmp_path / "kit.mat"
    arrays = {"I_tr": rng.normal(size=(8, 3)), "T_tr": rng.normal(size=(8, 2)),
              "L_tr": np.eye(4)[rng.integers(0, 4, 8)], "I_te": rng.normal(size=(4, 3)),
              "T_te": rng.normal(size=(4, 2)), "L_te": np.eye(4)[rng.integers(0, 4, 4)]}
    with h5py.File(path, "w") as f:  # MATLAB v7.3 stores column-major: transposed on disk
        for k, v in arrays.items():
            f[k] = v.T
    d = load_data(path)
    assert d.image.shape == (12, 3) and d.labels.shape == (12, 4)
    assert np.allclose(d.image[:8], arrays["I_tr"]) and np.allclose(d.text[8:], arrays["T_te"])
    assert np.array_equal(d.query_idx, np.arange(8, 12)) and np.array_equal(d.database_idx, np.arange(8))


def test_toolkit_with_database_part(tmp_path):
    rng = np.random.default_rng(2)
    parts = {}
    for p, n in (("tr", 5), ("te", 3), ("db", 7)):
        parts[f"I_{p}"], parts[f"T_{p}"] = rng.normal(size=(n, 3)), rng.normal(size=(n, 2))
        parts[f"L_{p}"] = rng.integers(1, 4, size=(n, 1))
    sio.savemat(tmp_path / "k.mat", parts)
    d = load_data(tmp_path / "k.mat")
    assert np.array_equal(d.database_idx, np.arange(8, 15)) and d.labels.shape == (15,)


@pytest.mark.parametrize(
    "arrays, message",
    [
        ({"image": np.ones((3, 2))}, "lacks the key 'text'"),
        ({"image": np.ones((3, 2)), "text": np.ones((3, 2)), "colour": np.ones(3)}, "unknown keys"),
        ({"foo": np.ones(3)}, "neither the generic layout"),
        ({"I_tr": np.ones((3, 2)), "T_tr": np.ones((3, 2))}, "lacks I_te and T_te"),
        ({"image": np.ones((3, 2)), "text": np.ones((4, 2))}, "4 rows, expected 3"),
    ],
)
def test_bad_files_give_clear_errors(tmp_path, arrays, message):
    np.savez(tmp_path / "bad.npz", **arrays)
    with pytest.raises((KeyError, ValueError), match=message):
        load_data(tmp_path / "bad.npz")


def test_unknown_names_and_types(tmp_path):
    with pytest.raises(FileNotFoundError, match="neither a built-in dataset"):
        load_dataset("no-such-thing")
    (tmp_path / "x.csv").write_text("1,2")
    with pytest.raises(ValueError, match="unsupported data file type"):
        load_data(tmp_path / "x.csv")


def test_save_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "d.npz"
    save_data(_make(), path)
    before = path.read_bytes()

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(np, "savez_compressed", boom)
    with pytest.raises(RuntimeError):
        save_data(_make(seed=1), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["d.npz"]  # no temporary left behind


def test_saved_files_get_ordinary_permissions(tmp_path):
    import os

    mask = os.umask(0o022)
    try:
        path = save_data(_make(), tmp_path / "d.npz")
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
    finally:
        os.umask(mask)
    assert (path.stat().st_mode & 0o777) == (plain.stat().st_mode & 0o777) == 0o644  # not mkstemp's 0600


def test_builtin_uci_digits():
    d = load_dataset("uci-digits")
    assert d.image.shape == (2000, 76) and d.text.shape == (2000, 64)
    assert d.query_idx.size == 500 and d.database_idx.size == 1500
    assert np.bincount(d.labels).tolist() == [200] * 10


@requires_file(WIKI)
def test_wikipedia_toolkit_protocol():
    d = load_data(WIKI)
    assert d.n_objects == 2866 and d.query_idx.size == 693
    assert np.array_equal(d.train_idx, d.database_idx) and d.train_idx.size == 2173
    assert d.image.shape[1] == 128 and d.text.shape[1] == 10


# ---------------------------------------------------------------- bad input (issue 9)

def _rand_data(n=30, seed=0, **kw):
    rng = np.random.default_rng(seed)
    return CrossModalData(image=rng.normal(size=(n, 5)), text=rng.normal(size=(n, 4)),
                          labels=rng.integers(0, 3, n), **kw)


def test_damaged_npz_data_files_name_the_file_and_never_mention_pickle(tmp_path):
    (tmp_path / "empty.npz").write_bytes(b"")
    np.save(tmp_path / "single.npy", np.ones(3))
    os.replace(tmp_path / "single.npy", tmp_path / "single.npz")
    (tmp_path / "garbage.npz").write_bytes(b"\x80\x04garbage that looks like a pickle" * 4)
    np.savez(tmp_path / "objects.npz", image=np.array([None, 1], dtype=object))
    good = save_data(_rand_data(), tmp_path / "good.npz").read_bytes()
    (tmp_path / "truncated.npz").write_bytes(good[: len(good) // 2])
    expected = {"empty": "is empty", "single": "single .npy array", "garbage": "not an .npz archive",
                "objects": "object data", "truncated": "truncated"}
    for name, message in expected.items():
        path = tmp_path / f"{name}.npz"
        with pytest.raises(DataFileError, match=message) as err:
            load_data(path)
        assert str(path) in str(err.value) and "pickle" not in str(err.value).lower()


def test_damaged_mat_files(tmp_path):
    import h5py

    (tmp_path / "empty.mat").write_bytes(b"")
    (tmp_path / "garbage.mat").write_bytes(b"MATLAB 5.0 MAT-file" + bytes(range(256)) * 3)
    good = save_data(_rand_data(), tmp_path / "good.mat").read_bytes()
    (tmp_path / "truncated_v5.mat").write_bytes(good[: len(good) // 2])
    with h5py.File(tmp_path / "v73.mat", "w") as f:
        f["image"] = np.ones((5, 30))
        f["text"] = np.ones((4, 30))
    v73 = (tmp_path / "v73.mat").read_bytes()
    (tmp_path / "truncated_v73.mat").write_bytes(v73[: len(v73) // 2])
    with h5py.File(tmp_path / "strings.mat", "w") as f:
        f["image"] = np.ones((5, 30))
        f["text"] = np.ones((4, 30))
        f["labels"] = np.array([b"cat"] * 30)
    for name in ("empty", "garbage", "truncated_v5", "truncated_v73", "strings"):
        path = tmp_path / f"{name}.mat"
        with pytest.raises(DataFileError) as err:
            load_data(path)
        assert str(path) in str(err.value), name


def test_directories_and_unsupported_types(tmp_path):
    (tmp_path / "folder.npz").mkdir()
    with pytest.raises(IsADirectoryError):
        load_data(tmp_path / "folder.npz")
    (tmp_path / "d.csv").write_text("a,b\n1,2\n")
    with pytest.raises(DataFileError, match="unsupported data file type '.csv'"):
        load_data(tmp_path / "d.csv")


@pytest.mark.parametrize(
    ("arrays", "message"),
    [
        ({"image": np.ones((4, 2)), "text": np.array([["a", "b"]] * 4)}, "array 'text' holds text data"),
        ({"image": np.full((4, 2), np.nan), "text": np.ones((4, 2))}, "NaN or infinite"),
        ({"image": np.ones((4, 2)), "text": np.ones((3, 2))}, "text has 3 rows, expected 4"),
        ({"image": np.ones((4, 2)), "text": np.ones((4, 2)), "labels": np.array(["x"] * 4)},
         "array 'labels' holds text data"),
        ({"image": np.ones((4, 2)), "text": np.ones((4, 2)), "query_idx": np.array([0, 9])}, "outside"),
        ({"image": np.ones((4, 2)), "text": np.ones((4, 2)), "query_idx": np.array([-1])}, "outside"),
        ({"image": np.ones((4, 2)), "text": np.ones((4, 2)), "query_idx": np.array([1, 1])}, "repeated"),
        ({"image": np.ones((4, 2)), "text": np.ones((4, 2)), "query_idx": np.array([0.5])}, "integer"),
        ({"image": np.ones(4), "text": np.ones((4, 2))}, "2-D"),
        ({"image": np.ones((4, 2)), "text": np.ones((4, 2)), "image_mask": np.array([2, 0, 1, 1])}, "boolean"),
    ],
)
def test_inconsistent_arrays_name_the_file(tmp_path, arrays, message):
    path = tmp_path / "d.npz"
    np.savez(path, **arrays)
    with pytest.raises(DataFileError, match=message) as err:
        load_data(path)
    assert str(path) in str(err.value) and isinstance(err.value, DmhError)


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_files_load_without_a_split(tmp_path, n):
    path = tmp_path / "tiny.npz"
    np.savez(path, image=np.ones((n, 3)), text=np.ones((n, 2)))
    d = load_data(path)
    assert d.n_objects == n and not d.has_split
    assert f"{n} objects" in d.summary()
    with pytest.raises(DataError, match="have no train_idx"):
        d.train()
