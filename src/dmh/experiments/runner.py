"""Run a reproduction config: plan its cells, fit those not finished yet, keep finished cells on
disk, write the outputs.

A *cell* is one fit (see :mod:`dmh.evaluation`, whose cell loop and cell key this module uses, as
``dmh evaluate`` does): for each seed and paired ratio the training set is
``make_semi_paired(data.train(), ratio, random_state=seed)``, identical for every method and bit
length, and the model gets ``random_state=seed``. Each finished cell is written at once, atomically,
to ``cells.json`` in the output folder; a rerun into the same folder skips the cells found there.
A cell's key holds everything that determines its result (the data's fingerprint and the method's
full parameters included), so a changed config or data file never reuses a stale cell.

Outputs (``out_dir``): ``config.json`` (the resolved config), ``cells.json`` (resume state), and
those of :func:`dmh.experiments.outputs.write_outputs`.
"""

from __future__ import annotations

import datetime
import itertools
import json
from collections.abc import Callable, Sequence
from pathlib import Path

from .._atomic import atomic_write_text, check_writable, exclusive_lock
from .._json import jsonable as _jsonable
from .._keys import stored_key
from ..errors import DataError, DmhError, OutputError, ParameterError, ResultsFileError
from ..evaluation import (
    KEY_FIELDS,
    cell_key,
    check_jobs,
    data_fingerprint,
    make_cell,
    normalize_key,
    reusable_cells,
    run_cells,
)
from .config import (  # DOCUMENTED_METHODS, KINDS, config_names, validate_config: also importable from here
    DOCUMENTED_METHODS,  # noqa: F401
    KINDS,  # noqa: F401
    _method_class,
    config_names,  # noqa: F401
    config_validation,
    load_config,
    resolve_config,
    run_params,
    source_string,
    validate_config,  # noqa: F401
)
from .outputs import write_outputs
from .summary import summarize_records  # noqa: F401 (also importable from here)

__all__ = ["CELLS_FILE", "METRICS_FILE", "cell_key", "load_cells", "load_reusable", "plan_cells", "run_experiment"]

CELLS_FILE = "cells.json"
METRICS_FILE = "metrics.json"


def plan_cells(cfg: dict) -> list[dict]:
    """Every cell of a resolved config, ordered dataset, seed, paired ratio, run, grid point, bits
    (so one semi-paired training set serves consecutive cells)."""
    if "resolved" not in cfg:
        # not user input: a programming error
        raise ValueError("plan_cells needs a resolved config (see resolve_config)")
    cells = []
    ratios = sorted({float(r) for run in cfg["runs"] for r in run["paired_ratios"]}, reverse=True)
    for ds in cfg["resolved"]["datasets"]:
        for seed in cfg["seeds"]:
            for ratio in ratios:
                for run in cfg["runs"]:
                    if ratio not in [float(r) for r in run["paired_ratios"]]:
                        continue
                    base = run_params(cfg, run)
                    grid = run.get("grid", {})
                    names = list(grid)
                    for values in itertools.product(*(grid[n] for n in names)) if names else [()]:
                        point = dict(zip(names, values, strict=True))
                        params = {**base, **point}
                        for n_bits in cfg["bits"]:
                            cells.append(
                                {
                                    "dataset": ds,
                                    "source": source_string(cfg["resolved"]["dataset_sources"][ds]),
                                    "label": run["label"],
                                    "method": run["method"],
                                    "params": params,
                                    "grid": point,
                                    "n_bits": int(n_bits),
                                    "paired_ratio": ratio,
                                    "seed": int(seed),
                                    "pairs_only": bool(run.get("pairs_only", False)),
                                }
                            )
    return cells


# ---------------------------------------------------------------------------------- datasets
def _load_datasets(cfg: dict, data_dir, sources: dict | None = None) -> dict:
    """The config's datasets by name; ``sources``, when given, receives what each was read from
    (a file path or a built-in name: the source of the data fingerprint in the cells' keys)."""
    from ..datasets import load_dataset

    data_dir = None if data_dir is None else Path(data_dir)
    if data_dir is not None and not data_dir.is_dir():
        raise FileNotFoundError(f"data folder {data_dir} does not exist")
    out = {}
    for name in cfg["resolved"]["datasets"]:
        spec = cfg["resolved"]["dataset_sources"][name]
        if "builtin" in spec:
            source = spec["builtin"]
            data = load_dataset(source)
        elif "benchmark" in spec:
            path = Path(spec["path"])
            if not path.is_absolute():
                if data_dir is None:
                    raise ParameterError(
                        f"data_dir is needed: dataset {name!r} reads {spec['path']} under a data folder (or choose "
                        "datasets that need none, e.g. uci-digits)"
                    )
                path = data_dir / path
            if not path.exists():
                note = f" ({spec['note']})" if spec.get("note") else ""
                raise FileNotFoundError(f"dataset {name!r}: {path} not found{note}")
            source = str(path)
            data = load_dataset(f"{spec['benchmark']}:{path}")
        else:  # NAME=SOURCE: a file (as given, or under the data folder), a built-in or benchmark spec
            source = spec["file"]
            candidates = [Path(source)] + ([data_dir / source] if data_dir is not None else [])
            hit = next((p for p in candidates if p.is_file()), None)
            source = str(hit) if hit is not None else source
            data = load_dataset(source)
        if not data.has_split:
            raise DataError(f"dataset {name!r} has no train/query/database split")
        data.require_labels()
        out[name] = data
        if sources is not None:
            sources[name] = source
    return out


# ------------------------------------------------------------------------------------- cells
def load_cells(out_dir) -> dict:
    """Finished cells of an output folder: ``{cell_key: entry}`` (empty when there are none)."""
    path = Path(out_dir) / CELLS_FILE
    if not path.exists():
        return {}
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsFileError(path, f"is not valid JSON ({exc}); delete it to start over") from None
    return check_cells(payload, path)


def load_reusable(folder, cells: Sequence[dict]) -> dict:
    """Finished cells of another run's output folder (``--reuse``) for the planned ``cells``:
    ``{cell_key: entry}``.

    From the folder's ``cells.json`` where it has one; else from its ``metrics.json``, which holds
    every finished cell's records under their cell keys (the folders in ``docs/results`` keep the
    report, config, metrics and plots, not the resume state). There, a planned cell is rebuilt from
    its records where both tasks' records carry its key (:func:`dmh.evaluation.reusable_cells`: the
    same rule as ``dmh evaluate --resume``); such an entry has no per-round ``history``.
    """
    folder = Path(folder)
    if (folder / CELLS_FILE).is_file():
        return load_cells(folder)
    path = folder / METRICS_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{folder}: no {CELLS_FILE} or {METRICS_FILE} there (not an experiment output "
                                "folder to reuse)")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsFileError(path, f"is not valid JSON ({exc})") from None
    records = payload.get("records") if isinstance(payload, dict) else None
    if not isinstance(records, list):
        raise ResultsFileError(path, "is not a metrics file of dmh reproduce (expected an object with a "
                               "'records' list)")
    if records:
        from ..records import check_records

        try:
            check_records(records)
        except DmhError as exc:
            raise ResultsFileError(path, f"is damaged ({exc})") from None
    found, _lines = reusable_cells(cells, records, str(path))
    by_key = {c["key"]: c for c in cells}
    return {
        key: {"key": key, "cell": by_key[key], "records": recs, "fit_seconds": recs[0].get("fit_seconds")}
        for key, recs in found.items()
    }


def check_cells(payload, path) -> dict:
    """``{key: entry}`` of a ``cells.json`` payload after checking its shape: an object with a
    ``cells`` list, each entry an object with a ``key``, a ``cell`` and valid result ``records``. A
    damaged file is refused (:class:`ResultsFileError`), never half-used. An entry whose ``cell``
    does not give back its ``key`` (an older key layout, or an edited file) is kept under a key that
    matches no planned cell, so its records are never taken for another cell's."""
    from ..records import check_records

    if not isinstance(payload, dict) or not isinstance(payload.get("cells"), list):
        raise ResultsFileError(
            path, "is not a cells file of dmh reproduce (expected an object with a 'cells' list); delete it to "
            "start over"
        )
    out = {}
    for i, entry in enumerate(payload["cells"]):
        problem = None
        if not isinstance(entry, dict) or not isinstance(entry.get("key"), str):
            problem = "is not an object with a 'key'"
        elif not isinstance(entry.get("cell"), dict) or not isinstance(entry.get("records"), list):
            problem = "lacks its 'cell' or its 'records'"
        elif entry.get("history") is not None and not isinstance(entry["history"], dict):
            problem = "has a damaged 'history'"
        else:
            try:
                check_records(entry["records"])
            except DmhError as exc:
                problem = f"is damaged ({exc})"
        if problem:
            raise ResultsFileError(path, f"cell {i} {problem}; delete the file to start over")
        cell = entry["cell"]
        key = stored_key(entry["key"], cell_key(cell) if all(k in cell for k in KEY_FIELDS) else None)
        if key in (entry["key"], normalize_key(entry["key"])):
            entry["key"] = key
        out[key] = entry
    return out


def _write_cells(out_dir: Path, cells: dict):
    payload = {"format": "dmh-experiment-cells/1", "cells": list(cells.values())}
    atomic_write_text(out_dir / CELLS_FILE, json.dumps(payload, allow_nan=False) + "\n")


# ---------------------------------------------------------------------------------------- run
def run_experiment(
    config, *, out_dir, data_dir=None, datasets: Sequence[str] | None = None, seeds: Sequence[int] | None = None,
    quick: bool = False, bits: Sequence[int] | None = None, paired_ratios: Sequence[float] | None = None,
    runs: Sequence[str] | None = None, reuse: Sequence | None = None,
    plots: bool = True,
    echo: Callable[[str], None] | None = None,
    shard: tuple[int, int] | None = None,
    jobs: int = 1,
    report_only: bool = False,
) -> dict:
    """Run an experiment config (a name, a path or a dict) and write its results to ``out_dir``.

    ``data_dir`` is the folder the config's data-relative paths start from (not needed for built-in
    data). ``datasets``, ``seeds``, ``quick``, ``bits``, ``paired_ratios``, ``runs``: see
    :func:`resolve_config`. Cells already in ``out_dir/cells.json`` are not fitted again, nor are
    cells found in a folder of ``reuse`` (another experiment's output, its ``cells.json`` or, where
    it keeps none, its ``metrics.json``: :func:`load_reusable`; e.g. table8 and fig4 share DMH at
    50% with table1; a cell is reused only when its key, see :func:`dmh.evaluation.cell_key`, is
    equal). ``echo`` receives progress lines. Returns
    ``{"out_dir", "n_cells", "n_fitted", "n_reused", "files"}``.

    ``shard=(k, n)`` (1 <= k <= n) runs only every n-th cell of the plan, from the k-th on, so that
    n processes (each with its own ``out_dir``) share one experiment; such a run writes
    ``config.json`` and ``cells.json`` but no report (it holds part of the cells; ``(1, 1)`` is an
    ordinary run). A run without ``shard`` that names the n folders in ``reuse`` then assembles the
    whole experiment without fitting anything.

    ``jobs=N`` fits N cells at a time in worker processes (:func:`dmh.evaluation.run_cells`), each
    finished cell saved at once as in a serial run.
    """
    if shard is not None:
        k_shard, n_shard = shard
        if not (isinstance(k_shard, int) and isinstance(n_shard, int) and 1 <= k_shard <= n_shard):
            raise ParameterError(f"shard must be K/N with 1 <= K <= N, got {k_shard}/{n_shard}")
        if n_shard == 1:  # the whole plan: an ordinary run, report included
            shard = None
    say = echo or (lambda _line: None)
    cfg = resolve_config(
        load_config(config), datasets=datasets, seeds=seeds, quick=quick, bits=bits, paired_ratios=paired_ratios,
        runs=runs
    )
    missing = sorted({r["method"] for r in cfg["runs"] if _method_class(r["method"]) is None})
    if missing:  # named by the registry, module not written yet: run the others, say so
        say(f"not run (not available in this install): {', '.join(missing)}")
        cfg["resolved"]["skipped_runs"] = [r["label"] for r in cfg["runs"] if r["method"] in missing]
        cfg["runs"] = [r for r in cfg["runs"] if r["method"] not in missing]
        if not cfg["runs"]:
            raise ParameterError(f"no method of experiment {cfg['name']!r} is available: {', '.join(missing)}")
    sources: dict[str, str] = {}
    data = _load_datasets(cfg, data_dir, sources)  # fail on missing data before any work
    validation = config_validation(cfg)  # "split": "validation": each dataset's validation split instead
    if validation is not None:
        data = {name: d.validation(**validation) for name, d in data.items()}
    fingerprints = {name: data_fingerprint(d, sources[name]) for name, d in data.items()}
    trains = {name: d.train() for name, d in data.items()}
    cells = [
        make_cell(dataset=c["dataset"], fingerprint=fingerprints[c["dataset"]], method=c["method"],
                  params=c["params"], n_bits=c["n_bits"], paired_ratio=c["paired_ratio"], seed=c["seed"],
                  label=c["label"], grid=c["grid"], source=c["source"], pairs_only=c["pairs_only"],
                  validation=validation, train=trains[c["dataset"]])
        for c in plan_cells(cfg)
    ]
    jobs = check_jobs(jobs)
    borrowable = [load_reusable(folder, cells) for folder in reuse or ()]  # before anything is written
    out = Path(out_dir)
    if report_only:
        if shard is not None:
            raise ParameterError("report_only writes the report of the whole plan: give it no shard")
        own = load_cells(out) if out.is_dir() else {}
        if not any(c["key"] in own or any(c["key"] in other for other in borrowable) for c in cells):
            raise ParameterError(f"report_only: none of the plan's {len(cells)} cell(s) is finished in {out} or "
                                 "the folders to reuse; nothing to report")
    if out.exists() and not out.is_dir():
        raise OutputError(out, "it is a file, not a folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(out, exc.strerror or str(exc)) from None
    check_writable(out / CELLS_FILE)
    keep_history = cfg["kind"] == "convergence"
    # one run per output folder: a second run into it would overwrite the first one's cells
    with exclusive_lock(out / CELLS_FILE, what="experiment folder"):
        cfg["resolved"].update(
            {
                "data_dir": None if data_dir is None else str(Path(data_dir).resolve()),
                "datasets_summary": {name: d.summary() for name, d in data.items()},
                "n_cells": len(cells),
                "dmh_version": _version(),
                "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
            }
        )
        if shard is not None:
            cells = cells[k_shard - 1 :: n_shard]
            cfg["resolved"]["shard"] = f"{k_shard}/{n_shard}"
        atomic_write_text(out / "config.json", json.dumps(_jsonable(cfg), indent=1, allow_nan=False) + "\n")
        keys = [c["key"] for c in cells]
        finished = load_cells(out)
        stale = len(set(finished) - set(keys))
        n_own = sum(k in finished for k in keys)
        n_borrowed = 0
        for other in borrowable:
            for k in keys:
                # a convergence figure plots each cell's per-round history: a cell without it is fitted
                if k not in finished and k in other and (not keep_history or other[k].get("history")):
                    finished[k] = other[k]
                    n_borrowed += 1
        if n_borrowed:
            _write_cells(out, finished)
        todo = [c for c in cells if c["key"] not in finished]
        say(
            f"{cfg['name']}{'' if shard is None else f' (shard {k_shard}/{n_shard})'}: {len(cells)} cell(s), "
            f"{n_own} already finished in {out}"
            + (f", {n_borrowed} reused from {', '.join(str(f) for f in reuse)}" if n_borrowed else "")
        )
        if stale:
            say(f"{stale} finished cell(s) in {out / CELLS_FILE} are not in this run's plan (other datasets, "
                "seeds, bits, ratios or parameters, or written by an older dmh without the full cell key): "
                "not reused, kept in the file")

        def save(entry):
            finished[entry["key"]] = entry
            _write_cells(out, finished)

        if report_only:
            # nothing is fitted: the report covers the finished cells and says how many are missing
            cfg["resolved"]["n_missing"] = len(todo)
            if todo:
                say(f"report only: {len(todo)} of {len(cells)} cell(s) not finished; the report covers the others")
            keys = [k for k in keys if k in finished]
            cells, todo = [c for c in cells if c["key"] in finished], []
        run_cells(todo, data, on_entry=save, keep_history=keep_history, echo=say, jobs=jobs)
        if shard is not None:  # part of the cells: the report is written by the run that assembles them
            files = {"cells": out / CELLS_FILE, "config": out / "config.json"}
        else:
            planned = [finished[k] for k in keys]
            files = write_outputs(cfg, planned, out, plots=plots)
        return {
            "out_dir": out,
            "n_cells": len(cells),
            "n_fitted": len(todo),
            "n_reused": len(cells) - len(todo),
            "files": files,
        }


def _version() -> str:
    from .. import __version__

    return __version__
