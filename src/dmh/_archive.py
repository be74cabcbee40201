"""Reading ``.npz`` files defensively, and self-describing archives (named arrays plus a JSON header
under ``__meta__``) that models, indexes and code files use.

Nothing is unpickled (reading an untrusted file cannot run code), and a file is validated before
anything is built from it: the archive's integrity (every member read to its end, so that its CRC is
checked), each member's ``.npy`` header against the member's size (before allocating the array), plain
numeric dtypes only, and the JSON header's schema (an object with the required keys of the right
types). Every problem becomes one :class:`dmh.errors.FileFormatError` naming the file.
"""

from __future__ import annotations

import json
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np

from .errors import FileFormatError, check_finite_memory

META_KEY = "__meta__"

#: exceptions that the zip and .npy parsers raise on damaged input (not bugs of dmh)
_PARSE_ERRORS = (
    zipfile.BadZipFile,
    zipfile.LargeZipFile,
    zlib.error,
    EOFError,
    struct.error,
    ValueError,
    NotImplementedError,  # unknown compression method
    RuntimeError,  # encrypted member
    UnicodeDecodeError,
    OverflowError,
    SyntaxError,  # a .npy header that is not a Python literal
)


def json_bytes(meta: dict) -> np.ndarray:
    return np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)


def check_readable_file(path, error_cls=FileFormatError, what: str = "file") -> Path:
    """``path`` as a Path after checking that it names an existing, non-empty regular file.

    A missing file raises :class:`FileNotFoundError`, a directory :class:`IsADirectoryError`
    (the usual OS errors, with the path as ``filename``); an empty file ``error_cls``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(2, f"{what} not found", str(path))
    if path.is_dir():
        raise IsADirectoryError(21, f"expected a {what}, got a directory", str(path))
    if path.stat().st_size == 0:
        raise error_cls(path, f"the {what} is empty (0 bytes)")
    return path


def read_npz(path, error_cls=FileFormatError, what: str = "file") -> dict[str, np.ndarray]:
    """Every array of the ``.npz`` file ``path``, checked (see the module docstring).

    Raises ``error_cls`` (a :class:`FileFormatError`) for a file that is not a valid ``.npz`` of
    plain numeric arrays; :class:`OSError` (e.g. :class:`PermissionError`) when it cannot be opened.
    """
    path = check_readable_file(path, error_cls, what)
    with open(path, "rb") as fh:
        head = fh.read(6)
    if head.startswith(b"\x93NUMPY"):
        raise error_cls(path, f"is not a {what}: it holds a single .npy array, not an .npz archive of named "
                              "arrays")
    if not zipfile.is_zipfile(path):
        if head.startswith(b"PK\x03\x04"):
            raise error_cls(path, "is truncated or damaged: a zip archive without its central directory")
        raise error_cls(path, f"is not a {what}: it is not an .npz archive (not a zip file)")
    try:
        with zipfile.ZipFile(path) as zf:
            out = {}
            for info in zf.infolist():
                if info.is_dir():
                    continue
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                if name in out:
                    raise error_cls(path, f"holds the array {name!r} twice")
                out[name] = _read_member(zf, info, path, error_cls)
    except FileFormatError:
        raise
    except _PARSE_ERRORS as exc:
        raise error_cls(path, f"is damaged or truncated ({_describe(exc)})") from None
    if not out:
        raise error_cls(path, "is an empty archive (it holds no arrays)")
    return out


def _describe(exc: BaseException) -> str:
    text = str(exc).split("\n")[0].strip()
    if "pickle" in text.lower():  # never pass on advice to unpickle an untrusted file
        text = "it holds object data"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _read_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, path: Path, error_cls) -> np.ndarray:
    from numpy.lib import format as npf

    with zf.open(info) as fp:
        version = npf.read_magic(fp)
        if version == (1, 0):
            shape, fortran, dtype = npf.read_array_header_1_0(fp)
        elif version == (2, 0):
            shape, fortran, dtype = npf.read_array_header_2_0(fp)
        else:
            shape, fortran, dtype = npf._read_array_header(fp, version)  # noqa: SLF001 - (3, 0)
        name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
        if dtype.hasobject or dtype.names is not None or dtype.subdtype is not None or dtype.kind not in "biufc":
            what = "object" if dtype.hasobject else "text" if dtype.kind in "US" else str(dtype)
            raise error_cls(path, f"array {name!r} holds {what} data ({dtype}), not numbers")
        if any(s < 0 for s in shape):
            raise error_cls(path, f"array {name!r} has a negative dimension in its shape {shape}")
        count = 1
        for s in shape:
            count *= int(s)
        n_bytes = count * dtype.itemsize
        header_len = fp.tell()  # magic + header, as read
        if info.file_size != header_len + n_bytes:
            raise error_cls(
                path,
                f"is damaged or truncated: array {name!r} declares shape {shape} of {dtype} "
                f"({n_bytes} bytes) but holds {info.file_size - header_len} bytes of data",
            )
        check_finite_memory(n_bytes, f"array {name!r} of {path}")
        flat = np.empty(count, dtype=dtype)
        if n_bytes:
            view = memoryview(flat.view(np.uint8))
            got = 0
            while got < n_bytes:
                n = fp.readinto(view[got:])
                if not n:
                    break
                got += n
            if got != n_bytes:
                raise error_cls(path, f"is truncated: array {name!r} ended after {got} of {n_bytes} bytes")
        if fp.read(1):
            raise error_cls(path, f"is damaged: array {name!r} holds bytes after its array")
    return flat.reshape(shape, order="F" if fortran else "C")


def read_archive(path, kind: str, version: int, what: str, schema: dict | None = None,
                 error_cls=FileFormatError):
    """``(meta, arrays)`` of a dmh archive of format ``kind``, after checking its integrity and header.

    ``schema`` maps required header keys to the accepted type(s) (``int`` excludes ``bool``).
    """
    arrays = read_npz(path, error_cls, f"dmh {what} file")
    path = Path(path)
    if META_KEY not in arrays:
        raise error_cls(path, f"is not a dmh {what} file: it has no {META_KEY} header")
    raw = arrays.pop(META_KEY)
    try:
        meta = json.loads(raw.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error_cls(path, f"has a damaged header (not JSON text: {exc})") from None
    if not isinstance(meta, dict):
        raise error_cls(path, f"has a damaged header: expected a JSON object, got {type(meta).__name__}")
    if meta.get("format") != kind:
        raise error_cls(path, f"is not a dmh {what} file (header format {meta.get('format')!r}, expected {kind!r})")
    fv = meta.get("format_version", 0)
    if not _is_int(fv):
        raise error_cls(path, f"has a damaged header: format_version is {fv!r}, not an integer")
    if fv > version:
        raise error_cls(path, f"was written by a newer dmh (format {fv}, this one reads up to {version})")
    check_schema(meta, schema or {}, path, error_cls)
    return meta, arrays


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_schema(meta: dict, schema: dict, path, error_cls) -> None:
    """Each key of ``schema`` is present in ``meta`` with one of its types."""
    for key, types in schema.items():
        if key not in meta:
            raise error_cls(path, f"has an incomplete header: it lacks {key!r}")
        types = types if isinstance(types, tuple) else (types,)
        value = meta[key]
        ok = any(_is_int(value) if t is int else isinstance(value, t) for t in types)
        if not ok:
            names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise error_cls(path, f"has a damaged header: {key!r} is {value!r}, expected {names}")
