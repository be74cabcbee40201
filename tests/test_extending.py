"""docs/extending.md, run: the example method of examples/ passes check_hasher and runs through
evaluate, reproduce (a config naming it), tune, fit + load_model + encode, build + search, under its
import path, a registered name and an installed entry point."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

import dmh
from dmh import registry
from dmh.cli import main
import dmh.testing
from dmh.testing import check_hasher

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = ROOT / "examples"
DOC = ROOT / "docs" / "extending.md"
PATH = "cca_hasher:CCAHasher"


@pytest.fixture(autouse=True)
def _example_on_the_path(monkeypatch):
    monkeypatch.syspath_prepend(str(EXAMPLES))
    monkeypatch.setattr(registry, "METHODS", dict(registry.METHODS))


def _blocks(language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)


def test_the_page_shows_the_example_as_it_is():
    assert _blocks("python")[0] == (EXAMPLES / "cca_hasher.py").read_text(encoding="utf-8")
    assert _blocks("json")[0] == (EXAMPLES / "cca_hasher.json").read_text(encoding="utf-8")


def test_the_example_passes_check_hasher():
    from cca_hasher import CCAHasher

    check_hasher(CCAHasher(n_bits=8), bad_params=[{"reg": 0}, {"reg": "x"}])


def test_the_pages_pytest_file_runs_every_check_of_the_example():
    (source,) = [b for b in _blocks("python") if "parametrize_with_checks" in b]
    namespace = {}
    exec(compile(source, str(DOC), "exec"), namespace)  # noqa: S102 - the page's own example
    test = namespace["test_cca_hasher"]
    (mark,) = test.pytestmark
    assert [c.keywords["checks"] for _, c in mark.args[1]] == [[name] for name in dmh.testing.CHECKS]
    for estimator, check in mark.args[1]:
        test(estimator, check)


def _run(*args) -> None:
    code = main(["--threads", "1", *map(str, args)])
    assert code == 0, args


def test_evaluate_and_tune_take_the_class_path(tmp_path, capsys):
    _run("evaluate", "uci-digits", "--method", f"{PATH},cca-itq", "--bits", "16", "--paired-ratio", "1.0",
         "--param", f"{PATH}.reg=0.01", "--out", tmp_path / "r.json")
    results = json.loads((tmp_path / "r.json").read_text())["results"]
    ours = [r for r in results if r["method"] == PATH]
    assert len(ours) == 2 and ours[0]["params"] == {"reg": 0.01}
    assert all(r["map"] > 0.25 for r in ours)  # a random ranking scores 0.099 here
    _run("tune", "uci-digits", "--method", PATH, "--grid", "reg=0.001,1", "--bits", "16", "--out", tmp_path / "t.json")
    tuned = json.loads((tmp_path / "t.json").read_text())
    assert tuned["config"]["method"] == PATH and len(tuned["records"]) == 2 and tuned["chosen"]["candidate"]


def test_reproduce_runs_a_config_naming_it(tmp_path, monkeypatch):
    monkeypatch.chdir(EXAMPLES)  # as the page runs it
    _run("reproduce", "cca_hasher.json", "--bits", "16", "--out", tmp_path / "rep", "--no-plots")
    metrics = json.loads((tmp_path / "rep" / "metrics.json").read_text())
    by_label = {(r["method"], r["task"]): r["map"] for r in metrics["records"]}
    assert by_label[("CCA+sign", "image->text")] > 0.25
    assert {r["base_method"] for r in metrics["records"]} == {PATH, "cca-itq", "cvh"}
    assert "| CCA+sign |" in (tmp_path / "rep" / "report.md").read_text()


def test_fit_load_encode_build_and_search(tmp_path, capsys):
    from cca_hasher import CCAHasher

    from dmh.datasets.shapes import make_shapes

    _run("fit", "uci-digits", "--method", PATH, "--bits", "16", "--out", tmp_path / "m.npz")
    model = dmh.load_model(tmp_path / "m.npz")
    assert type(model) is CCAHasher and model.n_bits_ == 16
    _run("encode", tmp_path / "m.npz", "uci-digits", "--modality", "text", "--out", tmp_path / "c.npz")
    photos, captions = make_shapes(tmp_path / "photos", 24, caption_ratio=0.75)
    _run("build", photos, captions, "-o", tmp_path / "col", "--method", PATH, "--bits", "8",
         "--image-model", "pixels-16", "--no-progress")
    assert json.loads((tmp_path / "col" / "build.json").read_text())["settings"]["method"] == PATH
    capsys.readouterr()
    _run("search", tmp_path / "col", "--text", "a red circle", "--k", "3", "--format", "json")
    assert len(json.loads(capsys.readouterr().out)["results"]) == 3


def test_a_registered_or_installed_name(tmp_path, monkeypatch):
    from cca_hasher import CCAHasher

    dmh.register_method("cca-sign", CCAHasher)
    model = dmh.registry.make_method("cca-sign", n_bits=8).fit(dmh.testing.toy_data())
    path = model.save(tmp_path / "m.npz")
    with np.load(path) as f:
        assert json.loads(f["__meta__"].tobytes())["method"] == "cca-sign"
    assert type(dmh.load_model(path)) is CCAHasher
    del registry.METHODS["cca-sign"]
    dist = tmp_path / "cca_sign-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: cca-sign\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[dmh.methods]\ncca-sign = {PATH}\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    _run("evaluate", "uci-digits", "--method", "cca-sign", "--bits", "16", "--paired-ratio", "1.0",
         "--out", tmp_path / "r.json")
    assert {r["method"] for r in json.loads((tmp_path / "r.json").read_text())["results"]} == {"cca-sign"}


def test_the_readme_lists_the_registry_s_methods():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    listed = re.search(r"Methods: (.*?), or a method of your own", text, re.S).group(1)
    assert re.findall(r"`([a-z0-9-]+)`", listed) == list(registry.BUILTIN_METHODS)
