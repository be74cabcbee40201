"""Loading a benchmark's DATA argument: a missing or unreadable file is one error line, not a traceback."""
from __future__ import annotations

import argparse


def load_or_exit(parser: argparse.ArgumentParser, path: str):
    """:func:`dmh.load_dataset` of ``path``; on failure ``parser.error`` with the reason (exit 2)."""
    from dmh import load_dataset
    from dmh.errors import DmhError

    try:
        return load_dataset(path)
    except (OSError, DmhError) as exc:
        parser.error(str(exc))
