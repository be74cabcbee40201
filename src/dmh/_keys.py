"""What keeps earlier results and saved models valid while the methods change: one table, read by the
cell key (:func:`dmh.evaluation.full_params`), by the fit of a cell (:func:`dmh.evaluation.fit_cell`),
by :func:`dmh.load_model` and by the readers of finished cells (``--resume``, ``--reuse``).

A result cell is reused only under an equal key (the canonical JSON of its data, method, every
parameter, bits, paired ratio and seed: :func:`dmh.evaluation.cell_key`), so an option added to a
method or taken from it would change every key written before, and those results would be fitted
again. The table below says, per method, how each such option enters a key and a saved model:

====================  =================================  =============================================
kind                  in a cell key                      in a saved model's header
====================  =================================  =============================================
``added``             left out while it holds the value  missing from an earlier file: that value
                      every earlier result ran with
``removed``           written, at the value the fit      present in an earlier file: dropped (the
                      always uses today                  weights are what they are)
``PAIRED_INERT``      in a fully paired or pairs-only    kept (a parameter like any other)
                      cell, at the value that changes
                      nothing there
``INERT_UNLESS``      unless another option holds a      kept (a parameter like any other)
                      given value, at the value that
                      changes nothing
:data:`EXECUTION_     left out (where a fit runs, not    kept (a parameter like any other)
PARAMS`               what it computes)
====================  =================================  =============================================

Beyond the parameters: a key stored with an execution parameter (results written while ``device``
was part of the key) is read without it (:func:`normalize_key`), and a stored cell whose fields do not
give back its key (another key layout, or an edited file) is kept under a key no planned cell has
(:func:`stored_key`), so its records are never taken for another cell's. A parameter of a saved
model that is neither the class's nor removed on purpose is an error naming it
(:func:`model_params`): a typo or a file of another version, not something to drop.

To add or remove an option of a built-in method: add its entry here, and check with
``pytest tests/test_result_keys.py`` that every committed result under ``docs/results`` keeps its key.
"""

from __future__ import annotations

import json

from ._json import jsonable

__all__ = ["ADDED_OPTIONS", "BITS_INERT", "EXECUTION_PARAMS", "INERT_UNLESS", "PAIRED_INERT", "REMOVED_OPTIONS",
           "bits_key_params", "dump_key", "fit_params", "key_params", "model_params", "normalize_key",
           "paired_key_params", "stored_key"]

#: method -> {option: the value every result written before the option existed ran with}
ADDED_OPTIONS: dict[str, dict[str, object]] = {
    "dmh": {"dam_precision": "float32", "gamma_scaling": "none", "ridge_solver": "sklearn",
            "gbe_schedule": "constant", "cle_gram": False, "dam_agree_target": None, "dam_contrastive": 0.0,
            "use_unpaired": True, "dam_first_target": None, "dam_last_epochs": None,
            "encoder": "network", "ridge_weight": 1.0, "gbe_exaggeration": 1.0,
            "block_bits": None, "unpaired_margin": 0.0, "gbe_block_bits": 4096,
            "dam_scaling": "feature"},
    "sadch": {"input_scaling": "feature"},
}

#: method -> {option taken out: the one value the fit uses today}
REMOVED_OPTIONS: dict[str, dict[str, object]] = {
    "dmh": {"dam_tol": None, "dam_weight_decay": 0.0, "kernel_scale": 1.0, "gbe_balance": 0.0,
            "gbe_decorrelation": 0.0, "unpaired_weight": 1.0},
}

#: method -> {option: value}: options that change nothing when every training object is paired (a
#: fully paired cell, or a pairs-only one). Such a cell's key holds them at this value (and so, where
#: it is an added option's old value, leaves them out): a default that differs only on semi-paired
#: data keeps the keys of every fully paired result
PAIRED_INERT: dict[str, dict[str, object]] = {
    "dmh": {"use_unpaired": True, "unpaired_margin": 0.0},
}

#: method -> {option: (other option, its value, inert value)}: an option that changes nothing unless
#: the other option holds that value. Elsewhere a key holds it at the inert value (and so, where that
#: is an added option's old value, leaves it out): ``unpaired_margin`` acts only under
#: ``use_unpaired="auto"``, so the cells that name ``use_unpaired`` true or false keep their keys
INERT_UNLESS: dict[str, dict[str, tuple[str, object, object]]] = {
    "dmh": {"unpaired_margin": ("use_unpaired", "auto", 0.0)},
}

#: method -> {option: inert value}: a length that changes nothing when the code is no longer than it.
#: ``gbe_block_bits=b`` solves a code of ``n_bits <= b`` bits as one GBE problem, as every result
#: before the option did (its value in :data:`ADDED_OPTIONS`, 4096: at least every code length,
#: ``dmh.methods.dmh_options.ONE_PROBLEM``); such a cell's key holds it at that value and so leaves
#: it out, and is fitted at it: the 16-bit cells made before the default became 16 keep their keys
BITS_INERT: dict[str, dict[str, object]] = {
    "dmh": {"gbe_block_bits": 4096},
}

#: parameters that say where a fit runs, not what it computes: kept in a cell's ``params`` (the fit
#: uses them, its records show them) and left out of its key
EXECUTION_PARAMS = ("device",)

#: the prefix of a stored cell's key that no planned cell has (see :func:`stored_key`)
_UNMATCHED = "stale:"


def key_params(method: str, params: dict) -> dict:
    """``params`` (every parameter of ``method``, defaults included) as a cell key holds them:
    removed options added at the value the fit always uses, an option of :data:`INERT_UNLESS` at
    its inert value where it acts on nothing, added options left out at the value earlier results
    ran with."""
    out = dict(params)
    for name, value in REMOVED_OPTIONS.get(method, {}).items():
        out.setdefault(name, value)
    for name, (other, active, inert) in INERT_UNLESS.get(method, {}).items():
        if name in out and out.get(other, ADDED_OPTIONS.get(method, {}).get(other)) != active:
            out[name] = inert
    for name, value in ADDED_OPTIONS.get(method, {}).items():
        if name in out and out[name] == value:
            del out[name]
    return out


def paired_key_params(method: str, params: dict) -> dict:
    """``params`` as :func:`key_params` wrote them, for a cell whose training objects are all paired:
    the options of :data:`PAIRED_INERT` at their value there."""
    out = dict(params)
    for name, value in PAIRED_INERT.get(method, {}).items():
        if name in out:
            out[name] = value
    return key_params(method, out)


def bits_key_params(method: str, params: dict, n_bits: int) -> dict:
    """``params`` as :func:`key_params` wrote them, for a cell of ``n_bits`` bits: the lengths of
    :data:`BITS_INERT` that are at least ``n_bits`` at their inert value there."""
    out = dict(params)
    for name, value in BITS_INERT.get(method, {}).items():
        length = out.get(name)
        if isinstance(length, int) and not isinstance(length, bool) and length >= int(n_bits):
            out[name] = value
    return key_params(method, out)


def fit_params(method: str, params: dict) -> dict:
    """A cell's ``params`` as the method's ``__init__`` takes them: removed options left out, and an
    added option the key leaves out at the value it stands for (the value every earlier result ran
    with; not the method's default, which may have changed since)."""
    removed = REMOVED_OPTIONS.get(method, {})
    out = {k: v for k, v in params.items() if k not in removed}
    for name, value in ADDED_OPTIONS.get(method, {}).items():
        out.setdefault(name, value)
    return out


def model_params(method: str, saved: dict, valid) -> tuple[dict, list[str]]:
    """The parameters of a saved model's header as its class takes them: ``(params, unknown)``.

    ``valid``: the class's parameter names. Removed options are dropped; an added option the file
    lacks takes the value earlier files were made with; ``unknown`` lists the names that are
    neither (the caller refuses the file, naming them)."""
    valid = set(valid)
    removed = REMOVED_OPTIONS.get(method, {})
    params = {k: v for k, v in saved.items() if k in valid}
    unknown = sorted(k for k in saved if k not in valid and k not in removed)
    for name, value in ADDED_OPTIONS.get(method, {}).items():
        if name in valid and name not in saved:
            params[name] = value
    return params, unknown


def normalize_key(key: str) -> str:
    """A stored cell key as :func:`dmh.evaluation.cell_key` writes it today: one written while an
    execution parameter (``device``) was part of the key is read without it. A string that is not
    a key's JSON is returned as it is (it then matches no planned cell)."""
    try:
        ident = json.loads(key)
    except (json.JSONDecodeError, TypeError):
        return key
    if not isinstance(ident, dict) or not any(p in (ident.get("params") or {}) for p in EXECUTION_PARAMS):
        return key
    return dump_key(ident)


def dump_key(ident: dict) -> str:
    """The canonical JSON of a cell's identity (execution parameters left out)."""
    ident = dict(ident)
    if isinstance(ident.get("params"), dict):
        ident["params"] = {k: v for k, v in ident["params"].items() if k not in EXECUTION_PARAMS}
    return json.dumps(jsonable(ident), sort_keys=True, separators=(",", ":"))


def stored_key(key: str, own_key: str | None) -> str:
    """The key a finished cell read from a file is kept under: its stored ``key`` (normalised)
    where its fields give that key back (``own_key``, ``None`` when they cannot), else a key that
    no planned cell has, so its records are never taken for another cell's."""
    key = normalize_key(key)
    return key if own_key == key else _UNMATCHED + key
