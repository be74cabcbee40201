"""Experiment configs: load, validate and resolve them.

A *config* (``dmh/experiments/configs/NAME.json``) holds everything an experiment needs: the
methods ("runs", each a label, a method of the registry or a ``package.module:Class``, extra
parameters, the paired ratios and an optional parameter grid), the bit lengths, the seeds, the
datasets (the paper's and those that run here), a reduced ``quick`` variant and the numbers the
paper reports. See ``docs/experiments.md``.
:func:`resolve_config` applies the command line's reductions and records them in ``cfg["resolved"]``.
"""

from __future__ import annotations

import copy
import json
import numbers
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from ..errors import DmhError, ParameterError, ParameterTypeError, UnknownNameError
from ..records import TASKS
from ..registry import BUILTIN_METHODS, PAPER_METHODS

__all__ = [
    "KINDS",
    "DOCUMENTED_METHODS",
    "PEER_METHODS",
    "config_names",
    "config_extent",
    "load_config",
    "resolve_config",
    "run_params",
    "source_string",
    "validate_config",
]

#: what a config reproduces, and so which report and plots it gets
KINDS = ("table", "topn", "pr", "ratio_sweep", "sensitivity", "convergence")
#: every method the paper compares (:data:`dmh.registry.PAPER_METHODS`)
DOCUMENTED_METHODS = PAPER_METHODS
#: the built-in methods compared beyond the paper (:mod:`dmh.peers`)
PEER_METHODS = tuple(name for name in BUILTIN_METHODS if name not in PAPER_METHODS)
_QUICK_KEYS = {"seeds", "bits", "paired_ratios", "grid", "method_params"}
_RUN_KEYS = {"label", "method", "paired_ratios", "params", "grid", "pairs_only"}
_DATASET_KEYS = {"builtin", "benchmark", "path", "file", "paper", "title", "note"}


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
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as exc:
            raise ParameterError(f"experiment config {path} is not UTF-8 JSON text ({exc.reason})") from None
        origin = str(path)
    else:
        raise UnknownNameError(
            f"unknown experiment {key!r}; available: {', '.join(config_names())} (or a path to a .json config)"
        )
    try:
        config = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParameterError(f"experiment config {origin} is not valid JSON: {exc}") from None
    return validate_config(config)


def _fail(config, where: str, what: str):
    """A one-line error naming the config and the field, or (``config`` None) the argument alone."""
    raise ParameterError(f"{where} {what}" if config is None else f"config {config.get('name', '?')!r}: {where} {what}")


def _check_object(config, where, value, allowed, say_allowed: bool = False):
    """``value`` is a JSON object with keys among ``allowed``."""
    if not isinstance(value, dict):
        _fail(config, where, "must be an object")
    extra = set(value) - set(allowed)
    if extra:
        allowed_note = f"; allowed: {sorted(allowed)}" if say_allowed else ""
        _fail(config, where, f"has unknown key(s) {sorted(extra)}{allowed_note}")


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
    """The method's class, or None when it cannot be found (an unknown name, a module that is not
    installed): the runner reports such runs as not run."""
    from ..registry import get_method_class

    try:
        return get_method_class(name)
    except (ModuleNotFoundError, KeyError):
        return None


def _check_method(config, where, method):
    """``method`` is a method name of the registry or a class as ``package.module:Class``."""
    from ..registry import method_names, resolve_method

    if not isinstance(method, str):
        _fail(config, where, f"must be a method name, got {method!r}")
    try:
        resolve_method(method)
    except DmhError as exc:
        why = str(exc) if ":" in method else f"{', '.join(method_names())}, or package.module:Class"
        _fail(config, where, f"{method!r} is not a known method ({why})")


def _check_params(config, where, method, params):
    if not isinstance(params, dict):
        _fail(config, where, f"must be a dict of parameters, got {params!r}")
    klass = _method_class(method)
    if klass is None:
        return
    valid = set(klass().get_params(deep=False))
    unknown = sorted(set(params) - valid)
    if unknown:
        _fail(config, where, f"names unknown parameter(s) {unknown} of {method!r}; it has {sorted(valid)}")
    if "n_bits" in params or "random_state" in params:
        _fail(config, where, "must not set n_bits or random_state (they come from 'bits' and 'seeds')")


def validate_config(config: dict) -> dict:
    """Check a config's structure and values; returns it. Errors name the config and the field."""
    if not isinstance(config, dict):
        raise ParameterTypeError(f"an experiment config must be a JSON object, got {type(config).__name__}")
    # paper_ref: the report's first line names it (a config without it failed there, after every fit)
    for key in ("name", "title", "paper_ref", "kind", "bits", "seeds", "runs", "datasets", "default_datasets",
                "paper"):
        if key not in config:
            _fail(config, "", f"lacks the key {key!r}")
    if config["kind"] not in KINDS:
        _fail(config, "kind", f"is {config['kind']!r}; expected one of {KINDS}")
    _check_int_list(config, "bits", config["bits"], 1, 4096)
    _check_int_list(config, "seeds", config["seeds"], 0)
    metrics = config.get("metrics", ["map"])
    if not isinstance(metrics, list) or not metrics or not all(isinstance(m, str) for m in metrics):
        _fail(config, "metrics", f"must be a non-empty list of metric names, got {metrics!r}")
    for flag in ("leaderboard", "report_fit_time"):
        if not isinstance(config.get(flag, False), bool):
            _fail(config, flag, f"must be true or false, got {config[flag]!r}")
    runs = config["runs"]
    if not isinstance(runs, list) or not runs:
        _fail(config, "runs", "must be a non-empty list")
    labels: dict = {}
    for i, run in enumerate(runs):
        where = f"runs[{i}]"
        _check_object(config, where, run, _RUN_KEYS, say_allowed=True)
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
        _check_method(config, f"{where}.method", run["method"])
        _check_ratios(config, f"{where}.paired_ratios", run["paired_ratios"])
        _check_params(config, f"{where}.params", run["method"], run.get("params", {}))
        if not isinstance(run.get("pairs_only", False), bool):
            _fail(config, f"{where}.pairs_only", f"must be true or false, got {run['pairs_only']!r}")
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
        _check_method(config, "method_params", method)
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
    config_validation(config)
    return config


def config_validation(config: dict) -> dict | None:
    """A config's ``split``: ``"test"`` (the default: the datasets' query sets) or ``"validation"``,
    with an optional ``validation`` object ``{"fraction": 0.2, "random_state": 0}``. Returns the
    validation split's ``{"fraction", "random_state"}``, or None for the query sets."""
    split = config.get("split", "test")
    if split not in ("test", "validation"):
        _fail(config, "split", f"is {split!r}; expected 'test' or 'validation'")
    spec = config.get("validation")
    if split == "test":
        if spec is not None:
            _fail(config, "validation", "applies only with \"split\": \"validation\"")
        return None
    spec = {} if spec is None else spec
    _check_object(config, "validation", spec, {"fraction", "random_state"}, True)
    spec = {"fraction": 0.2, "random_state": 0, **spec}
    fraction, seed = spec["fraction"], spec["random_state"]
    if not isinstance(fraction, (int, float)) or isinstance(fraction, bool) or not 0 < fraction < 1:
        _fail(config, "validation.fraction", f"must be a number strictly between 0 and 1, got {fraction!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        _fail(config, "validation.random_state", f"must be a whole number >= 0, got {seed!r}")
    return {"fraction": float(fraction), "random_state": seed}


def _check_dataset(config, name, spec):
    where = f"datasets.{name}"
    _check_object(config, where, spec, _DATASET_KEYS)
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
    runs: Sequence[str] | None = None,
) -> dict:
    """The config as it will run: ``quick`` overrides applied, the chosen datasets and seeds.

    ``datasets``: names from the config's ``datasets``, or ``NAME=SOURCE`` for a dataset not in it
    (a data file, a built-in name or a ``benchmark:path`` spec); default ``default_datasets``.
    ``seeds``, ``bits``, ``paired_ratios``: subsets or replacements of the config's (a run keeps
    only its ratios that are in ``paired_ratios`` and is left out when none is); ``runs``: the labels
    of the runs to keep (every run with one of them). The report says the run was reduced when any
    of them leaves out part of the config.
    """
    cfg = copy.deepcopy(validate_config(copy.deepcopy(config)))
    full = config_extent(cfg)
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
        _check_int_list(None, "seeds", seeds, 0)
        cfg["seeds"] = seeds
    if bits is not None:
        bits = [int(b) for b in bits]
        _check_int_list(None, "bits", bits, 1, 4096)
        cfg["bits"] = bits
    if paired_ratios is not None:
        wanted = [float(r) for r in paired_ratios]
        _check_ratios(None, "paired_ratios", wanted)
        for run in cfg["runs"]:
            run["paired_ratios"] = [r for r in run["paired_ratios"] if float(r) in wanted]
        cfg["runs"] = [run for run in cfg["runs"] if run["paired_ratios"]]
        if not cfg["runs"]:
            raise ParameterError(f"no run of experiment {cfg['name']!r} has a paired ratio in {wanted}")
    if runs is not None:
        wanted_runs = [str(r) for r in runs]
        labels = [run["label"] for run in cfg["runs"]]
        unknown = [r for r in wanted_runs if r not in labels]
        known = ", ".join(dict.fromkeys(labels))
        if not wanted_runs:
            raise ParameterError(f"runs names no run; experiment {cfg['name']!r} has {known}")
        if unknown:
            raise ParameterError(f"runs: experiment {cfg['name']!r} has no run labelled {unknown}; "
                                 f"its runs are {known}")
        cfg["runs"] = [run for run in cfg["runs"] if run["label"] in wanted_runs]
    ran = config_extent(cfg)
    reduced = {k: {"config": full[k], "ran": ran[k]} for k in full if not set(full[k]) <= set(ran[k])}
    chosen = list(cfg["default_datasets"]) if datasets is None else list(datasets)
    if not chosen:
        raise ParameterError("datasets names no dataset")
    selected = {}
    for entry in chosen:
        if "=" in entry:
            name, source = entry.split("=", 1)
            if not name or not source:
                raise ParameterError(f"a dataset given as NAME=SOURCE needs both parts, got {entry!r}")
            selected[name] = {"file": source, "paper": False, "title": name}
        elif entry in cfg["datasets"]:
            selected[entry] = cfg["datasets"][entry]
        else:
            raise UnknownNameError(
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
    _check_values(cfg)
    return cfg


def _check_values(cfg: dict) -> None:
    """Every run's parameter values (and each value of its grid) are ones its method's fit accepts
    at every bit length that will run: a bad value fails here, not after hours of other cells."""
    from ..errors import ParameterError
    from ..evaluation import check_method_params

    for i, run in enumerate(cfg["runs"]):
        if _method_class(run["method"]) is None:
            continue
        params = run_params(cfg, run)
        trials = [("params", params)]
        trials += [(f"grid.{k}", {**params, k: v}) for k, values in run.get("grid", {}).items() for v in values]
        for where, values in trials:
            try:
                check_method_params(run["method"], values, cfg["bits"])
            except ParameterError as exc:
                _fail(cfg, f"runs[{i}].{where}", f"has a value that fit refuses: {exc}")


def config_extent(cfg: dict) -> dict:
    """The seeds, bit lengths, paired ratios and run labels a config covers."""
    ratios = sorted({float(r) for run in cfg["runs"] for r in run["paired_ratios"]})
    runs = list(dict.fromkeys(run["label"] for run in cfg["runs"]))
    return {"seeds": list(cfg["seeds"]), "bits": list(cfg["bits"]), "paired_ratios": ratios, "runs": runs}


def run_params(cfg: dict, run: dict) -> dict:
    res = cfg["resolved"]
    params = dict(res["method_params"].get(run["method"], {}))
    params.update(run.get("params", {}))
    params.update(res["quick_method_params"].get(run["method"], {}))
    return params


def source_string(spec: dict) -> str:
    if "builtin" in spec:
        return f"builtin:{spec['builtin']}"
    if "benchmark" in spec:
        return f"{spec['benchmark']}:{spec['path']}"
    return f"file:{spec['file']}"
