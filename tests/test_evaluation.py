"""The one cell loop and the one cell key shared by `dmh evaluate` and `dmh reproduce`."""

import json

import pytest

from dmh import CrossModalData, save_data
from dmh.cli import main
from dmh.evaluation import (
    cell_key,
    data_fingerprint,
    full_params,
    make_cell,
    normalize_key,
    plan_evaluation,
    reusable_cells,
    run_cells,
)


def _copy(data, **changes):
    fields = dict(image=data.image.copy(), text=data.text.copy(), labels=data.labels, train_idx=data.train_idx,
                  query_idx=data.query_idx, database_idx=data.database_idx)
    return CrossModalData(**{**fields, **changes})


def test_full_params_hold_the_defaults_and_refuse_unknown_names():
    params = full_params("cvh", {"reg": 0.5})
    assert params["reg"] == 0.5 and "n_bits" not in params and "random_state" not in params
    assert full_params("cvh") == {**params, "reg": full_params("cvh")["reg"]}
    with pytest.raises(ValueError, match="unknown parameter"):
        full_params("cvh", {"colour": 1})


def test_an_option_added_later_leaves_the_keys_of_earlier_results_alone():
    """``dmh._keys.ADDED_OPTIONS``: ``dam_precision`` came after results were written; at "float32" (what
    they ran with) it is not in a cell's params, so their keys still match; at "bfloat16" it is."""
    from pathlib import Path

    assert "dam_precision" not in full_params("dmh")
    assert full_params("dmh", {"dam_precision": "float32"}) == full_params("dmh")
    assert full_params("dmh", {"dam_precision": "bfloat16"})["dam_precision"] == "bfloat16"
    # gamma_scaling came later still: "none" (the value under both presets so far) leaves keys alone
    assert "gamma_scaling" not in full_params("dmh") and "gamma_scaling" not in full_params("dmh", {"preset": "paper"})
    assert full_params("dmh", {"gamma_scaling": "none"}) == full_params("dmh")
    assert full_params("dmh", {"gamma_scaling": "bits"})["gamma_scaling"] == "bits"
    # ridge_solver: "sklearn" (every result before it became "dual") leaves keys alone, so those
    # records keep theirs; the default "dual" is in the key, so they are not taken for its cells
    assert full_params("dmh")["ridge_solver"] == "dual"
    assert "ridge_solver" not in full_params("dmh", {"ridge_solver": "sklearn"})
    assert full_params("dmh", {"ridge_solver": "sklearn"}) != full_params("dmh")
    cells = Path(__file__).resolve().parents[1] / "docs" / "results" / "fig4" / "cells.json"
    if cells.exists():  # a finished run made before the option: its DMH cells keep their keys
        entry = next(e for e in json.loads(cells.read_text())["cells"] if e["cell"]["method"] == "dmh")
        assert full_params("dmh", entry["cell"]["params"]) == entry["cell"]["params"]
        assert cell_key(entry["cell"]) == entry["key"]


def test_the_key_changes_with_everything_that_changes_the_result(toy_data, tmp_path):
    fp = data_fingerprint(toy_data, "toy")
    base = dict(dataset="toy", fingerprint=fp, method="cvh", params={}, n_bits=8, paired_ratio=0.5, seed=0)
    key = make_cell(**base)["key"]
    assert make_cell(**base)["key"] == key  # deterministic
    assert make_cell(**base)["key"] == make_cell(**{**base, "params": {"reg": full_params("cvh")["reg"]}})["key"]
    for change in ({"params": {"reg": 0.5}}, {"n_bits": 16}, {"paired_ratio": 1.0}, {"seed": 1}, {"method": "imh"}):
        assert make_cell(**{**base, **change})["key"] != key, change
    other = _copy(toy_data)
    other.image[0, 0] += 1.0  # one value of the data changed
    assert data_fingerprint(other, "toy")["sha256"] != fp["sha256"]
    resplit = _copy(toy_data, train_idx=toy_data.query_idx, database_idx=toy_data.query_idx,
                    query_idx=toy_data.train_idx)
    assert data_fingerprint(resplit, "toy")["split"] != fp["split"]
    path = save_data(toy_data, tmp_path / "toy.npz")
    on_file = data_fingerprint(toy_data, str(path))
    assert on_file["size"] == path.stat().st_size and on_file["source"] == str(path.resolve())
    with pytest.raises(ValueError, match="lacks"):
        cell_key({"method": "cvh"})


def test_where_a_fit_runs_is_not_part_of_its_key_and_older_keys_that_named_it_still_match(toy_data):
    """``device`` says where a fit runs, not what it computes: the fit gets it (it is in the cell's
    params), the key leaves it out, and a key written while it was part of keys reads the same."""
    fp = data_fingerprint(toy_data, "toy")
    base = dict(dataset="toy", fingerprint=fp, method="ucch", n_bits=8, paired_ratio=1.0, seed=0)
    cpu, auto = make_cell(**base, params={"device": "cpu"}), make_cell(**base, params={"device": "auto"})
    assert cpu["params"]["device"] == "cpu" and auto["params"]["device"] == "auto"
    assert cpu["key"] == auto["key"] and '"device"' not in cpu["key"]
    assert make_cell(**base, params={"epochs": 3})["key"] != cpu["key"]  # a real parameter still counts
    ident = json.loads(cpu["key"])
    ident["params"]["device"] = "cuda"  # as results written before were keyed
    old = json.dumps(ident, sort_keys=True, separators=(",", ":"))
    assert old != cpu["key"] and normalize_key(old) == cpu["key"]
    assert normalize_key(cpu["key"]) == cpu["key"] and normalize_key("not json") == "not json"
    records = [{"task": t, "cell_key": old, "map": 0.5} for t in ("image->text", "text->image")]
    found, _ = reusable_cells([cpu], records)
    assert list(found) == [cpu["key"]]


def test_a_cell_names_the_preset_values_it_ran_with_so_a_changed_preset_is_not_reused(toy_data, monkeypatch):
    from dmh import _keys
    from dmh.methods import dmh as dmh_module

    fp = data_fingerprint(toy_data, "toy")
    base = dict(dataset="toy", fingerprint=fp, method="dmh", params={}, n_bits=32, paired_ratio=0.5, seed=0)
    cell = make_cell(**base)
    neutral = _keys.ADDED_OPTIONS["dmh"]  # left out at the value results ran with before they existed

    def written(preset):
        return {k: v for k, v in dmh_module.PRESETS[preset].items() if neutral.get(k, object()) != v}
    default = written("default")
    assert {k: cell["params"][k] for k in default} == default  # written out, not None
    paper = make_cell(**{**base, "params": {"preset": "paper"}})["params"]
    assert {k: paper[k] for k in written("paper")} == written("paper")
    given = make_cell(**{**base, "params": {"cle_scaling": "view"}})["params"]
    assert given["cle_scaling"] == "view"  # a value given wins over the preset's
    # naming the preset's value or leaving it to the preset: the same run, the same key
    assert make_cell(**{**base, "params": {"cle_scaling": default["cle_scaling"]}})["key"] == cell["key"]
    other = "view" if default["cle_scaling"] != "view" else "feature"
    changed = {**dmh_module.PRESETS["default"], "cle_scaling": other}
    monkeypatch.setitem(dmh_module.PRESETS, "default", changed)
    assert make_cell(**base)["key"] != cell["key"]


def test_a_block_length_the_code_is_within_keeps_the_key_of_one_problem(toy_data):
    """gbe_block_bits >= n_bits is one GBE problem, the fit of gbe_block_bits=None bit for bit
    (tests/methods/test_dmh_stages.py): its cells keep the key of results made before it existed,
    at the default preset's 16 as at any length; a longer code with blocks has a key of its own."""
    fp = data_fingerprint(toy_data, "toy")
    base = dict(dataset="toy", fingerprint=fp, method="dmh", n_bits=16, paired_ratio=1.0, seed=0)
    keys = {make_cell(**base, params=p)["key"] for p in ({}, {"gbe_block_bits": 16}, {"gbe_block_bits": 64})}
    assert len(keys) == 1 and "gbe_block_bits" not in json.loads(keys.pop())["params"]
    wide = make_cell(**{**base, "n_bits": 64}, params={})
    assert json.loads(wide["key"])["params"]["gbe_block_bits"] == 16
    one = make_cell(**{**base, "n_bits": 64}, params={"gbe_block_bits": 64})
    assert "gbe_block_bits" not in one["params"] and one["key"] != wide["key"]
    # and is fitted as one problem, not at the default preset's 16 (a key leaves out what it ran with)
    from dmh import DMH
    from dmh._keys import ADDED_OPTIONS, fit_params
    from dmh.methods.dmh_options import ONE_PROBLEM, DMHOptions

    assert ADDED_OPTIONS["dmh"]["gbe_block_bits"] == ONE_PROBLEM
    assert DMHOptions.of(DMH(64, **fit_params("dmh", one["params"]))).gbe_block_bits >= 64
    paper = make_cell(**{**base, "n_bits": 64}, params={"preset": "paper"})
    assert "gbe_block_bits" not in paper["params"]  # the paper's one problem, as before


def test_run_cells_records_carry_the_key_and_resume_reuses_exact_matches_only(toy_data):
    cells = plan_evaluation(toy_data, "toy", ["cvh"], [8], [1.0, 0.5], [0])
    entries = run_cells(cells, {"data": toy_data})
    records = [r for e in entries for r in e["records"]]
    assert len(records) == 4 and {r["cell_key"] for r in records} == {c["key"] for c in cells}
    reuse, lines = reusable_cells(cells, records)
    assert set(reuse) == {c["key"] for c in cells} and lines[0].startswith("Resuming: 2 of 2")
    other = plan_evaluation(toy_data, "toy", ["cvh"], [8], [1.0, 0.5], [0], {"cvh": {"reg": 0.5}})
    reuse, lines = reusable_cells(other, records + [{"method": "cvh", "task": "image->text"}])
    assert reuse == {}
    assert any("2 finished cell(s)" in line and "not reused" in line for line in lines)
    assert any("1 record(s)" in line and "no cell key" in line for line in lines)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_evaluate_resume_never_mixes_another_data_file(toy_data, tmp_path, capsys):
    a = save_data(toy_data, tmp_path / "a.npz")
    changed = _copy(toy_data)
    changed.text[:, 0] *= 2.0
    b = save_data(changed, tmp_path / "b.npz")
    out = tmp_path / "r.json"
    args = ["--method", "cvh", "--bits", "8", "--paired-ratio", "1.0", "--out", str(out)]
    assert main(["evaluate", str(a), *args]) == 0
    first = json.loads(out.read_text())["results"]
    capsys.readouterr()
    assert main(["evaluate", str(a), *args, "--resume"]) == 0
    assert "Resuming: 1 of 1 cell(s) reused" in capsys.readouterr().out
    assert main(["evaluate", str(b), *args, "--resume"]) == 0
    said = capsys.readouterr().out
    assert "Resuming: 0 of 1" in said and "differ from this run" in said
    second = json.loads(out.read_text())["results"]
    assert len(second) == 2 and {r["cell_key"] for r in second}.isdisjoint({r["cell_key"] for r in first})
    # a results file of an older dmh (records without cell_key) is not reused
    payload = json.loads(out.read_text())
    for r in payload["results"]:
        del r["cell_key"]
    out.write_text(json.dumps(payload))
    assert main(["evaluate", str(b), *args, "--resume"]) == 0
    assert "carry no cell key" in capsys.readouterr().out
