"""Reports of retrieval results: JSON, CSV and markdown tables (and, on request, PNG figures),
drawn from records only (see :mod:`dmh.records` for what a record holds).

Tables show the mean ± sample standard deviation (``ddof=1``) over seeds, one row per method and
pairing ratio, one column per task and code length; a cell with a single seed shows the value
alone. Methods appearing with one pairing ratio of 100% are labelled by name alone; otherwise the
ratio follows the name as in the DMH paper's figures: ``"DMH (50%)"``.

The writers every report uses are public for scripts that write results of their own (the
benchmarks and studies of the repository): :func:`atomic_write_text` (a crash mid-write leaves the
previous file, never half of one; a missing or read-only folder is one :class:`dmh.errors.OutputError`
naming the file), :func:`check_writable` (that check before any work) and :func:`jsonable` (numpy
values, NaN and the like as plain JSON values).
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

from ._atomic import atomic_write_text, check_writable
from ._json import jsonable
from .errors import ParameterError
from .records import (
    ID_KEYS,
    NOT_METRICS,
    REQUIRED_KEYS,
    TASK_SHORT,
    TASKS,
    check_records,
    method_label,
    scalar_metrics,
    summarize,
)

__all__ = [
    "atomic_write_text",
    "check_writable",
    "jsonable",
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
    "write_results",
]

def markdown_table(records, metric: str = "map", digits: int = 4) -> str:
    """``metric`` as mean ± std over seeds; rows method and pairing, columns task and bits."""
    rows = summarize(records, metric)
    if not rows:
        raise ParameterError(f"no record holds the metric {metric!r}")
    columns = sorted({(r["task"], r["n_bits"]) for r in rows}, key=lambda c: (TASKS.index(c[0]), c[1]))
    row_keys = list(dict.fromkeys((r["method"], r["paired_ratio"], r["label"]) for r in rows))
    cells = {(r["method"], r["paired_ratio"], r["task"], r["n_bits"]): r for r in rows}
    header = ["Method"] + [f"{TASK_SHORT[t]} {b} bits" for t, b in columns]
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
    extra = sorted({k for r in records for k in r if k in NOT_METRICS and k not in ID_KEYS})
    fields = list(ID_KEYS) + extra + metrics
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n", extrasaction="ignore")
    writer.writeheader()
    for rec in records:
        writer.writerow({k: jsonable(rec.get(k)) for k in fields})
    return buf.getvalue()


def write_json(records, path) -> Path:
    """All records, curves included, as JSON (NaN written as null), atomically."""
    records = check_records(records)
    path = Path(path)
    atomic_write_text(path, json.dumps(jsonable(records), indent=1, allow_nan=False) + "\n")
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


def _tables_and_figures(records, json_path: Path, plots: bool) -> dict[str, Path]:
    """The CSV and markdown files beside ``json_path`` and, with ``plots``, the figures of
    :func:`dmh.plots.plot_curves` in its folder."""
    paths = {
        "csv": write_csv(records, json_path.with_suffix(".csv")),
        "markdown": write_markdown(records, json_path.with_suffix(".md")),
    }
    if plots:
        from .plots import plot_curves

        paths.update(plot_curves(records, json_path.parent))
    return paths


def write_results(path, records, *, dataset: str, config: dict, label_prior_map: float | None = None,
                  tables: bool = False, plots: bool = False) -> dict[str, Path]:
    """The results file of ``dmh evaluate`` (``{"dataset", "config", "label_prior_map", "results",
    "summary"}``: ``results`` holds one record per cell and task), atomically; with ``tables`` also
    the CSV and markdown files beside it, with ``plots`` the figures. Returns ``{name: path}``."""
    payload = {
        "dataset": dataset,
        "config": config,
        "label_prior_map": label_prior_map,
        "results": records,
        "summary": summarize(records),
    }
    path = Path(path)
    atomic_write_text(path, json.dumps(jsonable(payload), indent=1))
    paths = {"json": path}
    if tables:
        paths.update(_tables_and_figures(records, path, plots))
    return paths


def write_reports(records, out_dir, plots: bool = False, stem: str = "results") -> dict[str, Path]:
    """Write ``<stem>.json``, ``<stem>.csv``, ``<stem>.md`` (and with ``plots`` the PNG figures of
    :func:`dmh.plots.plot_curves`) to ``out_dir``; returns ``{name: path}``."""
    records = check_records(records)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    json_path = write_json(records, out_dir / f"{stem}.json")
    return {"json": json_path, **_tables_and_figures(records, json_path, plots)}
