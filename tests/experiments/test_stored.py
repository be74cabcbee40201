"""metrics.json stores what an experiment's reports and figures read, one record a line."""

from __future__ import annotations

import json

from dmh.experiments.stored import dumps_metrics, stored_record


def _record(map_value=0.123456789123):
    return {
        "method": "dmh", "map": map_value,
        "topn": {"n": [1, 10], "precision": [0.12345678901, 0.5], "precision_tie_aware": [0.1, 0.2]},
        "pr_radius": {"form": "pooled", "radius": [0, 1], "precision": [0.987654321, None], "recall": [0.1, 1.0]},
        "pr_radius_per_query": {"form": "per_query", "precision": [0.5] * 100},
    }


def test_a_stored_record_keeps_scalars_and_drops_what_no_report_reads():
    rec = stored_record(_record())
    assert rec["map"] == 0.123456789123 and rec["method"] == "dmh"  # scalars as computed
    assert "pr_radius_per_query" not in rec and "precision_tie_aware" not in rec["topn"]
    assert rec["topn"] == {"n": [1, 10], "precision": [0.123457, 0.5]}
    assert rec["pr_radius"]["precision"] == [0.9877, None] and rec["pr_radius"]["form"] == "pooled"
    assert "pr_radius_per_query" in _record()  # the input is not changed


def test_metrics_text_is_json_with_one_record_a_line():
    payload = {"experiment": "x", "records": [_record(0.1), _record(0.2)], "summary": {"map": []}, "histories": []}
    text = dumps_metrics(payload)
    back = json.loads(text)
    assert [r["map"] for r in back["records"]] == [0.1, 0.2] and back["histories"] == []
    assert back["records"][0] == stored_record(_record(0.1))
    record_lines = [line for line in text.splitlines() if line.startswith('{"method"')]
    assert len(record_lines) == 2
