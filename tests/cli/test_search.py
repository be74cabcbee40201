"""dmh encode / index / search, run in-process on tiny data."""

import csv
import io
import json

import numpy as np
import pytest
from click.testing import CliRunner

from dmh import CrossModalData, save_data
from dmh.base import BaseHasher
from dmh.cli.search import encode, index, search
from dmh.index import HammingIndex, load_codes, save_codes
from dmh.methods import METHODS


class TinyHasher(BaseHasher):
    """Random projections: enough to exercise the CLI without training anything."""

    method_name = "tiny"

    def __init__(self, n_bits=16, random_state=0):
        self.n_bits = n_bits
        self.random_state = random_state

    def _fit(self, data):
        rng = np.random.default_rng(self.random_state)
        self.w_ = {m: rng.normal(size=(data.n_features[m], self.n_bits)) for m in ("image", "text")}

    def _project(self, X, modality):
        return X @ self.w_[modality]

    def _get_state(self):
        return {"w_image": self.w_["image"], "w_text": self.w_["text"]}

    def _set_state(self, state):
        self.w_ = {"image": state["w_image"], "text": state["w_text"]}


@pytest.fixture
def files(tmp_path, monkeypatch):
    monkeypatch.setitem(METHODS, "tiny", (__name__, "TinyHasher"))
    rng = np.random.default_rng(0)
    n = 60
    y = rng.integers(0, 3, n)
    text_mask = np.ones(n, bool)
    text_mask[[1, 50]] = False  # two objects without a text
    data = CrossModalData(
        image=rng.normal(size=(n, 10)) + y[:, None],
        text=rng.normal(size=(n, 6)) + y[:, None],
        labels=y,
        text_mask=text_mask,
        train_idx=np.arange(40),
        query_idx=np.arange(40, 60),
        database_idx=np.arange(40),
    )
    data_path = save_data(data, tmp_path / "data.npz")
    model = TinyHasher(n_bits=16).fit(data)
    model_path = model.save(tmp_path / "model.npz")
    model12 = TinyHasher(n_bits=12).fit(data)
    return {
        "data": data,
        "data_path": str(data_path),
        "model": model,
        "model_path": str(model_path),
        "model12_path": str(model12.save(tmp_path / "model12.npz")),
        "dir": tmp_path,
    }


def run(command, args):
    return CliRunner().invoke(command, [str(a) for a in args], catch_exceptions=False)


def invoke(command, args):
    """``dmh COMMAND ARGS`` through :func:`dmh.cli.main`, the boundary that turns bad input into one
    line and exit code 2."""
    import click

    from dmh.cli import main

    @click.command(context_settings={"ignore_unknown_options": True, "help_option_names": []})
    @click.argument("argv", nargs=-1, type=click.UNPROCESSED)
    def through_main(argv):
        raise SystemExit(main([command.name, *argv]))

    return CliRunner().invoke(through_main, [str(a) for a in args])


def test_encode_index_search_end_to_end(files):
    tmp = files["dir"]
    r = run(
        encode,
        [
            files["model_path"],
            files["data_path"],
            "--modality",
            "text",
            "--rows",
            "database",
            "--out",
            tmp / "db.npz",
        ],
    )
    assert r.exit_code == 0, r.output
    codes, ids = load_codes(tmp / "db.npz")
    assert codes.dtype == np.int8 and codes.shape == (39, 16)  # row 1 has no text
    assert 1 not in ids and ids.tolist() == [i for i in range(40) if i != 1]
    np.testing.assert_array_equal(codes, files["model"].encode(files["data"].text[ids], "text"))

    r = run(index, [tmp / "db.npz", "--out", tmp / "db.dmhidx", "--backend", "numpy"])
    assert r.exit_code == 0, r.output
    idx = HammingIndex.load(tmp / "db.dmhidx")
    assert idx.ntotal == 39 and idx.backend == "numpy"

    r = run(
        encode,
        [
            files["model_path"],
            files["data_path"],
            "--modality",
            "image",
            "--rows",
            "query",
            "--out",
            tmp / "q.npz",
        ],
    )
    assert r.exit_code == 0, r.output
    r = run(search, [tmp / "db.dmhidx", "--codes", tmp / "q.npz", "--k", 5])
    assert r.exit_code == 0, r.output
    result = json.loads(r.stdout)
    queries, qids = load_codes(tmp / "q.npz")
    dist, hit_ids = idx.search(queries, 5)
    assert [q["query_id"] for q in result["results"]] == qids.tolist()
    assert [q["ids"] for q in result["results"]] == hit_ids.tolist()
    assert [q["distances"] for q in result["results"]] == dist.tolist()

    # the same queries encoded on the fly, as CSV, within a radius, to a file
    r = run(
        search,
        [
            tmp / "db.dmhidx",
            "--model",
            files["model_path"],
            "--data",
            files["data_path"],
            "--modality",
            "image",
            "--radius",
            4,
            "--format",
            "csv",
            "--out",
            tmp / "hits.csv",
        ],
    )
    assert r.exit_code == 0, r.output
    rows = list(csv.DictReader(io.StringIO((tmp / "hits.csv").read_text())))
    lims, dist, hit_ids = idx.range_search(queries, 4)
    assert len(rows) == lims[-1]
    assert [int(row["id"]) for row in rows] == hit_ids.tolist()
    assert all(int(row["distance"]) <= 4 for row in rows)


def test_k_larger_than_index_drops_padding(files):
    tmp = files["dir"]
    save_codes(tmp / "c.npz", files["model"].encode(files["data"].image[:3], "image"))
    run(index, [tmp / "c.npz", "--out", tmp / "c.dmhidx"])
    r = run(search, [tmp / "c.dmhidx", "--codes", tmp / "c.npz", "--k", 10])
    assert r.exit_code == 0, r.output
    assert all(len(q["ids"]) == 3 for q in json.loads(r.stdout)["results"])


@pytest.fixture
def built(files):
    tmp = files["dir"]
    save_codes(tmp / "c.npz", files["model"].encode(files["data"].image[:20], "image"))
    run(index, [tmp / "c.npz", "--out", tmp / "c.dmhidx"])
    save_codes(tmp / "c8.npz", np.ones((2, 8), np.int8))
    save_codes(tmp / "c12.npz", np.ones((2, 12), np.int8))
    save_codes(tmp / "empty.npz", np.ones((0, 16), np.int8))
    np.savez(tmp / "bad.npz", codes=np.zeros((2, 16), np.int8))
    return files


@pytest.mark.parametrize(
    "command, args, message",
    [
        (search, ["c.dmhidx", "--codes", "c.npz", "--k", 0], "--k must be a positive integer"),
        (search, ["c.dmhidx", "--codes", "c.npz", "--k", -3], "--k must be a positive integer"),
        (
            search,
            ["c.dmhidx", "--codes", "c.npz", "--radius", 17],
            "--radius must be between 0 and n_bits=16",
        ),
        (search, ["c.dmhidx", "--codes", "c.npz", "--radius", -1], "--radius must be between"),
        (search, ["c.dmhidx", "--codes", "c.npz"], "exactly one of --k and --radius"),
        (search, ["c.dmhidx", "--codes", "c.npz", "--k", 2, "--radius", 2], "exactly one of"),
        (search, ["c.dmhidx", "--codes", "c8.npz", "--k", 2], "8 bits, the index holds 16-bit"),
        (search, ["c.dmhidx", "--codes", "bad.npz", "--k", 2], "-1 and \\+1"),
        (search, ["c.dmhidx", "--k", 2], "give the queries"),
        (search, ["c.dmhidx", "--model", "MODEL", "--k", 2], "missing --data, --modality"),
        (search, ["missing.dmhidx", "--codes", "c.npz", "--k", 2], "does not exist"),
        (search, ["c.npz", "--codes", "c.npz", "--k", 2], "not a dmh index file"),
        (index, ["c12.npz", "--out", "x.dmhidx"], "multiple of 8"),
        (index, ["empty.npz", "--out", "x.dmhidx"], "empty database"),
        (index, ["c.dmhidx", "--out", "x.dmhidx"], "dmh-hamming-index file, not a code file"),
        (index, ["data.npz", "--out", "x.dmhidx"], "no 'codes' array"),
        (index, ["nope.npz", "--out", "x.dmhidx"], "does not exist"),
        (
            encode,
            ["MODEL", "nodata.npz", "--modality", "text", "--out", "o.npz"],
            "neither a built-in",
        ),
        (
            encode,
            ["MODEL", "DATA", "--modality", "sound", "--out", "o.npz"],
            "'sound' is not one of",
        ),
        (
            encode,
            ["data.npz", "DATA", "--modality", "text", "--out", "o.npz"],
            "not a dmh model file",
        ),
    ],
)
def test_bad_input_is_one_clear_line(built, monkeypatch, command, args, message):
    monkeypatch.chdir(built["dir"])
    args = [
        built["model_path"] if a == "MODEL" else built["data_path"] if a == "DATA" else a
        for a in args
    ]
    r = invoke(command, args)
    assert r.exit_code == 2, r.output
    assert r.exception is None or isinstance(r.exception, SystemExit)
    assert "Traceback" not in r.output
    assert message.replace("\\", "") in r.output or __import__("re").search(message, r.output), (
        r.output
    )


def test_model_and_index_bit_counts_must_agree(built):
    tmp = built["dir"]
    r = invoke(
        search,
        [
            str(tmp / "c.dmhidx"),
            "--model",
            built["model12_path"],
            "--data",
            built["data_path"],
            "--modality",
            "image",
            "--k",
            "3",
        ],
    )
    assert r.exit_code == 2 and "12 bits" in r.output
