"""Which method? One table per dataset that ranks every method of a comparison run (the ``peers``
experiment) by its mean over code lengths, directions and seeds, with the spread over seeds, on MAP
over the whole database and on the top of the ranking (MAP@50, precision@10), with the mean fit
time; and DMH's (bits, direction) cells classed as won, tied or lost against every method trained
on the same data, by the paired test over seeds of :mod:`dmh.experiments.outcomes`.

Methods are compared only with methods trained on the same data: the rows of one paired ratio.
The tables are drawn from the records alone (``metrics.json``), so ``dmh reproduce`` writes them
into its report and :func:`leaderboard_markdown` can redraw them anywhere (the README).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence

import numpy as np

from ..records import TASKS, method_label, with_top_precision
from .outcomes import Z, field_outcome, outcome_counts_text, paired_outcome

__all__ = ["RANKED_METRICS", "field_counts", "leaderboard_compact", "leaderboard_markdown", "leaderboard_rows",
           "setting_costs", "unfinished_rows"]

#: what a method is ranked on: the whole ranking, then its top
RANKED_METRICS = ("map", "map@50", "precision@10")
_SHORT = {"map": "MAP", "map@50": "MAP@50", "precision@10": "P@10"}


def _seed_cells(records: Sequence[dict], metric: str) -> dict:
    """``{(dataset, label, ratio): {(bits, task): {seed: value}}}`` of grid-free records."""
    acc = defaultdict(lambda: defaultdict(dict))
    for r in records:
        if r.get("grid") or r.get(metric) is None:
            continue
        key = (r["dataset"], r["method"], float(r["paired_ratio"]))
        acc[key][(int(r["n_bits"]), r["task"])][r["seed"]] = float(r[metric])
    return {k: dict(cells) for k, cells in acc.items()}


def _on_gpu(record: dict) -> bool:
    params = record.get("params")
    return isinstance(params, dict) and params.get("device") == "cuda"


def cpu_fits(records: Sequence[dict], group=("dataset", "method", "paired_ratio")) -> list[dict]:
    """The records whose fit seconds compare: in each ``group`` (by default a leaderboard row) that
    has fits on the CPU, those alone; the fits on a GPU (``params["device"] == "cuda"``) only where
    the group has no other. For tables of fit seconds, so that they compare one kind of machine."""
    has_cpu = {tuple(r.get(k) for k in group) for r in records if not _on_gpu(r)}
    return [r for r in records if not _on_gpu(r) or tuple(r.get(k) for k in group) not in has_cpu]


def _fit_seconds(records: Sequence[dict]) -> dict:
    """Mean fit seconds per (dataset, method, ratio), of :func:`cpu_fits`."""
    acc = defaultdict(list)
    for r in cpu_fits(records):
        if not r.get("grid") and r["task"] == TASKS[0] and r.get("fit_seconds") is not None:
            acc[(r["dataset"], r["method"], float(r["paired_ratio"]))].append(r["fit_seconds"])
    return {k: float(np.mean(v)) for k, v in acc.items()}


def _row_stats(cells: dict, shared) -> tuple[float, float | None, int]:
    """Mean over the ``shared`` cells of each cell's mean over seeds; the sample standard deviation
    over seeds of the row's per-seed mean (over the seeds every shared cell has; ``None`` with one);
    the number of those seeds."""
    mean = float(np.mean([np.mean(list(cells[c].values())) for c in shared]))
    seeds = sorted(set.intersection(*(set(cells[c]) for c in shared)))
    per_seed = [np.mean([cells[c][s] for c in shared]) for s in seeds]
    return mean, (float(np.std(per_seed, ddof=1)) if len(per_seed) > 1 else None), len(seeds)


def leaderboard_rows(records: Sequence[dict], dataset: str) -> list[dict]:
    """One row per (method, paired ratio) of ``dataset``: ``label``, ``paired_ratio``, the mean of
    each :data:`RANKED_METRICS` over its (bits, direction) cells (each a mean over seeds) with its
    spread (``sd_<metric>``: the standard deviation over seeds of the row's per-seed mean), the rank
    on each among the rows of its paired ratio (1 = best), ``fit_seconds``, ``n_cells`` and
    ``n_seeds``. Only cells that every row of the ratio has are averaged, so that the means compare
    like with like."""
    records = with_top_precision([r for r in records if r.get("dataset") == dataset])
    by_metric = {m: _seed_cells(records, m) for m in RANKED_METRICS}
    fit = _fit_seconds(records)
    keys = sorted(by_metric["map"], key=lambda k: (-k[2], k[1]))
    rows = []
    for ratio in sorted({k[2] for k in keys}, reverse=True):
        group = [k for k in keys if k[2] == ratio]
        # a row still being computed (fewer (cell, seed) results than the fullest row of its ratio) is
        # left out of the ranking (unfinished_rows names it), so that it does not narrow the others'
        size = {k: sum(len(v) for v in by_metric["map"][k].values()) for k in group}
        group = [k for k in group if size[k] == max(size.values())]
        shared = set.intersection(*(set(by_metric["map"][k]) for k in group))
        for m in RANKED_METRICS[1:]:
            shared &= set.intersection(*(set(by_metric[m].get(k, {})) for k in group))
        if not shared:
            continue
        # a fixed order: a float mean summed in a set's order moves with the hash seed, and a mean at
        # a rounding boundary printed differently from run to run
        shared = sorted(shared)
        stats = {k: {m: _row_stats(by_metric[m][k], shared) for m in RANKED_METRICS} for k in group}
        ranks = {m: _ranks([stats[k][m][0] for k in group]) for m in RANKED_METRICS}
        for i, k in enumerate(group):
            rows.append({
                "label": k[1],
                "paired_ratio": ratio,
                **{m: stats[k][m][0] for m in RANKED_METRICS},
                **{f"sd_{m}": stats[k][m][1] for m in RANKED_METRICS},
                **{f"rank_{m}": ranks[m][i] for m in RANKED_METRICS},
                "fit_seconds": fit.get(k),
                "n_cells": len(shared),
                "n_seeds": stats[k]["map"][2],
            })
    rows.sort(key=lambda r: (-r["paired_ratio"], r["rank_map"], r["label"]))
    return rows


def unfinished_rows(records: Sequence[dict], dataset: str,
                    expected: Sequence[tuple[str, float]] = ()) -> list[tuple[str, float, int, int]]:
    """The rows of ``dataset`` that :func:`leaderboard_rows` leaves out because they hold fewer (cell,
    seed) results than the fullest row of their paired ratio: ``(label, ratio, results, of)``.
    ``expected``: the ``(label, ratio)`` rows the run plans (its config's runs); one of them with no
    result on ``dataset`` yet is named with 0 results."""
    cells = _seed_cells([r for r in records if r.get("dataset") == dataset], "map")
    size = {k: sum(len(v) for v in c.values()) for k, c in cells.items()}
    ratios = {k[2] for k in size}
    for label, ratio in expected:
        if float(ratio) in ratios:
            size.setdefault((dataset, label, float(ratio)), 0)
    out = []
    for (_, label, ratio), n in sorted(size.items(), key=lambda kv: (-kv[0][2], kv[0][1])):
        full = max(v for k, v in size.items() if k[2] == ratio)
        if n < full:
            out.append((label, ratio, n, full))
    return out


def _unfinished_text(records, datasets, titles, expected=()) -> str:
    parts = [f"{method_label(label)} at {ratio:.0%} pairs on {titles.get(ds, ds)} ({n} of {full})"
             for ds in datasets for label, ratio, n, full in unfinished_rows(records, ds, expected)]
    if not parts:
        return ""
    return ("Not finished, so not ranked ((bits, direction, seed) results so far): " + "; ".join(parts)
            + ". Their finished cells count in the comparisons with DMH below; a cell where a rival shares "
            "fewer than two seeds with DMH is untested.")


def _ranks(values: list[float]) -> list[int]:
    """Competition ranks, 1 for the largest (values equal to 4 decimals share a rank)."""
    rounded = [round(v, 4) for v in values]
    return [1 + sum(o > v for o in rounded) for v in rounded]


def _pm(mean: float, sd: float | None) -> str:
    return f"{mean:.3f}" if sd is None else f"{mean:.3f} ± {sd:.3f}"


def field_counts(records: Sequence[dict], label: str, ratio: float, *, versus: Sequence[str] | None = None,
                 metric: str = "map", z: float = Z) -> tuple[Counter, Counter]:
    """DMH-style counts for the row ``label`` at ``ratio``: ``(outcomes, lost_to)``. ``outcomes``
    counts its (dataset, bits, direction) cells as won, tied, lost or untested against every other
    row of that ratio (or ``versus`` only) by :func:`dmh.experiments.outcomes.field_outcome`;
    ``lost_to`` counts, per rival, the cells it won against the row. Cells where the row or every
    rival is absent are not counted."""
    cells = _seed_cells(with_top_precision(list(records)), metric)
    outcomes, lost_to = Counter(), Counter()
    for ds in sorted({k[0] for k in cells}):
        own = cells.get((ds, label, float(ratio)))
        if not own:
            continue
        others = {lab: v for (d, lab, r), v in cells.items()
                  if d == ds and r == float(ratio) and lab != label and (versus is None or lab in versus)}
        for c, values in own.items():
            rivals = {lab: v[c] for lab, v in others.items() if c in v}
            if not rivals:
                continue
            result = field_outcome(values, rivals, z=z)
            outcomes[result.outcome] += 1
            lost_to.update(result.lost_to)
    return outcomes, lost_to


def leaderboard_markdown(records: Sequence[dict], titles: dict[str, str] | None = None,
                         datasets: Sequence[str] | None = None, expected: Sequence[tuple[str, float]] = ()) -> str:
    """The "which method?" tables of every dataset of ``records`` (markdown), then DMH's counts.
    ``expected``: the ``(label, ratio)`` rows the run plans, so that one without results is named."""
    titles = titles or {}
    datasets = list(datasets) if datasets is not None else list(dict.fromkeys(r["dataset"] for r in records))
    lines = []
    for ds in datasets:
        rows = leaderboard_rows(records, ds)
        if not rows:
            continue
        n = rows[0]["n_cells"]
        lines += [
            f"**{titles.get(ds, ds)}**: mean over {n} (bits, direction) cells, each a mean over seeds, ± the "
            "standard deviation over seeds of that mean; rank among the methods trained on the same data (1 = best); "
            "fit s: mean seconds of one fit on the CPU (fits on a GPU count only for a row that has no other)",
            "",
            "| method | trained on | seeds | MAP | rank | MAP@50 | rank | P@10 | rank | fit s |",
            "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
        ]
        for r in rows:
            fit = "–" if r["fit_seconds"] is None else f"{r['fit_seconds']:.1f}"
            lines.append(
                f"| {method_label(r['label'])} | {r['paired_ratio']:.0%} pairs | {r['n_seeds']} "
                + "".join(f"| {_pm(r[m], r[f'sd_{m}'])} | {r[f'rank_{m}']} " for m in RANKED_METRICS)
                + f"| {fit} |"
            )
        lines.append("")
    unfinished = _unfinished_text(records, datasets, titles, expected)
    if unfinished:
        lines += [unfinished, ""]
    costs = setting_costs(records)
    if costs:
        lines += [costs, ""]
    counts = dmh_counts(records)
    if counts:
        lines += counts + [""]
    return "\n".join(lines)


def leaderboard_compact(records: Sequence[dict], titles: dict[str, str] | None = None,
                        datasets: Sequence[str] | None = None, ratio: float = 1.0,
                        metrics: Sequence[str] = ("map", "precision@10"),
                        expected: Sequence[tuple[str, float]] = ()) -> str:
    """One table for one paired ratio: a row per method, per dataset its mean of each of
    ``metrics`` ± its spread over seeds, with its rank there in parentheses, and its mean fit
    seconds over the datasets; rows in the order of their mean rank on the first metric. The short
    form of :func:`leaderboard_markdown` (for a README)."""
    titles = titles or {}
    datasets = list(datasets) if datasets is not None else list(dict.fromkeys(r["dataset"] for r in records))
    table: dict[str, dict] = {}
    for ds in datasets:
        for r in leaderboard_rows(records, ds):
            if r["paired_ratio"] == float(ratio):
                table.setdefault(r["label"], {})[ds] = r
    if not table:
        return ""
    order = sorted(table, key=lambda lab: (np.mean([row[f"rank_{metrics[0]}"] for row in table[lab].values()]), lab))
    head = [f"{titles.get(ds, ds)} {_SHORT[m]}" for ds in datasets for m in metrics]
    lines = ["| method | " + " | ".join(head) + " | fit s |", "|---|" + "---:|" * (len(head) + 1)]
    for lab in order:
        cells = []
        for ds in datasets:
            row = table[lab].get(ds)
            cells += ["–" if row is None else f"{_pm(row[m], row[f'sd_{m}'])} ({row[f'rank_{m}']})" for m in metrics]
        fits = [row["fit_seconds"] for row in table[lab].values() if row["fit_seconds"] is not None]
        fit = f"{np.mean(fits):.1f}" if fits else "–"
        lines.append(f"| {method_label(lab)} | " + " | ".join(cells) + f" | {fit} |")
    unfinished = _unfinished_text([r for r in records if float(r["paired_ratio"]) == float(ratio)], datasets, titles,
                                  [(lab, q) for lab, q in expected if float(q) == float(ratio)])
    return "\n".join(lines) + (f"\n\n{unfinished}" if unfinished else "")


#: the suffix of a row that runs a method in a lighter setting than its defaults (the peers config)
LIGHT_SUFFIX = " (CPU setting)"


def setting_costs(records: Sequence[dict], metric: str = "map", z: float = Z) -> str:
    """What each lighter setting costs: for every row ``X (CPU setting)`` beside a row ``X`` (the
    method at its defaults), per dataset and paired ratio, the mean over the (bits, direction) cells
    both finished of the lighter row minus the default's (paired by seed), and those cells won, tied
    and lost by the lighter setting. Markdown; empty when no row has both."""
    cells = _seed_cells(with_top_precision(list(records)), metric)
    lines = []
    for (ds, label, ratio), light in sorted(cells.items(), key=lambda kv: (kv[0][1], kv[0][0], -kv[0][2])):
        if not label.endswith(LIGHT_SUFFIX):
            continue
        full = cells.get((ds, label[: -len(LIGHT_SUFFIX)], ratio))
        shared = sorted(set(light) & set(full or {}))
        if not shared:
            continue
        counts = Counter(paired_outcome(light[c], full[c], z=z).outcome for c in shared)
        diffs = [np.mean([light[c][s] - full[c][s] for s in set(light[c]) & set(full[c])]) for c in shared]
        name = method_label(label[: -len(LIGHT_SUFFIX)])
        lines.append(f"| {name} | {ds} | {ratio:.0%} | {len(shared)} | {np.mean(diffs):+.3f} "
                     f"| {min(diffs):+.3f} / {max(diffs):+.3f} | {outcome_counts_text(counts)} |")
    if not lines:
        return ""
    return "\n".join([
        f"What the lighter setting costs ({_SHORT[metric]}, the CPU setting's row minus the default's, paired by "
        "seed, over the (bits, direction) cells both have finished; won/tied/lost by the CPU setting):",
        "",
        "| method | dataset | trained on | cells | mean difference | lowest / highest cell | cells won, tied, lost |",
        "|---|---|---:|---:|---:|---:|---|",
        *lines,
    ])


def _lost_to_text(lost_to: Counter) -> str:
    if not lost_to:
        return ""
    return " (lost to " + ", ".join(f"{method_label(lab)} in {n}" for lab, n in lost_to.most_common()) + ")"


def dmh_counts(records, z: float = Z) -> list[str]:
    """DMH's cells won, tied and lost against every other method trained on the same data (DMH at
    100% and at 50% pairing) and against DMH on the same set's pairs alone, as markdown bullets."""
    labels = {r["method"] for r in records}
    out = []
    if "DMH" not in labels:
        return out
    # DMH on the pairs alone is the same method on part of the data: a reference, not a rival
    rivals = sorted(labels - {"DMH", "DMH (pairs only)"})
    for ratio, who in ((1.0, "DMH (100%)"), (0.5, "DMH (50%)")):
        parts = []
        for m in RANKED_METRICS[:2]:
            counts, lost_to = field_counts(records, "DMH", ratio, versus=rivals, metric=m, z=z)
            if sum(counts.values()):
                parts.append(f"on {_SHORT[m]} {outcome_counts_text(counts)} (dataset, bits, direction) cells"
                             + _lost_to_text(lost_to))
        if parts:
            out.append(f"- {who} against every other method trained on the same data: " + "; ".join(parts) + ".")
    if "DMH (pairs only)" in labels:
        parts = []
        for m in RANKED_METRICS[:2]:
            counts, _ = field_counts(records, "DMH", 0.5, versus=["DMH (pairs only)"], metric=m, z=z)
            if sum(counts.values()):
                parts.append(f"on {_SHORT[m]} {outcome_counts_text(counts)} cells")
        out.append("- DMH (50%) against DMH (pairs only): " + "; ".join(parts) + ".")
    if out:
        out.append(f"- A cell is won when DMH's mean over seeds is ahead of each rival's by more than {z:g} standard "
                   "errors of the per-seed difference (paired by seed), lost when a rival is ahead by that much, "
                   "tied otherwise (a tie is not a win; `dmh.experiments.outcomes`).")
    return out
