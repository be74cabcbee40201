"""The evaluation protocol and its one cell loop, used by ``dmh evaluate``, ``dmh reproduce`` and
``dmh tune`` (which scores its cells on held-out pairs instead: :class:`CellTask`).

Train on a (semi-)paired training set, encode queries and database with the learned hash
functions, score image->text and text->image Hamming ranking. A *cell* is one fit: dataset, method
(with its full parameters), bit length, paired ratio and seed (the seed makes the semi-paired
training set and seeds the method). For each dataset, seed and paired ratio, one semi-paired
training set (:func:`dmh.make_semi_paired`) is made and shared by the consecutive cells that use it.

A *pairs-only* cell (``pairs_only=True``) trains on the paired objects of that same semi-paired set
alone, its image-only and text-only objects dropped: beside the cell that uses every object, it
shows whether a method gains from the unpaired ones (for a method that ignores them, the two cells
train on the same data).

Every cell has one key (:func:`cell_key`): the canonical JSON of the dataset's fingerprint (its
source path, file size and a hash of its arrays), its split, the pairing seed, the method and its
full parameters (defaults included), the bit length, the
label it is shown under, for a pairs-only cell only, ``pairs_only`` and, for a cell scored on the
validation split (:meth:`dmh.CrossModalData.validation`) only, ``validation`` (its fraction and
seed). Where a fit runs (``device``, :data:`EXECUTION_PARAMS`) is not part of the key: it changes
how fast a fit runs, not its result beyond rounding (a deep peer's MAP on a GPU and on the CPU agree within 0.001). How
options added to or removed from a method keep earlier keys valid: :mod:`dmh._keys`. A finished
cell is reused (``evaluate --resume``, ``reproduce`` into the same folder or with ``--reuse``) only
on an exact key match.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._json import jsonable
from ._keys import dump_key, fit_params, key_params, normalize_key, paired_key_params
from ._workers import MAX_JOBS, check_jobs
from .data import CrossModalData, make_semi_paired
from .errors import DataError, ParameterError
from .records import TASKS
from .registry import get_method_class, resolve_method

__all__ = [
    "MAX_JOBS",
    "TASKS",
    "TRAININGS",
    "EVALUATE",
    "CellTask",
    "cell_key",
    "check_jobs",
    "data_fingerprint",
    "evaluate_model",
    "fit_cell",
    "full_params",
    "label_prior_map",
    "make_cell",
    "normalize_key",
    "pairs_only_redundant",
    "pairs_only_set",
    "plan_evaluation",
    "run_cells",
    "reusable_cells",
    "run_evaluation",
]

#: the parameters a cell sets itself (every other one is part of the cell's ``params``)
_CELL_PARAMS = ("n_bits", "random_state")
#: the fields of a cell that make up its key
KEY_FIELDS = ("dataset", "data", "split", "label", "method", "params", "n_bits", "paired_ratio", "seed")
#: fields that enter the key only where a cell sets them (a cell without them keeps the key it has)
OPTIONAL_KEY_FIELDS = ("pairs_only", "validation")
#: what a cell trains on: every object of the semi-paired set, or its paired objects alone
TRAININGS = ("semi-paired", "pairs-only")


def _score(query_codes, database_codes, query_labels, database_labels) -> dict:
    from .metrics import evaluate_retrieval

    return evaluate_retrieval(query_codes, database_codes, query_labels, database_labels)


def evaluate_model(model, query: CrossModalData, database: CrossModalData) -> dict[str, dict]:
    """Scores of a fitted model for both tasks: ``{"image->text": {...}, "text->image": {...}}``."""
    from .base import encode_checked  # codes checked as they are taken: a method may be one's own

    q_labels, db_labels = query.require_labels(), database.require_labels()
    for part, d in (("query", query), ("database", database)):
        if not d.is_fully_paired:
            raise DataError(f"the {part} set must hold both modalities for every object (cross-modal evaluation)")
    out = {}
    for task, (qm, dm) in zip(TASKS, (("image", "text"), ("text", "image")), strict=True):
        qc = encode_checked(model, getattr(query, qm), qm)
        dc = encode_checked(model, getattr(database, dm), dm)
        out[task] = _score(qc, dc, q_labels, db_labels)
    return out


def label_prior_map(data: CrossModalData) -> float:
    """Expected MAP of a random ranking: about the mean share of relevant database items per query
    (the floor any method's MAP is to be read against)."""
    from .metrics import relevance

    q, db = data.query(), data.database()
    return float(relevance(q.labels, db.labels).mean(axis=1).mean())


# ---------------------------------------------------------------------------------- cell keys
def _hash_arrays(arrays: Iterable) -> str:
    h = hashlib.sha256()
    for arr in arrays:
        if arr is None:
            h.update(b"none;")
            continue
        arr = np.ascontiguousarray(arr)
        h.update(f"{arr.dtype.str}{arr.shape};".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def _source_file(source: str) -> Path | None:
    """The file a data source string reads (``PATH`` or ``BENCHMARK:PATH``), None for built-ins."""
    for candidate in (source, source.split(":", 1)[-1]):
        path = Path(candidate)
        if path.is_file():
            return path.resolve()
    return None


def data_fingerprint(data: CrossModalData, source: str) -> dict:
    """What identifies a dataset in a cell key: ``{"source", "size", "sha256", "split"}``.

    ``source`` is how the data were named (a file, ``builtin:NAME``, ``BENCHMARK:PATH``); a file is
    given by its resolved path and its size in bytes. ``sha256`` hashes the features, masks and
    labels; ``split`` hashes the train/query/database indices.
    """
    path = _source_file(str(source))
    return {
        "source": str(path) if path is not None else str(source),
        "size": path.stat().st_size if path is not None else None,
        "sha256": _hash_arrays((data.image, data.text, data.image_mask, data.text_mask, data.labels)),
        "split": _hash_arrays((data.train_idx, data.query_idx, data.database_idx)),
    }


def full_params(method: str, params: dict | None = None) -> dict:
    """Every hyperparameter of ``method`` with ``params`` applied over its defaults (the cell's
    ``n_bits`` and ``random_state`` excluded), options left to a preset resolved to the preset's
    values; unknown names fail here, before any work."""
    klass = get_method_class(method)
    defaults = klass().get_params(deep=False)
    if "random_state" not in defaults:
        raise ParameterError(f"method {method!r}: {klass.__name__}.__init__ takes no random_state, through which "
                             "dmh seeds every fit (give it random_state=None)")
    params = dict(params or {})
    unknown = sorted(set(params) - set(defaults))
    if unknown:
        raise ParameterError(f"unknown parameter(s) {unknown} for method {method!r}; it has {sorted(defaults)}")
    out = {k: v for k, v in defaults.items() if k not in _CELL_PARAMS}
    out.update({k: v for k, v in params.items() if k not in _CELL_PARAMS})
    # options a preset fills in are written out: a cell names the configuration it ran, so that a
    # later change of a preset's values changes the key instead of reusing results silently
    resolve = getattr(klass, "preset_options", None)
    if resolve is not None:
        out.update(resolve(out))
    # options added or removed since results were written keep those results' keys (dmh._keys)
    return jsonable(key_params(resolve_method(method), out))


def check_method_params(method: str, params: dict | None = None, bits: Iterable[int] | None = None) -> None:
    """Every name in ``params`` a hyperparameter of ``method`` (:func:`full_params`) and every value
    one that ``fit`` accepts at each bit length of ``bits`` (default: the method's own), checked
    before any data are loaded; the first problem raises :class:`ParameterError`."""
    full_params(method, params)
    klass = get_method_class(method)
    model = klass(**dict(params or {}))
    for b in (list(bits) if bits is not None else [None]):
        try:
            model.check_hyperparameters(b)
        except ParameterError as exc:  # name the method (a --param may apply to several) once
            if str(exc).startswith(f"{klass.__name__}: "):
                raise
            raise ParameterError(f"{method}: {exc}") from None


def make_cell(*, dataset: str, fingerprint: dict, method: str, params: dict, n_bits: int, paired_ratio: float,
              seed: int, label: str | None = None, grid: dict | None = None, source: str | None = None,
              pairs_only: bool = False, validation: dict | None = None) -> dict:
    """A cell with its full parameters and its key (``cell["key"]``); ``pairs_only`` trains it on
    the paired objects of its semi-paired set alone; ``validation`` (``{"fraction", "random_state"}``)
    says that the cell's data are the validation split made with them."""
    cell = {
        "dataset": dataset,
        "source": source if source is not None else fingerprint["source"],
        "data": {k: v for k, v in fingerprint.items() if k != "split"},
        "split": fingerprint["split"],
        "label": label if label is not None else method,
        "method": resolve_method(method),
        "params": full_params(method, params),
        "grid": dict(grid or {}),
        "n_bits": int(n_bits),
        "paired_ratio": float(paired_ratio),
        "seed": int(seed),
    }
    if pairs_only:
        cell["pairs_only"] = True
    if validation:
        cell["validation"] = {"fraction": float(validation["fraction"]),
                              "random_state": int(validation["random_state"])}
    if pairs_only or float(paired_ratio) >= 1.0:  # options that change nothing there keep older keys
        cell["params"] = paired_key_params(cell["method"], cell["params"])
    cell["key"] = cell_key(cell)
    return cell


def cell_key(cell: dict) -> str:
    """Canonical JSON of everything that determines a cell's result (see the module docstring)."""
    missing = [k for k in KEY_FIELDS if k not in cell]
    if missing:
        raise DataError(f"a cell needs {list(KEY_FIELDS)} for its key; this one lacks {missing} (see make_cell)")
    ident = {k: cell[k] for k in KEY_FIELDS}
    ident.update({k: cell[k] for k in OPTIONAL_KEY_FIELDS if cell.get(k)})
    return dump_key(ident)


# -------------------------------------------------------------------------------- the cell loop
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


def reusable_cells(cells: Sequence[dict], records: Sequence[dict], where: str = "the results file"):
    """Which finished cells of earlier ``records`` this run may reuse: ``({key: records}, lines)``.

    A cell is reused only when its records carry exactly the key of a planned cell and hold both
    tasks. ``lines`` say how many were reused and why the others were not (other data, split or
    parameters; records of an older dmh without a cell key); those records are not kept.
    """
    planned = {c["key"] for c in cells}
    by_key: dict[str, list[dict]] = {}
    no_key = 0
    for rec in records:
        key = rec.get("cell_key") if isinstance(rec, dict) else None
        if isinstance(key, str):
            key = normalize_key(key)
        if key is None:
            no_key += 1
        else:
            by_key.setdefault(key, []).append(rec)
    reuse = {k: v for k, v in by_key.items() if k in planned and {r.get("task") for r in v} >= set(TASKS)}
    partial = sum(1 for k in by_key if k in planned and k not in reuse)
    other = sum(1 for k in by_key if k not in planned)
    lines = [f"Resuming: {len(reuse)} of {len(cells)} cell(s) reused from {where} (same cell key)"]
    if other:
        lines.append(f"{other} finished cell(s) in {where} differ from this run (data file, split, method, "
                     "parameters, bits, paired ratio or seed): not reused, not kept")
    if partial:
        lines.append(f"{partial} cell(s) in {where} lack a task's record: fitted again")
    if no_key:
        lines.append(f"{no_key} record(s) in {where} carry no cell key (written by an older dmh): "
                     "not reused, not kept")
    return reuse, lines


# --------------------------------------------------------------------------- dmh evaluate's plan
def plan_evaluation(
    data: CrossModalData,
    source: str,
    methods: Sequence[str] = ("dmh",),
    bits: Sequence[int] = (16, 32, 64, 128),
    paired_ratios: Sequence[float] = (1.0, 0.5),
    seeds: Sequence[int] = (0,),
    method_params: dict[str, dict] | None = None,
    dataset: str = "data",
    trainings: Sequence[str] = ("semi-paired",),
    validation: dict | None = None,
) -> list[dict]:
    """The cells of one evaluation, ordered seed, paired ratio, method, training, bits. ``source``
    names the data (a file path or a built-in name) in the cells' keys; ``dataset`` is the name
    records carry.

    ``trainings`` (of :data:`TRAININGS`): ``"pairs-only"`` adds cells trained on the pairs of each
    semi-paired set alone, labelled ``"METHOD (pairs only)"``. Beside ``"semi-paired"`` they are
    made only where they differ from it: at paired ratios below 1 and for methods that use unpaired
    objects (:func:`pairs_only_redundant` says which were left out). ``validation``
    (``{"fraction", "random_state"}``): ``data`` is the validation split made with them
    (:meth:`dmh.CrossModalData.validation`), and the cells say so in their keys and records."""
    if not data.has_split:
        raise DataError(f"{source}: the data need train_idx, query_idx and database_idx (see with_split)")
    train = data.train()
    if not train.is_fully_paired:
        raise DataError(
            f"{source}: the training set holds {train.n_image_only} image-only and {train.n_text_only} text-only "
            "objects; the evaluation makes its semi-paired training sets itself (--paired-ratio) from a fully "
            "paired one"
        )
    data.require_labels()
    method_params = method_params or {}
    for name in methods:  # unknown names and parameters fail before any work
        full_params(name, method_params.get(name))
    for r in paired_ratios:
        if not 0.0 < float(r) <= 1.0:
            raise ParameterError(f"paired ratio must lie in (0, 1], got {r}")
    trainings = _check_trainings(trainings)
    fingerprint = data_fingerprint(data, source)
    cells = []
    for s in seeds:
        for r in paired_ratios:
            for m in methods:
                for t in trainings:
                    pairs_only = t == "pairs-only"
                    if pairs_only and len(trainings) > 1 and pairs_only_redundant(m, r):
                        continue
                    label = f"{m} (pairs only)" if pairs_only else m
                    cells += [make_cell(dataset=dataset, fingerprint=fingerprint, method=m,
                                        params=method_params.get(m, {}), n_bits=b, paired_ratio=r, seed=s,
                                        label=label, pairs_only=pairs_only, validation=validation)
                              for b in bits]
    return cells


def _check_trainings(trainings) -> tuple[str, ...]:
    from ._validation import check_unique

    out = tuple(trainings)
    bad = [t for t in out if t not in TRAININGS]
    if bad or not out:
        raise ParameterError(f"training must be one or both of {', '.join(TRAININGS)}, got {list(out)!r}")
    return tuple(check_unique(list(out), "training"))


def pairs_only_redundant(method: str, paired_ratio: float) -> bool:
    """Whether a pairs-only cell of ``method`` at ``paired_ratio`` trains on exactly the data of the
    semi-paired cell: at full pairing, or for a method that ignores unpaired objects."""
    return float(paired_ratio) >= 1.0 or not getattr(get_method_class(method), "uses_unpaired", False)


def run_evaluation(
    data: CrossModalData,
    methods: Sequence[str] = ("dmh",),
    bits: Sequence[int] = (16, 32, 64, 128),
    paired_ratios: Sequence[float] = (1.0, 0.5),
    seeds: Sequence[int] = (0,),
    method_params: dict[str, dict] | None = None,
    on_record: Callable[[dict], None] | None = None,
    done: set | None = None,
    progress: bool = False,
    source: str = "data",
    trainings: Sequence[str] = ("semi-paired",),
    validation: dict | None = None,
) -> list[dict]:
    """Fit and score every (seed, paired ratio, method, bit length) cell.

    ``data`` needs a split and labels. ``method_params`` maps a method name to extra keyword
    arguments. ``on_record`` is called with each result record as soon as it exists (for writing
    partial results); cells whose key (:func:`cell_key`) is in ``done`` are skipped (to resume an
    interrupted run; a ``(method, n_bits, paired_ratio, seed)`` tuple in ``done``, as earlier
    versions took, skips that cell too). ``source`` names the data in the cells' keys. ``validation``
    (``{"fraction", "random_state"}``): score the validation split of ``data``'s training objects
    made with them instead of its query set. Returns the list of records, one per cell and task.
    """
    name = data.name or "data"
    if validation is not None:
        data = data.validation(**validation)
    cells = plan_evaluation(data, source, methods, bits, paired_ratios, seeds, method_params, dataset=name,
                            trainings=trainings, validation=validation)
    done = set(done or ())
    cells = [c for c in cells
             if c["key"] not in done and (c["method"], c["n_bits"], c["paired_ratio"], c["seed"]) not in done]

    def on_entry(entry):
        for rec in entry["records"]:
            if on_record is not None:
                on_record(rec)

    entries = run_cells(cells, {name: data}, on_entry=on_entry, progress=progress)
    return [rec for e in entries for rec in e["records"]]
