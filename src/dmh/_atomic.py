"""Atomic file writes: write to a temporary file beside the target, flush it to disk, then rename.

A crash or an exception mid-write leaves the previous file (or none) in place, never a half-written one.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


@contextlib.contextmanager
def atomic_path(path, suffix: str | None = None):
    """Yield a temporary path in the target's folder; on success it replaces ``path`` atomically."""
    path = Path(path)
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.exists():
        raise FileNotFoundError(f"cannot write {path}: folder {folder} does not exist")
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.", suffix=suffix if suffix is not None else "".join(path.suffixes) + ".tmp",
        dir=folder,
    )
    os.close(fd)
    try:
        yield Path(tmp)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
        # mkstemp creates the file 0600; give it the permissions a plain open() would have
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path, text: str) -> None:
    with atomic_path(path) as tmp:
        Path(tmp).write_text(text, encoding="utf-8")
