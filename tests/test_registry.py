"""The open registry: names, register_method, package.module:Class, entry points of installed
packages, how a saved model names its class, and load_model's handling of parameters."""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import pytest

import dmh
from dmh import registry
from dmh.errors import ModelFileError, ParameterError, UnknownNameError
from dmh.registry import get_method_class, make_method, method_key, method_names, register_method, resolve_method
from dmh.testing import toy_data

from .test_testing import _Mean  # noqa: F401 (the class the paths name)

PATH = "tests.test_testing:_Mean"


@pytest.fixture(autouse=True)
def _clean_registry(monkeypatch):
    """Each test registers into a copy of the registry."""
    monkeypatch.setattr(registry, "METHODS", dict(registry.METHODS))


def _fitted(method="cvh", **params):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return make_method(method, n_bits=4, random_state=0, **params).fit(toy_data())


def test_builtins_keep_their_names_and_import_nothing_to_list():
    import subprocess

    names = method_names()
    assert names[:14] == list(registry.BUILTIN_METHODS) and set(registry.PAPER_METHODS) < set(names)
    assert all(method_key(get_method_class(n)) == n for n in registry.BUILTIN_METHODS)
    assert resolve_method("dmh.baselines.cvh:CVH") == "cvh" and resolve_method(" CVH ") == "cvh"
    code = "import sys, dmh; dmh.registry.method_names(); print('torch' in sys.modules, 'dmh.baselines' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True).stdout.split() == ["False", "False"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("nope", "unknown method 'nope'; available: dmh, cvh"),
        ("no_such_pkg.mod:Cls", "there is no module 'no_such_pkg' to import"),
        ("json:loads", "is not a hashing method"),
        ("tests.test_testing:Nope", "has no 'Nope'"),
        ("a b:C", "neither a method name nor a class"),
    ],
)
def test_unknown_methods_are_one_line_errors(spec, message):
    with pytest.raises(UnknownNameError, match=message) as err:
        get_method_class(spec)
    assert "\n" not in str(err.value)


def test_register_method_by_class_and_by_path():
    assert register_method("mean-sign", _Mean) is _Mean
    assert get_method_class("Mean-Sign") is _Mean and "mean-sign" in method_names()
    assert method_key(_Mean) == "mean-sign" and resolve_method(PATH) == "mean-sign"
    register_method("mean-sign", _Mean)  # the same again: no error
    register_method("mean-path", PATH)  # imported when first used
    assert get_method_class("mean-path") is _Mean
    with pytest.raises(ParameterError, match="registered already; pass overwrite=True"):
        register_method("mean-sign", "json:loads")
    register_method("mean-sign", PATH, overwrite=True)


@pytest.mark.parametrize(
    ("name", "method", "message"),
    [
        ("dmh", _Mean, "is a built-in method of dmh"),
        ("Bad Name", _Mean, "is not valid"),
        ("a.b", _Mean, "is not valid"),
        ("auto", _Mean, "is not valid"),
        ("ok", dict, "is not a hashing method"),
        ("ok", 3, "takes a dmh.BaseHasher subclass"),
        ("ok", "not a path", "neither a method name nor a class"),
    ],
)
def test_register_method_refuses(name, method, message):
    with pytest.raises(ParameterError, match=message) as err:
        register_method(name, method)
    assert "\n" not in str(err.value)


def test_a_class_path_works_wherever_a_name_does(tmp_path):
    model = make_method(PATH, n_bits=4).fit(toy_data())
    assert model.save(tmp_path / "m.npz") and json.loads(
        np.load(tmp_path / "m.npz")["__meta__"].tobytes())["method"] == PATH
    loaded = dmh.load_model(tmp_path / "m.npz")
    assert type(loaded) is _Mean
    register_method("mean-sign", _Mean)  # registered: files name it by its registered name
    header = json.loads(np.load(_Mean(4).fit(toy_data()).save(tmp_path / "r.npz"))["__meta__"].tobytes())
    assert header["method"] == "mean-sign" and header["class_path"] == PATH


def test_a_file_naming_an_unregistered_name_says_which_class(tmp_path):
    register_method("mean-sign", _Mean)
    path = _Mean(4).fit(toy_data()).save(tmp_path / "m.npz")
    del registry.METHODS["mean-sign"]
    with pytest.raises(ModelFileError, match=rf"names a method not available here \(class {PATH}\).*register it"):
        dmh.load_model(path)


def _rewrite(path, change):
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    meta = change(json.loads(arrays["__meta__"].tobytes()))
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(path, **arrays)
    return path


def test_load_model_names_unknown_parameters_and_reads_old_files(tmp_path):
    path = _fitted().save(tmp_path / "cvh.npz")
    typo = _rewrite(tmp_path / "cvh.npz", lambda m: {**m, "params": {**m["params"], "n_bitz": 4}})
    with pytest.raises(ModelFileError, match=r"has parameters that CVH does not have: \['n_bitz'\]"):
        dmh.load_model(typo)
    # a model file of a method (DMH) from before an option was removed, and before one was added
    from dmh import _keys

    saved = _fitted("dmh", **{"d": 8, "hidden_size": 16, "n_rounds": 1, "dam_epochs": 1}).save(tmp_path / "dmh.npz")

    def older(meta):
        params = {k: v for k, v in meta["params"].items() if k != "ridge_solver"}
        return {**meta, "params": {**params, "gbe_balance": 0.0}}

    old = dmh.load_model(_rewrite(saved, older))
    assert old.ridge_solver == _keys.ADDED_OPTIONS["dmh"]["ridge_solver"] and not hasattr(old, "gbe_balance")
    with pytest.raises(ModelFileError, match="a module of Python's standard library"):
        dmh.load_model(_rewrite(path, lambda m: {**m, "method": "os:system"}))


def test_an_installed_package_offers_methods_by_entry_point(tmp_path, monkeypatch):
    dist = tmp_path / "my_hashers-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: my-hashers\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[dmh.methods]\nmean-sign = {PATH}\ndmh = {PATH}\n")
    assert "mean-sign" not in method_names()
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.warns(UserWarning, match="takes the name of a built-in method; ignored"):
        names = method_names()
    assert "mean-sign" in names and names.count("dmh") == 1
    assert get_method_class("mean-sign") is _Mean and method_key(_Mean) == "mean-sign"
    model = _Mean(4).fit(toy_data())
    header = json.loads(np.load(model.save(tmp_path / "m.npz"))["__meta__"].tobytes())
    assert header["method"] == "mean-sign"
    assert type(dmh.load_model(tmp_path / "m.npz")) is _Mean


def test_registered_methods_reach_worker_processes():
    """--jobs runs cells in spawned workers: a method registered in this process is known there."""
    from dmh.evaluation import plan_evaluation, run_cells

    register_method("mean-sign", _Mean)
    data = toy_data(n=60).with_split(query_size=20)
    cells = plan_evaluation(data, "toy", ["mean-sign"], bits=[4, 8], paired_ratios=[1.0], dataset="toy")
    entries = run_cells(cells, {"toy": data}, jobs=2)
    assert [e["key"] for e in entries] == [c["key"] for c in cells]
    assert all(e["records"][0]["base_method"] == "mean-sign" for e in entries)
