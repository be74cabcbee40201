"""``dmh tune``: a grid of candidate settings of one method, each fitted on the training set less
held-out pairs and scored on them without labels (:func:`dmh.heldout.score_model`), resumable.

The fits run in the one cell loop (:func:`dmh.evaluation.run_cells`, with :data:`TUNE` as what is
done with each cell); a fit's key (:func:`fit_key`) is what a resumed tune reuses it by.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence

from .._json import jsonable
from .._literal import literal_value
from ..data import CrossModalData
from ..errors import DataError, ParameterError
from ..evaluation import CellTask, data_fingerprint, full_params, run_cells
from ..heldout import holdout_pairs, score_model

__all__ = ["TUNE", "candidate_key", "check_distinct_candidates", "data_ident", "fit_key", "parse_grid", "tune"]


def parse_grid(spec: str, method: str) -> list[dict]:
    """``'dmh.n_rounds=1,3;dmh.gamma=0.01,0.1'`` -> the list of candidate parameter dicts (the
    Cartesian product; ``method.`` prefixes are optional). An empty spec is one candidate: the
    defaults."""
    from ..registry import resolve_method

    axes: list[tuple[str, list]] = []
    for part in (p.strip() for p in spec.split(";")):
        if not part:
            continue
        if "=" not in part:
            raise ParameterError(f"grid entries are KEY=V1,V2,... separated by ';', got {part!r}")
        key, values = part.split("=", 1)
        key = key.strip()
        if "." in key:  # METHOD.KEY: a parameter name has no dot (a method may: package.module:Class)
            prefix, _, key = key.rpartition(".")
            if prefix.lower() != method.lower() and not (":" in prefix and resolve_method(prefix) == method):
                raise ParameterError(f"grid entry {part!r} names method {prefix!r}, but the method tuned is {method!r}")
        vals = [literal_value(v.strip()) for v in values.split(",") if v.strip()]
        if not vals:
            raise ParameterError(f"grid entry {part!r} lists no values")
        if any(k == key for k, _ in axes):
            raise ParameterError(f"grid names {key!r} twice")
        axes.append((key, vals))
    if not axes:
        return [{}]
    keys = [k for k, _ in axes]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(v for _, v in axes))]


def candidate_key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def data_ident(data: CrossModalData) -> dict:
    """The data part of a tune fit's key: the hashes of :func:`dmh.evaluation.data_fingerprint`
    (features, masks and labels; the split), computed once per tune."""
    fp = data_fingerprint(data, "")
    return {"data": fp["sha256"], "split": fp["split"]}


def fit_key(ident: dict, method: str, params: dict, n_bits: int, seed: int, paired_ratio: float,
            holdout: float) -> str:
    """Everything that determines one tune fit's result: the data (``ident``, from
    :func:`data_ident`), the method with every parameter (defaults and preset values written out,
    see :func:`dmh.evaluation.full_params`), bits, seed, paired ratio and held-out share. A resumed
    tune reuses a finished fit only under an equal key."""
    key = {
        **ident, "method": method, "params": full_params(method, params), "n_bits": int(n_bits), "seed": int(seed),
        "paired_ratio": float(paired_ratio), "holdout": float(holdout),
    }
    return json.dumps(jsonable(key), sort_keys=True, separators=(",", ":"))


def tune(data: CrossModalData, method: str, grid: Sequence[dict], bits: Sequence[int], seeds: Sequence[int],
         *, paired_ratio: float = 1.0, holdout: float = 0.15, fixed_params: dict | None = None,
         test_map: bool = False, records: list | None = None, on_record: Callable[[dict], None] | None = None,
         on_resume: Callable[[int, int], None] | None = None, progress: bool = False, jobs: int = 1,
         echo: Callable[[str], None] | None = None) -> list[dict]:
    """Fit every candidate (grid x bits x seeds) on the training set minus held-out pairs and score
    it without labels (:func:`dmh.heldout.score_model`). ``records`` are finished results (resuming:
    their cells are skipped). With ``test_map`` the MAP on the data's query/database split is also
    recorded, to *validate* the criterion and for reports; :func:`dmh.selection.choose` never reads
    it. Two candidates that are one setting at every bit length are refused
    (:func:`check_distinct_candidates`). ``on_resume(reused, planned)`` is called once the finished records have been checked against
    this run's settings (a mismatch raises :class:`DataError` before it), when some are reused.

    ``data`` needs a training split (``train_idx``) or is used whole. For each seed, the training
    set is made semi-paired at ``paired_ratio`` (:func:`dmh.make_semi_paired`) and then the held-out
    pairs are drawn from its pairs with the same seed.

    The fits run in :func:`dmh.evaluation.run_cells`: ``jobs=N`` (N > 1) fits N candidates at a time
    in worker processes (each with dmh's threads // N, a fit's result that of a serial run at that
    thread count; ``echo`` gets the line saying so). ``on_record`` receives each record as it
    finishes. The list returned holds ``records`` and the new ones, in the plan's order either way.
    """
    from .._workers import check_jobs
    from ..registry import get_method_class

    jobs = check_jobs(jobs)
    klass = get_method_class(method)
    valid = set(klass().get_params(deep=False))
    fixed_params = dict(fixed_params or {})
    for params in [fixed_params, *grid]:
        unknown = sorted(set(params) - valid)
        if unknown:
            raise ParameterError(f"unknown parameter(s) {unknown} for method {method!r}; it has {sorted(valid)}")
    check_distinct_candidates(method, grid, bits, fixed_params)
    records = list(records or [])
    plan = [(s, b, p) for s in seeds for b in bits for p in grid]
    ident = data_ident(data)
    keys = [fit_key(ident, method, {**fixed_params, **p}, b, s, paired_ratio, holdout) for s, b, p in plan]
    _check_resumed(records, plan, keys, paired_ratio)
    if test_map:
        data.query(), data.database()  # data without a query/database split fail here, before any fit
    done = {r["key"] for r in records}
    cells = [{"key": k, "dataset": "data", "method": method, "label": method, "grid": p,
              "params": {**fixed_params, **p}, "n_bits": int(b), "seed": int(s), "paired_ratio": float(paired_ratio),
              "holdout": float(holdout), "test_map": bool(test_map)}
             for (s, b, p), k in zip(plan, keys, strict=True) if k not in done]
    if on_resume is not None and len(plan) > len(cells):
        on_resume(len(plan) - len(cells), len(plan))

    def finished(rec):
        records.append(rec)
        if on_record is not None:
            on_record(rec)

    run_cells(cells, {"data": data}, on_entry=finished, echo=echo, progress=progress, jobs=jobs, task=TUNE)
    order = {k: i for i, k in enumerate(keys)}  # the plan's order, whatever finished first
    return sorted(records, key=lambda r: order.get(r["key"], -1))


def check_distinct_candidates(method: str, grid: Sequence[dict], bits: Sequence[int], fixed_params: dict) -> None:
    """Refuse two candidates of ``grid`` that are one setting at every bit length of ``bits`` (a
    value equal to the default or to a preset's, or a block length the code is within): the same fit
    would run twice and the two would be reported as rivals."""
    from .._keys import bits_key_params

    seen: dict[tuple, dict] = {}
    for params in grid:
        full = full_params(method, {**fixed_params, **params})
        setting = tuple(json.dumps(jsonable(bits_key_params(method, full, b)), sort_keys=True) for b in bits)
        if setting in seen:
            at = ", ".join(str(int(b)) for b in bits)
            raise ParameterError(f"grid candidates {candidate_key(seen[setting])} and {candidate_key(params)} are the "
                                 f"same setting at {at} bits (a default's value, a preset's, or a block length the "
                                 "code is within): list each setting once")
        seen[setting] = params


def _check_resumed(records: list[dict], plan: list, keys: list[str], paired_ratio: float) -> None:
    """Finished ``records`` of a tune to resume checked against this run's plan: each with a key, of
    the same data, split, method, paired ratio and held-out share, and a planned candidate's record
    only under its planned key (else :class:`DataError`)."""
    if any(r.get("key") is None for r in records):
        raise DataError("the tune results to resume hold fits without a key (written by an older dmh): "
                        "they cannot be told apart from other settings; start a new results file")
    setting = ("data", "split", "method", "paired_ratio", "holdout")
    if keys:
        ours = json.loads(keys[0])
        other = [r for r in records if any(json.loads(r["key"]).get(f) != ours[f] for f in setting)]
        if other:
            raise DataError(f"the tune results to resume hold {len(other)} fit(s) of another tune (other data, split, "
                            "method, paired ratio or held-out share): start a new results file")
    planned = {(candidate_key(p), int(b), int(s), float(paired_ratio)): k
               for (s, b, p), k in zip(plan, keys, strict=True)}
    clash = [r for r in records if r["key"] != planned.get((r["candidate"], r["n_bits"], r["seed"], r["paired_ratio"]),
                                                           r["key"])]
    if clash:
        r = clash[0]
        raise DataError(f"the tune results to resume hold {len(clash)} fit(s) of this run's candidates made under "
                        "other parameter values (other fixed parameters, or a changed default; first: "
                        f"{r['candidate']} {r['n_bits']} bits seed {r['seed']}): start a new results file")


def _tune_fit(state: dict, cell: dict) -> dict:
    """Fit and score one candidate of :func:`tune` (in this process or a worker's): on its seed's
    training set less that seed's held-out pairs (made once for consecutive cells of one seed)."""
    import time

    from ..data import make_semi_paired
    from ..registry import get_method_class

    data = state["datasets"][cell["dataset"]]
    seed = cell["seed"]
    cache = state.setdefault("split_cache", {})
    split = (cell["dataset"], seed, cell["paired_ratio"], cell["holdout"])
    if split not in cache:
        cache.clear()
        train = data.train() if data.train_idx is not None else data
        if cell["paired_ratio"] < 1.0:
            train = make_semi_paired(train, cell["paired_ratio"], random_state=seed)
        cache[split] = holdout_pairs(train, cell["holdout"], random_state=seed)
    fit_data, held = cache[split]
    model = get_method_class(cell["method"])(n_bits=cell["n_bits"], random_state=seed, **cell["params"])
    t0 = time.perf_counter()
    model.fit(fit_data)
    fit_s = time.perf_counter() - t0
    rec = {
        "key": cell["key"],
        "method": cell["method"],
        "candidate": candidate_key(cell["grid"]),
        "params": cell["grid"],
        "n_bits": cell["n_bits"],
        "seed": seed,
        "paired_ratio": cell["paired_ratio"],
        "fit_seconds": round(fit_s, 3),
        "n_fit": fit_data.n_objects,
        "n_heldout_pairs": held.n,
        "label_free": score_model(model, held, fit_data, per_pair=True),
    }
    if cell["test_map"]:
        from ..evaluation import evaluate_model

        tests = state.setdefault("test_sets", {})
        if cell["dataset"] not in tests:
            tests.clear()
            tests[cell["dataset"]] = (data.query(), data.database())
        sc = evaluate_model(model, *tests[cell["dataset"]])
        rec["test_map"] = {task: v["map"] for task, v in sc.items()}
    return rec


#: what :func:`dmh.evaluation.run_cells` does with a tune's cell: fit it on the training set less the
#: held-out pairs and score it on them (no line per cell: ``dmh tune`` prints each record's)
TUNE = CellTask(_tune_fit, None, "tune")
