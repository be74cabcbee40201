"""Careless values in every option of the ``dmh`` command line: each case must exit 0 (accepted)
or 2 with one line ``Error: ...``; a traceback, another exit code, a hang, an input file changed or
output left behind by a refused command is a failure.

    python benchmarks/fuzz_options.py [--filter TEXT] [--jobs 1] [--timeout 60] [--subprocess]
                                      [--list] [--verbose]

The commands are read from the click group ``dmh.cli.cli`` (every command but ``serve`` and
``demo``, whose runs block or take minutes): for every option (and positional argument) of every
command, each careless value of ``VALUES`` replaces that option's value in an otherwise valid
invocation of the command (``BASES``: small files built by ``bad_inputs._build``, CVH at 8 bits so
every fit takes well under a second; ``reproduce`` runs a one-cell config of its own). Boolean
flags take no value and are left out. Each case runs in a child process of its own, forked
from this one after the bases have run here once (so its imports are warm), with its output
captured and a timeout; ``--subprocess`` runs ``python -m dmh.cli`` instead (slower, closer to a
user). Each case gets a fresh folder holding its outputs; the careless paths (a folder, a missing
file, a path with spaces and unicode) lie in it too.

A case fails when it exits with a code other than 0 or 2; prints a traceback; exits 2 with
anything but one ``Error:`` line on standard error (``warning:`` lines aside); changes or removes a
file of the shared inputs; or exits 2 after writing into its folder (a refused command leaves
nothing behind). Timeouts are counted apart. A refusal whose message names neither the option nor
the value is listed as "vague" (counted, not a failure: the value may be named in other words);
a failure understood and left as it is (``KNOWN``, with the reason) as "known". Options holding
``KEY=VALUE`` (``--param``, ``--grid``) also get each value behind a hyperparameter of CVH.
Exits 1 when any case fails or times out.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import click

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bad_inputs import _build  # noqa: E402 - the shared fixture files

#: commands left out: `serve` blocks (it serves until stopped), `demo` fits DMH for minutes
SKIP_COMMANDS = {"serve", "demo"}
#: careless values (name, value); ``{dir}``, ``{missing}`` and ``{unicode}`` are paths in the case's folder
VALUES = [
    ("empty", ""),
    ("blank", " "),
    ("-1", "-1"),
    ("0", "0"),
    ("nan", "nan"),
    ("inf", "inf"),
    ("1e999", "1e999"),
    ("abc", "abc"),
    ("1,1", "1,1"),
    ("comma", ","),
    ("huge", "10000000000000"),
    ("folder", "{dir}"),
    ("missing file", "{missing}"),
    ("unicode path", "{unicode}"),
]

#: options holding KEY=VALUE: also tried with each careless value behind a hyperparameter of CVH
KEY_VALUE_OPTIONS = {"--param": "reg", "--grid": "reg"}

#: failures understood and left as they are: case name -> why (listed as "known", not counted as failures)
KNOWN = {
    "build: --param reg=0": "reg=0 is a valid value that this data's singular covariance refuses, which only the fit "
                            "can find: the build stops there with its scan/features log lines before the error, and "
                            "keeps its finished stages for a rerun with --restart or other settings",
}

ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}


def _tiny_config(root: Path) -> Path:
    """A one-cell experiment (CVH, 8 bits, seed 0, on the 60-object data file)."""
    config = {
        "name": "tiny", "title": "one CVH cell", "paper_ref": "no table", "kind": "table", "metrics": ["map"],
        "bits": [8], "seeds": [0],
        "runs": [{"label": "CVH", "method": "cvh", "paired_ratios": [1.0]}],
        "datasets": {"good": {"file": str(root / "good.npz"), "paper": False, "title": "good"}},
        "default_datasets": ["good"],
        "paper": {"source": "none", "rows": None, "notes": ["a test config: no paper numbers"]},
    }
    path = root / "tiny.json"
    path.write_text(json.dumps(config))
    return path


def _copy_collection(root: Path, case: Path) -> None:
    shutil.copytree(root / "col", case / "out" / "col")


def bases(root: Path) -> dict[str, list[tuple[str, dict, list, object]]]:
    """Valid invocations per command: (label, {argument name: value}, [(option, value or None)], setup).
    ``{out}`` in a value is the case's output folder; ``setup(root, case)`` prepares the case folder."""
    r = str(root)
    (root / "texts.csv").write_text("id,text,labels\n" + "".join(
        f"{i},a {c} thing number {i},{c}\n" for i, c in enumerate(["red", "blue", "green"] * 4)))
    tiny = str(_tiny_config(root))
    index_search = [("--codes", f"{r}/codes.npz"), ("--k", "3"), ("--out", "{out}/s.json")]
    return {
        "fit": [("fit", {"data": f"{r}/good.npz"},
                 [("--method", "cvh"), ("--bits", "8"), ("--out", "{out}/m.npz")], None)],
        "evaluate": [("evaluate", {"data": f"{r}/good.npz"},
                      [("--method", "cvh"), ("--bits", "8"), ("--paired-ratio", "1.0"), ("--seeds", "0"),
                       ("--out", "{out}/e.json")], None)],
        "tune": [("tune", {"data": f"{r}/good.npz"},
                  [("--method", "cvh"), ("--bits", "8"), ("--seeds", "0"), ("--out", "{out}/t.json")], None)],
        "info": [("info", {"data": f"{r}/good.npz"}, [], None)],
        "encode": [("encode", {"model": f"{r}/model.npz", "data": f"{r}/good.npz"},
                    [("--modality", "image"), ("--out", "{out}/c.npz")], None)],
        "index": [("index", {"codes": f"{r}/codes.npz"}, [("--out", "{out}/i.dmhidx"), ("--backend", "numpy")],
                   None)],
        "search": [
            ("search index", {"index_path": f"{r}/index.dmhidx"}, index_search, None),
            ("search collection", {"index_path": f"{r}/col"},
             [("--text", "a red circle"), ("--k", "3"), ("--out", "{out}/s.txt")], None),
        ],
        "featurize": [("featurize", {}, [("--texts", f"{r}/texts.csv"), ("--labels-column", "labels"),
                                         ("--output", "{out}/f.npz"), ("--no-progress", None)], None)],
        "datasets": [("datasets", {"spec": "uci-digits"}, [], None)],
        "reproduce": [("reproduce", {"name": tiny},
                       [("--out", "{out}/rep"), ("--no-plots", None)], None)],
        "build": [("build", {"photos": f"{r}/photos", "captions": f"{r}/captions.csv"},
                   [("--output", "{out}/col"), ("--method", "cvh"), ("--bits", "16"),
                    ("--image-model", "pixels-16"), ("--no-progress", None)], None)],
        "add": [("add", {"collection": "{out}/col", "captions": f"{r}/more.csv"}, [("--no-progress", None)],
                 _copy_collection)],
    }


def _takes_value(param) -> bool:
    if isinstance(param, click.Argument):
        return True
    return not (param.is_flag and param.is_bool_flag) and not param.count and param.name != "help"


def _argv(command, name, args, opts):
    """The token list of one invocation."""
    argv = [name]
    for param in command.params:
        if isinstance(param, click.Argument) and args.get(param.name) is not None:
            argv.append(args[param.name])
    for opt, value in opts:
        argv += [opt] if value is None else [opt, value]
    return argv


def cases(root: Path):
    """(case name, argv template, setup) for every command, base and option/argument x value."""
    from dmh.cli import cli

    out = []
    all_bases = bases(root)
    for name, command in sorted(cli.commands.items()):
        if name in SKIP_COMMANDS:
            continue
        if name not in all_bases:
            raise SystemExit(f"no valid invocation of `dmh {name}` in bases(): add one")
        for label, args, opts, setup in all_bases[name]:
            out.append((f"{label}: base", _argv(command, name, args, opts), setup, ""))
            for param in command.params:
                if not _takes_value(param):
                    continue
                values = list(VALUES)
                if isinstance(param, click.Option) and param.opts[-1] in KEY_VALUE_OPTIONS:
                    key = KEY_VALUE_OPTIONS[param.opts[-1]]
                    values += [(f"{key}={vname}", f"{key}={value}") for vname, value in VALUES]
                for vname, value in values:
                    if isinstance(param, click.Argument):
                        what = param.name.upper()
                        argv = _argv(command, name, {**args, param.name: value}, opts)
                    else:
                        what = param.opts[-1] if param.opts[-1].startswith("--") else param.opts[0]
                        mine = set(param.opts) | set(param.secondary_opts)
                        if any(o in mine for o, _ in opts):
                            new = [(o, value if o in mine else v) for o, v in opts]
                        else:
                            new = [*opts, (what, value)]
                        argv = _argv(command, name, args, new)
                    out.append((f"{label}: {what} {vname}", argv, setup, value))
        if name == "info":  # the group's own option, on the lightest command
            for vname, value in VALUES:
                out.append((f"--threads {vname}", ["--threads", value, *_argv(command, name, *all_bases[name][0][1:3])],
                            None, value))
    return out


# ------------------------------------------------------------------------------------ running
def _snapshot(folder: Path, skip=()) -> dict:
    state = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = [d for d in dirnames if os.path.join(dirpath, d) not in skip]
        for f in filenames:
            p = os.path.join(dirpath, f)
            with contextlib.suppress(OSError):
                st = os.lstat(p)
                state[p] = (st.st_size, st.st_mtime_ns)
    return state


def _prepare(root: Path, case_dir: Path, template, setup):
    for sub in ("out", "adir", "spaced dïr ✓"):
        (case_dir / sub).mkdir(parents=True)
    if setup is not None:
        setup(root, case_dir)
    values = {"out": str(case_dir / "out"), "dir": str(case_dir / "adir"),
              "missing": str(case_dir / "missing.npz"), "unicode": str(case_dir / "spaced dïr ✓" / "fïle ✓.npz")}
    filled = [t.format(**values) if "{" in t else t for t in template]
    return filled[:-1], filled[-1]


def _run_forked(argv, cwd: Path, logs: Path, timeout: float):
    """``dmh.cli.main(argv)`` in a forked child (its own session, output to files); (rc, out, err) or None
    on timeout."""
    out_path, err_path = logs.with_suffix(".out"), logs.with_suffix(".err")
    pid = os.fork()
    if pid == 0:  # the child: never returns
        rc = 1
        try:
            os.setsid()
            os.chdir(cwd)
            for fd, path in ((1, out_path), (2, err_path)):
                f = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                os.dup2(f, fd)
                os.close(f)
            from dmh.cli import main

            try:
                rc = main(argv)
            except SystemExit as exc:
                rc = exc.code if isinstance(exc.code, int) else 1
            except BaseException:  # noqa: BLE001 - anything escaping main is a traceback
                traceback.print_exc()
                rc = 1
        finally:
            with contextlib.suppress(Exception):
                sys.stdout.flush()
                sys.stderr.flush()
            os._exit(rc if isinstance(rc, int) and 0 <= rc < 256 else 1)
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None
        time.sleep(0.01)
    rc = os.waitstatus_to_exitcode(status)
    read = lambda p: p.read_text(errors="replace") if p.exists() else ""  # noqa: E731
    return rc, read(out_path), read(err_path)


def _run_subprocess(argv, cwd: Path, timeout: float):
    proc = subprocess.Popen([sys.executable, "-m", "dmh.cli", *argv], cwd=cwd, env={**os.environ, **ENV},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, errors="replace",
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return None
    return proc.returncode, out, err


def _names_it(message: str, case_name: str, value: str) -> bool:
    """Whether a refusal names the option (argument) or the value it refused."""
    what = case_name.split(": ", 1)[1].split(" ", 1)[0] if ": " in case_name else case_name.split(" ", 1)[0]
    text = message.lower()
    hints = {what.lower(), what.lower().lstrip("-").replace("-", "_"), what.lower().lstrip("-")}
    if value.strip() and len(value.strip()) > 1:
        hints.add(value.strip().lower())
    if "=" in value:  # KEY=VALUE: naming the key is naming it
        hints.add(value.split("=", 1)[0].strip().lower())
    return any(h and h in text for h in hints)


def run_case(i, case, root: Path, fixtures: dict, timeout: float, use_subprocess: bool):
    name, template, setup, value = case
    case_dir = root / "cases" / f"{i:04d}"
    argv, value = _prepare(root, case_dir, [*template, value], setup)
    before = _snapshot(case_dir)
    t0 = time.perf_counter()
    if use_subprocess:
        result = _run_subprocess(argv, case_dir, timeout)
    else:
        result = _run_forked(argv, case_dir, root / "logs" / f"{i:04d}", timeout)
    seconds = time.perf_counter() - t0
    shown = ["dmh", *argv]
    if result is None:
        return name, "timeout", f"no answer in {timeout:.0f} s", seconds, shown
    rc, out, err = result
    problems = []
    if rc not in (0, 2) or (name.endswith(": base") and rc != 0):
        problems.append(f"exit {rc}" + (" (the valid invocation must succeed)" if rc == 2 else ""))
    if "Traceback" in out + err:
        problems.append("traceback")
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith(("warning:", "\r"))]
    if rc == 2 and (len(lines) != 1 or not lines[0].startswith("Error:")):
        problems.append(f"{len(lines)} stderr line(s), not one 'Error:' line")
    changed = sorted(p for p, s in _snapshot(root, skip={str(root / "cases"), str(root / "logs")}).items()
                     if fixtures.get(p) != s)
    changed += sorted(set(fixtures) - set(_snapshot(root, skip={str(root / "cases"), str(root / "logs")})))
    if changed:
        problems.append(f"changed shared input(s) {[os.path.relpath(p, root) for p in changed[:3]]}")
        for p in changed:  # restore nothing: rebuild is too slow; later cases compare against the new state
            fixtures.pop(p, None)
    if rc == 2:
        after = _snapshot(case_dir)
        left = sorted(os.path.relpath(p, case_dir) for p, s in after.items() if before.get(p) != s)
        if left:
            problems.append(f"refused but wrote {left[:3]}")
    message = (lines or err.strip().splitlines() or out.strip().splitlines() or [""])[-1][:200]
    if "Traceback" in err:
        message = err.strip().splitlines()[-1][:200]
    if problems and name in KNOWN:
        verdict, message = "known", f"{message} [{KNOWN[name]}]"
    elif problems:
        verdict = "FAIL: " + "; ".join(problems)
    elif rc == 2 and not _names_it(message, name, value):
        verdict = "vague"
    else:
        verdict = "ok"
    shutil.rmtree(case_dir, ignore_errors=True)
    return name, verdict, f"exit {rc}: {message}", seconds, shown


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--filter", default="", help="run only cases whose name contains this")
    parser.add_argument("--jobs", type=int, default=1, help="cases run at once")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    parser.add_argument("--subprocess", action="store_true", help="run each case as python -m dmh.cli")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--verbose", action="store_true", help="also print the passing cases")
    args = parser.parse_args(argv)
    os.environ.update(ENV)
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="dmh-fuzz-options-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        _build(root)
        all_cases = cases(root)
        selected = [(i, c) for i, c in enumerate(all_cases) if args.filter in c[0]]
        if args.list:
            for _, (name, template, _setup, _value) in selected:
                print(f"{name}\n    dmh {' '.join(template)}")
            print(f"{len(selected)} of {len(all_cases)} cases")
            return 0
        (root / "logs").mkdir()
        (root / "cases").mkdir()
        if not args.subprocess:  # each base once here: warm imports for the forked children
            for _i, (name, template, setup, _value) in selected:
                if name.endswith(": base"):
                    warm = root / "cases" / "warm"
                    argv_, _ = _prepare(root, warm, [*template, ""], setup)
                    with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), \
                            contextlib.redirect_stderr(null):
                        from dmh.cli import main as dmh_main

                        with contextlib.suppress(BaseException):
                            dmh_main(argv_)
                    shutil.rmtree(warm, ignore_errors=True)
        fixtures = _snapshot(root, skip={str(root / "cases"), str(root / "logs")})
        print(f"{len(selected)} cases ({time.perf_counter() - t0:.0f} s to build the files)", flush=True)

        def one(item):
            i, case = item
            return run_case(i, case, root, fixtures, args.timeout, args.subprocess)

        results = []
        with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for result in pool.map(one, selected):
                results.append(result)
                name, verdict, message, seconds, shown = result
                if verdict != "ok" or args.verbose:
                    print(f"{verdict:<5} {name} ({seconds:.1f} s)\n      {' '.join(map(repr, shown))}\n"
                          f"      {message}", flush=True)
    counts = {k: sum(r[1].startswith(k) for r in results) for k in ("ok", "vague", "known", "FAIL", "timeout")}
    print(f"{len(results)} cases: {counts['ok']} ok, {counts['vague']} vague refusals, {counts['known']} known, "
          f"{counts['FAIL']} failed, {counts['timeout']} timed out ({time.perf_counter() - t0:.0f} s)")
    return 1 if counts["FAIL"] or counts["timeout"] else 0


if __name__ == "__main__":
    sys.exit(main())
