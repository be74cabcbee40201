"""The errors :mod:`dmh` raises about its user's input: one family, so that callers (the CLI among
them) can tell "the input is wrong" from "dmh has a bug".

Every error is raised where the problem is known and its message names the file or argument and
what is wrong, in one line. All are :class:`ValueError` subclasses (code written against the
scikit-learn convention ``except ValueError`` keeps working); the few about a wrong *type* are also
:class:`TypeError`.

========================  =======================================================================
class                     raised when
========================  =======================================================================
``DmhError``              base of the family (never raised itself)
``FileFormatError``       a file dmh reads is unreadable, corrupted, truncated or inconsistent;
                          ``.path`` is the file. Subclasses say which kind of file:
``DataFileError``         a data file (``.npz`` / ``.mat``)
``ModelFileError``        a saved model
``IndexFileError``        a saved Hamming index
``CodesFileError``        a code file (from ``dmh encode``)
``ResultsFileError``      a results / cells file of ``dmh evaluate`` or ``dmh reproduce``
``DataError``             arrays given as data are inconsistent (shapes, dtypes, NaN, indices)
``ParameterError``        an argument or hyperparameter is out of range, non-finite, duplicated...
``UnknownNameError``      an unknown method, dataset or experiment name (also a ``KeyError``)
``MissingDependencyError``  an optional package the request needs is not installed (an ``ImportError``)
``FitDivergedError``      a fit's loss became NaN or infinite (a learning rate or weight too large)
``ResourceError``         a size that cannot be allocated (estimated before allocating)
``OutputError``           an output path cannot be written, or is in use by another run
``CollectionError``       bad input to a collection command (photos, captions, query, settings)
``CollectionFileError``   a collection folder's own file (manifest, build record) is damaged
``UnknownItemError``      no item with that id in a collection (the service answers 404)
========================  =======================================================================
"""

from __future__ import annotations

from pathlib import Path

__all__ = [
    "CodesFileError",
    "CollectionError",
    "CollectionFileError",
    "DataError",
    "DataFileError",
    "DataTypeError",
    "DegenerateCodesWarning",
    "DmhError",
    "FileFormatError",
    "FitDivergedError",
    "IndexFileError",
    "MissingDependencyError",
    "ModelFileError",
    "OutputError",
    "ParameterError",
    "ParameterTypeError",
    "ResourceError",
    "ResultsFileError",
    "UnknownItemError",
    "UnknownNameError",
    "os_error_message",
]


class DmhError(ValueError):
    """Base of every error about the user's input (a bad file, argument or output path)."""


class FileFormatError(DmhError):
    """A file cannot be read as what it should be. ``path`` is the file; the message names it."""

    what = "file"

    def __init__(self, path, problem: str):
        self.path = Path(path) if path is not None else None
        self.problem = problem
        super().__init__(f"{self.path}: {problem}" if self.path is not None else problem)


class DataFileError(FileFormatError):
    what = "data file"


class ModelFileError(FileFormatError):
    what = "model file"


class IndexFileError(FileFormatError):
    what = "index file"


class CodesFileError(FileFormatError):
    what = "code file"


class ResultsFileError(FileFormatError):
    what = "results file"


class DataError(DmhError):
    """Arrays given as data are inconsistent: wrong shape or dtype, NaN, bad indices or masks."""


class DataTypeError(DataError, TypeError):
    """An array given as data has the wrong dtype (object, strings, complex, ...)."""


class ParameterError(DmhError):
    """An argument or hyperparameter is invalid (out of range, non-finite, duplicated, ...)."""


class ParameterTypeError(ParameterError, TypeError):
    """An argument has the wrong type."""


class UnknownNameError(ParameterError, KeyError):
    """A name (method, dataset, experiment, ...) that dmh does not know. Also a :class:`KeyError`,
    as the lookup of a missing key in a mapping is."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


class FitDivergedError(ParameterError, FloatingPointError):
    """A fit's training loss became NaN or infinite: the hyperparameters given (a learning rate,
    a loss weight) are too large for the data. Also a :class:`FloatingPointError`."""


class MissingDependencyError(DmhError, ImportError):
    """An optional dependency that the requested feature needs is not installed (the message says
    which ``pip install`` brings it). Also an :class:`ImportError`."""


class ResourceError(ParameterError):
    """A requested size would need more memory than can be allocated (checked before allocating)."""


class OutputError(DmhError):
    """An output path cannot be written (missing or read-only folder, a directory in the way, a
    results file in use by another run, ...)."""

    def __init__(self, path, problem: str):
        self.path = Path(path)
        self.problem = problem
        super().__init__(f"cannot write {self.path}: {problem}")


class CollectionError(DmhError):
    """Bad input to a collection command (:mod:`dmh.app.collection`): photos folder, captions file,
    query, or build settings."""


class CollectionFileError(FileFormatError, CollectionError):
    """A file of a collection folder (its manifest or build record) is damaged or inconsistent."""

    what = "collection file"


class UnknownItemError(UnknownNameError, CollectionError):
    """No item with that id in a collection (the search service answers it with 404)."""


class DegenerateCodesWarning(UserWarning):
    """A fit ended with constant or near-constant bits (or non-finite outputs) on its training data."""


def check_finite_memory(n_bytes: float, what: str, argument: str | None = None) -> None:
    """Refuse (``ResourceError``) an allocation of ``n_bytes`` larger than the machine's memory.

    The bound is the physical memory when it can be read (else 1 TiB): a size beyond it would fail
    anyway, only later and with a less clear error (or after swapping for minutes).
    """
    limit = _physical_memory()
    if n_bytes > limit:
        hint = f" (from {argument})" if argument else ""
        raise ResourceError(
            f"{what}{hint} would need about {_human(n_bytes)} of memory, more than this machine has "
            f"({_human(limit)})"
        )


def _physical_memory() -> float:
    import os

    try:
        return float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):  # pragma: no cover - not POSIX
        return float(2**40)


def _human(n_bytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if n_bytes < 1024 or unit == "PiB":
            return f"{n_bytes:.3g} {unit}"
        n_bytes /= 1024
    return f"{n_bytes:.3g} PiB"  # pragma: no cover


#: OS errors that are about the user's files or output place (one line at the command line), as
#: opposed to failures of dmh itself
_EXPECTED_ERRNOS = {
    "ENOSPC": "no space left on the device",
    "EDQUOT": "disk quota exceeded",
    "EROFS": "the file system is read-only",
    "EACCES": "permission denied",
    "EPERM": "operation not permitted",
    "EISDIR": "is a directory",
    "ENOTDIR": "a part of the path is not a directory",
    "ENOENT": "no such file or directory",
    "ENAMETOOLONG": "the file name is too long",
    "ELOOP": "too many levels of symbolic links",
    "EEXIST": "already exists",
    "ENXIO": "no such device",
}


def os_error_message(exc: OSError) -> str | None:
    """One line naming the file and the problem for an OS error about the user's files (permission
    denied, a directory where a file is expected, a read-only or full disk, ...), or ``None`` for any
    other OS error (a failure to report as a bug)."""
    import errno as _errno

    reasons = {getattr(_errno, k): v for k, v in _EXPECTED_ERRNOS.items() if hasattr(_errno, k)}
    if exc.errno is None and isinstance(exc, (FileNotFoundError, NotADirectoryError, IsADirectoryError,
                                              PermissionError)):
        return str(exc)  # raised by dmh with its own message
    if exc.errno not in reasons:
        return None
    name = exc.filename if exc.filename is not None else None
    text = exc.strerror or reasons[exc.errno]
    if name is None:
        return text
    return f"{name}: {text}"
