"""Figures of an experiment: TopN-precision and PR curves (drawn by :mod:`dmh.plots`), MAP against
the paired ratio, parameter sensitivity, and the loss curves of convergence runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from .. import plots as dplots
from ..records import TASK_SHORT as _TASK_SHORT
from ..records import TASKS
from .summary import index_summary as _index
from .summary import summarize_records, whole_curve

__all__ = ["write_figures"]

_PRETTY = {"lambda_": "λ", "eta": "η", "gamma": "γ"}


# -------------------------------------------------------------------------------------- plots
def _figure(n_panels: int, width: float = 5.0, height: float = 4.0, rows: int = 1):
    return dplots.new_figure(n_panels, width, height, rows)


def _save(fig, path: Path) -> Path:
    return dplots.save_figure(fig, path, dpi=110)


def write_figures(cfg, entries, records, ds, out: Path) -> dict[str, Path]:
    """The PNG figures of dataset ``ds`` for a resolved config's kind; returns ``{stem: path}``."""
    title = cfg["resolved"]["dataset_sources"][ds].get("title", ds)
    kind, paths = cfg["kind"], {}
    if kind in ("table", "topn", "pr"):
        for b in cfg["bits"]:
            if kind in ("table", "topn"):
                p = dplots.plot_topn(records, out / f"{ds}_topn_{b}bits.png", b)
                if p is not None:
                    paths[p.stem] = p
            if kind in ("table", "pr"):
                p = dplots.plot_pr(records, out / f"{ds}_pr_{b}bits.png", b)
                if p is not None:
                    paths[p.stem] = p
    elif kind == "ratio_sweep":
        paths[f"{ds}_map_vs_ratio"] = _plot_ratio(cfg, records, ds, title, out / f"{ds}_map_vs_ratio.png")
    elif kind == "sensitivity":
        paths[f"{ds}_sensitivity"] = _plot_sensitivity(cfg, records, ds, title, out / f"{ds}_sensitivity.png")
    elif kind == "convergence":
        paths[f"{ds}_convergence"] = _plot_convergence(entries, ds, title, out / f"{ds}_convergence.png")
    return paths


def _plot_ratio(cfg, records, ds, title, path):
    summary = _index(summarize_records(records, "map"))
    ratios = sorted({float(r) for run in cfg["runs"] for r in run["paired_ratios"]})
    fig, axes = _figure(2)
    styles = ["-", "--", ":", "-."]
    for ax, task in zip(axes, TASKS, strict=True):
        for i, run in enumerate(cfg["runs"]):
            for j, b in enumerate(cfg["bits"]):
                pts = [(r, summary.get((ds, run["label"], r, b, task, "{}"))) for r in ratios]
                pts = [(r, s["mean"]) for r, s in pts if s is not None]
                if pts:
                    x, y = zip(*pts, strict=True)
                    ax.plot(
                        np.asarray(x) * 100,
                        y,
                        styles[i % len(styles)],
                        marker="os^D"[j % 4],
                        color=f"C{j}",
                        label=f"{run['label']} {b} bits",
                    )
        ax.set_title(f"{title}: {_TASK_SHORT[task]}")
        ax.set_xlabel("paired share of the training set (%)")
        ax.set_ylabel("MAP")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize="small")
    return _save(fig, path)


def _plot_sensitivity(cfg, records, ds, title, path):
    summary = _index(summarize_records(records, "map"))
    n_bits = cfg["bits"][0]
    panels = []
    for run in cfg["runs"]:
        names = list(run.get("grid", {}))
        if len(names) == 2:
            panels += [(run, task) for task in TASKS]
        elif len(names) == 1:
            panels.append((run, None))
    fig, axes = _figure(len(panels), 4.6, 4.0)
    for ax, (run, task) in zip(axes, panels, strict=True):
        names, ratio = list(run["grid"]), float(run["paired_ratios"][0])

        def mean(point, task, run=run, ratio=ratio):
            s = summary.get((ds, run["label"], ratio, n_bits, task, json.dumps(point, sort_keys=True)))
            return np.nan if s is None else s["mean"]

        if task is not None:
            a, b = names
            va, vb = run["grid"][a], run["grid"][b]
            z = np.array([[mean({a: x, b: y}, task) for y in vb] for x in va])
            im = ax.imshow(z, origin="lower", cmap="viridis", aspect="auto")
            ax.set_xticks(range(len(vb)), [f"{v:g}" for v in vb], rotation=45)
            ax.set_yticks(range(len(va)), [f"{v:g}" for v in va])
            ax.set_xlabel(_PRETTY.get(b, b))
            ax.set_ylabel(_PRETTY.get(a, a))
            for (i, j), v in np.ndenumerate(z):
                if np.isfinite(v):
                    ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=6, color="w")
            ax.set_title(f"{title}: MAP {_TASK_SHORT[task]}")
            ax.figure.colorbar(im, ax=ax, shrink=0.8)
        else:
            (a,) = names
            va = run["grid"][a]
            for t in TASKS:
                ax.plot(range(len(va)), [mean({a: x}, t) for x in va], marker="o", label=_TASK_SHORT[t])
            ax.set_xticks(range(len(va)), [f"{v:g}" for v in va], rotation=45)
            ax.set_xlabel(_PRETTY.get(a, a))
            ax.set_ylabel("MAP")
            ax.set_title(f"{title}: MAP vs {_PRETTY.get(a, a)}")
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize="small")
    return _save(fig, path)


def _concat_rounds(rounds) -> tuple[list, list, list]:
    """Per-round (step, value) lists laid end to end: ``(x, y, first step of each round)``."""
    x, y, starts, offset = [], [], [], 0
    for pts in rounds:
        if not pts:
            continue
        starts.append(offset)
        x += [offset + it for it, _ in pts]
        y += [v for _, v in pts]
        offset += max(it for it, _ in pts)
    return x, y, starts


def _round_marks(ax, starts, k):
    if k == 0:  # the round boundaries of the first curve only, to keep the panel readable
        for start in starts[1:]:
            ax.axvline(start + 0.5, color="grey", linestyle=":", linewidth=1)


def _plot_convergence(entries, ds, title, path):
    fig, axes = _figure(4, 5.0, 3.6, rows=2)
    hists = [(e["cell"], e["history"]) for e in entries if e["cell"]["dataset"] == ds and e.get("history")]
    for k, (cell, hist) in enumerate(hists):
        tag = f"{cell['label']} seed {cell['seed']}"
        x, y, starts = _concat_rounds([list(enumerate(rnd, 1)) for rnd in hist["cle"]])
        axes[0].plot(x, y, color=f"C{k}", alpha=0.7, label=tag)
        _round_marks(axes[0], starts, k)
        x, y, starts = _concat_rounds(hist["gbe"])
        axes[1].plot(x, y, color=f"C{k}", alpha=0.7, label=tag)
        _round_marks(axes[1], starts, k)
        for m, style in (("dam_image", "-"), ("dam_text", "--")):
            x, y, starts = _concat_rounds([list(enumerate(rnd, 1)) for rnd in hist[m]])
            axes[2].plot(x, y, style, color=f"C{k}", alpha=0.7, label=f"{tag} {m[4:]}")
        _round_marks(axes[2], starts, k)
        whole = whole_curve(hist)
        axes[3].plot(range(1, len(whole) + 1), whole, marker="o", alpha=0.7, label=tag)
    for ax, (name, xlabel) in zip(
        axes,
        (
            ("(a) CLE objective (Eq. 6)", "CLE iteration (rounds one after another)"),
            ("(b) GBE loss (Eq. 11)", "GBE iteration (rounds one after another)"),
            ("(c) DAM loss (Eq. 12), mean per epoch", "epoch (rounds one after another)"),
            ("(d) DMH: sum of the sub-model losses", "outer round"),
        ),
        strict=True,
    ):
        ax.set_title(f"{title}: {name}", fontsize="medium")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("loss")
        ax.grid(True, alpha=0.3)
        if len(hists) <= 5:
            ax.legend(fontsize="x-small")
    return _save(fig, path)
