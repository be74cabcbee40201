"""What a cell of :mod:`dmh.evaluation` is and its key: the dataset's fingerprint, the method's full
parameters, the cell itself (:func:`make_cell`), its key (:func:`cell_key`) and which finished cells
of earlier records a run may reuse (:func:`reusable_cells`). The rules (what enters the key, what
does not): the docstring of :mod:`dmh.evaluation`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ._json import jsonable
from ._keys import bits_key_params, dump_key, fit_params, key_params, normalize_key, paired_key_params
from .data import CrossModalData
from .errors import DataError, ParameterError
from .records import TASKS
from .registry import get_method_class, resolve_method


#: the parameters a cell sets itself (every other one is part of the cell's ``params``)
_CELL_PARAMS = ("n_bits", "random_state")
#: the fields of a cell that make up its key
KEY_FIELDS = ("dataset", "data", "split", "label", "method", "params", "n_bits", "paired_ratio", "seed")
#: fields that enter the key only where a cell sets them (a cell without them keeps the key it has)
OPTIONAL_KEY_FIELDS = ("pairs_only", "validation")


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
              pairs_only: bool = False, validation: dict | None = None, train: CrossModalData | None = None) -> dict:
    """A cell with its full parameters and its key (``cell["key"]``); ``pairs_only`` trains it on
    the paired objects of its semi-paired set alone; ``validation`` (``{"fraction", "random_state"}``)
    says that the cell's data are the validation split made with them; ``train``, the training set
    the cell's is drawn from, lets an option that does nothing on any part of it keep older keys
    (:func:`data_key_params`)."""
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
    cell["params"] = bits_key_params(cell["method"], cell["params"], n_bits)  # so do lengths the code is within
    if train is not None:  # and options these data give no work
        cell["params"] = data_key_params(cell["method"], cell["params"], train)
    cell["key"] = cell_key(cell)
    return cell


def data_key_params(method: str, params: dict, train: CrossModalData) -> dict:
    """``params`` as :func:`key_params` wrote them, for a cell trained on ``train`` or a part of it
    (a semi-paired set, its pairs, a fit's held-out subset): the options the method's
    ``data_inert_options`` finds inert on every part of these data at the values that change
    nothing there (and so, where that is an added option's old value, left out of the key). The
    cell is fitted with those values: the same computation, under the key earlier results have."""
    hook = getattr(get_method_class(method), "data_inert_options", None)
    inert = hook(fit_params(method, params), train) if hook is not None else {}
    return jsonable(key_params(method, {**params, **inert})) if inert else params


def cell_key(cell: dict) -> str:
    """Canonical JSON of everything that determines a cell's result (see the module docstring)."""
    missing = [k for k in KEY_FIELDS if k not in cell]
    if missing:
        raise DataError(f"a cell needs {list(KEY_FIELDS)} for its key; this one lacks {missing} (see make_cell)")
    ident = {k: cell[k] for k in KEY_FIELDS}
    ident.update({k: cell[k] for k in OPTIONAL_KEY_FIELDS if cell.get(k)})
    return dump_key(ident)


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
