"""PNG figures of retrieval curves: TopN-precision and precision-recall by Hamming radius.

One figure per code length and curve kind, one panel per task (image->text, text->image), one line
per method and pairing ratio, labelled like the DMH paper's figures (``"DMH (50%)"``; see
:func:`dmh.records.method_label`). Curves are averaged over seeds. Records are those of
:mod:`dmh.records` holding the curves of :func:`dmh.metrics.evaluate_retrieval`.

matplotlib is imported only when a figure is drawn, and only its object-oriented API with the Agg
canvas is used (no pyplot, no global backend switch).
"""

from __future__ import annotations

import math
import warnings
from collections import defaultdict
from pathlib import Path

import numpy as np

from ._atomic import atomic_path
from .errors import DataError, ParameterError
from .records import TASKS, check_records, method_labels

__all__ = ["plot_topn", "plot_pr", "plot_curves", "mean_curves", "new_figure", "save_figure"]

_TASK_TITLE = {"image->text": "Image → Text", "text->image": "Text → Image"}
_MARKERS = "os^Dv<>ph*x+"


def _values(seq) -> np.ndarray:
    return np.array([np.nan if v is None else float(v) for v in seq], dtype=np.float64)


def mean_curves(records, kind: str, n_bits: int) -> dict:
    """Seed-averaged curves of ``kind`` (``"topn"``, ``"pr_radius"``, ``"pr_radius_per_query"``).

    Returns ``{task: [(label, x, y), ...]}``: for ``"topn"`` x = N and y = precision, for the PR
    kinds x = recall and y = precision (points where precision is undefined are dropped).
    """
    records = check_records(records)
    labels = method_labels(records)
    groups = defaultdict(list)
    for rec in records:
        if int(rec["n_bits"]) == n_bits and isinstance(rec.get(kind), dict):
            groups[(rec["task"], rec["method"], float(rec["paired_ratio"]))].append(rec[kind])
    out = {task: [] for task in TASKS}
    for (task, method, ratio), curves in sorted(groups.items(), key=lambda g: (g[0][1], -g[0][2])):
        if kind == "topn":
            xs = [tuple(c["n"]) for c in curves]
            if len(set(xs)) != 1:
                raise DataError(
                    f"{method} at {n_bits} bits ({task}): seeds have different TopN grids"
                )
            x = np.asarray(xs[0], dtype=np.float64)
            y = np.nanmean([_values(c["precision"]) for c in curves], axis=0)
        else:
            with warnings.catch_warnings():  # all seeds undefined at a radius: nan, dropped below
                warnings.simplefilter("ignore", category=RuntimeWarning)
                x = np.nanmean([_values(c["recall"]) for c in curves], axis=0)
                y = np.nanmean([_values(c["precision"]) for c in curves], axis=0)
            keep = np.isfinite(x) & np.isfinite(y)
            x, y = x[keep], y[keep]
        out[task].append((labels[(method, ratio)], x, y))
    return out


def new_figure(n_panels: int, width: float = 5.0, height: float = 4.0, rows: int = 1):
    """A figure of ``n_panels`` axes (``rows`` rows) on the Agg canvas: ``(figure, flat axes)``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cols = math.ceil(n_panels / rows)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(rows, cols, squeeze=False).ravel()


def save_figure(fig, path, dpi: int = 120) -> Path:
    """Write ``fig`` as PNG to ``path``, atomically, in a palette of at most 256 colours (a plot's
    lines and text lose nothing; the file is about a third of the full-colour one)."""
    import io

    from PIL import Image  # matplotlib's own dependency

    path = Path(path)
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    with atomic_path(path) as tmp:
        quantized_png(Image.open(buffer), tmp)
    return path


def quantized_png(image, path) -> None:
    """Save a PIL ``image`` as a PNG of at most 256 colours (median cut, no dithering) at ``path``."""
    from PIL import Image

    palette = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    palette.save(path, format="PNG", optimize=True)


#: above this many curves a plot's legend goes beside its panels, once (inside each panel it would
#: cover the curves and leave the panels no room)
_LEGEND_INSIDE = 8


def _figure(curves, xlabel, ylabel, title):
    tasks = [t for t in TASKS if curves.get(t)]
    n_curves = max(len(curves[t]) for t in tasks)
    outside = n_curves > _LEGEND_INSIDE
    fig, axes = new_figure(len(tasks), width=5.0, height=4.0 + (0.12 * n_curves / 2 if outside else 0.0))
    for ax, task in zip(axes, tasks, strict=True):
        for j, (label, x, y) in enumerate(curves[task]):
            ax.plot(
                x, y, marker=_MARKERS[j % len(_MARKERS)], markersize=4, linewidth=1.4, label=label
            )
        ax.set_title(f"{_TASK_TITLE[task]} @ {title}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.grid(True, alpha=0.3)
        if not outside:
            ax.legend(fontsize="small")
    if outside:
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside right upper", fontsize="small", ncols=1 + n_curves // 20)
    return fig


def plot_topn(records, path, n_bits: int) -> Path | None:
    """TopN-precision curves at ``n_bits``, one panel per task; ``None`` if no record has them."""
    curves = mean_curves(records, "topn", n_bits)
    if not any(curves.values()):
        return None
    return save_figure(
        _figure(curves, "N (number of retrieved items)", "Precision", f"{n_bits} bits"), path
    )


def plot_pr(records, path, n_bits: int, form: str = "pooled") -> Path | None:
    """Precision-recall curves by Hamming radius 0..n_bits (``form``: ``"pooled"`` or
    ``"per_query"``); ``None`` when no record has them."""
    if form not in ("pooled", "per_query"):
        raise ParameterError(f"form must be 'pooled' or 'per_query', got {form!r}")
    kind = "pr_radius" if form == "pooled" else "pr_radius_per_query"
    curves = mean_curves(records, kind, n_bits)
    if not any(curves.values()):
        return None
    title = f"{n_bits} bits" + (" (per-query mean)" if form == "per_query" else "")
    return save_figure(_figure(curves, "Recall", "Precision", title), path)


def plot_curves(records, out_dir) -> dict[str, Path]:
    """Every figure the records allow: ``topn_<bits>bits.png`` and ``pr_<bits>bits.png`` per code
    length; returns ``{name: path}``."""
    records = check_records(records)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {}
    for n_bits in sorted({int(r["n_bits"]) for r in records}):
        for name, fn in (("topn", plot_topn), ("pr", plot_pr)):
            path = fn(records, out_dir / f"{name}_{n_bits}bits.png", n_bits)
            if path is not None:
                paths[f"{name}_{n_bits}bits"] = path
    return paths
