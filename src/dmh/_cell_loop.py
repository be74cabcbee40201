"""The one cell loop of :mod:`dmh.evaluation` (:func:`run_cells`, serial or in worker processes) and
what it does with a cell by default (:func:`fit_cell`: fit on the cell's semi-paired or pairs-only
training set, score both tasks, make its records).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from ._json import jsonable
from ._keys import fit_params
from ._scoring import evaluate_model
from ._workers import check_jobs
from .data import CrossModalData, make_semi_paired
from .registry import get_method_class


def _history(model) -> dict | None:
    hist = getattr(model, "history_", None)
    if not isinstance(hist, dict):
        return None
    return {
        "cle": [list(map(float, h)) for h in hist.get("cle", [])],
        "gbe": [[[int(it), float(v)] for it, v in h] for h in hist.get("gbe", [])],
        "dam_image": [list(map(float, h)) for h in hist.get("dam_image", [])],
        "dam_text": [list(map(float, h)) for h in hist.get("dam_text", [])],
        "time": hist.get("time", []),
    }


def fit_cell(cell: dict, data: CrossModalData, train: CrossModalData, keep_history: bool = False) -> dict:
    """Fit one cell on ``train``, score it on ``data``'s query and database sets; returns the
    finished cell ``{"key", "cell", "records", "fit_seconds"[, "unpaired_choice"][, "history"]}`` (one
    record per task; ``unpaired_choice``: what a model's ``use_unpaired="auto"`` chose)."""
    klass = get_method_class(cell["method"])
    params = fit_params(cell["method"], cell["params"])  # the key's params as the fit takes them (dmh._keys)
    model = klass(n_bits=cell["n_bits"], random_state=cell["seed"], **params)
    t0 = time.perf_counter()
    model.fit(train)
    fit_s = time.perf_counter() - t0
    scores = evaluate_model(model, data.query(), data.database())
    records = []
    for task, sc in scores.items():
        records.append(
            {
                "dataset": cell["dataset"],
                "method": cell["label"],
                "base_method": cell["method"],
                "params": cell["params"],
                "grid": cell["grid"],
                "n_bits": cell["n_bits"],
                "paired_ratio": cell["paired_ratio"],
                "seed": cell["seed"],
                "task": task,
                "split": "validation" if cell.get("validation") else "test",
                **sc,
                **({"pairs_only": True} if cell.get("pairs_only") else {}),
                "fit_seconds": round(fit_s, 3),
                "n_train": train.n_objects,
                "n_paired": train.n_paired,
                "cell_key": cell["key"],
            }
        )
    entry = {"key": cell["key"], "cell": cell, "records": jsonable(records), "fit_seconds": round(fit_s, 3)}
    choice = getattr(model, "unpaired_choice_", None)  # what DMH's use_unpaired="auto" chose, and why
    if choice is not None:
        entry["unpaired_choice"] = jsonable(choice)
    if keep_history:
        entry["history"] = jsonable(_history(model))
    return entry


@dataclass(frozen=True)
class CellTask:
    """What :func:`run_cells` does with each cell. ``fit(state, cell) -> entry``: a module-level function
    (a worker process finds it by name) given the loop's ``state`` (``datasets``, ``keep_history``, and
    whatever it keeps there, such as a training set shared by consecutive cells) and one cell;
    ``line(cell)``: the words a cell is shown with (``None``: no line per cell); ``name``: the
    progress bar's."""

    fit: Callable[[dict, dict], dict]
    line: Callable[[dict], str] | None = None
    name: str = "evaluate"


def run_cells(
    cells: Sequence[dict],
    datasets: dict[str, CrossModalData],
    *,
    on_entry: Callable[[dict], None] | None = None,
    keep_history: bool = False,
    echo: Callable[[str], None] | None = None,
    progress: bool = False,
    jobs: int = 1,
    task: CellTask | None = None,
) -> list[dict]:
    """The one cell loop: fit and score every cell (in order; consecutive cells of one dataset,
    seed and paired ratio share their semi-paired training set). ``on_entry`` gets each finished
    cell as soon as it exists (to save it); ``echo`` a line per cell; ``progress`` shows a bar.
    Returns the finished cells, in the order of ``cells``. ``task`` (a :class:`CellTask`) is what is
    done with each cell: by default :data:`EVALUATE` (:func:`fit_cell`); ``dmh tune`` passes its own
    (a fit scored on held-out pairs, :mod:`dmh.selection`).

    ``jobs=N`` (N > 1) fits N cells at a time, each in its own worker process with
    ``threads // N`` threads (at least one; ``threads`` is dmh's setting, :func:`dmh.get_threads`),
    handing the next cell to whichever worker finishes first. A cell's result is the one a serial
    run at that thread count gives (same seed, same codes); ``on_entry`` still runs in this
    process, one cell at a time, as each cell finishes. Each worker holds its own copy of the data
    and one fit: memory grows about N-fold. If a cell fails, no further cell starts; the cells
    running in the other workers are finished and handed to ``on_entry`` before the error is
    raised, so nothing fitted is lost.
    """
    jobs = check_jobs(jobs)
    task = EVALUATE if task is None else task
    bar = None
    if progress:
        from tqdm.auto import tqdm

        # on a terminal only: in a log or a pipe the bar's fragments would bury the messages
        bar = tqdm(total=len(cells), desc=task.name, unit="fit", disable=None)
    try:
        if jobs > 1 and len(cells) > 1:
            return _run_cells_parallel(cells, datasets, jobs, on_entry, keep_history, echo, bar, task)
        state = {"datasets": datasets, "keep_history": keep_history}
        entries = []
        for i, cell in enumerate(cells, 1):
            line = task.line(cell) if task.line is not None else None
            if echo is not None and line is not None:
                echo(f"[{i}/{len(cells)}] {cell['dataset']} {line}")
            if bar is not None and line is not None:
                bar.set_postfix_str(line)
            entry = task.fit(state, cell)
            entries.append(entry)
            if on_entry is not None:
                on_entry(entry)
            if bar is not None:
                bar.update(1)
    finally:  # also on an error: the bar ends its line before the error is printed
        if bar is not None:
            bar.close()
    return entries


def _cell_line(cell: dict) -> str:
    grid = "".join(f" {k}={v:g}" if isinstance(v, float) else f" {k}={v}" for k, v in cell["grid"].items())
    pairs = ", pairs only" if cell.get("pairs_only") else ""
    return (f"{cell['label']}{grid} {cell['n_bits']} bits, paired {cell['paired_ratio']:g}{pairs}, "
            f"seed {cell['seed']}")


def pairs_only_set(semi: CrossModalData) -> CrossModalData:
    """The paired objects of a semi-paired training set alone (its image-only and text-only objects
    dropped): what a pairs-only cell trains on."""
    name = f"{semi.name} (pairs only)" if semi.name else ""
    return semi.subset(np.flatnonzero(semi.paired_mask), name=name)


def _training_set(cache: dict, cell: dict, data: CrossModalData) -> CrossModalData:
    """The cell's training set: the semi-paired set of its dataset, seed and paired ratio (made once
    for consecutive cells that share it), or that set's pairs alone for a pairs-only cell."""
    key = (cell["dataset"], cell["seed"], cell["paired_ratio"])
    if key not in cache:
        cache.clear()
        cache[key] = {"semi-paired": make_semi_paired(data.train(), cell["paired_ratio"], random_state=cell["seed"])}
    sets = cache[key]
    if cell.get("pairs_only"):
        if "pairs-only" not in sets:
            sets["pairs-only"] = pairs_only_set(sets["semi-paired"])
        return sets["pairs-only"]
    return sets["semi-paired"]


def _fit_cell_task(state: dict, cell: dict) -> dict:
    """One cell of :func:`run_cells`, in this process or a worker's (``state``: the datasets,
    ``keep_history``, the training set of the latest cells)."""
    data = state["datasets"][cell["dataset"]]
    return fit_cell(cell, data, _training_set(state.setdefault("cache", {}), cell, data), state["keep_history"])


#: what :func:`run_cells` does with a cell unless told otherwise: :func:`fit_cell`
EVALUATE = CellTask(_fit_cell_task, _cell_line, "evaluate")


def _run_cells_parallel(cells, datasets, jobs, on_entry, keep_history, echo, bar, task) -> list[dict]:
    from ._workers import run_in_workers

    n_done = [0]

    def handed(i, entry):
        n_done[0] += 1
        if echo is not None and task.line is not None:
            echo(f"[{n_done[0]}/{len(cells)}] {cells[i]['dataset']} {task.line(cells[i])}: "
                 f"{entry['fit_seconds']:.1f} s")
        if on_entry is not None:
            on_entry(entry)
        if bar is not None:
            bar.update(1)

    state = {"datasets": {c["dataset"]: datasets[c["dataset"]] for c in cells}, "keep_history": keep_history}
    return run_in_workers(task.fit, cells, jobs=jobs, state=state, on_result=handed, echo=echo)
