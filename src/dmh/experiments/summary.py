"""Experiment records summarised over seeds, and the loss histories of convergence runs read per
outer round: what both the report tables and the figures of an experiment are drawn from."""

from __future__ import annotations

import json
from collections.abc import Sequence

from ..records import summarize

__all__ = ["BY_CELL", "index_summary", "rounds", "summarize_records", "whole_curve"]

#: how experiment records are grouped over seeds: dataset, run label, paired ratio, bits, task, grid point
BY_CELL = ("dataset", "method", "paired_ratio", "n_bits", "task", "grid")


def summarize_records(records: Sequence[dict], metric: str) -> list[dict]:
    """Mean and sample std (``ddof=1``; None with one seed) of ``metric`` over seeds, per dataset,
    label, paired ratio, bit length, task and grid point (:func:`dmh.records.summarize` grouped by
    :data:`BY_CELL`); each row names its ``metric``."""
    if not records:
        return []
    return [{**row, "metric": metric} for row in summarize(records, metric, by=BY_CELL)]


def index_summary(summary: list[dict]) -> dict:
    """Summary rows by ``(dataset, method, paired_ratio, n_bits, task, canonical grid JSON)``."""
    return {
        (s["dataset"], s["method"], s["paired_ratio"], s["n_bits"], s["task"], json.dumps(s["grid"], sort_keys=True)): s
        for s in summary
    }


def rounds(hist: dict) -> list[dict]:
    """Per outer round: the last value of each sub-model's loss and their sum ('whole')."""
    out = []
    n = len(hist.get("dam_image", []))
    for r in range(n):
        cle = hist["cle"][r][-1] if r < len(hist["cle"]) and hist["cle"][r] else None
        gbe = hist["gbe"][r][-1][1] if r < len(hist["gbe"]) and hist["gbe"][r] else None
        di = hist["dam_image"][r][-1] if hist["dam_image"][r] else None
        dt = hist["dam_text"][r][-1] if r < len(hist["dam_text"]) and hist["dam_text"][r] else None
        parts = [v for v in (cle, gbe, di, dt) if v is not None]
        out.append(
            {
                "round": r + 1,
                "cle": cle,
                "gbe": gbe,
                "dam_image": di,
                "dam_text": dt,
                "whole": float(sum(parts)) if parts else None,
            }
        )
    return out


def whole_curve(hist: dict) -> list[float | None]:
    """The 'whole' value per round; rounds without a CLE/GBE step (DMH-FIX) carry the last one."""
    vals, last = [], {"cle": None, "gbe": None}
    for row in rounds(hist):
        for k in ("cle", "gbe"):
            if row[k] is not None:
                last[k] = row[k]
        parts = [v for v in (last["cle"], last["gbe"], row["dam_image"], row["dam_text"]) if v is not None]
        vals.append(float(sum(parts)) if parts else None)
    return vals
