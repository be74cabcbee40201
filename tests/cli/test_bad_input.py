"""Issue 9 at the command line: bad input is one line ``Error: ...`` naming the file or argument
and exit code 2; nothing silently wrong, nothing lost, no work wasted on an unwritable output."""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest

from dmh import CrossModalData, save_data
from dmh.cli import main

CVH = ["--method", "cvh", "--bits", "8"]


@pytest.fixture
def data_file(tmp_path, toy_data):
    return save_data(toy_data, tmp_path / "toy.npz")


def _error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "Traceback" not in err and "pickle" not in err.lower()
    return lines[0]


def _no_fit(monkeypatch):
    from dmh.base import BaseHasher

    def fail(self, data):
        raise AssertionError("fitted before checking the input")

    monkeypatch.setattr(BaseHasher, "fit", fail)


@pytest.mark.parametrize("ratio", ["1.5", "nan", "0", "-1"])
def test_fit_refuses_a_paired_ratio_outside_0_1_like_evaluate(data_file, tmp_path, capsys, monkeypatch, ratio):
    _no_fit(monkeypatch)
    out = tmp_path / "m.npz"
    assert main(["fit", str(data_file), *CVH, "--paired-ratio", ratio, "--out", str(out)]) == 2
    assert "--paired-ratio must lie in (0, 1]" in _error(capsys) and not out.exists()
    assert main(["evaluate", str(data_file), *CVH, "--paired-ratio", ratio, "--out", str(tmp_path / "r.json")]) == 2
    assert "--paired-ratio must lie in (0, 1]" in _error(capsys)


@pytest.mark.parametrize(
    ("option", "value"), [("--seeds", "0,0"), ("--bits", "8,8"), ("--paired-ratio", "1,1.0"), ("--method", "cvh,CVH")]
)
def test_repeated_values_are_refused(data_file, tmp_path, capsys, monkeypatch, option, value):
    _no_fit(monkeypatch)
    args = {"--method": "cvh", "--bits": "8", "--paired-ratio": "1.0", "--seeds": "0", option: value}
    argv = ["evaluate", str(data_file), *[x for kv in args.items() for x in kv], "--out", str(tmp_path / "r.json")]
    assert main(argv) == 2
    assert f"{option} repeats" in _error(capsys)


@pytest.mark.parametrize("command", ["fit", "evaluate", "encode", "index", "search"])
def test_unwritable_output_is_refused_before_any_work(data_file, tmp_path, capsys, monkeypatch, command):
    from dmh.index import save_codes
    from dmh.registry import get_method_class

    model = get_method_class("cvh")(n_bits=8).fit(CrossModalData(
        image=np.random.default_rng(0).normal(size=(30, 12)), text=np.random.default_rng(1).normal(size=(30, 9))))
    model_path = model.save(tmp_path / "model.npz")
    codes = save_codes(tmp_path / "codes.npz", np.ones((3, 8), np.int8))
    from dmh.index import HammingIndex

    index = HammingIndex(8, backend="numpy").add(np.ones((3, 8), np.int8)).save(tmp_path / "i.dmhidx")
    _no_fit(monkeypatch)
    bad = tmp_path / "missing-folder" / "out.npz"
    argv = {
        "fit": ["fit", str(data_file), *CVH, "--out", str(bad)],
        "evaluate": ["evaluate", str(data_file), *CVH, "--out", str(bad.with_suffix(".json"))],
        "encode": ["encode", str(model_path), str(data_file), "--modality", "image", "--out", str(bad)],
        "index": ["index", str(codes), "--out", str(bad)],
        "search": ["search", str(index), "--codes", str(codes), "--k", "2", "--out", str(bad)],
    }[command]
    assert main(argv) == 2
    line = _error(capsys)
    assert "missing-folder" in line and "does not exist" in line and "--out" in line


@pytest.mark.parametrize(("code", "words"), [(errno.EROFS, "read-only"), (errno.ENOSPC, "no space left"),
                                             (errno.EACCES, "permission denied")])
def test_read_only_or_full_output_is_one_line(data_file, tmp_path, capsys, monkeypatch, code, words):
    real_open = os.open

    def failing(path, *args, **kwargs):
        if ".dmh-" in os.fspath(path):
            raise OSError(code, os.strerror(code), os.fspath(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", failing)
    _no_fit(monkeypatch)
    assert main(["fit", str(data_file), *CVH, "--out", str(tmp_path / "m.npz")]) == 2
    line = _error(capsys)
    assert "m.npz" in line and words in line.lower()


def test_unreadable_input_is_one_line_naming_it(data_file, capsys, monkeypatch):
    import builtins

    import dmh._archive as archive

    def denied(path, *args, **kwargs):
        if os.fspath(path) == os.fspath(data_file):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return builtins.open(path, *args, **kwargs)

    monkeypatch.setattr(archive, "open", denied, raising=False)
    assert main(["info", str(data_file)]) == 2
    line = _error(capsys)
    assert str(data_file) in line and "Permission denied" in line


def test_unexpected_exceptions_still_raise(data_file, monkeypatch):
    """Only user errors are turned into one line: a bug keeps its traceback (exit code 1)."""
    import dmh.io

    def bug(path):
        raise RuntimeError("a bug")

    monkeypatch.setattr(dmh.io, "read_arrays", bug)
    with pytest.raises(RuntimeError, match="a bug"):
        main(["info", str(data_file)])


def test_existing_results_are_never_silently_overwritten(data_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    out.write_text('{"results": []}')
    assert main(["evaluate", str(data_file), *CVH, "--paired-ratio", "1.0", "--out", str(out)]) == 2
    line = _error(capsys)
    assert "r.json" in line and "--resume" in line and "--overwrite" in line
    assert out.read_text() == '{"results": []}'
    assert main(["evaluate", str(data_file), *CVH, "--paired-ratio", "1.0", "--out", str(out), "--overwrite"]) == 0
    assert len(json.loads(out.read_text())["results"]) == 2


def test_a_second_run_on_the_same_results_is_refused(data_file, tmp_path, capsys):
    from dmh._atomic import exclusive_lock

    out = tmp_path / "r.json"
    with exclusive_lock(out) as lock:  # another run holds it
        assert main(["evaluate", str(data_file), *CVH, "--paired-ratio", "1.0", "--out", str(out)]) == 2
        assert f"pid {os.getpid()}" in _error(capsys) and not out.exists()
    assert main(["evaluate", str(data_file), *CVH, "--paired-ratio", "1.0", "--out", str(out)]) == 0
    assert lock.read_text() == ""  # released at the end, naming no holder


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"results": [{"method": "cvh"}]}', '{"results": 3}'])
def test_bad_resume_file_names_the_file(data_file, tmp_path, capsys, monkeypatch, content):
    _no_fit(monkeypatch)
    out = tmp_path / "r.json"
    out.write_text(content)
    assert main(["evaluate", str(data_file), *CVH, "--out", str(out), "--resume"]) == 2
    assert str(out) in _error(capsys)


def test_resume_reuses_only_cells_of_the_same_data_and_parameters(toy_data, tmp_path, capsys):
    path = save_data(toy_data, tmp_path / "d.npz")
    out = tmp_path / "r.json"
    args = ["--method", "cvh", "--bits", "8", "--paired-ratio", "1.0", "--out", str(out), "--resume"]
    assert main(["evaluate", str(path), *args]) == 0
    first = json.loads(out.read_text())["results"]
    capsys.readouterr()
    assert main(["evaluate", str(path), *args, "--param", "cvh.reg=0.5"]) == 0  # other parameters
    assert "Resuming: 0 of 1" in capsys.readouterr().out
    changed = CrossModalData(image=toy_data.image * 2, text=toy_data.text, labels=toy_data.labels,
                             train_idx=toy_data.train_idx, query_idx=toy_data.query_idx,
                             database_idx=toy_data.database_idx)
    save_data(changed, path)  # the same file name, other data
    assert main(["evaluate", str(path), *args]) == 0
    said = capsys.readouterr().out
    assert "Resuming: 0 of 1" in said
    last = json.loads(out.read_text())["results"]
    assert {r["cell_key"] for r in last}.isdisjoint({r["cell_key"] for r in first})


@pytest.mark.parametrize("content", ['{"cells": [1, 2]}', "[]", '{"cells": [{"key": "k", "cell": {}, "records": []}]}',
                                     "not json"])
def test_reproduce_refuses_a_damaged_cells_file(tmp_path, capsys, content):
    out = tmp_path / "rep"
    out.mkdir()
    (out / "cells.json").write_text(content)
    assert main(["reproduce", "table1", "--quick", "--datasets", "uci-digits", "--out", str(out), "--no-plots"]) == 2
    assert "cells.json" in _error(capsys)


def test_absurd_sizes_are_refused_before_allocating(data_file, tmp_path, capsys):
    from dmh.index import HammingIndex, save_codes

    codes = save_codes(tmp_path / "codes.npz", np.ones((3, 8), np.int8))
    index = HammingIndex(8, backend="numpy").add(np.ones((3, 8), np.int8)).save(tmp_path / "i.dmhidx")
    # the CLI asks for no more than the index holds: every code comes back
    assert main(["search", str(index), "--codes", str(codes), "--k", "1000000000000", "--format", "csv"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1 + 3 * 3
    from dmh.errors import ResourceError

    with pytest.raises(ResourceError, match="k=1000000000000"):  # the library pads to k, as faiss does
        HammingIndex.load(index).search(np.ones((3, 8), np.int8), 1_000_000_000_000)
    assert main(["fit", str(data_file), "--method", "dmh", "--bits", "8", "--param", "dmh.hidden_size=10000000000000",
                 "--out", str(tmp_path / "m.npz")]) == 2
    assert "hidden_size=10000000000000" in _error(capsys)
    assert main(["fit", str(data_file), "--method", "dmh", "--param", "gamma=nan", "--out",
                 str(tmp_path / "m.npz")]) == 2
    assert "gamma must be a finite number" in _error(capsys)


def test_damaged_inputs_are_one_line(data_file, tmp_path, capsys):
    (tmp_path / "empty.npz").write_bytes(b"")
    assert main(["info", str(tmp_path / "empty.npz")]) == 2
    assert "empty.npz" in _error(capsys)  # not "Aborted."
    blob = data_file.read_bytes()
    (tmp_path / "cut.npz").write_bytes(blob[: len(blob) // 2])
    assert main(["fit", str(tmp_path / "cut.npz"), *CVH, "--out", str(tmp_path / "m.npz")]) == 2
    assert "cut.npz" in _error(capsys)


@pytest.mark.parametrize("n", [1, 2])
def test_files_of_one_or_two_objects_encode_and_search_with_rows_all(tmp_path, capsys, n):
    from dmh.registry import get_method_class

    rng = np.random.default_rng(0)
    model = get_method_class("cvh")(n_bits=8).fit(CrossModalData(image=rng.normal(size=(30, 6)),
                                                                 text=rng.normal(size=(30, 5))))
    model_path = model.save(tmp_path / "m.npz")
    tiny = tmp_path / "tiny.npz"
    np.savez(tiny, image=rng.normal(size=(n, 6)), text=rng.normal(size=(n, 5)))
    assert main(["info", str(tiny)]) == 0
    assert f"{n} objects" in capsys.readouterr().out
    assert main(["encode", str(model_path), str(tiny), "--modality", "text", "--out", str(tmp_path / "c.npz")]) == 0
    assert main(["index", str(tmp_path / "c.npz"), "--out", str(tmp_path / "i.dmhidx")]) == 0
    assert main(["search", str(tmp_path / "i.dmhidx"), "--model", str(model_path), "--data", str(tiny),
                 "--modality", "image", "--rows", "all", "--k", "1"]) == 0
    assert len(json.loads(capsys.readouterr().out)["results"]) == n
    assert main(["encode", str(model_path), str(tiny), "--modality", "text", "--rows", "query", "--out",
                 str(tmp_path / "q.npz")]) == 2
    assert "no query split" in _error(capsys)


@pytest.mark.parametrize(
    "argv",
    [
        ["fit", "DATA", *CVH, "--seed", "-1", "--out", "OUT/m.npz"],
        ["evaluate", "DATA", *CVH, "--seeds", "0,-3", "--out", "OUT/r.json"],
        ["reproduce", "table1", "--quick", "--seeds", "-2", "--out", "OUT/rep"],
        ["tune", "DATA", *CVH, "--seeds", "-1", "--out", "OUT/t.json"],  # was a ValueError traceback
    ],
)
def test_negative_seeds_are_refused(data_file, tmp_path, capsys, monkeypatch, argv):
    _no_fit(monkeypatch)
    argv = [str(data_file) if a == "DATA" else a.replace("OUT", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    line = _error(capsys)
    assert "non-negative integer seed" in line and "--seed" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["toy.npz"]  # nothing written


def test_evaluate_refuses_a_training_set_that_is_not_fully_paired(tmp_path, capsys, monkeypatch):
    _no_fit(monkeypatch)
    rng = np.random.default_rng(0)
    path = tmp_path / "half.npz"
    np.savez(path, image=rng.normal(size=(20, 6)), text=rng.normal(size=(20, 5)), labels=rng.integers(0, 2, 20),
             text_mask=np.arange(20) % 2 == 0, query_idx=np.arange(10))
    assert main(["evaluate", str(path), "--method", "cvh", "--bits", "4", "--out", str(tmp_path / "r.json")]) == 2
    line = _error(capsys)
    assert "half.npz" in line and "image-only" in line


def test_reproduce_config_that_is_not_text(tmp_path, capsys):
    config = tmp_path / "binary.json"
    config.write_bytes(bytes(range(256)))
    assert main(["reproduce", str(config)]) == 2
    assert "binary.json" in _error(capsys)


def test_usage_errors_are_one_line_and_dmh_alone_shows_the_help(capsys):
    assert main(["fit"]) == 2
    assert "Missing argument 'DATA'" in _error(capsys)
    assert main(["evaluate", "--nope"]) == 2
    assert "No such option" in _error(capsys)
    assert main([]) == 2
    assert "Usage: dmh" in capsys.readouterr().err


@pytest.mark.parametrize(("param", "option"), [("random_state=5", "--seed"), ("cvh.n_bits=16", "--bits")])
def test_params_the_command_sets_itself_are_refused(data_file, tmp_path, capsys, monkeypatch, param, option):
    """--param n_bits used to be dropped silently by evaluate (and to clash in fit)."""
    _no_fit(monkeypatch)
    for command in ("fit", "evaluate"):
        out = tmp_path / ("m.npz" if command == "fit" else "r.json")
        assert main([command, str(data_file), *CVH, "--param", param, "--out", str(out)]) == 2
        assert option in _error(capsys)


@pytest.mark.parametrize("param", ['dmh.perplexity="abc"', "dmh.perplexity=[1]", "dmh.gbe_lr='x'",
                                   "dmh.preset=[1]", "dmh.hidden_size=-3", "dmh.gbe_schedule=-1"])
def test_bad_param_values_are_refused_before_the_data(tmp_path, capsys, param):
    """A bad --param value was checked only after the data were loaded and made semi-paired, and
    some (a string where a number belongs) ended in a TypeError traceback."""
    missing = tmp_path / "no-such-data.npz"
    assert main(["fit", str(missing), "--method", "dmh", "--bits", "8", "--param", param,
                 "--out", str(tmp_path / "m.npz")]) == 2
    line = _error(capsys)
    assert line.startswith("Error: DMH: ") and "no-such-data" not in line  # the method, named once
    assert main(["evaluate", str(missing), "--method", "cvh,dmh", "--bits", "8", "--param", param,
                 "--out", str(tmp_path / "r.json")]) == 2
    assert _error(capsys).startswith("Error: DMH: ")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize(("args", "words"), [
    (["--grid", "dmh.perplexity=30,abc"], "perplexity must be"),
    (["--grid", "n_bits=8,16"], "--grid n_bits is set by the command itself"),
    (["--grid", "k=3", "--param", "random_state=1"], "--param random_state is set by the command itself"),
    (["--grid", "k=3", "--param", "hidden_size=0"], "hidden_size must be"),
    # None is the default preset's 16: the same fit twice, reported as two rivals
    (["--grid", "dmh.gbe_block_bits=None,16"], "are the same setting at 8 bits"),
])
def test_tune_checks_every_candidate_before_the_first_fit(tmp_path, capsys, monkeypatch, args, words):
    """--grid perplexity=30,abc fitted the first candidate, then ended in a traceback at the
    second; --param n_bits=3 clashed with --bits in a TypeError."""
    _no_fit(monkeypatch)
    out = tmp_path / "t.json"
    assert main(["tune", str(tmp_path / "no-such-data.npz"), "--method", "dmh", *args, "--bits", "8",
                 "--seeds", "0", "--out", str(out)]) == 2
    assert words in _error(capsys)
    assert not out.exists()


def test_a_diverged_peer_fit_is_one_line(data_file, tmp_path, capsys):
    """A deep peer whose loss became NaN raised a bare FloatingPointError (a traceback)."""
    from dmh.errors import FitDivergedError, ParameterError

    assert issubclass(FitDivergedError, ParameterError) and issubclass(FitDivergedError, FloatingPointError)
    assert main(["fit", str(data_file), "--method", "jdsh", "--bits", "8", "--param", "mu=1e30",
                 "--out", str(tmp_path / "m.npz")]) == 2
    assert "training loss became" in _error(capsys)
    assert not (tmp_path / "m.npz").exists()


# ---- found by test_fuzz_options.py (careless values in every option of every command)
@pytest.mark.parametrize(
    ("argv", "named"),
    [
        (["fit", "", *CVH, "--out", "OUT/m.npz"], "DATA"),  # was: ". holds no benchmark file"
        (["fit", "DATA", *CVH, "--out", ""], "--out"),
        (["tune", "DATA", *CVH, "--out", ""], "--out"),  # was: ".: Is a directory"
        (["evaluate", "DATA", *CVH, "--out", "OUT/r.json", "--param", ""], "--param"),
        # a blank value after KEY= reached the method's own check (or a fit, for a free-form string)
        (["evaluate", "DATA", *CVH, "--out", "OUT/r.json", "--param", "reg= "], "--param"),
        (["fit", "DATA", *CVH, "--param", "cvh.reg=", "--out", "OUT/m.npz"], "--param"),
        (["encode", "DATA", "DATA", "--modality", "image", "--out", " "], "--out"),
        (["search", " ", "--k", "3"], "COLLECTION|INDEX"),
        (["reproduce", "table1", "--quick", "--datasets", " ", "--out", "OUT/rep"], "--datasets"),
        (["reproduce", "table1", "--quick", "--datasets", ",", "--out", "OUT/rep"], "--datasets"),
    ],
)
def test_empty_or_blank_values_are_refused_naming_the_option(data_file, tmp_path, capsys, monkeypatch, argv, named):
    _no_fit(monkeypatch)
    cwd = tmp_path / "cwd"  # an empty path was the current folder: nothing may land there either
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    argv = [str(data_file) if a == "DATA" else a.replace("OUT", str(tmp_path)) for a in argv]
    assert main(argv) == 2
    line = _error(capsys)
    assert named in line and ("must not be empty" in line or "names no dataset" in line), line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cwd", "toy.npz"] and not any(cwd.iterdir())


def test_an_absurd_thread_count_is_refused(data_file, capsys):
    from dmh._threads import resolve_threads

    assert main(["--threads", "10000000000000", "info", str(data_file)]) == 2  # was an OverflowError traceback
    err = _error(capsys)
    assert "--threads" in err and "at most 4096" in err
    assert "n_threads" not in err  # the option's name, not the Python argument's
    with pytest.raises(ValueError, match="at most 4096"):
        resolve_threads(10**13)


def test_featurize_refuses_an_empty_label_separator(tmp_path, capsys):
    texts = tmp_path / "texts.csv"
    texts.write_text("id,text,labels\n1,a red thing,red\n2,a blue thing,blue\n")
    out = tmp_path / "f.npz"
    argv = ["featurize", "--texts", str(texts), "--labels-column", "labels", "--label-separator", "", "-o", str(out)]
    assert main(argv) == 2  # was: ValueError: empty separator, a traceback
    assert "--label-separator" in _error(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["texts.csv"]


def _tiny_config(tmp_path, data_file, **change) -> str:
    config = {"name": "tiny", "title": "one CVH cell", "paper_ref": "no table", "kind": "table", "bits": [8],
              "seeds": [0], "runs": [{"label": "CVH", "method": "cvh", "paired_ratios": [1.0]}],
              "datasets": {"toy": {"file": str(data_file), "paper": False, "title": "toy"}},
              "default_datasets": ["toy"], "paper": {"source": "none", "rows": None, "notes": ["no numbers"]}}
    config.update(change)
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
    return str(path)


def test_reproduce_refuses_a_missing_reuse_folder_before_writing(data_file, tmp_path, capsys, monkeypatch):
    _no_fit(monkeypatch)
    out = tmp_path / "rep"
    argv = ["reproduce", _tiny_config(tmp_path, data_file), "--no-plots", "--out", str(out),
            "--reuse", str(tmp_path / "nope")]
    assert main(argv) == 2  # config.json used to be written first
    assert "--reuse" in _error(capsys) and not out.exists()


def test_reproduce_refuses_a_config_without_paper_ref_before_fitting(data_file, tmp_path, capsys, monkeypatch):
    _no_fit(monkeypatch)  # it used to fail in the report, after every fit, with a KeyError traceback
    out = tmp_path / "rep"
    argv = ["reproduce", _tiny_config(tmp_path, data_file, paper_ref=None), "--no-plots", "--out", str(out)]
    assert main(argv) == 2
    assert "paper_ref" in _error(capsys) and not out.exists()


def test_tune_checks_its_output_before_any_fit(tmp_path, capsys, monkeypatch):
    """tune --out /proc/... started fitting and failed only at the first write, losing the fit."""
    _no_fit(monkeypatch)
    for out, words in [("/proc/dmh-tune.json", "/proc/dmh-tune.json"), (str(tmp_path / "nope" / "t.json"), "nope")]:
        assert main(["tune", "uci-digits", "--method", "dmh", "--grid", "gamma=0.01", "--bits", "8", "--seeds", "0",
                     "--out", out]) == 2
        assert words in _error(capsys)


def test_evaluate_refuses_a_bad_data_file_before_making_the_lock_beside_out(tmp_path, capsys):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not an archive")
    out = tmp_path / "runs" / "r.json"
    out.parent.mkdir()
    assert main(["evaluate", str(bad), *CVH, "--out", str(out)]) == 2
    assert "bad.npz" in _error(capsys)
    assert list(out.parent.iterdir()) == []  # neither the results file nor its lock
