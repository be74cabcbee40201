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


def int_list(parser: argparse.ArgumentParser, text: str, name: str, low: int = 1, high: int = 4096) -> list[int]:
    """``"16,64"`` as a list of integers in ``[low, high]``; anything else is ``parser.error``."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        parser.error(f"{name}: expected comma-separated whole numbers, got {text!r}")
    bad = [v for v in values if not low <= v <= high]
    if bad:
        parser.error(f"{name}: each value must be between {low} and {high}, got {bad[0]}")
    return values


def results_file(parser: argparse.ArgumentParser, path: str, name: str = "--out") -> list:
    """Records already in the JSON list at ``path`` (``[]`` when it does not exist), checked before
    any work: a folder, an unreadable file or one that is not a JSON list is ``parser.error``."""
    import json
    from pathlib import Path

    p = Path(path)
    if p.is_dir():
        parser.error(f"{name} {path}: is a folder; name a file")
    if not p.parent.is_dir():
        parser.error(f"{name} {path}: folder {p.parent} does not exist")
    if not p.exists():
        return []
    try:
        records = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        parser.error(f"{name} {path}: not a readable results file ({exc})")
    if not isinstance(records, list):
        parser.error(f"{name} {path}: not a results file of this script (a JSON list)")
    return records


def param_dict(parser: argparse.ArgumentParser, items, name: str = "--param") -> dict:
    """``KEY=VALUE`` strings as a dict, each value read as a Python literal where it is one (else
    kept as the string); an item without ``=`` is ``parser.error``."""
    import ast

    params = {}
    for item in items:
        if "=" not in item:
            parser.error(f"{name}: expected KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            pass
        params[key] = value
    return params
