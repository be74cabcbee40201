"""Reports (JSON, CSV, markdown) and figures from result records."""

import csv
import io
import json

import numpy as np
import pytest

from dmh.metrics import evaluate_retrieval
from dmh.report import (
    check_records,
    markdown_table,
    method_label,
    records_to_csv,
    summarize,
    write_reports,
)


def make_records(with_curves=True):
    rng = np.random.default_rng(0)
    q = np.where(rng.random((15, 16)) > 0.5, 1, -1).astype(np.int8)
    d = np.where(rng.random((80, 16)) > 0.5, 1, -1).astype(np.int8)
    ql, dl = rng.integers(0, 3, 15), rng.integers(0, 3, 80)
    base = evaluate_retrieval(q, d, ql, dl, topn=(1, 10, 50), curves=with_curves)
    records = []
    for method, ratio in (("dmh", 1.0), ("dmh", 0.5), ("cmfh", 1.0)):
        for n_bits in (16, 32):
            for task in ("image->text", "text->image"):
                for seed in (0, 1, 2):
                    rec = dict(base, method=method, paired_ratio=ratio, seed=seed, task=task, n_bits=n_bits)
                    rec.update(fit_seconds=1.5, n_train=80, n_paired=int(80 * ratio))
                    rec["map"] = 0.5 + 0.1 * seed + (0.01 if method == "dmh" else 0) + n_bits / 1000
                    records.append(rec)
    return records


def test_method_labels_follow_the_paper():
    assert method_label("dmh", 0.5) == "DMH (50%)"
    assert method_label("dmh", 1.0) == "DMH (100%)"
    assert method_label("cmfh", 1.0, show_ratio=False) == "CMFH"
    assert method_label("DMH-PCA") == "DMH-PCA"


def test_summary_is_mean_and_sample_std_over_seeds():
    rows = summarize(make_records(False), "map")
    row = next(
        r
        for r in rows
        if r["method"] == "dmh" and r["paired_ratio"] == 0.5 and r["n_bits"] == 16 and r["task"] == "image->text"
    )
    assert row["n_seeds"] == 3
    assert row["mean"] == pytest.approx(0.5 + 0.1 + 0.01 + 0.016)
    assert row["std"] == pytest.approx(np.std([0.0, 0.1, 0.2], ddof=1))
    assert row["label"] == "DMH (50%)"
    cmfh = next(r for r in rows if r["method"] == "cmfh")
    assert cmfh["label"] == "CMFH"  # one ratio of 100%: name alone


def test_markdown_table_layout():
    table = markdown_table(make_records(False), "map", digits=3)
    lines = table.strip().splitlines()
    assert lines[0] == "| Method | I→T 16 bits | I→T 32 bits | T→I 16 bits | T→I 32 bits |"
    assert len(lines) == 2 + 3  # header, rule, three method/ratio rows
    assert lines[2].startswith("| CMFH | 0.616 ± 0.100 |")
    assert any(line.startswith("| DMH (50%) |") for line in lines)
    single = markdown_table([r for r in make_records(False) if r["seed"] == 0], "map", digits=3)
    assert "±" not in single


def test_write_reports_writes_every_file(tmp_path):
    records = [r for r in make_records() if r["n_bits"] == 16]  # two figures keep the test fast
    paths = write_reports(records, tmp_path / "out", plots=True)
    assert set(paths) == {"json", "csv", "markdown", "topn_16bits", "pr_16bits"}
    loaded = json.loads(paths["json"].read_text())
    assert len(loaded) == len(records) and loaded[0]["topn"]["n"] == [1, 10, 50]
    rows = list(csv.DictReader(io.StringIO(paths["csv"].read_text())))
    assert len(rows) == len(records)
    assert {
        "method",
        "paired_ratio",
        "seed",
        "task",
        "n_bits",
        "map",
        "map@50",
        "map_tie_aware",
    } <= set(rows[0])
    assert "topn" not in rows[0]
    md = paths["markdown"].read_text()
    assert "## map\n" in md and "## map_tie_aware" in md and "## precision@radius2" in md
    assert "fit_seconds" not in md and "n_train" not in md and "fit_seconds" in rows[0]
    for key in ("topn_16bits", "pr_16bits"):
        assert paths[key].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list((tmp_path / "out").glob(".*tmp"))


def test_reports_without_curves_skip_figures(tmp_path):
    paths = write_reports(make_records(False), tmp_path, plots=True)
    assert set(paths) == {"json", "csv", "markdown"}


def test_nan_and_numpy_values_serialise():
    rec = dict(
        method="dmh",
        n_bits=np.int64(16),
        paired_ratio=np.float64(0.5),
        seed=0,
        task="image->text",
        map=np.float32(0.25),
        extra=float("nan"),
    )
    text = records_to_csv([rec])
    assert "0.25" in text


@pytest.mark.parametrize(
    "records, message",
    [
        ([], "no result records"),
        ({"method": "x"}, "list of dicts"),
        ([{"method": "dmh"}], "lacks"),
        (
            [dict(method="dmh", n_bits=16, paired_ratio=0.5, seed=0, task="img2txt", map=0.5)],
            "task",
        ),
        (
            [dict(method="dmh", n_bits=16, paired_ratio=1.5, seed=0, task="image->text", map=0.5)],
            "paired_ratio",
        ),
        (
            [dict(method="dmh", n_bits=0, paired_ratio=0.5, seed=0, task="image->text", map=0.5)],
            "n_bits",
        ),
    ],
)
def test_bad_records_name_the_problem(records, message):
    with pytest.raises((ValueError, TypeError), match=message):
        check_records(records)
