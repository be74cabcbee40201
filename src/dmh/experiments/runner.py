"""Run a reproduction config: fit every cell, keep finished cells on disk, write the reports.

A *config* (``dmh/experiments/configs/NAME.json``) holds everything an experiment needs: the
methods ("runs", each a label, a registry method, extra parameters, the paired ratios and an
optional parameter grid), the bit lengths, the seeds, the datasets (the paper's and those that run
here), a reduced ``quick`` variant and the numbers the paper reports. See ``docs/experiments.md``.

A *cell* is one fit: (dataset, run label, method, parameters, bit length, paired ratio, seed). The
protocol is :func:`dmh.evaluation.run_evaluation`'s: for each seed and paired ratio the training set
is ``make_semi_paired(data.train(), ratio, random_state=seed)``, identical for every method and bit
length, and the model gets ``random_state=seed``. Each finished cell is written at once, atomically,
to ``cells.json`` in the output folder; a rerun into the same folder skips the cells found there.
A cell's key holds everything that determines its result (the dataset's source included), so a
changed config never reuses a stale cell.

Outputs (``out_dir``): ``config.json`` (the resolved config), ``cells.json`` (resume state),
``metrics.json`` (every record, the per-seed summaries and, for convergence runs, the loss
histories), ``results_<dataset>.csv``, ``report.md`` (our numbers beside the paper's) and PNG plots.
"""

from __future__ import annotations

import copy
import datetime
import itertools
import json
import math
import numbers
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

import numpy as np

from .._atomic import atomic_write_text
from .._json import jsonable as _jsonable

__all__ = [
    "KINDS",
    "DOCUMENTED_METHODS",
    "PEER_METHODS",
    "config_names",
    "load_config",
    "validate_config",
    "resolve_config",
    "plan_cells",
    "cell_key",
    "load_cells",
    "run_experiment",
    "summarize_records",
    "write_outputs",
]

#: what a config reproduces, and so which report and plots it gets
KINDS = ("table", "topn", "pr", "ratio_sweep", "sensitivity", "convergence")
#: every method the paper compares; configs may name one the registry does not hold yet
DOCUMENTED_METHODS = ("dmh", "cvh", "imh", "lssh", "stmh", "cmfh", "fsh")
#: the methods compared beyond the paper (dmh.peers); the peers config may name one before the
#: registry holds it (they are added on separate branches): such runs are reported as not run
PEER_METHODS = ("cca-itq", "spdh", "djsrh", "jdsh", "dgcpn", "ucch", "sadch")
TASKS = ("image->text", "text->image")
_TASK_SHORT = {"image->text": "I→T", "text->image": "T→I"}
_PRETTY = {"lambda_": "λ", "eta": "η", "gamma": "γ"}
_QUICK_KEYS = {"seeds", "bits", "paired_ratios", "grid", "method_params"}
_RUN_KEYS = {"label", "method", "paired_ratios", "params", "grid"}
_DATASET_KEYS = {"builtin", "benchmark", "path", "file", "paper", "title", "note"}
CELLS_FILE = "cells.json"


# ------------------------------------------------------------------------------------ configs
def _configs_dir():
    return resources.files(__package__).joinpath("configs")


def config_names() -> list[str]:
    """Names of the configs shipped with dmh (``table1``, ``fig2``, ...)."""
    return sorted(p.name[: -len(".json")] for p in _configs_dir().iterdir() if p.name.endswith(".json"))


def load_config(name_or_path) -> dict:
    """A shipped config by name, or a JSON config file by path; validated."""
    text = None
    if isinstance(name_or_path, dict):
        return validate_config(copy.deepcopy(name_or_path))
    key = str(name_or_path)
    if key in config_names():
        text = _configs_dir().joinpath(f"{key}.json").read_text(encoding="utf-8")
        origin = f"dmh/experiments/configs/{key}.json"
    elif key.endswith(".json") or Path(key).is_file():
        path = Path(key)
        if not path.is_file():
            raise FileNotFoundError(f"experiment config {path} does not exist")
        text = path.read_text(encoding="utf-8")
        origin = str(path)
    else:
        raise KeyError(
            f"unknown experiment {key!r}; available: {', '.join(config_names())} (or a path to a .json config)"
        )
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"experiment config {origin} is not valid JSON: {exc}") from None
    return validate_config(config)


def _fail(config, where: str, what: str):
    raise ValueError(f"config {config.get('name', '?')!r}: {where} {what}")


def _check_int_list(config, where, values, low=None, high=None):
    if not isinstance(values, list) or not values:
        _fail(config, where, f"must be a non-empty list of integers, got {values!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Integral):
            _fail(config, where, f"must hold integers, got {v!r}")
        if (low is not None and v < low) or (high is not None and v > high):
            _fail(config, where, f"value {v} is outside [{low}, {high}]")
    if len(set(values)) != len(values):
        _fail(config, where, f"has duplicates: {values}")


def _check_ratios(config, where, values):
    if not isinstance(values, list) or not values:
        _fail(config, where, f"must be a non-empty list of paired ratios, got {values!r}")
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not 0.0 < float(v) <= 1.0:
            _fail(config, where, f"holds {v!r}; a paired ratio lies in (0, 1]")


def _method_class(name):
    """The registry's class, or None when the registry names it but its module is not written yet."""
    from ..methods import get_method_class

    try:
        return get_method_class(name)
    except (ModuleNotFoundError, KeyError):
        return None


def _check_params(config, where, method, params):
    if not isinstance(params, dict):
        _fail(config, where, f"must be a dict of parameters, got {params!r}")
    klass = _method_class(method) if method in _registry_names() else None
    if klass is None:
        return
    valid = set(klass().get_params(deep=False))
    unknown = sorted(set(params) - valid)
    if unknown:
        _fail(config, where, f"names unknown parameter(s) {unknown} of {method!r}; it has {sorted(valid)}")
    if "n_bits" in params or "random_state" in params:
        _fail(config, where, "must not set n_bits or random_state (they come from 'bits' and 'seeds')")


def _registry_names() -> list[str]:
    from ..methods import method_names

    return method_names()


def validate_config(config: dict) -> dict:
    """Check a config's structure and values; returns it. Errors name the config and the field."""
    if not isinstance(config, dict):
        raise TypeError(f"an experiment config must be a JSON object, got {type(config).__name__}")
    for key in ("name", "title", "kind", "bits", "seeds", "runs", "datasets", "default_datasets", "paper"):
        if key not in config:
            _fail(config, "", f"lacks the key {key!r}")
    if config["kind"] not in KINDS:
        _fail(config, "kind", f"is {config['kind']!r}; expected one of {KINDS}")
    _check_int_list(config, "bits", config["bits"], 1, 4096)
    _check_int_list(config, "seeds", config["seeds"], 0)
    metrics = config.get("metrics", ["map"])
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
        _fail(config, "metrics", f"must be a non-empty list of metric names, got {metrics!r}")
    known = set(DOCUMENTED_METHODS) | set(PEER_METHODS) | set(_registry_names())
    runs = config["runs"]
    if not isinstance(runs, list) or not runs:
        _fail(config, "runs", "must be a non-empty list")
    labels: dict = {}
    for i, run in enumerate(runs):
        where = f"runs[{i}]"
        if not isinstance(run, dict):
            _fail(config, where, "must be an object")
        extra = set(run) - _RUN_KEYS
        if extra:
            _fail(config, where, f"has unknown key(s) {sorted(extra)}; allowed: {sorted(_RUN_KEYS)}")
        for key in ("label", "method", "paired_ratios"):
            if key not in run:
                _fail(config, where, f"lacks {key!r}")
        # a label may recur (e.g. IMH fully paired, then IMH at 50% with other settings) for the
        # same method at other paired ratios: (label, ratio) names a table row
        prev = labels.get(run["label"])
        ratios = {float(r) for r in run["paired_ratios"]} if isinstance(run["paired_ratios"], list) else set()
        if prev is not None and (prev[0] != run["method"] or prev[1] & ratios):
            _fail(
                config,
                where,
                f"repeats the label {run['label']!r} (allowed only for the same method at other paired ratios)",
            )
        labels[run["label"]] = (run["method"], ratios | (prev[1] if prev else set()))
        if run["method"] not in known:
            _fail(config, f"{where}.method", f"{run['method']!r} is not a known method ({', '.join(sorted(known))})")
        _check_ratios(config, f"{where}.paired_ratios", run["paired_ratios"])
        _check_params(config, f"{where}.params", run["method"], run.get("params", {}))
        grid = run.get("grid", {})
        if not isinstance(grid, dict):
            _fail(config, f"{where}.grid", "must map parameter names to lists of values")
        for pname, values in grid.items():
            if not isinstance(values, list) or not values:
                _fail(config, f"{where}.grid.{pname}", "must be a non-empty list")
        _check_params(config, f"{where}.grid", run["method"], dict.fromkeys(grid))
    if config["kind"] == "sensitivity" and not any(r.get("grid") for r in runs):
        _fail(config, "runs", "of a sensitivity config need a 'grid'")
    for method, params in config.get("method_params", {}).items():
        if method not in known:
            _fail(config, "method_params", f"names unknown method {method!r}")
        _check_params(config, f"method_params.{method}", method, params)
    datasets = config["datasets"]
    if not isinstance(datasets, dict) or not datasets:
        _fail(config, "datasets", "must map dataset names to their sources")
    for name, spec in datasets.items():
        _check_dataset(config, name, spec)
    if not isinstance(config["default_datasets"], list) or not config["default_datasets"]:
        _fail(config, "default_datasets", "must be a non-empty list")
    for name in config["default_datasets"]:
        if name not in datasets:
            _fail(config, "default_datasets", f"names {name!r}, which is not in 'datasets'")
    _check_quick(config, config.get("quick", {}))
    _check_paper(config, config["paper"])
    return config


def _check_dataset(config, name, spec):
    where = f"datasets.{name}"
    if not isinstance(spec, dict):
        _fail(config, where, "must be an object")
    extra = set(spec) - _DATASET_KEYS
    if extra:
        _fail(config, where, f"has unknown key(s) {sorted(extra)}")
    if ("builtin" in spec) == ("benchmark" in spec or "file" in spec):
        _fail(config, where, "needs exactly one source: 'builtin', or 'benchmark' with 'path', or 'file'")
    if "builtin" in spec:
        from ..datasets import BUILTIN

        if spec["builtin"] not in BUILTIN:
            _fail(config, where, f"names built-in {spec['builtin']!r}; built-in: {sorted(BUILTIN)}")
    if "benchmark" in spec:
        from ..datasets.benchmarks import _benchmark

        try:
            _benchmark(spec["benchmark"])
        except KeyError as exc:
            _fail(config, where, str(exc.args[0]))
        if not isinstance(spec.get("path"), str):
            _fail(config, where, "needs 'path': the benchmark's file or folder, relative to the data folder")


def _check_quick(config, quick):
    if not isinstance(quick, dict):
        _fail(config, "quick", "must be an object")
    extra = set(quick) - _QUICK_KEYS
    if extra:
        _fail(config, "quick", f"has unknown key(s) {sorted(extra)}; allowed: {sorted(_QUICK_KEYS)}")
    if "seeds" in quick:
        _check_int_list(config, "quick.seeds", quick["seeds"], 0)
    if "bits" in quick:
        _check_int_list(config, "quick.bits", quick["bits"], 1, 4096)
    if "paired_ratios" in quick:
        _check_ratios(config, "quick.paired_ratios", quick["paired_ratios"])
    for method, params in quick.get("method_params", {}).items():
        _check_params(config, f"quick.method_params.{method}", method, params)


def _check_paper(config, paper):
    if not isinstance(paper, dict) or "source" not in paper or "rows" not in paper:
        _fail(config, "paper", "must be an object with 'source' and 'rows' (null for a figure without numbers)")
    rows = paper["rows"]
    if rows is None:
        if not paper.get("notes"):
            _fail(config, "paper", "without numbers ('rows': null) must say why in 'notes'")
        return
    for key in ("metric", "bits", "datasets"):
        if key not in paper:
            _fail(config, "paper", f"with numbers needs {key!r}")
    _check_int_list(config, "paper.bits", paper["bits"], 1, 4096)
    for ds in paper["datasets"]:
        if ds not in config["datasets"]:
            _fail(config, "paper.datasets", f"names {ds!r}, which is not in 'datasets'")
    if not isinstance(rows, dict) or set(rows) - set(TASKS) or not rows:
        _fail(config, "paper.rows", f"must map tasks {TASKS} to rows")
    for task, by_label in rows.items():
        for label, by_ds in by_label.items():
            for ds, values in by_ds.items():
                where = f"paper.rows[{task}][{label}][{ds}]"
                if ds not in paper["datasets"]:
                    _fail(config, where, "names a dataset not in paper.datasets")
                if not isinstance(values, list) or len(values) != len(paper["bits"]):
                    _fail(config, where, f"must hold {len(paper['bits'])} numbers (one per paper.bits)")
                for v in values:
                    if v is not None and (not isinstance(v, numbers.Real) or not 0.0 <= v <= 1.0):
                        _fail(config, where, f"holds {v!r}; expected a number in [0, 1] or null")


# --------------------------------------------------------------------------------- resolution
def resolve_config(
    config: dict,
    *,
    datasets: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    quick: bool = False,
    bits: Sequence[int] | None = None,
    paired_ratios: Sequence[float] | None = None,
) -> dict:
    """The config as it will run: ``quick`` overrides applied, the chosen datasets and seeds.

    ``datasets``: names from the config's ``datasets``, or ``NAME=SOURCE`` for a dataset not in it
    (a data file, a built-in name or a ``benchmark:path`` spec); default ``default_datasets``.
    ``seeds``, ``bits``, ``paired_ratios``: subsets or replacements of the config's (a run keeps
    only its ratios that are in ``paired_ratios`` and is left out when none is); the report says
    the run was reduced when any of them leaves out part of the config.
    """
    cfg = copy.deepcopy(validate_config(copy.deepcopy(config)))
    full = _extent(cfg)
    q = cfg.get("quick", {}) if quick else {}
    if "seeds" in q:
        cfg["seeds"] = list(q["seeds"])
    if "bits" in q:
        cfg["bits"] = list(q["bits"])
    for run in cfg["runs"]:
        run.setdefault("params", {})
        if "paired_ratios" in q:
            kept = [r for r in run["paired_ratios"] if r in q["paired_ratios"]]
            run["paired_ratios"] = kept or run["paired_ratios"][:1]
        for pname in list(run.get("grid", {})):
            if pname in q.get("grid", {}):
                run["grid"][pname] = list(q["grid"][pname])
    mp = copy.deepcopy(cfg.get("method_params", {}))
    for method, params in q.get("method_params", {}).items():
        mp.setdefault(method, {}).update(params)
    if seeds is not None:
        seeds = [int(s) for s in seeds]
        _check_int_list(cfg, "--seeds", seeds, 0)
        cfg["seeds"] = seeds
    if bits is not None:
        bits = [int(b) for b in bits]
        _check_int_list(cfg, "--bits", bits, 1, 4096)
        cfg["bits"] = bits
    if paired_ratios is not None:
        wanted = [float(r) for r in paired_ratios]
        _check_ratios(cfg, "--ratios", wanted)
        for run in cfg["runs"]:
            run["paired_ratios"] = [r for r in run["paired_ratios"] if float(r) in wanted]
        cfg["runs"] = [run for run in cfg["runs"] if run["paired_ratios"]]
        if not cfg["runs"]:
            raise ValueError(f"no run of experiment {cfg['name']!r} has a paired ratio in {wanted}")
    ran = _extent(cfg)
    reduced = {k: {"config": full[k], "ran": ran[k]} for k in full if not set(full[k]) <= set(ran[k])}
    chosen = list(cfg["default_datasets"]) if datasets is None else list(datasets)
    if not chosen:
        raise ValueError("no dataset chosen")
    selected = {}
    for entry in chosen:
        if "=" in entry:
            name, source = entry.split("=", 1)
            if not name or not source:
                raise ValueError(f"a dataset given as NAME=SOURCE needs both parts, got {entry!r}")
            selected[name] = {"file": source, "paper": False, "title": name}
        elif entry in cfg["datasets"]:
            selected[entry] = cfg["datasets"][entry]
        else:
            raise KeyError(
                f"experiment {cfg['name']!r} knows no dataset {entry!r}; it knows {', '.join(cfg['datasets'])} "
                "(or give NAME=FILE)"
            )
    cfg["resolved"] = {
        "quick": bool(quick),
        "reduced": {} if quick else reduced,
        "datasets": list(selected),
        "dataset_sources": selected,
        # the precedence of parameters: method_params < run params < quick method_params
        "method_params": mp,
        "quick_method_params": q.get("method_params", {}),
    }
    return cfg


def _extent(cfg: dict) -> dict:
    """The seeds, bit lengths and paired ratios a config covers."""
    ratios = sorted({float(r) for run in cfg["runs"] for r in run["paired_ratios"]})
    return {"seeds": list(cfg["seeds"]), "bits": list(cfg["bits"]), "paired_ratios": ratios}


def _run_params(cfg: dict, run: dict) -> dict:
    res = cfg["resolved"]
    params = dict(res["method_params"].get(run["method"], {}))
    params.update(run.get("params", {}))
    params.update(res["quick_method_params"].get(run["method"], {}))
    return params


def plan_cells(cfg: dict) -> list[dict]:
    """Every cell of a resolved config, ordered dataset, seed, paired ratio, run, grid point, bits
    (so one semi-paired training set serves consecutive cells)."""
    if "resolved" not in cfg:
        raise ValueError("plan_cells needs a resolved config (see resolve_config)")
    cells = []
    ratios = sorted({float(r) for run in cfg["runs"] for r in run["paired_ratios"]}, reverse=True)
    for ds in cfg["resolved"]["datasets"]:
        for seed in cfg["seeds"]:
            for ratio in ratios:
                for run in cfg["runs"]:
                    if ratio not in [float(r) for r in run["paired_ratios"]]:
                        continue
                    base = _run_params(cfg, run)
                    grid = run.get("grid", {})
                    names = list(grid)
                    for values in itertools.product(*(grid[n] for n in names)) if names else [()]:
                        point = dict(zip(names, values, strict=True))
                        params = {**base, **point}
                        for n_bits in cfg["bits"]:
                            cells.append(
                                {
                                    "dataset": ds,
                                    "source": _source_string(cfg["resolved"]["dataset_sources"][ds]),
                                    "label": run["label"],
                                    "method": run["method"],
                                    "params": params,
                                    "grid": point,
                                    "n_bits": int(n_bits),
                                    "paired_ratio": ratio,
                                    "seed": int(seed),
                                }
                            )
    return cells


def _source_string(spec: dict) -> str:
    if "builtin" in spec:
        return f"builtin:{spec['builtin']}"
    if "benchmark" in spec:
        return f"{spec['benchmark']}:{spec['path']}"
    return f"file:{spec['file']}"


def cell_key(cell: dict) -> str:
    """Canonical JSON of everything that determines a cell's result."""
    ident = {k: cell[k] for k in ("dataset", "source", "label", "method", "params", "n_bits", "paired_ratio", "seed")}
    return json.dumps(_jsonable(ident), sort_keys=True, separators=(",", ":"))


# ---------------------------------------------------------------------------------- datasets
def _load_datasets(cfg: dict, data_dir) -> dict:
    from ..datasets import load_dataset

    data_dir = None if data_dir is None else Path(data_dir)
    if data_dir is not None and not data_dir.is_dir():
        raise FileNotFoundError(f"data folder {data_dir} does not exist")
    out = {}
    for name in cfg["resolved"]["datasets"]:
        spec = cfg["resolved"]["dataset_sources"][name]
        if "builtin" in spec:
            data = load_dataset(spec["builtin"])
        elif "benchmark" in spec:
            path = Path(spec["path"])
            if not path.is_absolute():
                if data_dir is None:
                    raise FileNotFoundError(
                        f"dataset {name!r} reads {spec['path']} under a data folder: pass --data DIR "
                        "(or choose datasets that need none, e.g. --datasets uci-digits)"
                    )
                path = data_dir / path
            if not path.exists():
                note = f" ({spec['note']})" if spec.get("note") else ""
                raise FileNotFoundError(f"dataset {name!r}: {path} not found{note}")
            data = load_dataset(f"{spec['benchmark']}:{path}")
        else:  # NAME=SOURCE: a file (as given, or under the data folder), a built-in or benchmark spec
            source = spec["file"]
            candidates = [Path(source)] + ([data_dir / source] if data_dir is not None else [])
            hit = next((p for p in candidates if p.is_file()), None)
            data = load_dataset(str(hit) if hit is not None else source)
        if not data.has_split:
            raise ValueError(f"dataset {name!r} has no train/query/database split")
        data.require_labels()
        out[name] = data
    return out


# ------------------------------------------------------------------------------------- cells
def load_cells(out_dir) -> dict:
    """Finished cells of an output folder: ``{cell_key: entry}`` (empty when there are none)."""
    path = Path(out_dir) / CELLS_FILE
    if not path.exists():
        return {}
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path} is not valid JSON ({exc}); delete it to start over") from None
    return {entry["key"]: entry for entry in payload.get("cells", [])}


def _write_cells(out_dir: Path, cells: dict):
    payload = {"format": "dmh-experiment-cells/1", "cells": list(cells.values())}
    atomic_write_text(out_dir / CELLS_FILE, json.dumps(payload, allow_nan=False) + "\n")


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


def _fit_cell(cell, data, train, keep_history: bool):
    from ..evaluation import evaluate_model
    from ..methods import get_method_class

    klass = get_method_class(cell["method"])
    model = klass(n_bits=cell["n_bits"], random_state=cell["seed"], **cell["params"])
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
                **sc,
                "fit_seconds": round(fit_s, 3),
                "n_train": train.n_objects,
                "n_paired": train.n_paired,
            }
        )
    entry = {"key": cell_key(cell), "cell": cell, "records": _jsonable(records), "fit_seconds": round(fit_s, 3)}
    if keep_history:
        entry["history"] = _jsonable(_history(model))
    return entry


# ---------------------------------------------------------------------------------------- run
def run_experiment(
    config,
    *,
    out_dir,
    data_dir=None,
    datasets: Sequence[str] | None = None,
    seeds: Sequence[int] | None = None,
    quick: bool = False,
    bits: Sequence[int] | None = None,
    paired_ratios: Sequence[float] | None = None,
    reuse: Sequence | None = None,
    plots: bool = True,
    echo: Callable[[str], None] | None = None,
) -> dict:
    """Run an experiment config (a name, a path or a dict) and write its results to ``out_dir``.

    ``data_dir`` is the folder the config's data-relative paths start from (not needed for built-in
    data). ``datasets``, ``seeds``, ``quick``, ``bits``, ``paired_ratios``: see
    :func:`resolve_config`. Cells already in ``out_dir/cells.json`` are not fitted again, nor are
    cells found in the ``cells.json`` of a folder in ``reuse`` (another experiment's output: e.g.
    table8 and fig4 share DMH at 50% with table1; a cell is reused only when everything that
    determines it, see :func:`cell_key`, is equal). ``echo`` receives progress lines. Returns ``{"out_dir",
    "n_cells", "n_fitted", "n_reused", "files"}``.
    """
    from ..data import make_semi_paired

    say = echo or (lambda _line: None)
    cfg = resolve_config(
        load_config(config), datasets=datasets, seeds=seeds, quick=quick, bits=bits, paired_ratios=paired_ratios
    )
    missing = sorted({r["method"] for r in cfg["runs"] if _method_class(r["method"]) is None})
    if missing:  # named by the registry, module not written yet: run the others, say so
        say(f"not run (not available in this install): {', '.join(missing)}")
        cfg["resolved"]["skipped_runs"] = [r["label"] for r in cfg["runs"] if r["method"] in missing]
        cfg["runs"] = [r for r in cfg["runs"] if r["method"] not in missing]
        if not cfg["runs"]:
            raise ValueError(f"no method of experiment {cfg['name']!r} is available: {', '.join(missing)}")
    cells = plan_cells(cfg)
    data = _load_datasets(cfg, data_dir)  # fail on missing data before any work
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    cfg["resolved"].update(
        {
            "data_dir": None if data_dir is None else str(Path(data_dir).resolve()),
            "datasets_summary": {name: d.summary() for name, d in data.items()},
            "n_cells": len(cells),
            "dmh_version": _version(),
            "started": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
    )
    atomic_write_text(out / "config.json", json.dumps(_jsonable(cfg), indent=1, allow_nan=False) + "\n")
    finished = load_cells(out)
    keys = [cell_key(c) for c in cells]
    n_own = sum(k in finished for k in keys)
    n_borrowed = 0
    for folder in reuse or ():
        if not (Path(folder) / CELLS_FILE).is_file():
            raise FileNotFoundError(f"--reuse {folder}: no {CELLS_FILE} there (not an experiment output folder)")
        other = load_cells(folder)
        for k in keys:
            if k not in finished and k in other:
                finished[k] = other[k]
                n_borrowed += 1
    if n_borrowed:
        _write_cells(out, finished)
    todo = [c for c, k in zip(cells, keys, strict=True) if k not in finished]
    say(
        f"{cfg['name']}: {len(cells)} cell(s), {n_own} already finished in {out}"
        + (f", {n_borrowed} reused from {', '.join(str(f) for f in reuse)}" if n_borrowed else "")
    )
    keep_history = cfg["kind"] == "convergence"
    cache: dict = {}
    for i, cell in enumerate(todo, 1):
        key = (cell["dataset"], cell["seed"], cell["paired_ratio"])
        if key not in cache:
            cache.clear()
            train = data[cell["dataset"]].train()
            cache[key] = make_semi_paired(train, cell["paired_ratio"], random_state=cell["seed"])
        grid = "".join(f" {k}={v:g}" if isinstance(v, float) else f" {k}={v}" for k, v in cell["grid"].items())
        say(
            f"[{i}/{len(todo)}] {cell['dataset']} {cell['label']}{grid} {cell['n_bits']} bits, "
            f"paired {cell['paired_ratio']:g}, seed {cell['seed']}"
        )
        entry = _fit_cell(cell, data[cell["dataset"]], cache[key], keep_history)
        finished[entry["key"]] = entry
        _write_cells(out, finished)
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


# ------------------------------------------------------------------------------------ summary
def summarize_records(records: Sequence[dict], metric: str) -> list[dict]:
    """Mean and sample std (``ddof=1``; None with one seed) of ``metric`` over seeds, per dataset,
    label, paired ratio, bit length, task and grid point."""
    groups = defaultdict(list)
    for rec in records:
        value = rec.get(metric)
        if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
            gkey = (
                rec["dataset"],
                rec["method"],
                float(rec["paired_ratio"]),
                int(rec["n_bits"]),
                rec["task"],
                json.dumps(rec.get("grid", {}), sort_keys=True),
            )
            groups[gkey].append(float(value))
    out = []
    for (ds, label, ratio, n_bits, task, grid), values in groups.items():
        arr = np.asarray(values)
        out.append(
            {
                "dataset": ds,
                "method": label,
                "paired_ratio": ratio,
                "n_bits": n_bits,
                "task": task,
                "grid": json.loads(grid),
                "metric": metric,
                "mean": float(arr.mean()),
                "std": float(arr.std(ddof=1)) if arr.size > 1 else None,
                "n_seeds": int(arr.size),
            }
        )
    return out


# ------------------------------------------------------------------------------------ outputs
def _fmt(mean, std, digits=4) -> str:
    if mean is None:
        return "–"
    return f"{mean:.{digits}f}" if std is None else f"{mean:.{digits}f} ± {std:.{digits}f}"


def _labels(cfg: dict) -> dict:
    """(run label, ratio) -> table label: the ratio follows the name unless the run is 100% only,
    as in the paper ("DMH (50%)")."""
    from ..report import method_label

    out = {}
    for run in cfg["runs"]:
        ratios = [float(r) for r in run["paired_ratios"]]
        show = set(ratios) != {1.0}  # the rule of dmh.report (and so of the plots' legends)
        for r in ratios:
            out[(run["label"], r)] = method_label(run["label"], r, show)
    return out


def _index(summary: list[dict]) -> dict:
    return {
        (s["dataset"], s["method"], s["paired_ratio"], s["n_bits"], s["task"], json.dumps(s["grid"], sort_keys=True)): s
        for s in summary
    }


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
            for (label, ratio), shown in labels.items():
                row = [shown]
                seen.add(shown)
                for b in cfg["bits"]:
                    s = idx.get((ds, label, ratio, b, task, "{}"))
                    row.append(_fmt(s["mean"], s["std"]) if s else "–")
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
            parts.append("\n".join(lines) + "\n" + "".join(f"\n- {n}" for n in notes) + ("\n" if notes else ""))
    return parts


def _fit_time_tables(cfg, records, datasets) -> list[str]:
    """Mean (± std over seeds) fit time in seconds per method, pairing and bit length. Each cell's
    fit time is in both of its task records; one task is counted."""
    labels = _labels(cfg)
    idx = _index(summarize_records([r for r in records if r["task"] == TASKS[0]], "fit_seconds"))
    parts = []
    for ds in datasets:
        title = cfg["resolved"]["dataset_sources"][ds].get("title", ds)
        header = ["Method"] + [f"{b} bits" for b in cfg["bits"]]
        lines = [
            f"### {title}: fit time (seconds)",
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


def _rounds(hist: dict) -> list[dict]:
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


def _whole_curve(hist: dict) -> list[float | None]:
    """The 'whole' value per round; rounds without a CLE/GBE step (DMH-FIX) carry the last one."""
    vals, last = [], {"cle": None, "gbe": None}
    for row in _rounds(hist):
        for k in ("cle", "gbe"):
            if row[k] is not None:
                last[k] = row[k]
        parts = [v for v in (last["cle"], last["gbe"], row["dam_image"], row["dam_text"]) if v is not None]
        vals.append(float(sum(parts)) if parts else None)
    return vals


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
        f"Reproduces {cfg['paper_ref']} of the DMH paper.",
        cfg.get("description", ""),
        "",
    ]
    if ran_paper:
        lines.append(f"> **Datasets.** This run used {', '.join(ran)}. The paper used {', '.join(paper_ds)}.")
    else:
        lines.append(
            f"> **Datasets.** This run used {', '.join(ran)}, **not** the paper's "
            f"{', '.join(paper_ds)} (not available here). Any numbers of the paper shown below are "
            "for those other datasets: they show what the paper claims (levels, ordering of methods), "
            "not values this run is expected to match."
        )
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
    for run in cfg["runs"]:
        params = _run_params(cfg, run)
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
    records = [r for e in entries for r in e["records"]]
    metrics = list(dict.fromkeys([*cfg.get("metrics", ["map"]), "map"]))
    summary = {m: summarize_records(records, m) for m in metrics}
    payload = {
        "experiment": cfg["name"],
        "title": cfg["title"],
        "quick": cfg["resolved"]["quick"],
        "datasets": cfg["resolved"]["datasets_summary"],
        "n_cells": len(entries),
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
    files = {"config": out / "config.json", "cells": out / CELLS_FILE, "metrics": out / "metrics.json"}
    atomic_write_text(files["metrics"], json.dumps(_jsonable(payload), indent=1, allow_nan=False) + "\n")

    quick_params = cfg["resolved"]["quick_method_params"]
    lines = _header(cfg, quick_params)
    datasets = cfg["resolved"]["datasets"]
    pngs: dict[str, Path] = {}
    lines.append("## Results")
    lines.append("")
    if cfg["kind"] in ("table", "topn", "pr", "convergence"):
        for m in metrics:
            lines += _metric_tables(cfg, summary[m], m, datasets)
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
            pngs.update(_plots(cfg, entries, ds_records, ds, out))
    if pngs:
        lines += ["## Plots", ""] + [f"- [{p.name}]({p.name})" for p in pngs.values()] + [""]
    files["report"] = out / "report.md"
    atomic_write_text(files["report"], "\n".join(lines) + "\n")
    files.update(pngs)
    return files


# -------------------------------------------------------------------------------------- plots
def _figure(n_panels: int, width: float = 5.0, height: float = 4.0, rows: int = 1):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    cols = math.ceil(n_panels / rows)
    fig = Figure(figsize=(width * cols, height * rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    return fig, axes


def _save(fig, path: Path) -> Path:
    from .._atomic import atomic_path

    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    return path


def _plots(cfg, entries, records, ds, out: Path) -> dict[str, Path]:
    from .. import plots as dplots

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
        whole = _whole_curve(hist)
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
