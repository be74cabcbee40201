"""The rule for design defaults: does a candidate setting replace the default?

Both settings are scored on the validation split of each development set's training objects
(``dmh evaluate DATA --split validation``; :meth:`dmh.CrossModalData.validation`), never on the
query sets, which stay for reporting. On each dataset and each figure (:data:`FIGURES`: MAP over the
whole database and MAP@50), the two are compared by the leaderboard's paired test over seeds
(:func:`dmh.experiments.outcomes.paired_outcome`) on each seed's mean over the cells (paired ratio,
bits, direction) both settings have. The candidate changes the default when it wins or ties on both
figures on every dataset and loses on none; a comparison without two shared seeds is untested, and
an untested one changes nothing.

A *setting* is a method with some parameters (``("dmh", {"block_bits": 32})``; no parameters: the
method at its defaults). Its records are those whose method and full parameters are exactly these
(:func:`dmh.evaluation.full_params`), so the runs of two settings may come from two results files.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .._keys import EXECUTION_PARAMS, bits_key_params, paired_key_params
from ..errors import DataError, ParameterError
from .outcomes import OUTCOMES, Z, paired_outcome

__all__ = ["FIGURES", "DatasetComparison", "changes_default", "check_settings_differ", "compare_settings",
           "comparison_markdown", "setting_records"]

#: what a default is chosen on: the whole ranking and its top
FIGURES = ("map", "map@50")
_SHORT = {"map": "MAP", "map@50": "MAP@50"}


@dataclass(frozen=True)
class DatasetComparison:
    """The candidate against the baseline on one dataset and figure: the means over the shared
    cells and seeds, the paired test over seeds of each seed's mean over those cells
    (``diff``, ``se``, ``n_seeds``, ``outcome``), the number of shared cells and their own
    outcomes cell by cell (``cells``: outcome -> count)."""

    dataset: str
    figure: str
    baseline: float | None
    against: float | None
    diff: float
    se: float
    n_seeds: int
    n_cells: int
    outcome: str
    cells: Counter


def _record_split(record: dict) -> str:
    return record.get("split", "test")  # records written before the validation split were all on the query set


def setting_records(records: Sequence[dict], method: str, params: Mapping | None = None,
                    split: str = "validation") -> list[dict]:
    """The records of ``split`` whose method is ``method`` and whose full parameters are
    ``params`` over its defaults (where a parameter changes nothing, at full pairing, on the pairs
    alone or at a code no longer than a length, as a cell key writes it)."""
    from ..evaluation import full_params
    from ..registry import resolve_method

    name = resolve_method(method)
    full = full_params(method, dict(params or {}))
    paired = paired_key_params(name, full)

    def strip(p):
        return {k: v for k, v in p.items() if k not in EXECUTION_PARAMS}

    want, want_paired = strip(full), strip(paired)
    out = []
    for r in records:
        if r.get("base_method", r.get("method")) != name or _record_split(r) != split:
            continue
        if not isinstance(r.get("params"), dict):
            continue
        if r.get("grid"):
            continue
        expected = want_paired if r.get("pairs_only") or float(r["paired_ratio"]) >= 1.0 else want
        if strip(r["params"]) == bits_key_params(name, expected, int(r["n_bits"])):
            out.append(r)
    return out


def _by_cell(records: Sequence[dict], figure: str) -> dict:
    """``{dataset: {(paired_ratio, pairs_only, n_bits, task): {seed: value}}}``; two records of one
    cell and seed must agree (the same cell read from two files)."""
    acc: dict = defaultdict(lambda: defaultdict(dict))
    for r in records:
        value = r.get(figure)
        if value is None:
            continue
        cell = (float(r["paired_ratio"]), bool(r.get("pairs_only")), int(r["n_bits"]), r["task"])
        seeds = acc[r.get("dataset", "data")][cell]
        seed = int(r["seed"])
        if seed in seeds and round(seeds[seed], 6) != round(float(value), 6):
            raise DataError(f"two records of {r.get('dataset', 'data')} {cell[2]} bits {cell[3]} at paired ratio "
                            f"{cell[0]:g}, seed {seed}, give {figure} {seeds[seed]:.4f} and {float(value):.4f}: the "
                            "results files hold two runs of one setting")
        seeds[seed] = float(value)
    return acc


def compare_settings(baseline: Sequence[dict], against: Sequence[dict], *, figures: Sequence[str] = FIGURES,
                     z: float = Z) -> list[DatasetComparison]:
    """The ``against`` records compared with the ``baseline`` records (each one setting, e.g. from
    :func:`setting_records`), per dataset (every dataset either has) and figure."""
    out = []
    for figure in figures:
        base, cand = _by_cell(baseline, figure), _by_cell(against, figure)
        for ds in sorted(set(base) | set(cand)):
            b, a = base.get(ds, {}), cand.get(ds, {})
            shared = sorted(set(a) & set(b))
            seeds = sorted(set.intersection(*(set(a[c]) & set(b[c]) for c in shared))) if shared else []
            cells = Counter(paired_outcome(a[c], b[c], z=z).outcome for c in shared)
            if not seeds:
                out.append(DatasetComparison(ds, figure, None, None, float("nan"), float("nan"), 0, len(shared),
                                             "untested", cells))
                continue
            own = {s: float(np.mean([a[c][s] for c in shared])) for s in seeds}
            rival = {s: float(np.mean([b[c][s] for c in shared])) for s in seeds}
            test = paired_outcome(own, rival, z=z)
            out.append(DatasetComparison(ds, figure, float(np.mean(list(rival.values()))),
                                         float(np.mean(list(own.values()))), test.diff, test.se, test.n,
                                         len(shared), test.outcome, cells))
    return out


def changes_default(rows: Sequence[DatasetComparison]) -> bool:
    """The rule: won or tied on every dataset and figure (and so lost on none, untested on none)."""
    return bool(rows) and all(r.outcome in ("won", "tied") for r in rows)


def _num(value: float | None, fmt: str) -> str:
    return "–" if value is None or not np.isfinite(value) else format(value, fmt)


def comparison_markdown(rows: Sequence[DatasetComparison], baseline: str, against: str, split: str = "validation",
                        z: float = Z) -> str:
    """The table of :func:`compare_settings` and the verdict, as markdown."""
    if not rows:
        raise DataError("nothing to compare: neither setting has a record with MAP or MAP@50")
    lines = [
        f"{against} against {baseline} on the {split} split: per dataset and figure, the mean over the cells "
        "(paired ratio, bits, direction) both have, and the paired test over seeds of each seed's mean "
        f"(won or lost beyond {z:g} standard errors of the per-seed difference, tied within)",
        "",
        "| dataset | figure | baseline | candidate | difference ± SE | seeds | cells | outcome "
        "| cells won, tied, lost |",
        "|---|---|---:|---:|---:|---:|---:|---|---|",
    ]
    for r in rows:
        diff = "–" if not np.isfinite(r.diff) else (f"{r.diff:+.4f}" + ("" if not np.isfinite(r.se)
                                                                         else f" ± {r.se:.4f}"))
        counts = ", ".join(str(r.cells.get(o, 0)) for o in OUTCOMES[:3])
        if r.cells.get("untested"):
            counts += f" (untested {r.cells['untested']})"
        lines.append(f"| {r.dataset} | {_SHORT.get(r.figure, r.figure)} | {_num(r.baseline, '.4f')} | "
                     f"{_num(r.against, '.4f')} | {diff} | {r.n_seeds} | {r.n_cells} | {r.outcome} | {counts} |")
    lost = sorted({r.dataset for r in rows if r.outcome == "lost"})
    untested = sorted({r.dataset for r in rows if r.outcome == "untested"})
    won = sum(r.outcome == "won" for r in rows)
    lines.append("")
    if changes_default(rows) and split == "validation":
        lines.append(f"Changes the default: yes ({against} wins or ties on both figures on every dataset, "
                     f"{won} of {len(rows)} won).")
    else:
        why = []
        if lost:
            why.append(f"lost on {', '.join(lost)}")
        if untested:
            why.append(f"untested on {', '.join(untested)} (needs both settings on two or more shared seeds)")
        if split != "validation":
            why.append(f"these are {split}-split figures; defaults are chosen on the validation split")
        lines.append("Changes the default: no (" + "; ".join(why) + ").")
    return "\n".join(lines)


def check_settings_differ(baseline: tuple[str, dict], against: tuple[str, dict]) -> None:
    """Refuse comparing a setting with itself (it would tie everywhere and 'change' the default)."""
    from ..evaluation import full_params
    from ..registry import resolve_method

    if (resolve_method(baseline[0]), full_params(*baseline)) == (resolve_method(against[0]), full_params(*against)):
        raise ParameterError("--baseline and --against name the same setting (the same method and parameters)")
