"""The validation split of the training objects, ``dmh evaluate --split validation`` and the rule
for defaults (``dmh compare``, :mod:`dmh.experiments.defaults`)."""

import json
import zlib

import numpy as np
import pytest

from dmh import CrossModalData
from dmh.cli import main
from dmh.datasets import load_builtin
from dmh.errors import DataError, ParameterError
from dmh.evaluation import data_fingerprint, full_params, make_cell, plan_evaluation
from dmh.experiments.defaults import changes_default, compare_settings, comparison_markdown, setting_records

# ------------------------------------------------------------------------------- the split


def test_the_validation_split_is_seeded_disjoint_and_carved_from_the_training_objects():
    data = load_builtin("uci-digits")
    val = data.validation(fraction=0.2, random_state=0)
    train = data.train_idx
    assert val.query_idx.size == round(0.2 * train.size) and val.train_idx.size == train.size - val.query_idx.size
    assert np.array_equal(val.train_idx, val.database_idx)  # the fit's objects are the database
    assert np.intersect1d(val.query_idx, val.database_idx).size == 0
    assert np.array_equal(np.union1d(val.query_idx, val.train_idx), np.sort(train))  # every training object, once
    assert np.intersect1d(val.query_idx, data.query_idx).size == 0  # no test query is a validation object
    again = data.validation(fraction=0.2, random_state=0)
    assert np.array_equal(again.query_idx, val.query_idx)  # seeded
    other = data.validation(fraction=0.2, random_state=1)
    assert not np.array_equal(other.query_idx, val.query_idx)
    assert np.array_equal(val.image, data.image) and np.array_equal(val.labels, data.labels)  # another split
    assert data_fingerprint(val, "d")["split"] != data_fingerprint(data, "d")["split"]


def test_a_test_query_listed_among_the_training_objects_never_becomes_a_validation_object():
    rng = np.random.default_rng(0)
    n = 60
    leaky = CrossModalData(image=rng.normal(size=(n, 4)), text=rng.normal(size=(n, 3)), labels=np.arange(n) % 3,
                           train_idx=np.arange(40), query_idx=np.arange(30, 50), database_idx=np.arange(n))
    for seed in range(5):
        val = leaky.validation(fraction=0.5, random_state=seed)
        for part in (val.query_idx, val.train_idx, val.database_idx):
            assert np.intersect1d(part, leaky.query_idx).size == 0
        assert val.query_idx.size == 15 and val.train_idx.size == 15  # half of the 30 training objects left


@pytest.mark.parametrize("fraction", [0.0, 1.0, 1, -0.2, 2.5, 100, float("nan"), "0.2", True])
def test_a_bad_fraction_is_refused(fraction):
    with pytest.raises(ParameterError, match="fraction"):
        load_builtin("uci-digits").validation(fraction=fraction)


def test_too_few_training_objects_or_none_are_refused():
    rng = np.random.default_rng(0)
    data = CrossModalData(image=rng.normal(size=(10, 2)), text=rng.normal(size=(10, 2)), train_idx=[0, 1])
    with pytest.raises(DataError, match="validation"):
        data.validation(fraction=0.2)  # rounds to no query
    with pytest.raises(DataError, match="train_idx"):
        CrossModalData(image=data.image, text=data.text).validation()


# ---------------------------------------------------------------------------------- cell keys
def test_the_split_enters_a_cell_key_only_when_it_is_the_validation_split(toy_data):
    fp = data_fingerprint(toy_data, "toy")
    base = dict(dataset="toy", fingerprint=fp, method="cvh", params={}, n_bits=8, paired_ratio=1.0, seed=0)
    test_cell = make_cell(**base)
    assert "validation" not in test_cell and "validation" not in json.loads(test_cell["key"])
    assert make_cell(**base, validation=None)["key"] == test_cell["key"]  # the default keeps today's keys
    val_cell = make_cell(**base, validation={"fraction": 0.2, "random_state": 0})
    assert json.loads(val_cell["key"])["validation"] == {"fraction": 0.2, "random_state": 0}
    assert val_cell["key"] != make_cell(**base, validation={"fraction": 0.2, "random_state": 1})["key"]
    val = toy_data.validation(fraction=0.25, random_state=0)
    cells = plan_evaluation(val, "toy", ["cvh"], [8], [1.0], [0], validation={"fraction": 0.25, "random_state": 0})
    assert all(c["validation"] == {"fraction": 0.25, "random_state": 0} for c in cells)


# ------------------------------------------------------------------------------------ the CLI
def test_evaluate_on_the_validation_split(tmp_path, capsys):
    out = tmp_path / "val.json"
    args = ["evaluate", "uci-digits", "--method", "cvh", "--bits", "16", "--paired-ratio", "1.0", "--seeds", "0"]
    assert main([*args, "--split", "validation", "--validation-fraction", "0.25", "--out", str(out)]) == 0
    assert "375 of the training objects as queries" in capsys.readouterr().out
    payload = json.loads(out.read_text())
    assert {r["split"] for r in payload["results"]} == {"validation"}
    assert {r["n_query"] for r in payload["results"]} == {375} and {r["n_train"] for r in payload["results"]} == {1125}
    assert payload["config"]["split"] == "validation"
    assert payload["config"]["validation"] == {"fraction": 0.25, "random_state": 0}
    test_out = tmp_path / "test.json"
    assert main([*args, "--out", str(test_out)]) == 0  # the default: the query set, as before
    test_records = json.loads(test_out.read_text())["results"]
    assert {r["split"] for r in test_records} == {"test"} and {r["n_query"] for r in test_records} == {500}
    assert all("validation" not in json.loads(r["cell_key"]) for r in test_records)
    # resuming the test run's file with the validation split reuses none of its cells
    assert main([*args, "--split", "validation", "--out", str(test_out), "--resume"]) == 0
    assert "0 of 1 cell(s) reused" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--validation-fraction", "0.3"], "--validation-fraction applies only with --split validation"),
        (["--validation-seed", "1"], "--validation-seed applies only with --split validation"),
        (["--split", "validation", "--validation-fraction", "1"], "--validation-fraction"),
        (["--split", "holdout"], "--split"),
    ],
)
def test_bad_split_options_are_one_line(extra, message, tmp_path, capsys):
    assert main(["evaluate", "uci-digits", "--method", "cvh", "--bits", "16", *extra,
                 "--out", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


# -------------------------------------------------------------------------- the rule's verdict
def _records(dataset, params, shift, seeds=(0, 1, 2, 3), noise=0.002, split="validation"):
    """Synthetic records of CVH with ``params``: per (bits, task) cell and seed, a base value plus
    ``shift`` (one per figure, or one for both) plus seeded noise."""
    rng = np.random.default_rng(zlib.crc32(f"{dataset} {json.dumps(params, sort_keys=True)}".encode()))
    shifts = shift if isinstance(shift, dict) else {"map": shift, "map@50": shift}
    out = []
    for bits in (16, 32):
        for task in ("image->text", "text->image"):
            for s in seeds:
                out.append({
                    "dataset": dataset, "method": "cvh", "base_method": "cvh", "params": full_params("cvh", params),
                    "grid": {}, "n_bits": bits, "paired_ratio": 1.0, "seed": s, "task": task, "split": split,
                    "map": 0.5 + 0.01 * s + shifts["map"] + rng.normal(0, noise),
                    "map@50": 0.6 + 0.01 * s + shifts["map@50"] + rng.normal(0, noise),
                })
    return out


CANDIDATE = {"reg": 0.5}


def _verdict(base_shift_by_ds, cand_shift_by_ds, **kw):
    recs = []
    for ds, shift in base_shift_by_ds.items():
        recs += _records(ds, {}, shift, **kw)
    for ds, shift in cand_shift_by_ds.items():
        recs += _records(ds, CANDIDATE, shift, **kw)
    base, cand = setting_records(recs, "cvh"), setting_records(recs, "cvh", CANDIDATE)
    return compare_settings(base, cand)


def test_a_clear_win_on_every_dataset_changes_the_default():
    rows = _verdict({"a": 0.0, "b": 0.0}, {"a": 0.05, "b": 0.05})
    assert [(r.dataset, r.figure, r.outcome) for r in rows] == [
        ("a", "map", "won"), ("b", "map", "won"), ("a", "map@50", "won"), ("b", "map@50", "won")]
    assert changes_default(rows)
    text = comparison_markdown(rows, "cvh", "cvh reg=0.5")
    assert "Changes the default: yes" in text and "| a | MAP | 0.5" in text


def test_a_tie_changes_the_default_but_a_loss_on_one_figure_of_one_dataset_does_not():
    tie = _verdict({"a": 0.0, "b": 0.0}, {"a": 0.0, "b": 0.05})
    assert {r.outcome for r in tie if r.dataset == "a"} == {"tied"} and changes_default(tie)
    lost = _verdict({"a": 0.0, "b": 0.0}, {"a": 0.05, "b": {"map": 0.05, "map@50": -0.05}})
    assert [r.outcome for r in lost if r.dataset == "b"] == ["won", "lost"]
    assert not changes_default(lost)
    assert "Changes the default: no (lost on b)" in comparison_markdown(lost, "cvh", "cvh reg=0.5")


def test_one_seed_is_untested_and_changes_nothing_and_test_records_are_not_validation_ones():
    rows = _verdict({"a": 0.0}, {"a": 0.05}, seeds=(0,))
    assert {r.outcome for r in rows} == {"untested"} and not changes_default(rows)
    recs = _records("a", {}, 0.0, split="test") + _records("a", CANDIDATE, 0.05, split="test")
    assert setting_records(recs, "cvh") == []  # validation is the default split
    rows = compare_settings(setting_records(recs, "cvh", split="test"), setting_records(recs, "cvh", CANDIDATE,
                                                                                         split="test"))
    assert changes_default(rows)
    assert "Changes the default: no" in comparison_markdown(rows, "cvh", "cvh reg=0.5", split="test")


def test_compare_on_the_command_line(tmp_path, capsys):
    base, cand = tmp_path / "base.json", tmp_path / "cand.json"
    base.write_text(json.dumps({"results": _records("a", {}, 0.0)}))
    cand.write_text(json.dumps({"records": _records("a", CANDIDATE, 0.05)}))  # a metrics.json of dmh reproduce
    assert main(["compare", str(base), str(cand), "--baseline", "cvh", "--against", "cvh.reg=0.5"]) == 0
    out = capsys.readouterr().out
    assert "| a | MAP@50 |" in out and "Changes the default: yes" in out
    assert main(["compare", str(base), str(cand), "--baseline", "cvh", "--against", "cvh.reg=0.25"]) == 2
    assert "no record of cvh reg=0.25 on the validation split" in capsys.readouterr().err
    assert main(["compare", str(base), "--baseline", "cvh", "--against", "cvh"]) == 2
    assert "the same setting" in capsys.readouterr().err
    (tmp_path / "bad.json").write_text("[1, 2]")
    assert main(["compare", str(tmp_path / "bad.json"), "--baseline", "cvh", "--against", "cvh.reg=1"]) == 2
    assert "bad.json: is not a results file" in capsys.readouterr().err
    # a dmh tune's file beside the records (a folder's *.json) was called damaged records
    (tmp_path / "tune.json").write_text(json.dumps({"config": {"grid": "reg=0.5"}, "records": [{"label_free": {}}]}))
    assert main(["compare", str(base), str(tmp_path / "tune.json"), "--baseline", "cvh", "--against", "cvh.reg=1"]) == 2
    assert "tune.json: holds a dmh tune's held-out pair scores" in capsys.readouterr().err


def test_compare_both_sets_a_parameter_of_both_settings(tmp_path, capsys):
    """Records made at an older default: --both names its value once for both sides, and a key set
    twice (on one side and in --both) is refused in one line."""
    def itq(params, shift):  # n_iter=20 stands for the value a default had when the records were made
        recs = _records("a", {"reg": 0.1 + shift}, shift)  # its own noise per setting
        for r in recs:
            r.update(method="cca-itq", base_method="cca-itq", params=full_params("cca-itq", {"n_iter": 20, **params}))
        return recs

    path = tmp_path / "r.json"
    path.write_text(json.dumps({"results": itq({}, 0.0) + itq({"corr_power": 0.5}, 0.05)}))
    args = ["compare", str(path), "--baseline", "cca-itq", "--against", "cca-itq.corr_power=0.5"]
    assert main(args) == 2
    assert "no record of cca-itq on the validation split" in capsys.readouterr().err
    assert main([*args, "--both", "cca-itq.n_iter=20"]) == 0
    out = capsys.readouterr().out
    assert "cca-itq corr_power=0.5 n_iter=20 against cca-itq n_iter=20" in out and "Changes the default: yes" in out
    for extra, message in [(["--both", "cca-itq.corr_power=2"], "sets corr_power twice"),
                           (["--both", "cca-itq"], "sets no parameter"), (["--both", "cvh.reg=1"], "names 2 methods"),
                           (["--both", "="], "Invalid value for --baseline and --both: '=' names no parameter")]:
        assert main([*args, *extra]) == 2
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1, err


# ------------------------------------------------------------------------- experiment configs
def _config(tmp_path, **extra):
    cfg = {
        "name": "valsplit", "title": "CVH on the validation split", "paper_ref": "none", "kind": "table",
        "bits": [16], "seeds": [0], "runs": [{"label": "CVH", "method": "cvh", "paired_ratios": [1.0]}],
        "datasets": {"uci-digits": {"builtin": "uci-digits"}}, "default_datasets": ["uci-digits"],
        "paper": {"source": "none", "rows": None, "notes": ["not in the paper"]}, **extra,
    }
    path = tmp_path / "valsplit.json"
    path.write_text(json.dumps(cfg))
    return path


def test_a_config_may_score_on_the_validation_split(tmp_path):
    from dmh.experiments.runner import load_cells

    out = tmp_path / "run"
    config = _config(tmp_path, split="validation", validation={"fraction": 0.25})
    assert main(["reproduce", str(config), "--no-plots", "--out", str(out)]) == 0
    (entry,) = load_cells(out).values()
    assert entry["cell"]["validation"] == {"fraction": 0.25, "random_state": 0}
    assert {r["split"] for r in entry["records"]} == {"validation"} and entry["records"][0]["n_query"] == 375
    assert "scored on the validation split: 0.25" in (out / "report.md").read_text()


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"split": "holdout"}, "split is 'holdout'"),
        ({"validation": {"fraction": 0.3}}, "validation applies only with"),
        ({"split": "validation", "validation": {"fraction": 1.5}}, "validation.fraction must be"),
        ({"split": "validation", "validation": {"share": 0.5}}, "unknown key(s) ['share']"),
    ],
)
def test_a_bad_split_in_a_config_is_one_line(extra, message, tmp_path, capsys):
    assert main(["reproduce", str(_config(tmp_path, **extra)), "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_run_evaluation_scores_the_validation_split_when_asked(toy_data):
    from dmh.evaluation import run_evaluation

    kw = dict(methods=["cvh"], bits=[8], paired_ratios=[1.0], seeds=[0])
    spec = {"fraction": 0.25, "random_state": 0}
    records = run_evaluation(toy_data, validation=spec, **kw)
    assert {r["split"] for r in records} == {"validation"} and {r["n_query"] for r in records} == {20}
    assert {r["n_train"] for r in records} == {60}
    test = run_evaluation(toy_data, **kw)
    assert {r["split"] for r in test} == {"test"} and {r["n_query"] for r in test} == {40}
