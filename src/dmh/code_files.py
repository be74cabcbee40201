"""Code files: ``{-1,+1}`` codes and their ids in an ``.npz`` archive with a JSON header (no pickle),
written atomically by :func:`save_codes` and read back, checked, by :func:`load_codes`. Both are
also importable from :mod:`dmh.index`.

A code file may also hold ``values``: the real values whose signs are the codes, one float16 row of
unit length per code (:func:`compact_values`), which a search re-ranks its Hamming candidates by
(:mod:`dmh.app.rerank`). Files without them (``dmh encode``'s, or a collection's from before) are read as
before; ``load_codes(path, with_values=True)`` then gives ``None`` for them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ._archive import META_KEY, json_bytes, read_npz
from ._atomic import atomic_path
from .errors import CodesFileError, DataError, DmhError
from .hamming import check_pm1 as _check_pm1

__all__ = ["CODES_FORMAT_VERSION", "compact_values", "load_codes", "save_codes"]

CODES_FORMAT_VERSION = 1


def compact_values(values) -> np.ndarray:
    """The rows of ``values`` (n, n_bits) scaled to unit length, as float16 (a row of zeros stays
    zero). Non-finite values are a :class:`~dmh.errors.DataError`. A float16 array is taken as
    already compact and returned as it is (so rows kept once never drift when written again)."""
    if isinstance(values, np.ndarray) and values.dtype == np.float16 and values.ndim == 2:
        if not np.isfinite(values).all():
            raise DataError("values hold NaN or infinite entries")
        return values
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 2:
        raise DataError(f"values must be 2-dimensional (n, n_bits), got shape {v.shape}")
    if not np.isfinite(v).all():
        raise DataError("values hold NaN or infinite entries")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    return (v / np.where(norms > 0, norms, 1.0)).astype(np.float16)


def save_codes(path, codes, ids=None, *, modality: str | None = None, values=None) -> Path:
    """Write ``{-1,+1}`` codes (int8 ``codes``) and their ``ids`` (int64; default ``0..n-1``) to an
    ``.npz`` file, atomically; with ``values`` (the real values whose signs are the codes, shape of
    ``codes``), also those, as :func:`compact_values` keeps them."""
    arr = _check_pm1(codes, "codes").astype(np.int8)
    ids = (
        np.arange(arr.shape[0], dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
    )
    if ids.shape != (arr.shape[0],):
        raise DataError(f"ids must have shape ({arr.shape[0]},), got {ids.shape}")
    extra = {}
    if values is not None:
        if np.shape(values) != arr.shape:
            raise DataError(f"values must have the shape of the codes {arr.shape}, got {np.shape(values)}")
        extra["values"] = compact_values(values)
    meta = {
        "format": "dmh-codes",
        "format_version": CODES_FORMAT_VERSION,
        "n_bits": int(arr.shape[1]),
        "modality": modality,
    }
    path = Path(path)
    with atomic_path(path, suffix=".tmp") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, codes=arr, ids=ids, **extra, **{META_KEY: json_bytes(meta)})
    return path


def load_codes(path, *, with_values: bool = False) -> tuple:
    """Read a code file: ``(codes, ids)``, int8 ``{-1,+1}`` ``(n, n_bits)`` and int64 ``(n,)``;
    with ``with_values=True``, ``(codes, ids, values)``: the stored values (float16, shape of the
    codes), or ``None`` when the file holds none.

    Besides files written by :func:`save_codes`, any ``.npz`` with a ``codes`` array (``{-1,+1}``)
    and optionally ``ids`` is accepted.
    """
    path = Path(path)
    arrays = read_npz(path, CodesFileError, "code file")
    if "codes" not in arrays:
        raise CodesFileError(path, f"has no 'codes' array (it holds {sorted(arrays)})")
    meta = None
    if META_KEY in arrays:
        try:
            meta = json.loads(arrays[META_KEY].tobytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            raise CodesFileError(path, "has a damaged header (not JSON text)") from None
        kind = meta.get("format") if isinstance(meta, dict) else None
        if kind != "dmh-codes":
            raise CodesFileError(path, f"is a {kind} file, not a code file (from dmh encode)")
    codes = arrays["codes"]
    ids = arrays.get("ids")
    try:
        codes = _check_pm1(codes, "codes").astype(np.int8)
    except DmhError as exc:
        raise CodesFileError(path, str(exc)) from None
    if meta is not None and meta.get("n_bits", codes.shape[1]) != codes.shape[1]:
        raise CodesFileError(path, f"its header says {meta['n_bits']!r} bits but the codes have {codes.shape[1]}")
    if ids is None:
        ids = np.arange(codes.shape[0], dtype=np.int64)
    ids = np.asarray(ids).reshape(-1)
    if ids.size != codes.shape[0]:
        raise CodesFileError(path, f"{codes.shape[0]} codes but {ids.size} ids")
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise CodesFileError(path, f"ids must be integers, got dtype {ids.dtype}")
    if ids.size and (ids.min() < 0 or np.unique(ids).size != ids.size):
        raise CodesFileError(path, "ids must be unique non-negative row numbers")
    if not with_values:
        return codes, ids.astype(np.int64)
    values = arrays.get("values")
    if values is not None:
        if values.shape != codes.shape or values.dtype != np.float16:
            raise CodesFileError(path, f"holds values of shape {values.shape} and dtype {values.dtype}; expected "
                                 f"float16 of the codes' shape {codes.shape}")
        if not np.isfinite(values).all():
            raise CodesFileError(path, "holds values that are NaN or infinite")
    return codes, ids.astype(np.int64), values
