"""The outputs of an experiment: ``metrics.json`` (every record, the per-seed summaries and, for
convergence runs, the loss histories) and ``report.md`` (our numbers beside the paper's), plus the
figures of :mod:`dmh.experiments.figures`. Drawn from the resolved config (which runs, which
datasets, the paper's numbers) and the finished cells' records.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

import numpy as np

from .._atomic import atomic_write_text
from .._json import jsonable as _jsonable
from ..records import TASK_SHORT as _TASK_SHORT
from ..records import TASKS, method_labels, with_top_precision
from .config import run_params
from .figures import write_figures
from .leaderboard import cpu_fits, leaderboard_markdown
from .stored import dumps_metrics
from .summary import index_summary as _index
from .summary import rounds as _rounds
from .summary import summarize_records

__all__ = ["summarize_records", "write_outputs"]

# ------------------------------------------------------------------------------------ outputs
def _fmt(mean, std, digits=4) -> str:
    if mean is None:
        return "–"
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def _labels(cfg: dict) -> dict:
    """(run label, ratio) -> table label: the ratio follows the name unless the run is 100% only,
    as in the paper ("DMH (50%)"). Per run: a label can stand for two runs (IMH at 100% and 50%)."""
    out = {}
    for run in cfg["runs"]:
        out.update(method_labels((run["label"], float(r)) for r in run["paired_ratios"]))
    return out


def _paper_columns(cfg) -> tuple[list[str], str]:
    paper = cfg["paper"]
    names = [cfg["datasets"][d].get("title", d) for d in paper["datasets"]]
    return paper["datasets"], " / ".join(names)


def _metric_tables(cfg, summary, metric, datasets) -> list[str]:
    """Rows: method and pairing; columns: bits (ours), each beside the paper's value(s)."""
    labels = _labels(cfg)
    idx = _index(summary)
    paper = cfg["paper"]
    with_paper = paper.get("rows") is not None and paper.get("metric") == metric
    parts = []
    for ds in datasets:
        title = cfg["resolved"]["dataset_sources"][ds].get("title", ds)
        for task in TASKS:
            header = ["Method"]
            for b in cfg["bits"]:
                header.append(f"{b} bits: ours ({title})")
                if with_paper:
                    pds, pnames = _paper_columns(cfg)
                    header.append(f"{b} bits: paper ({pnames})")
            lines = [
                f"### {title}: {metric}, {_TASK_SHORT[task]} ({task})",
                "",
                "| " + " | ".join(header) + " |",
                "|" + "|".join(["---"] + [":---:"] * (len(header) - 1)) + "|",
            ]
            seen = set()
            best = _best_rows(labels, idx, ds, task, cfg["bits"])
            for (label, ratio), shown in labels.items():
                row = [shown]
                seen.add(shown)
                for b in cfg["bits"]:
                    s = idx.get((ds, label, ratio, b, task, "{}"))
                    cell = _fmt(s["mean"], s["std"]) if s else "–"
                    row.append(f"**{cell}**" if (label, ratio) in best.get(b, ()) else cell)
                    if with_paper:
                        row.append(_paper_cell(cfg, task, shown, b))
                lines.append("| " + " | ".join(row) + " |")
            notes = []
            if with_paper:  # rows run here that the paper lacks; rows the paper has and this run does not
                notes += [f"{shown}: {why}." for shown, why in paper.get("not_in_paper", {}).items() if shown in seen]
                for shown in paper["rows"].get(task, {}):
                    if shown in seen:
                        continue
                    why = paper.get("not_run", {}).get(shown, "not run here")
                    notes.append(f"{shown}: {why}.")
                    row = [f"{shown} (not run)"]
                    for b in cfg["bits"]:
                        row += ["–", _paper_cell(cfg, task, shown, b)]
                    lines.append("| " + " | ".join(row) + " |")
            if any(best.values()):
                notes.insert(0, "Bold: the best mean of its column among the rows trained at the same paired ratio.")
            parts.append("\n".join(lines) + "\n" + "".join(f"\n- {n}" for n in notes) + ("\n" if notes else ""))
    return parts


def _best_rows(labels, idx, ds, task, bits) -> dict:
    """``{bits: {(label, ratio), ...}}``: the rows with the highest mean in each column, among the rows
    of one paired ratio (methods are compared on the same training data); none where a ratio has one
    row only."""
    out = {}
    for b in bits:
        by_ratio = defaultdict(dict)
        for label, ratio in labels:
            s = idx.get((ds, label, ratio, b, task, "{}"))
            if s and s["mean"] is not None:
                by_ratio[ratio][(label, ratio)] = round(s["mean"], 4)  # as shown
        out[b] = {row for rows in by_ratio.values() if len(rows) > 1
                  for row, v in rows.items() if v == max(rows.values())}
    return out


def _fit_time_tables(cfg, records, datasets) -> list[str]:
    """Mean (± std over seeds) fit time in seconds per method, pairing and bit length. Each cell's
    fit time is in both of its task records; one task is counted. Where a table cell has fits on
    the CPU, fits on a GPU are left out of it (:func:`dmh.experiments.leaderboard.cpu_fits`)."""
    labels = _labels(cfg)
    first = [r for r in records if r["task"] == TASKS[0]]
    timed = cpu_fits(first, group=("dataset", "method", "paired_ratio", "n_bits"))
    idx = _index(summarize_records(timed, "fit_seconds"))
    parts = []
    for ds in datasets:
        title = cfg["resolved"]["dataset_sources"][ds].get("title", ds)
        header = ["Method"] + [f"{b} bits" for b in cfg["bits"]]
        lines = [
            f"### {title}: fit time (seconds)",
            "",
            "Fits on the CPU; a cell's fits on a GPU count only where it has none on the CPU.",
            "",
            "| " + " | ".join(header) + " |",
            "|" + "|".join(["---"] + [":---:"] * (len(header) - 1)) + "|",
        ]
        for (label, ratio), shown in labels.items():
            row = [shown]
            for b in cfg["bits"]:
                s = idx.get((ds, label, ratio, b, TASKS[0], "{}"))
                row.append(_fmt(s["mean"], s["std"], digits=1) if s else "–")
            lines.append("| " + " | ".join(row) + " |")
        parts.append("\n".join(lines) + "\n")
    return parts


def _paper_cell(cfg, task, shown, n_bits) -> str:
    paper = cfg["paper"]
    if n_bits not in paper["bits"]:
        return "–"
    j = paper["bits"].index(n_bits)
    by_ds = paper["rows"].get(task, {}).get(shown)
    if by_ds is None:
        return "–"
    vals = [by_ds.get(d, [None] * len(paper["bits"]))[j] for d in paper["datasets"]]
    return " / ".join("–" if v is None else f"{v:.4f}" for v in vals)


def _topn_table(cfg, records, ds, n_bits) -> str:
    labels = _labels(cfg)
    ns = None
    acc = defaultdict(list)
    for r in records:
        if r["dataset"] == ds and r["n_bits"] == n_bits and isinstance(r.get("topn"), dict):
            ns = r["topn"]["n"]
            acc[(r["method"], float(r["paired_ratio"]), r["task"])].append(r["topn"]["precision"])
    if ns is None:
        return ""
    shown_n = [n for n in ns if n in (10, 50, 100, 200, 500, 1000)] or ns
    lines = [
        f"### TopN-precision at {n_bits} bits (mean over seeds)",
        "",
        "| Method | task | " + " | ".join(f"N={n}" for n in shown_n) + " |",
        "|---|---|" + ":---:|" * len(shown_n),
    ]
    for (label, ratio), shown in labels.items():
        for task in TASKS:
            curves = acc.get((label, ratio, task))
            if not curves:
                continue
            mean = np.nanmean(np.array([[np.nan if v is None else v for v in c] for c in curves], float), axis=0)
            lines.append(
                f"| {shown} | {_TASK_SHORT[task]} | " + " | ".join(f"{mean[ns.index(n)]:.4f}" for n in shown_n) + " |"
            )
    return "\n".join(lines) + "\n"


def _ratio_tables(cfg, summary, metric, ds) -> str:
    idx = _index(summary)
    ratios = sorted({float(r) for run in cfg["runs"] for r in run["paired_ratios"]})
    lines = []
    for task in TASKS:
        lines += [
            f"### {metric}, {_TASK_SHORT[task]}, by paired ratio",
            "",
            "| Method | bits | " + " | ".join(f"{r:.0%}" for r in ratios) + " |",
            "|---|---|" + ":---:|" * len(ratios),
        ]
        for run in cfg["runs"]:
            for b in cfg["bits"]:
                cells = [idx.get((ds, run["label"], r, b, task, "{}")) for r in ratios]
                lines.append(
                    f"| {run['label']} | {b} | "
                    + " | ".join(_fmt(c["mean"], c["std"]) if c else "–" for c in cells)
                    + " |"
                )
        lines.append("")
    return "\n".join(lines)


def _grid_values(cfg, run, name):
    return list(run["grid"][name])


def _sensitivity_tables(cfg, summary, metric, ds) -> str:
    idx = _index(summary)
    n_bits = cfg["bits"][0]
    lines = []
    for run in cfg["runs"]:
        names = list(run.get("grid", {}))
        ratio = float(run["paired_ratios"][0])
        for task in TASKS:

            def cell(point, run=run, ratio=ratio, task=task):
                c = idx.get((ds, run["label"], ratio, n_bits, task, json.dumps(point, sort_keys=True)))
                return _fmt(c["mean"], c["std"], 3) if c else "–"

            if len(names) == 2:
                a, b = names
                va, vb = _grid_values(cfg, run, a), _grid_values(cfg, run, b)
                lines += [
                    f"### {metric}, {_TASK_SHORT[task]}: {a} (rows) × {b} (columns), {n_bits} bits, paired {ratio:.0%}",
                    "",
                    f"| {a} \\ {b} | " + " | ".join(f"{v:g}" for v in vb) + " |",
                    "|---|" + ":---:|" * len(vb),
                ]
                for x in va:
                    lines.append(f"| {x:g} | " + " | ".join(cell({a: x, b: y}) for y in vb) + " |")
            elif len(names) == 1:
                (a,) = names
                va = _grid_values(cfg, run, a)
                lines += [
                    f"### {metric}, {_TASK_SHORT[task]}: {a}, {n_bits} bits, paired {ratio:.0%}",
                    "",
                    "| " + a + " | " + " | ".join(f"{v:g}" for v in va) + " |",
                    "|---|" + ":---:|" * len(va),
                    f"| {metric} | " + " | ".join(cell({a: x}) for x in va) + " |",
                ]
            lines.append("")
    return "\n".join(lines)


def _convergence_table(entries, ds) -> str:
    rows = defaultdict(lambda: defaultdict(list))
    for e in entries:
        if e["cell"]["dataset"] != ds or not e.get("history"):
            continue
        for row in _rounds(e["history"]):
            for k, v in row.items():
                if k != "round" and v is not None:
                    rows[row["round"]][k].append(v)
    if not rows:
        return ""
    keys = ("cle", "gbe", "dam_image", "dam_text", "whole")
    lines = [
        "### Loss at the end of each outer round (mean over seeds)",
        "",
        "| round | CLE objective | GBE loss | DAM image | DAM text | whole (sum) |",
        "|---|" + ":---:|" * 5,
    ]
    for r in sorted(rows):
        lines.append(f"| {r} | " + " | ".join(f"{np.mean(rows[r][k]):.4g}" if rows[r][k] else "–" for k in keys) + " |")
    return "\n".join(lines) + "\n"


def _header(cfg, quick_params) -> list[str]:
    res = cfg["resolved"]
    ran = [cfg["resolved"]["dataset_sources"][d].get("title", d) + f" (`{d}`)" for d in res["datasets"]]
    paper_ds = [spec.get("title", name) for name, spec in cfg["datasets"].items() if spec.get("paper")]
    ran_paper = [d for d in res["datasets"] if res["dataset_sources"][d].get("paper")]
    lines = [
        f"# {cfg['title']}",
        "",
        (f"Reproduces {cfg['paper_ref']} of the DMH paper." if paper_ds
         else f"Not in the DMH paper: {cfg['paper_ref']}."),
        cfg.get("description", ""),
        "",
    ]
    if not paper_ds:  # a comparison beyond the paper (the peers config): no paper data to name
        lines.append(f"> **Datasets.** This run used {', '.join(ran)}.")
    elif ran_paper:
        lines.append(f"> **Datasets.** This run used {', '.join(ran)}. The paper used {', '.join(paper_ds)}.")
    else:
        lines.append(
            f"> **Datasets.** This run used {', '.join(ran)}, **not** the paper's "
            f"{', '.join(paper_ds)} (not available here). Any numbers of the paper shown below are "
            "for those other datasets: they show what the paper claims (levels, ordering of methods), "
            "not values this run is expected to match."
        )
    if res.get("n_missing"):
        lines += ["", f"> **Partial.** {res['n_missing']} of {res['n_cells']} cells of this run are not finished: "
                  "every mean below is over the seeds that are (see metrics.json for each record). "
                  f"`dmh reproduce {cfg.get('name', 'CONFIG')} --reuse THIS_FOLDER --out NEW_FOLDER` (with this "
                  "run's `--data` and `--datasets`) fits only those and reuses the rest; it resumes where it "
                  "was stopped, and `--shard K/N` splits the fits over machines."]
    if res["quick"]:
        lines += [
            ">",
            "> **Quick run (`--quick`)**: reduced settings for a smoke test, **not a reproduction**: "
            f"seeds {cfg['seeds']}, bits {cfg['bits']}, method settings {json.dumps(quick_params)}.",
        ]
    if res.get("reduced"):
        what = "; ".join(
            f"{k.replace('_', ' ')} {v['ran']} of the config's {v['config']}" for k, v in res["reduced"].items()
        )
        lines += [
            ">",
            f"> **Reduced run**: {what} (chosen on the command line, e.g. to fit a time budget); "
            "every other setting is the config's.",
        ]
    if res.get("skipped_runs"):
        lines += [">", f"> **Not run** (method not available in this install): {', '.join(res['skipped_runs'])}."]
    lines += [
        "",
        "## Settings",
        "",
        f"- seeds: {cfg['seeds']} (mean ± sample std over seeds; one seed: the value alone)",
        f"- bits: {cfg['bits']}",
    ]
    if cfg.get("split") == "validation":
        v = {"fraction": 0.2, "random_state": 0, **cfg.get("validation", {})}
        lines.append(f"- scored on the validation split: {v['fraction']:g} of each dataset's training objects as "
                     f"queries (seed {v['random_state']}), the rest as training set and database; not on the query "
                     "sets, which the paper's numbers are for")
    for run in cfg["runs"]:
        params = run_params(cfg, run)
        grid = f", grid {json.dumps(run['grid'])}" if run.get("grid") else ""
        lines.append(
            f"- {run['label']}: `{run['method']}` at paired ratios {run['paired_ratios']}, "
            f"parameters {json.dumps(params)}{grid}"
        )
    for name in res["datasets"]:
        lines.append(f"- data `{name}`: {res['datasets_summary'].get(name, '')}")
    for note in cfg.get("notes", []):
        lines.append(f"- note: {note}")
    lines += ["", "## The paper's numbers", ""]
    for note in cfg["paper"].get("notes", []):
        lines.append(f"- {note}")
    if cfg["paper"].get("rows") is not None:
        lines.append(
            f"- {cfg['paper']['source']} reports {cfg['paper']['metric']} on "
            f"{', '.join(cfg['datasets'][d].get('title', d) for d in cfg['paper']['datasets'])}; "
            "they appear beside ours in the tables below, in that order."
        )
    return lines + [""]


def write_outputs(cfg: dict, entries: list[dict], out_dir, plots: bool = True) -> dict[str, Path]:
    """``metrics.json``, ``report.md`` and the PNG plots of a resolved config's finished cells."""
    out = Path(out_dir)
    # records reused from runs that predate the scalar precision@10 take it from their TopN curve
    records = with_top_precision([r for e in entries for r in e["records"]])
    metrics = list(dict.fromkeys([*cfg.get("metrics", ["map"]), "map"]))
    summary = {m: summarize_records(records, m) for m in metrics}
    payload = {
        "experiment": cfg["name"],
        "title": cfg["title"],
        "quick": cfg["resolved"]["quick"],
        "datasets": cfg["resolved"]["datasets_summary"],
        "n_cells": len(entries),
        "n_missing": cfg["resolved"].get("n_missing", 0),
        "records": records,
        "summary": summary,
    }
    if cfg["kind"] == "convergence":
        payload["histories"] = [
            {
                "cell": e["cell"],
                "history": e.get("history"),
                "rounds": _rounds(e["history"]) if e.get("history") else None,
            }
            for e in entries
        ]
    files = {"config": out / "config.json", "cells": out / "cells.json", "metrics": out / "metrics.json"}
    atomic_write_text(files["metrics"], dumps_metrics(_jsonable(payload)))

    quick_params = cfg["resolved"]["quick_method_params"]
    lines = _header(cfg, quick_params)
    datasets = cfg["resolved"]["datasets"]
    pngs: dict[str, Path] = {}
    lines.append("## Results")
    lines.append("")
    if cfg["kind"] in ("table", "topn", "pr", "convergence"):
        for m in metrics:
            lines += _metric_tables(cfg, summary[m], m, datasets)
    if cfg.get("leaderboard"):
        titles = {ds: cfg["resolved"]["dataset_sources"][ds].get("title", ds) for ds in datasets}
        expected = [(run["label"], float(q)) for run in cfg["runs"] for q in run["paired_ratios"]]
        lines += ["## Which method?", "", leaderboard_markdown(records, titles, datasets, expected)]
    if cfg.get("report_fit_time"):
        lines += _fit_time_tables(cfg, records, datasets)
    for ds in datasets:
        ds_records = [r for r in records if r["dataset"] == ds]
        title = cfg["resolved"]["dataset_sources"][ds].get("title", ds)
        if cfg["kind"] == "topn":
            for b in cfg["bits"]:
                lines.append(_topn_table(cfg, ds_records, ds, b))
        if cfg["kind"] == "ratio_sweep":
            lines.append(f"## {title}\n")
            for m in metrics:
                lines.append(_ratio_tables(cfg, summary[m], m, ds))
        if cfg["kind"] == "sensitivity":
            lines.append(f"## {title}\n")
            for m in metrics:
                lines.append(_sensitivity_tables(cfg, summary[m], m, ds))
        if cfg["kind"] == "convergence":
            lines.append(f"## {title}: convergence\n")
            lines.append(_convergence_table(entries, ds))
        if plots and ds_records:
            pngs.update(write_figures(cfg, entries, ds_records, ds, out))
    if pngs:
        lines += ["## Plots", ""] + [f"- [{p.name}]({p.name})" for p in pngs.values()] + [""]
    files["report"] = out / "report.md"
    atomic_write_text(files["report"], "\n".join(lines) + "\n")
    files.update(pngs)
    return files

