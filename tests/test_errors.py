"""dmh.errors: the one family of user-facing errors, and the convention that keeps it one family."""

from __future__ import annotations

import errno
import re
from pathlib import Path

import pytest

from dmh.errors import (
    DataFileError,
    DmhError,
    MissingDependencyError,
    ParameterError,
    UnknownNameError,
    os_error_message,
)

SRC = Path(__file__).resolve().parents[1] / "src" / "dmh"


def test_the_family_keeps_the_builtin_bases_callers_catch():
    assert issubclass(DataFileError, DmhError) and issubclass(DmhError, ValueError)
    err = UnknownNameError("unknown method 'x'")
    assert isinstance(err, KeyError) and isinstance(err, ParameterError) and str(err) == "unknown method 'x'"
    assert issubclass(MissingDependencyError, ImportError)
    assert str(DataFileError("d.npz", "is empty")) == "d.npz: is empty"


def test_os_error_message_names_the_file_for_user_errors_only():
    assert os_error_message(PermissionError(errno.EACCES, "Permission denied", "x.npz")) == "x.npz: Permission denied"
    assert os_error_message(OSError(errno.ENOSPC, "No space left on device", "o.json")).startswith("o.json")
    assert os_error_message(FileNotFoundError("data folder d does not exist")) == "data folder d does not exist"
    assert os_error_message(OSError(errno.EBADF, "Bad file descriptor")) is None  # not the user's doing


def test_user_facing_errors_are_raised_as_the_dmh_family():
    """A plain ``raise ValueError/TypeError/KeyError`` in dmh escapes the command line's one-line
    errors (the CLI maps only DmhError and the OS errors about files): raise a class of dmh.errors,
    or mark a check of dmh's own code with ``# not user input`` (or a deliberate KeyError with
    ``KeyError on purpose``) on the line or the line above."""
    offenders = []
    for path in sorted(SRC.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if re.search(r"\braise (ValueError|TypeError|KeyError)\(", line):
                context = line + (lines[i - 1] if i else "")
                if "not user input" not in context and "on purpose" not in context:
                    offenders.append(f"{path.relative_to(SRC)}:{i + 1}: {line.strip()}")
    assert not offenders, "raise a dmh.errors class instead:\n" + "\n".join(offenders)


@pytest.mark.parametrize("name", ["nope", "DMH2"])
def test_unknown_method_names_are_unknown_name_errors(name):
    from dmh.registry import get_method_class

    with pytest.raises(UnknownNameError, match="unknown method"):
        get_method_class(name)
