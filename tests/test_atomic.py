"""dmh._atomic: atomic saves, the temporaries of killed writers, write checks before work and the
lock that keeps two runs from writing the same results."""

from __future__ import annotations

import errno
import os

import numpy as np
import pytest

from dmh import CrossModalData, save_data
from dmh.errors import OutputError


def _rand_data(n=30, seed=0, **kw):
    rng = np.random.default_rng(seed)
    return CrossModalData(image=rng.normal(size=(n, 5)), text=rng.normal(size=(n, 4)),
                          labels=rng.integers(0, 3, n), **kw)


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
        save_data(_rand_data(), tmp_path / "out.npz")
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
