"""The runner's resume state: cells of an older key (or of other data) are never taken for this run's."""

import json

import pytest

from dmh import save_data
from dmh.cli import main
from dmh.experiments import load_cells


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_cells_without_the_current_key_are_refitted_and_said(toy_data, tmp_path, capsys):
    toy = save_data(toy_data, tmp_path / "toy.npz")
    out = tmp_path / "f4"
    args = ["reproduce", "fig4", "--quick", "--datasets", f"toy={toy}", "--out", str(out), "--no-plots",
            "--ratios", "0.5", "--bits", "8"]
    assert main(args) == 0, capsys.readouterr().err
    cells = load_cells(out)
    n = len(cells)
    assert n >= 1 and all(json.loads(k)["data"]["sha256"] for k in cells)
    # the same cells under an older key layout (no data fingerprint, given parameters only)
    payload = json.loads((out / "cells.json").read_text())
    for entry in payload["cells"]:
        entry["key"] = json.dumps({k: entry["cell"][k] for k in ("dataset", "label", "method", "n_bits", "seed")})
    (out / "cells.json").write_text(json.dumps(payload))
    capsys.readouterr()
    assert main(args) == 0
    said = capsys.readouterr().out
    assert f"{n} finished cell(s)" in said and "not reused, kept" in said
    assert set(load_cells(out)) >= set(cells)  # refitted under the current key
