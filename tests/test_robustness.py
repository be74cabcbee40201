"""Bad input through the library: every problem is a DmhError naming the file or argument, raised
before anything is built or allocated; nothing silently wrong (issue 9)."""

from __future__ import annotations

import errno
import json
import os
import warnings

import numpy as np
import pytest

from dmh import CrossModalData, load_data, save_data
from dmh.base import BaseHasher, load_model
from dmh.errors import (
    DataError,
    DataFileError,
    DegenerateCodesWarning,
    DmhError,
    ModelFileError,
    OutputError,
    ParameterError,
    ResourceError,
)


def _data(n=30, seed=0, **kw):
    rng = np.random.default_rng(seed)
    return CrossModalData(image=rng.normal(size=(n, 5)), text=rng.normal(size=(n, 4)),
                          labels=rng.integers(0, 3, n), **kw)


# ---------------------------------------------------------------------------------- data files
def test_damaged_npz_data_files_name_the_file_and_never_mention_pickle(tmp_path):
    (tmp_path / "empty.npz").write_bytes(b"")
    np.save(tmp_path / "single.npy", np.ones(3))
    os.replace(tmp_path / "single.npy", tmp_path / "single.npz")
    (tmp_path / "garbage.npz").write_bytes(b"\x80\x04garbage that looks like a pickle" * 4)
    np.savez(tmp_path / "objects.npz", image=np.array([None, 1], dtype=object))
    good = save_data(_data(), tmp_path / "good.npz").read_bytes()
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
    good = save_data(_data(), tmp_path / "good.mat").read_bytes()
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


# ---------------------------------------------------------------------------------- splits
def _split_file(tmp_path, n=50, **idx):
    rng = np.random.default_rng(1)
    path = tmp_path / "d.npz"
    np.savez(path, image=rng.normal(size=(n, 3)), text=rng.normal(size=(n, 2)), **idx)
    return load_data(path)


def _assert_consistent(d, n=50):
    assert np.intersect1d(d.query_idx, d.train_idx).size == 0, "queries leak into the training set"
    assert np.intersect1d(d.query_idx, d.database_idx).size == 0
    assert np.isin(d.train_idx, d.database_idx).all()
    assert np.union1d(d.query_idx, d.database_idx).size == n, "some objects are in no set"


def test_partial_split_query_only_derives_the_rest(tmp_path):
    d = _split_file(tmp_path, query_idx=np.arange(5, 15))
    assert np.array_equal(d.query_idx, np.arange(5, 15))
    assert np.array_equal(d.database_idx, np.setdiff1d(np.arange(50), np.arange(5, 15)))
    _assert_consistent(d)


def test_partial_split_database_only_and_train_only(tmp_path):
    d = _split_file(tmp_path, database_idx=np.arange(40))
    assert np.array_equal(d.query_idx, np.arange(40, 50))
    _assert_consistent(d)
    d = _split_file(tmp_path, train_idx=np.arange(20))
    assert np.array_equal(d.train_idx, np.arange(20))
    assert d.query_idx.size == 6 and d.query_idx.min() >= 20  # 20% of the 30 objects outside training
    _assert_consistent(d)
    d = _split_file(tmp_path, train_idx=np.arange(10), database_idx=np.arange(30))
    assert np.array_equal(d.query_idx, np.arange(30, 50))


def test_partial_split_refuses_what_cannot_be_derived(tmp_path):
    with pytest.raises(DataFileError, match="none is left for the queries"):
        _split_file(tmp_path, database_idx=np.arange(50))
    with pytest.raises(DataFileError, match="none is left for the database"):
        _split_file(tmp_path, query_idx=np.arange(50))
    with pytest.raises(DataFileError, match="no object for the queries"):
        _split_file(tmp_path, train_idx=np.arange(50))


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_files_load_without_a_split(tmp_path, n):
    path = tmp_path / "tiny.npz"
    np.savez(path, image=np.ones((n, 3)), text=np.ones((n, 2)))
    d = load_data(path)
    assert d.n_objects == n and not d.has_split
    assert f"{n} objects" in d.summary()
    with pytest.raises(DataError, match="have no train_idx"):
        d.train()


# ---------------------------------------------------------------------------------- models
def _saved(tmp_path, method="cvh", **params):
    from dmh.methods import get_method_class

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = get_method_class(method)(n_bits=4, random_state=0, **params).fit(_data())
    return model, model.save(tmp_path / f"{method}.npz")


def _rewrite(path, out, meta_change=None, array_change=None):
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(arrays["__meta__"].tobytes())
    if meta_change:
        meta = meta_change(meta)
    if array_change:
        array_change(arrays)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(out, **arrays)
    return out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: {**m, "n_bits": 8}, "weights disagree with the header.*n_bits = 8"),
        (lambda m: {**m, "n_features": {"image": 9, "text": 4}}, "image features = 9"),
        (lambda m: [m], "expected a JSON object"),
        (lambda m: {**m, "n_bits": "4"}, "'n_bits' is '4', expected int"),
        (lambda m: {k: v for k, v in m.items() if k != "params"}, "lacks 'params'"),
        (lambda m: {**m, "method": "nope"}, "unknown method"),
        (lambda m: {**m, "n_bits": 0}, "n_bits must be between 1 and 4096"),
    ],
)
def test_model_header_checked_against_weights(tmp_path, change, message):
    _, path = _saved(tmp_path)
    bad = _rewrite(path, tmp_path / "bad.npz", meta_change=change)
    with pytest.raises(ModelFileError, match=message) as err:
        load_model(bad)
    assert str(bad) in str(err.value)


def test_dmh_hidden_size_mismatch_and_nan_weights(tmp_path):
    params = {"n_rounds": 1, "hidden_size": 8, "d": 6, "dam_epochs": 1, "cle_max_iter": 2, "gbe_max_iter": 3}
    _, path = _saved(tmp_path, "dmh", **params)

    def hidden(meta):
        meta["params"]["hidden_size"] = 16
        return meta

    with pytest.raises(ModelFileError, match="image_net.body.0.weight"):
        load_model(_rewrite(path, tmp_path / "h.npz", meta_change=hidden))

    def nan(arrays):
        arrays["text_net.head.weight"] = np.full_like(arrays["text_net.head.weight"], np.nan)

    with pytest.raises(ModelFileError, match="NaN or infinite weights"):
        load_model(_rewrite(path, tmp_path / "n.npz", array_change=nan))

    def gamma(meta):
        meta["params"]["gamma"] = "nan"
        return meta

    with pytest.raises(ModelFileError, match="gamma must be a finite number"):
        load_model(_rewrite(path, tmp_path / "g.npz", meta_change=gamma))


def test_model_missing_arrays(tmp_path):
    _, path = _saved(tmp_path)
    bad = _rewrite(path, tmp_path / "bad.npz", array_change=lambda a: a.pop("text_projection"))
    with pytest.raises(ModelFileError, match="lacks the arrays.*text_projection"):
        load_model(bad)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -1.0, "nan", True])
def test_non_finite_hyperparameters_refused(value):
    from dmh.methods.dmh import DMH

    with pytest.raises(ParameterError, match="gamma must be a finite number"):
        DMH(n_bits=4, gamma=value).fit(_data())


def test_absurd_sizes_refused_before_allocating():
    from dmh.index import HammingIndex
    from dmh.methods.dmh import DMH

    with pytest.raises(ResourceError, match="hidden_size=10000000000000"):
        DMH(n_bits=4, hidden_size=10**13).fit(_data())
    index = HammingIndex(8, backend="numpy").add(np.ones((3, 8), np.int8))
    with pytest.raises(ResourceError, match="k=1000000000000"):
        index.search(np.ones((2, 8), np.int8), 10**12)


@pytest.mark.parametrize("ratio", [1.5, float("nan"), -0.1, "a"])
def test_paired_ratio_validation(ratio):
    from dmh import make_semi_paired

    with pytest.raises(ParameterError, match="paired_ratio"):
        make_semi_paired(_data(), ratio)


class _Constant(BaseHasher):
    method_name = "constant-test"

    def __init__(self, n_bits=4, random_state=None):
        self.n_bits = n_bits
        self.random_state = random_state

    def _fit(self, data):
        pass

    def _project(self, X, modality):
        return np.ones((X.shape[0], self.n_bits_))


def test_fit_warns_on_constant_bits():
    with pytest.warns(DegenerateCodesWarning, match="every training object gets the same code"):
        _Constant().fit(_data())


# ---------------------------------------------------------------------------------- saving
def test_stale_temporaries_of_dead_writers_are_cleaned(tmp_path):
    import subprocess
    import sys

    from dmh._atomic import _HOST, atomic_write_text

    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                          text=True, check=True)
    dead_pid = int(dead.stdout)
    stale = tmp_path / f".model.npz.dmh-{_HOST}-{dead_pid}-0a1b2c3d.npz.tmp"
    live = tmp_path / f".model.npz.dmh-{_HOST}-{os.getppid()}-0a1b2c3d.npz.tmp"
    other_host = tmp_path / f".model.npz.dmh-otherhost-{dead_pid}-0a1b2c3d.npz.tmp"
    for p in (stale, live, other_host):
        p.write_bytes(b"partial")
    atomic_write_text(tmp_path / "results.json", "{}")
    assert not stale.exists() and live.exists() and other_host.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == ["results.json"]


@pytest.mark.parametrize(
    ("code", "message"), [(errno.ENOSPC, "no space left"), (errno.EROFS, "read-only"), (errno.EACCES, "permission")]
)
def test_output_errors_name_the_target(tmp_path, monkeypatch, code, message):
    from dmh._atomic import check_writable

    real_open = os.open

    def failing_open(path, *args, **kwargs):
        if ".dmh-" in str(path):
            raise OSError(code, os.strerror(code), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing_open)
    with pytest.raises(OutputError, match=message) as err:
        save_data(_data(), tmp_path / "out.npz")
    assert "out.npz" in str(err.value)
    with pytest.raises(OutputError, match=f"{message}.*--out"):
        check_writable(tmp_path / "out.npz", "--out")


def test_check_writable_missing_folder_and_directory(tmp_path):
    from dmh._atomic import check_writable

    with pytest.raises(OutputError, match="does not exist"):
        check_writable(tmp_path / "nope" / "x.json")
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(OutputError, match="is a directory"):
        check_writable(tmp_path / "dir.json")
    assert check_writable(tmp_path / "ok.json") == tmp_path / "ok.json"
    assert list(tmp_path.iterdir()) == [tmp_path / "dir.json"]  # the probe leaves nothing behind


def test_exclusive_lock_refuses_a_second_writer_and_takes_over_stale_locks(tmp_path):
    import subprocess
    import sys

    from dmh._atomic import _HOST, exclusive_lock

    out = tmp_path / "results.json"
    with exclusive_lock(out) as lock:
        assert lock.exists()
        with pytest.raises(OutputError, match="being written by another dmh run"):
            with exclusive_lock(out):
                pass
    assert not lock.exists()
    dead = int(subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                              text=True, check=True).stdout)
    lock.write_text(f"{_HOST} {dead}\n")
    with exclusive_lock(out):
        assert lock.read_text().split()[1] == str(os.getpid())
    lock.write_text(f"otherhost {dead}\n")
    with pytest.raises(OutputError, match="otherhost"):
        with exclusive_lock(out):
            pass
