"""Reports of retrieval results: JSON, CSV and markdown tables (and, on request, PNG figures).

A *record* is one evaluated run: a dict with at least

========================  ==================================================================
key                       content
========================  ==================================================================
``method``                method name (``"dmh"``, ``"cmfh"``, ...)
``n_bits``                code length
``paired_ratio``          share of fully-paired training objects, in (0, 1]
``seed``                  the run's random seed
``task``                  ``"image->text"`` or ``"text->image"``
``map``                   MAP over the whole database
========================  ==================================================================

plus any other scalar metrics (``map_tie_aware``, ``map@50``, ``precision@radius2``, ...) and the
curves of :func:`dmh.metrics.evaluate_retrieval` (``topn``, ``pr_radius``, ...), which go to the
JSON file and the figures but not to the CSV file or the tables.

Tables show the mean ± sample standard deviation (``ddof=1``) over seeds, one row per method and
pairing ratio, one column per task and code length; a cell with a single seed shows the value
alone. Methods appearing with one pairing ratio of 100% are labelled by name alone; otherwise the
ratio follows the name as in the DMH paper's figures: ``"DMH (50%)"``.
"""

from __future__ import annotations

import csv
import io
import json
import math
import numbers
from collections import defaultdict
from pathlib import Path

import numpy as np

from ._atomic import atomic_write_text
from ._json import jsonable as _jsonable

__all__ = [
    "TASKS",
    "REQUIRED_KEYS",
    "check_records",
    "method_label",
    "scalar_metrics",
    "summarize",
    "markdown_table",
    "records_to_csv",
    "write_json",
    "write_csv",
    "write_markdown",
    "write_reports",
]

TASKS = ("image->text", "text->image")
REQUIRED_KEYS = ("method", "n_bits", "paired_ratio", "seed", "task", "map")
_ID_KEYS = ("method", "paired_ratio", "seed", "task", "n_bits")
#: metrics shown first, in this order, when present
_PREFERRED = ("map", "map_tie_aware", "map@50", "precision@radius2")
#: scalar keys that describe the run rather than measure it
_NOT_METRICS = {"n_bits", "paired_ratio", "seed", "n_query", "n_database", "n_train", "n_paired"}
_TASK_SHORT = {"image->text": "I→T", "text->image": "T→I"}


def check_records(records) -> list[dict]:
    """Validate result records; returns them as a list. Errors name the record and the key."""
    if isinstance(records, dict):
        raise TypeError("records must be a list of dicts (one per run), got a single dict")
    records = list(records)
    if not records:
        raise ValueError("no result records to report")
    for i, rec in enumerate(records):
        if not isinstance(rec, dict):
            raise TypeError(f"record {i} is a {type(rec).__name__}, expected a dict")
        missing = [k for k in REQUIRED_KEYS if k not in rec]
        if missing:
            raise ValueError(f"record {i} lacks {missing}; every record needs {list(REQUIRED_KEYS)}")
        if rec["task"] not in TASKS:
            raise ValueError(f"record {i} has task {rec['task']!r}; expected one of {TASKS}")
        if not isinstance(rec["n_bits"], numbers.Integral) or rec["n_bits"] < 1:
            raise ValueError(f"record {i} has n_bits {rec['n_bits']!r}; expected a positive integer")
        ratio = rec["paired_ratio"]
        if not isinstance(ratio, numbers.Real) or not 0 < ratio <= 1:
            raise ValueError(f"record {i} has paired_ratio {ratio!r}; expected a number in (0, 1]")
        if not isinstance(rec["map"], numbers.Real):
            raise ValueError(f"record {i} has map {rec['map']!r}; expected a number")
    return records


def method_label(method: str, paired_ratio: float | None = None, show_ratio: bool = True) -> str:
    """``"dmh", 0.5 -> "DMH (50%)"``; lower-case names are upper-cased (methods are acronyms)."""
    name = method.upper() if method == method.lower() else method
    if paired_ratio is None or not show_ratio:
        return name
    return f"{name} ({paired_ratio * 100:g}%)"


def _labels(records) -> dict[tuple[str, float], str]:
    ratios = defaultdict(set)
    for rec in records:
        ratios[rec["method"]].add(float(rec["paired_ratio"]))
    out = {}
    for method, rs in ratios.items():
        show = rs != {1.0}
        for r in rs:
            out[(method, r)] = method_label(method, r, show)
    return out


def _is_scalar(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def scalar_metrics(records) -> list[str]:
    """Names of the scalar metrics present in the records (preferred ones first)."""
    seen = []
    for rec in records:
        for key, value in rec.items():
            if key in _ID_KEYS or key in _NOT_METRICS or key in seen:
                continue
            if _is_scalar(value) or value is None:
                seen.append(key)
    seen = [k for k in seen if any(_is_scalar(r.get(k)) for r in records)]
    return [k for k in _PREFERRED if k in seen] + sorted(k for k in seen if k not in _PREFERRED)


def summarize(records, metric: str = "map") -> list[dict]:
    """Mean and standard deviation of ``metric`` over seeds per (method, paired_ratio, task, bits).

    Returns rows ``{method, paired_ratio, task, n_bits, mean, std, n_seeds, label}``; ``std`` is the
    sample standard deviation (``None`` with a single seed). Records lacking the metric are skipped.
    """
    records = check_records(records)
    labels = _labels(records)
    groups = defaultdict(list)
    for rec in records:
        value = rec.get(metric)
        if _is_scalar(value) and not math.isnan(value):
            key = (rec["method"], float(rec["paired_ratio"]), rec["task"], int(rec["n_bits"]))
            groups[key].append(float(value))
    rows = []
    for (method, ratio, task, n_bits), values in sorted(groups.items(), key=_group_order):
        arr = np.asarray(values)
        rows.append(
            {
                "method": method,
                "paired_ratio": ratio,
                "task": task,
                "n_bits": n_bits,
                "mean": float(arr.mean()),
                "std": float(arr.std(ddof=1)) if arr.size > 1 else None,
                "n_seeds": int(arr.size),
                "label": labels[(method, ratio)],
            }
        )
    return rows


def _group_order(item):
    (method, ratio, task, n_bits), _ = item
    return (method, -ratio, TASKS.index(task), n_bits)


def markdown_table(records, metric: str = "map", digits: int = 4) -> str:
    """``metric`` as mean ± std over seeds; rows method and pairing, columns task and bits."""
    rows = summarize(records, metric)
    if not rows:
        raise ValueError(f"no record holds the metric {metric!r}")
    columns = sorted({(r["task"], r["n_bits"]) for r in rows}, key=lambda c: (TASKS.index(c[0]), c[1]))
    row_keys = list(dict.fromkeys((r["method"], r["paired_ratio"], r["label"]) for r in rows))
    cells = {(r["method"], r["paired_ratio"], r["task"], r["n_bits"]): r for r in rows}
    header = ["Method"] + [f"{_TASK_SHORT[t]} {b} bits" for t, b in columns]
    lines = [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(["---"] + [":---:"] * len(columns)) + "|",
    ]
    for method, ratio, label in row_keys:
        out = [label]
        for task, n_bits in columns:
            cell = cells.get((method, ratio, task, n_bits))
            if cell is None:
                out.append("–")
            elif cell["std"] is None:
                out.append(f"{cell['mean']:.{digits}f}")
            else:
                out.append(f"{cell['mean']:.{digits}f} ± {cell['std']:.{digits}f}")
        lines.append("| " + " | ".join(out) + " |")
    return "\n".join(lines) + "\n"


def records_to_csv(records) -> str:
    """One CSV row per record: the identifying keys, then every scalar metric (curves left out)."""
    records = check_records(records)
    metrics = scalar_metrics(records)
    extra = sorted({k for r in records for k in r if k in _NOT_METRICS and k not in _ID_KEYS})
    fields = list(_ID_KEYS) + extra + metrics
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for rec in records:
        writer.writerow({k: _jsonable(rec.get(k)) for k in fields})
    return buf.getvalue()


def write_json(records, path) -> Path:
    """All records, curves included, as JSON (NaN written as null), atomically."""
    records = check_records(records)
    path = Path(path)
    atomic_write_text(path, json.dumps(_jsonable(records), indent=1, allow_nan=False) + "\n")
    return path


def write_csv(records, path) -> Path:
    path = Path(path)
    atomic_write_text(path, records_to_csv(records))
    return path


def write_markdown(records, path, metrics=None, digits: int = 4) -> Path:
    """One markdown table per metric, atomically. Default: every scalar metric present except
    timings (keys ending in ``_seconds``, which stay in the CSV file)."""
    records = check_records(records)
    if metrics is None:
        metrics = [m for m in scalar_metrics(records) if not m.endswith("_seconds")]
    parts = []
    for metric in metrics:
        parts.append(f"## {metric}\n\nmean ± std over seeds\n\n{markdown_table(records, metric, digits)}")
    path = Path(path)
    atomic_write_text(path, "\n".join(parts))
    return path


def write_reports(records, out_dir, plots: bool = False, stem: str = "results") -> dict[str, Path]:
    """Write ``<stem>.json``, ``<stem>.csv``, ``<stem>.md`` (and with ``plots`` the PNG figures of
    :func:`dmh.plots.plot_curves`) to ``out_dir``; returns ``{name: path}``."""
    records = check_records(records)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": write_json(records, out_dir / f"{stem}.json"),
        "csv": write_csv(records, out_dir / f"{stem}.csv"),
        "markdown": write_markdown(records, out_dir / f"{stem}.md"),
    }
    if plots:
        from .plots import plot_curves

        paths.update(plot_curves(records, out_dir))
    return paths
