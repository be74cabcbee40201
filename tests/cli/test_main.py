import json

import numpy as np
import pytest

import dmh
from dmh import CrossModalData, save_data
from dmh.cli import main


@pytest.fixture
def tiny_file(tmp_path, toy_data):
    return save_data(toy_data, tmp_path / "toy.npz")


TINY = ["--param", "dmh.d=8", "--param", "dmh.hidden_size=32", "--param", "dmh.n_rounds=1",
        "--param", "dmh.dam_epochs=2", "--param", "dmh.cle_max_iter=3", "--param", "dmh.gbe_max_iter=20"]


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings("ignore::dmh.errors.DegenerateCodesWarning")
def test_evaluate_writes_records(tiny_file, tmp_path, capsys):
    out = tmp_path / "r.json"
    rc = main(["evaluate", str(tiny_file), "--bits", "8,16", "--paired-ratio", "1.0,0.5", "--seeds", "0",
               "--out", str(out), "--plots", *TINY])
    assert rc == 0, capsys.readouterr().err
    payload = json.loads(out.read_text())
    recs = payload["results"]
    assert len(recs) == 2 * 2 * 2
    for r in recs:
        assert {"method", "n_bits", "paired_ratio", "seed", "task", "map"} <= set(r)
    # the command's MAP is the Python API's for the same cell (data, split, pairing, seed, settings)
    data = dmh.load_data(tiny_file)
    q, db = data.query(), data.database()
    tiny = dict(a.split("=") for a in TINY[1::2])
    for n_bits, ratio in ((8, 1.0), (16, 0.5)):
        train = dmh.make_semi_paired(data.train(), ratio, random_state=0)
        model = dmh.DMH(n_bits, random_state=0, **{k.removeprefix("dmh."): int(v) for k, v in tiny.items()}).fit(train)
        codes = {m: (model.encode(getattr(q, m), m), model.encode(getattr(db, m), m)) for m in ("image", "text")}
        expected = {f"{a}->{b}": dmh.mean_average_precision(codes[a][0], codes[b][1], q.labels, db.labels)
                    for a, b in (("image", "text"), ("text", "image"))}
        got = {r["task"]: r["map"] for r in recs if r["n_bits"] == n_bits and r["paired_ratio"] == ratio}
        assert got == pytest.approx(expected, abs=1e-12)
    assert "| DMH" in capsys.readouterr().out
    assert out.with_suffix(".csv").exists() and out.with_suffix(".md").exists()
    assert (tmp_path / "topn_16bits.png").exists() and (tmp_path / "pr_8bits.png").exists()
    # resume: nothing left to do, same records
    rc = main(["evaluate", str(tiny_file), "--bits", "8,16", "--paired-ratio", "1.0,0.5", "--out", str(out),
               "--resume", *TINY])
    assert rc == 0 and len(json.loads(out.read_text())["results"]) == 8


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_fit_then_info(tiny_file, tmp_path):
    model = tmp_path / "m.npz"
    assert main(["fit", str(tiny_file), "--bits", "8", "--paired-ratio", "0.5", "--out", str(model), *TINY[0:2],
                 "--param", "n_rounds=1", "--param", "hidden_size=16", "--param", "dam_epochs=1"]) == 0
    assert model.exists()
    assert main(["info", str(tiny_file)]) == 0


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings("ignore::dmh.errors.DegenerateCodesWarning")
def test_fit_keeps_features_in_float32_when_asked(tiny_file, tmp_path, capsys):
    """``fit --dtype float32`` (large training sets): the same codes as float64 for float32-exact
    inputs; a bad value is click's one-line usage error."""
    import dmh

    data = dmh.load_data(tiny_file)
    f32 = save_data(data.astype("float32").astype("float64"), tmp_path / "f32exact.npz")  # values float32 holds
    codes = {}
    for dtype in ("float64", "float32"):
        model = tmp_path / f"{dtype}.npz"
        assert main(["fit", str(f32), "--bits", "8", "--dtype", dtype, "--out", str(model), *TINY]) == 0
        codes[dtype] = dmh.load_model(model).encode(data.image, "image")
    assert np.array_equal(codes["float64"], codes["float32"])
    assert main(["fit", str(f32), "--dtype", "float16", "--out", str(tmp_path / "x.npz")]) == 2
    assert "float16" in capsys.readouterr().err


@pytest.mark.parametrize(
    "args, message",
    [
        (["evaluate", "nope.npz"], "neither a built-in dataset"),
        (["evaluate", "{f}", "--method", "xyz"], "unknown method"),
        (["evaluate", "{f}", "--bits", "0"], "--bits must be between 1 and 4096"),
        (["evaluate", "{f}", "--bits", "a,b"], "comma-separated integers"),
        (["evaluate", "{f}", "--paired-ratio", "0"], "paired-ratio must lie"),
        (["evaluate", "{f}", "--param", "dmh.colour=3"], "unknown parameter"),
        (["evaluate", "{nolabels}"], "hold no labels"),
        (["demo", "--rounds", "0"], "--rounds"),
        (["--threads", "0", "info", "{f}"], "--threads"),
    ],
)
def test_bad_input_is_one_clear_line(args, message, tiny_file, tmp_path, capsys):
    nolabels = save_data(CrossModalData(image=np.ones((10, 2)), text=np.ones((10, 2))), tmp_path / "nl.npz")
    args = [a.format(f=tiny_file, nolabels=nolabels) for a in args]
    rc = main(args)
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err and "Traceback" not in err


def test_help_lists_commands(capsys):
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for cmd in ("demo", "evaluate", "fit", "info"):
        assert cmd in out
