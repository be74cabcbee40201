"""How an experiment's ``metrics.json`` stores its records: what its report and figures read, no more.

A record as :func:`dmh.evaluation.run_cells` makes it also carries the per-query precision-recall
curve (``pr_radius_per_query``) and the tie-aware TopN curve (``topn.precision_tie_aware``), which no
report or figure of an experiment draws (their PR figures are the pooled curve, their TopN figures
the plain precision); the experiment's ``cells.json`` (resume state, not committed) keeps every
field. The curves that figures draw are rounded (TopN precision to 6 decimals, the pooled PR curve
to 4: far below what a figure shows); every scalar metric is kept as computed. The file holds one
record per line, so that a change to a few cells is a change to a few lines.
"""

from __future__ import annotations

import json

__all__ = ["CURVE_DECIMALS", "DROPPED_FIELDS", "dumps_metrics", "stored_record"]

#: fields (``curve.field`` for one inside a curve) that no report or figure of an experiment reads
DROPPED_FIELDS = ("pr_radius_per_query", "topn.precision_tie_aware")
#: curve -> decimals its numbers are stored with
CURVE_DECIMALS = {"topn": 6, "pr_radius": 4}


def _rounded(value, decimals: int):
    if isinstance(value, float):
        return round(value, decimals)
    if isinstance(value, list):
        return [_rounded(v, decimals) for v in value]
    if isinstance(value, dict):
        return {k: _rounded(v, decimals) for k, v in value.items()}
    return value


def stored_record(record: dict) -> dict:
    """``record`` as ``metrics.json`` keeps it: without :data:`DROPPED_FIELDS`, curves rounded."""
    out = {k: v for k, v in record.items() if k not in DROPPED_FIELDS}
    for field, decimals in CURVE_DECIMALS.items():
        if isinstance(out.get(field), dict):
            curve = {k: v for k, v in out[field].items() if f"{field}.{k}" not in DROPPED_FIELDS}
            out[field] = _rounded(curve, decimals)
    return out


def _line(value) -> str:
    return json.dumps(value, separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def dumps_metrics(payload: dict) -> str:
    """``payload`` (a dict of JSON-ready values) as text: one top-level field a line, and one item a
    line of each list of records (``records``, ``histories``); records stored by :func:`stored_record`."""
    parts = []
    for key, value in payload.items():
        if key in ("records", "histories") and isinstance(value, list):
            items = [stored_record(v) if key == "records" and isinstance(v, dict) else v for v in value]
            body = "[]" if not items else "[\n" + ",\n".join(_line(v) for v in items) + "\n]"
        else:
            body = _line(value)
        parts.append(f"{_line(key)}: {body}")
    return "{\n" + ",\n".join(parts) + "\n}\n"
