"""Result records: the two retrieval tasks, the record schema and its checks, the labels methods
are shown under, and the one summary over seeds that every table and figure is drawn from.

A *record* is one evaluated cell and task: a dict with at least

========================  ==================================================================
key                       content
========================  ==================================================================
``method``                method name (``"dmh"``, ``"cmfh"``, ...) or the run's label
``n_bits``                code length
``paired_ratio``          share of fully-paired training objects, in (0, 1]
``seed``                  the run's random seed
``task``                  ``"image->text"`` or ``"text->image"``
``map``                   MAP over the whole database
========================  ==================================================================

plus any other scalar metrics (``map_tie_aware``, ``map@50``, ...), the curves of
:func:`dmh.metrics.evaluate_retrieval` (``topn``, ``pr_radius``, ...), and what identifies the cell
(``cell_key``, and in experiments ``dataset``, ``base_method``, ``params``, ``grid``).
"""

from __future__ import annotations

import json
import math
import numbers
from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from .errors import DataError, DataTypeError

__all__ = [
    "TASKS",
    "TASK_SHORT",
    "REQUIRED_KEYS",
    "ID_KEYS",
    "NOT_METRICS",
    "check_records",
    "with_top_precision",
    "method_label",
    "method_labels",
    "scalar_metrics",
    "summarize",
]

#: the two cross-modal retrieval tasks, in the order every table and figure shows them
TASKS = ("image->text", "text->image")
TASK_SHORT = {"image->text": "I→T", "text->image": "T→I"}
REQUIRED_KEYS = ("method", "n_bits", "paired_ratio", "seed", "task", "map")
#: the keys that identify a record in the tables (besides ``dataset`` and ``grid`` in experiments)
ID_KEYS = ("method", "paired_ratio", "seed", "task", "n_bits")
#: metrics shown first, in this order, when present
_PREFERRED = ("map", "map_tie_aware", "map@50", "precision@radius2")
#: scalar keys that describe the run rather than measure it
NOT_METRICS = {"n_bits", "paired_ratio", "seed", "n_query", "n_database", "n_train", "n_paired"}
#: how :func:`summarize` groups by default: one row per method, pairing, task and code length
BY_METHOD = ("method", "paired_ratio", "task", "n_bits")


def check_records(records) -> list[dict]:
    """Validate result records; returns them as a list. Errors name the record and the key."""
    if isinstance(records, dict):
        raise DataTypeError("records must be a list of dicts (one per run), got a single dict")
    records = list(records)
    if not records:
        raise DataError("no result records to report")
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise DataTypeError(f"record {i} is a {type(rec).__name__}, expected a dict")
        missing = [k for k in REQUIRED_KEYS if k not in rec]
        if missing:
            raise DataError(f"record {i} lacks {missing}; every record needs {list(REQUIRED_KEYS)}")
        if rec["task"] not in TASKS:
            raise DataError(f"record {i} has task {rec['task']!r}; expected one of {TASKS}")
        if not isinstance(rec["n_bits"], numbers.Integral) or rec["n_bits"] < 1:
            raise DataError(f"record {i} has n_bits {rec['n_bits']!r}; expected a positive integer")
        ratio = rec["paired_ratio"]
        if not isinstance(ratio, numbers.Real) or not 0 < ratio <= 1:
            raise DataError(f"record {i} has paired_ratio {ratio!r}; expected a number in (0, 1]")
        if not isinstance(rec["map"], numbers.Real):
            raise DataError(f"record {i} has map {rec['map']!r}; expected a number")
    return records


def with_top_precision(records, n: int = 10) -> list[dict]:
    """The records, each with a scalar ``precision@n`` (share of relevant items among the first ``n``
    answers, position tie-break), taken from its TopN curve where the record predates the scalar."""
    key = f"precision@{n}"
    out = []
    for rec in records:
        topn = rec.get("topn")
        if key not in rec and isinstance(topn, dict) and n in (topn.get("n") or []):
            value = topn["precision"][topn["n"].index(n)]
            rec = {**rec, key: value}
        out.append(rec)
    return out


def method_label(method: str, paired_ratio: float | None = None, show_ratio: bool = True) -> str:
    """``"dmh", 0.5 -> "DMH (50%)"``; lower-case names are upper-cased (methods are acronyms), a
    qualifier in brackets kept as it is (``"dmh (pairs only)" -> "DMH (pairs only)"``), a class
    given as ``package.module:Class`` shown by its class name."""
    head, sep, tail = method.partition(" (")
    if ":" in head:
        head = head.rsplit(":", 1)[1].rsplit(".", 1)[-1]
    name = head.upper() + sep + tail if head == head.lower() else head + sep + tail
    if paired_ratio is None or not show_ratio:
        return name
    if name.endswith(")") and " (" in name:  # "DMH (pairs only)" -> "DMH (pairs only, 50%)"
        return f"{name[:-1]}, {paired_ratio * 100:g}%)"
    return f"{name} ({paired_ratio * 100:g}%)"


def method_labels(pairs) -> dict[tuple[str, float], str]:
    """``{(method, paired_ratio): label}`` for records (or ``(method, ratio)`` pairs): the ratio
    follows the name unless the method appears at 100% only, as in the paper ("DMH (50%)")."""
    ratios = defaultdict(set)
    for item in pairs:
        method, ratio = (item["method"], item["paired_ratio"]) if isinstance(item, dict) else item
        ratios[method].add(float(ratio))
    out = {}
    for method, rs in ratios.items():
        show = rs != {1.0}
        for r in rs:
            out[(method, r)] = method_label(method, r, show)
    return out


def is_scalar(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def scalar_metrics(records) -> list[str]:
    """Names of the scalar metrics present in the records (preferred ones first)."""
    seen = []
    for rec in records:
        for key, value in rec.items():
            if key in ID_KEYS or key in NOT_METRICS or key in seen:
                continue
            if is_scalar(value) or value is None:
                seen.append(key)
    seen = [k for k in seen if any(is_scalar(r.get(k)) for r in records)]
    return [k for k in _PREFERRED if k in seen] + sorted(k for k in seen if k not in _PREFERRED)


def _group_value(rec: dict, key: str):
    value = rec.get(key, {} if key == "grid" else None)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True)
    if key == "paired_ratio":
        return float(value)
    if key == "n_bits":
        return int(value)
    return value


def _sort_value(key: str, value):
    if key == "paired_ratio":
        return -value
    if key == "task":
        return TASKS.index(value)
    return value


def summarize(records, metric: str = "map", by: Sequence[str] = BY_METHOD) -> list[dict]:
    """Mean and sample standard deviation (``ddof=1``; ``None`` with one seed) of ``metric`` over
    seeds, one row per group of ``by`` (the keys records are grouped on; a dict-valued key such as
    ``grid`` is compared as canonical JSON). Records lacking the metric, or holding a non-finite
    value, are skipped. Rows are ``{*by, mean, std, n_seeds}`` plus ``label`` (see
    :func:`method_labels`) when ``by`` holds ``method`` and ``paired_ratio``; ordered by the ``by``
    keys (larger ratios first, tasks in :data:`TASKS` order)."""
    records = check_records(records)
    by = tuple(by)
    groups = defaultdict(list)
    for rec in records:
        value = rec.get(metric)
        if is_scalar(value) and math.isfinite(value):
            gkey = tuple(_group_value(rec, k) for k in by)
            groups[gkey].append(float(value))
    labels = method_labels(records) if {"method", "paired_ratio"} <= set(by) else None
    rows = []
    def order(group):
        return [_sort_value(k, v) for k, v in zip(by, group[0], strict=True)]

    for gkey, values in sorted(groups.items(), key=order):
        arr = np.asarray(values)
        row = {k: (json.loads(v) if k == "grid" else v) for k, v in zip(by, gkey, strict=True)}
        row.update(
            mean=float(arr.mean()),
            std=float(arr.std(ddof=1)) if arr.size > 1 else None,
            n_seeds=int(arr.size),
        )
        if labels is not None:
            row["label"] = labels[(row["method"], row["paired_ratio"])]
        rows.append(row)
    return rows
