"""``jobs=N``: the cell loop in worker processes (``dmh reproduce --jobs``, ``dmh evaluate --jobs``).

Each worker is a fresh ("spawn") interpreter, so these tests pay a few seconds of start-up each;
they run the cheapest methods on the toy set."""

import json
import pickle

import pytest

from dmh import get_threads, save_data, set_threads
from dmh._workers import MAX_JOBS, check_jobs, portable
from dmh.cli import main
from dmh.errors import DataError, FitDivergedError, OutputError, ParameterError
from dmh.evaluation import plan_evaluation, run_cells

quiet = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


@pytest.fixture
def restore_threads():
    from dmh import _threads

    before = _threads._setting
    yield
    set_threads(before)


def _maps(entries):
    return {e["key"]: [(r["task"], r["map"]) for r in e["records"]] for e in entries}


@quiet
def test_jobs_give_the_serial_results_in_plan_order(toy_data, restore_threads):
    cells = plan_evaluation(toy_data, "toy", ["cvh", "imh", "stmh", "fsh"], [8, 16], [1.0], [0, 1],
                            dataset="toy")
    set_threads(1)
    serial = run_cells(cells, {"toy": toy_data})
    set_threads(2)  # two workers of one thread each: the serial run's thread count
    seen, lines = [], []
    parallel = run_cells(cells, {"toy": toy_data}, jobs=2, on_entry=seen.append, echo=lines.append)
    assert [e["key"] for e in parallel] == [c["key"] for c in cells]  # plan order, whatever finished first
    assert _maps(parallel) == _maps(serial)
    assert sorted(e["key"] for e in seen) == sorted(c["key"] for c in cells)  # each handed over once
    assert lines[0] == f"{len(cells)} fit(s) in 2 worker processes of 1 thread(s) each"
    assert len(lines) == len(cells) + 1 and lines[-1].startswith(f"[{len(cells)}/{len(cells)}] toy ")


@quiet
def test_a_failing_cell_stops_new_cells_and_keeps_the_finished_ones(toy_data, restore_threads):
    set_threads(2)
    good = plan_evaluation(toy_data, "toy", ["cvh"], [8], [1.0], [0], dataset="toy")
    # FSH at 50% pairing: 40 paired objects, fewer than its 50 anchors; refused at once
    bad = plan_evaluation(toy_data, "toy", ["fsh"], [8], [0.5], [0], dataset="toy")
    later = plan_evaluation(toy_data, "toy", ["imh", "stmh"], [16], [1.0], list(range(1, 9)), dataset="toy")
    saved = []
    with pytest.raises(DataError, match="FSH trains on paired objects only"):  # the worker's error, as it was
        run_cells(good + bad + later, {"toy": toy_data}, jobs=2, on_entry=saved.append)
    keys = {e["key"] for e in saved}
    assert good[0]["key"] in keys and bad[0]["key"] not in keys
    assert len(saved) < 1 + len(later)  # the cells not yet handed to a worker were not started


def test_jobs_are_checked():
    assert check_jobs(3) == 3
    for bad in (0, -1, MAX_JOBS + 1, 1.5, "2", True, None):
        with pytest.raises(ParameterError, match="jobs must be an integer"):
            check_jobs(bad)


def test_errors_cross_from_a_worker_as_what_they_are():
    class Unpicklable(RuntimeError):
        def __init__(self, a, b):
            super().__init__(f"{a} {b}")

    exc = FitDivergedError("loss became NaN")
    assert portable(exc) is exc and type(pickle.loads(pickle.dumps(exc))) is FitDivergedError
    # OutputError takes (path, problem): pickling rebuilds it with one argument; it stays one line
    out = portable(OutputError("/x/y", "read-only"))
    assert isinstance(out, ParameterError) and str(out) == str(OutputError("/x/y", "read-only"))
    assert pickle.loads(pickle.dumps(out)).args == out.args
    try:
        raise Unpicklable(1, 2)
    except Unpicklable as exc:  # raised in the worker: its traceback goes with the stand-in
        bug = portable(exc)
    assert type(bug) is RuntimeError and "Unpicklable: 1 2" in str(bug) and "Traceback" in str(bug)


@quiet
def test_cli_jobs_option(toy_data, tmp_path, capsys, restore_threads):
    data = save_data(toy_data, tmp_path / "toy.npz")
    out = tmp_path / "r.json"
    assert main(["--threads", "2", "evaluate", str(data), "--method", "cvh,imh", "--bits", "8,16",
                 "--paired-ratio", "1.0", "--seeds", "0,1", "--jobs", "2", "--out", str(out)]) == 0
    # it says how the fits are split, as reproduce and tune do
    assert "8 fit(s) in 2 worker processes of 1 thread(s) each" in capsys.readouterr().out
    ref = tmp_path / "ref.json"
    assert main(["--threads", "1", "evaluate", str(data), "--method", "cvh,imh", "--bits", "8,16",
                 "--paired-ratio", "1.0", "--seeds", "0,1", "--out", str(ref)]) == 0
    # the results file lists the cells in the plan's order, as a serial run does
    got, want = json.loads(out.read_text()), json.loads(ref.read_text())
    strip = ("fit_seconds",)
    assert ([{k: v for k, v in r.items() if k not in strip} for r in got["results"]]
            == [{k: v for k, v in r.items() if k not in strip} for r in want["results"]])
    capsys.readouterr()
    for bad in ("0", "-2", "x", str(MAX_JOBS + 1)):
        assert main(["evaluate", str(data), "--method", "cvh", "--jobs", bad, "--out", str(tmp_path / "n.json")]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and "--jobs" in err[0], err
    assert not (tmp_path / "n.json").exists()
    assert get_threads() >= 1


@quiet
def test_tune_with_jobs_gives_the_serial_records_in_plan_order(toy_data, tmp_path, capsys, restore_threads):
    from dmh.selection import tune

    grid = [{"reg": 0.5}, {"reg": 1.0}, {"reg": 2.0}]

    def strip(records):
        return [{k: v for k, v in r.items() if k != "fit_seconds"} for r in records]

    set_threads(1)
    serial = tune(toy_data, "cvh", grid, [8, 16], [0, 1], test_map=True)
    set_threads(2)
    lines, seen = [], []
    parallel = tune(toy_data, "cvh", grid, [8, 16], [0, 1], test_map=True, jobs=2, echo=lines.append,
                    on_record=seen.append)
    assert strip(parallel) == strip(serial) and len(seen) == len(serial) == 12
    assert lines == ["12 fit(s) in 2 worker processes of 1 thread(s) each"]
    # the command: --jobs, and its file in the plan's order
    data = save_data(toy_data, tmp_path / "toy.npz")
    argv = ["tune", str(data), "--method", "cvh", "--grid", "reg=0.5,1.0,2.0", "--bits", "8,16", "--seeds", "0,1"]
    assert main(["--threads", "2", *argv, "--jobs", "2", "--out", str(tmp_path / "p.json")]) == 0
    capsys.readouterr()
    assert main(["--threads", "1", *argv, "--out", str(tmp_path / "s.json")]) == 0
    got, want = (json.loads((tmp_path / n).read_text()) for n in ("p.json", "s.json"))
    assert strip(got["records"]) == strip(want["records"]) and got["chosen"] == want["chosen"]
    # each other candidate beside the choice, with the standard error of the choice's lead
    out = capsys.readouterr().out
    assert out.count("the choice ahead by") == 2 == len(want["chosen"]["others"])
    assert all(o["lead_se"] > 0 for o in want["chosen"]["others"])
    capsys.readouterr()
    assert main([*argv, "--jobs", "0", "--out", str(tmp_path / "n.json")]) == 2
    assert "--jobs" in capsys.readouterr().err and not (tmp_path / "n.json").exists()


def test_the_cli_bound_is_the_library_bound():
    from dmh.cli._options import MAX_JOBS as CLI_MAX

    assert CLI_MAX == MAX_JOBS


def _square_or_die(state, item):  # a worker task (module level: spawned workers import it by name)
    import os

    if item == state["die_at"]:
        os._exit(3)  # as the kernel's out-of-memory killer would end it: no exception, no clean-up
    return item * item


def test_a_killed_worker_is_one_clear_error_and_the_finished_results_are_handed_over(restore_threads):
    from dmh._workers import run_in_workers
    from dmh.errors import ResourceError

    set_threads(2)
    assert run_in_workers(_square_or_die, [1, 2, 3], jobs=2, state={"die_at": None}) == [1, 4, 9]
    got = []
    with pytest.raises(ResourceError, match="ended abruptly.*fewer jobs"):
        run_in_workers(_square_or_die, list(range(6)), jobs=2, state={"die_at": 3},
                       on_result=lambda i, r: got.append((i, r)))
    assert all(r == i * i for i, r in got) and (3, 9) not in got
