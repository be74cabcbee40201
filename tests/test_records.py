"""The record schema, labels and the one summary over seeds."""

import pytest

from dmh.records import check_records, method_labels, summarize


def _rec(**kw):
    return {"method": "dmh", "n_bits": 8, "paired_ratio": 0.5, "seed": 0, "task": "image->text", "map": 0.5, **kw}


def test_summary_groups_by_the_keys_asked_for():
    recs = [_rec(dataset="a", map=0.4), _rec(dataset="a", seed=1, map=0.6), _rec(dataset="b", map=0.9),
            _rec(dataset="b", seed=1, map=float("nan"))]
    (row,) = summarize(recs, "map")
    assert row["n_seeds"] == 3 and row["label"] == "DMH (50%)"
    rows = summarize(recs, "map", by=("dataset", "method", "paired_ratio", "n_bits", "task", "grid"))
    assert [(r["dataset"], r["n_seeds"], r["grid"]) for r in rows] == [("a", 2, {}), ("b", 1, {})]
    assert rows[0]["mean"] == pytest.approx(0.5) and rows[1]["std"] is None


def test_labels_show_the_ratio_unless_only_full_pairing():
    assert method_labels([("cvh", 1.0), ("dmh", 1.0), ("dmh", 0.5)]) == {
        ("cvh", 1.0): "CVH", ("dmh", 1.0): "DMH (100%)", ("dmh", 0.5): "DMH (50%)"}


def test_bad_records_name_the_record_and_key():
    with pytest.raises(ValueError, match="record 0 has task"):
        check_records([_rec(task="both")])
