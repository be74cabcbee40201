"""Atomic file writes: write to a temporary file beside the target, flush it to disk, then rename.

A crash or an exception mid-write leaves the previous file (or none) in place, never a half-written one.

A process killed mid-write (SIGKILL, power loss) cannot remove its temporary file. So temporary
files are named ``.<target>.dmh-<host>-<pid>-<random>.tmp``: the next save into the same folder
removes those whose owner process (same host, that pid) no longer runs. Files of a live process,
or of another host (a shared folder), are left alone.

Errors that are about the output place rather than dmh (missing or read-only folder, permission
denied, disk full, a directory in the way) become one :class:`dmh.errors.OutputError` naming the
target.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
import socket
from pathlib import Path

from .errors import OutputError

__all__ = [
    "atomic_path", "atomic_write_text", "check_writable", "clean_stale_temporaries", "exclusive_lock", "lock_holder",
]

_HOST = re.sub(r"[^A-Za-z0-9_]", "_", socket.gethostname())[:40] or "host"
_TMP_RE = re.compile(r"^\..+\.dmh-(?P<host>[A-Za-z0-9_]+)-(?P<pid>\d+)-[0-9a-f]+(\.[^/]*)?\.tmp$")

#: OS errors about the output place (shown as one line), as opposed to bugs
_OUTPUT_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
    errno.EISDIR: "it is a directory",
    errno.ENOTDIR: "a part of the path is not a directory",
    errno.ENOENT: "the folder does not exist",
    errno.ENAMETOOLONG: "the file name is too long",
}


def _folder(path: Path) -> Path:
    return path.parent if str(path.parent) else Path(".")


def _check_target(path: Path) -> Path:
    folder = _folder(path)
    if not folder.exists():
        raise OutputError(path, f"folder {folder} does not exist")
    if not folder.is_dir():
        raise OutputError(path, f"{folder} is not a folder")
    if path.is_dir():
        raise OutputError(path, "it is a directory")
    return folder


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True  # another user's process, or a pid we cannot test: keep its files
    return True


def clean_stale_temporaries(folder) -> list[Path]:
    """Remove the temporary files of dead writers (this host) in ``folder``; returns them."""
    removed = []
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return removed
    for entry in entries:
        m = _TMP_RE.match(entry.name)
        if not m or m["host"] != _HOST:
            continue
        pid = int(m["pid"])
        if pid == os.getpid() or _pid_alive(pid):
            continue
        with contextlib.suppress(OSError):
            os.unlink(entry.path)
            removed.append(Path(entry.path))
    return removed


def _temporary(path: Path, folder: Path, suffix: str | None) -> Path:
    tail = suffix if suffix is not None else "".join(path.suffixes) + ".tmp"
    if not tail.endswith(".tmp"):
        tail += ".tmp"
    name = f".{path.name}.dmh-{_HOST}-{os.getpid()}-{secrets.token_hex(4)}{tail}"
    return folder / name


def _output_error(path: Path, exc: OSError) -> OutputError:
    return OutputError(path, _OUTPUT_ERRNOS.get(exc.errno, exc.strerror or str(exc)))


@contextlib.contextmanager
def atomic_path(path, suffix: str | None = None):
    """Yield a temporary path in the target's folder; on success it replaces ``path`` atomically."""
    path = Path(path)
    folder = _check_target(path)
    clean_stale_temporaries(folder)
    tmp = _temporary(path, folder, suffix)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        if exc.errno in _OUTPUT_ERRNOS:
            raise _output_error(path, exc) from None
        raise
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        # created 0600; give it the permissions a plain open() would have
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EISDIR):
            raise _output_error(path, exc) from None
        raise
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def check_writable(path, argument: str = "--out") -> Path:
    """Check, before any work, that ``path`` can be written (by :func:`atomic_path`): its folder
    exists and accepts a new file. Raises :class:`OutputError` naming ``argument`` and the path."""
    path = Path(path)
    try:
        _check_target(path)
        with atomic_path(path.with_name(path.name + ".probe"), suffix=".tmp"):
            raise _Probe
    except _Probe:
        return path
    except OutputError as exc:
        raise OutputError(path, f"{exc.problem} ({argument})") from None
    return path  # pragma: no cover - not reached (the probe always raises)


class _Probe(Exception):
    """Ends the write probe of :func:`check_writable` before anything is renamed."""


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically: the previous file, or none, until it is whole."""
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")


@contextlib.contextmanager
def exclusive_lock(path, what: str = "results file", *, wait: float = 0.0, lock_file=None, log=None,
                   hint: str = "wait for it to finish or write elsewhere"):
    """Hold an OS file lock on ``.<name>.lock`` beside ``path`` (or on ``lock_file``) for the
    duration, so that two runs never write the same output.

    The lock is :class:`filelock.FileLock` (``flock``): the kernel releases it when its process
    ends, however it ends, so a killed run never leaves a lock to clean. While held, the lock file
    names its holder (pid, host, command line, start time); it stays in place, empty, afterwards.
    A second run waits up to ``wait`` seconds (``log`` is told once that it waits), then gets an
    :class:`OutputError` naming the holder (and ``hint``: what to do).
    """
    import filelock

    path = Path(path)
    lock = Path(lock_file) if lock_file is not None else _check_target(path) / f".{path.name}.lock"
    fl = filelock.FileLock(lock, thread_local=False, fallback_to_soft=False)
    try:
        try:
            fl.acquire(timeout=0)
        except filelock.Timeout:
            holder = lock_holder(lock)
            if wait <= 0:
                raise OutputError(path, f"the {what} is being written by another dmh run ({holder}, lock "
                                  f"{lock}); {hint}") from None
            if log is not None:
                log(f"waiting up to {wait:g} s for the {what} {path}: another dmh run holds it ({holder})")
            try:
                fl.acquire(timeout=wait)
            except filelock.Timeout:
                raise OutputError(path, f"the {what} is still being written by another dmh run after "
                                  f"{wait:g} s of waiting ({lock_holder(lock)}, lock {lock}); {hint}") from None
    except OSError as exc:
        if exc.errno in _OUTPUT_ERRNOS:
            raise _output_error(path, exc) from None
        if exc.errno == errno.ENOSYS:  # pragma: no cover - a file system without flock
            raise OutputError(path, f"the file system of {lock} does not support file locks") from None
        raise
    try:
        _write_holder(lock)
        yield lock
    finally:
        with contextlib.suppress(OSError):
            os.truncate(lock, 0)  # the next run names no holder that has gone
        fl.release()


def _write_holder(lock: Path) -> None:
    import datetime
    import json
    import sys

    holder = {
        "pid": os.getpid(), "host": socket.gethostname(),
        "command": " ".join([_program(), *sys.argv[1:]])[:200],
        "since": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    with open(lock, "r+", encoding="utf-8") as fh:  # the lock is held on the file, not on this descriptor
        fh.truncate()
        fh.write(json.dumps(holder) + "\n")


def _program() -> str:
    import sys

    if not sys.argv or not sys.argv[0]:
        return "python"
    program = Path(sys.argv[0])
    return "dmh" if program.match("dmh/cli/__main__.py") else program.name


def lock_holder(lock) -> str:
    """Who holds the lock ``lock``, in words, from what its holder wrote there ("another
    process" when it wrote nothing yet, or names a process of this host that no longer runs)."""
    import json

    try:
        holder = json.loads(Path(lock).read_text(encoding="utf-8"))
        pid, host = int(holder["pid"]), str(holder["host"])
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"
    if host == socket.gethostname() and not _pid_alive(pid):
        return "another process"
    command = str(holder.get("command") or "").strip()
    since = str(holder.get("since") or "")
    return f"pid {pid} on {host}" + (f", {command!r}" if command else "") + (f", since {since}" if since else "")
