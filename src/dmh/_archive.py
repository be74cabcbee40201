"""Self-describing ``.npz`` archives: named arrays plus a JSON header under ``__meta__`` (no
pickle, so reading an untrusted file cannot run code). Models, indexes and code files use it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

META_KEY = "__meta__"


def json_bytes(meta: dict) -> np.ndarray:
    return np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)


def read_archive(path, kind: str, version: int, what: str):
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{what} file not found: {path}")
    try:
        archive = np.load(path, allow_pickle=False)
    except Exception as exc:
        raise ValueError(f"{path} is not a dmh {what} file (.npz): {exc}") from exc
    if not hasattr(archive, "files"):
        raise ValueError(
            f"{path} is not a dmh {what} file: it holds a single array, not an archive"
        )
    with archive:
        if META_KEY not in archive.files:
            raise ValueError(f"{path} is not a dmh {what} file: it has no {META_KEY} header")
        meta = json.loads(archive[META_KEY].tobytes().decode("utf-8"))
        arrays = {k: archive[k] for k in archive.files if k != META_KEY}
    if meta.get("format") != kind:
        raise ValueError(f"{path} is not a dmh {what} file (format {meta.get('format')!r})")
    if meta.get("format_version", 0) > version:
        raise ValueError(
            f"{path} was written by a newer dmh (format {meta['format_version']}, "
            f"this one reads up to {version})"
        )
    return meta, arrays
