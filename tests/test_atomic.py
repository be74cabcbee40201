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


def test_exclusive_lock_refuses_a_second_writer_and_is_freed_when_its_process_dies(tmp_path):
    import subprocess
    import sys

    from dmh._atomic import exclusive_lock

    out = tmp_path / "results.json"
    with exclusive_lock(out) as lock:
        assert f'"pid": {os.getpid()}' in lock.read_text()
        with pytest.raises(OutputError, match=f"being written by another dmh run \\(pid {os.getpid()} on .*pytest"):
            with exclusive_lock(out):
                pass
    assert lock.read_text() == ""  # released: no holder named any more
    # a holder killed (SIGKILL) while holding it: the kernel releases the lock, nothing to clean
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from dmh._atomic import exclusive_lock\n"
         f"with exclusive_lock({str(out)!r}):\n print('held', flush=True); time.sleep(60)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(OutputError, match=f"pid {holder.pid} on .*-c"):
            with exclusive_lock(out):
                pass
    finally:
        holder.kill()
        holder.wait()
    with exclusive_lock(out):
        assert f'"pid": {os.getpid()}' in lock.read_text()


def test_exclusive_lock_waits_a_bounded_time(tmp_path):
    import threading
    import time

    from dmh._atomic import exclusive_lock

    out = tmp_path / "results.json"
    said = []
    with exclusive_lock(out):
        t0 = time.monotonic()
        with pytest.raises(OutputError, match="still being written by another dmh run after 0.3 s"):
            with exclusive_lock(out, wait=0.3, log=said.append):
                pass
        assert time.monotonic() - t0 >= 0.3 and len(said) == 1 and "waiting up to 0.3 s" in said[0]
    got, second = [], exclusive_lock(out, wait=20)
    with exclusive_lock(out):
        waiter = threading.Thread(target=lambda: got.append(second.__enter__()))
        waiter.start()
        time.sleep(0.3)
        assert not got  # still waiting while the first holds it
    waiter.join(timeout=20)
    assert got and f'"pid": {os.getpid()}' in got[0].read_text()  # taken as soon as the first let go
    second.__exit__(None, None, None)
