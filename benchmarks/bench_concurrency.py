"""Concurrent fits: wall time of 1, 2 and 3 simultaneous DMH fits of the same cell, per thread
configuration, relative to one fit alone.

    python benchmarks/bench_concurrency.py [--configs old,default,1] [--concurrency 1,2,3]
        [--repeat 2] [--bits 16] [--param KEY=VALUE ...] [--out docs/results/bench_concurrency.json]
    python benchmarks/bench_concurrency.py --summarise docs/results/bench_concurrency.json

Configurations: ``old`` runs the fit without any dmh thread limit (each library sizes its own
pools, as before dmh had one setting); ``default`` runs it under dmh's default (nothing set:
``DMH_THREADS`` / ``OMP_NUM_THREADS`` unset, so the physical cores available); an integer ``N``
runs it under ``dmh.set_threads(N)``; ``passive`` is ``default`` with ``OMP_WAIT_POLICY=PASSIVE``
(OpenMP threads sleep at once at the end of a parallel region instead of spinning a while
first). The thread environment variables are removed from the children's environment so that
every configuration starts from the libraries' own defaults.

Each fit runs in its own process (DMH on UCI digits' training split; the reduced settings are
given by ``--param`` and written to the JSON). The processes of one trial import and load the data
first, then start fitting together; a trial's figure is each process's fit wall time. Trials
alternate configurations and concurrency levels (the order rotates every repeat) so that a change
of machine load affects them alike; the table gives medians over repeats and processes, and each
configuration's ratio to its own median alone and to the best single-fit median.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

CHILD = r"""
import contextlib, json, resource, sys, time
config, params = sys.argv[1], json.loads(sys.argv[2])
import dmh
import dmh.base
from dmh.datasets import load_builtin
from dmh.methods.dmh import DMH
if config == "old":
    dmh.base.thread_limit = lambda *a, **k: contextlib.nullcontext(None)
elif config not in ("default", "passive"):
    dmh.set_threads(int(config))
train = load_builtin("uci-digits").train()
model = DMH(random_state=0, **params)
import torch  # noqa: F401 - loaded before the timing in every configuration
print("ready", flush=True)
sys.stdin.readline()
r0 = resource.getrusage(resource.RUSAGE_SELF)
t0 = time.perf_counter()
model.fit(train)
wall = time.perf_counter() - t0
r1 = resource.getrusage(resource.RUSAGE_SELF)
cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
print(json.dumps({"wall_s": wall, "cpu_s": cpu, "torch_threads": torch.get_num_threads(),
                  "dmh_threads": dmh.get_threads()}), flush=True)
"""

_THREAD_ENV = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "DMH_THREADS",
               "OMP_WAIT_POLICY", "GOMP_SPINCOUNT")


_DEFAULT_PARAMS = ["n_rounds=1", "dam_epochs=1", "hidden_size=256", "gbe_max_iter=50", "cle_max_iter=10"]


def trial(config: str, n_proc: int, params: dict) -> list[dict]:
    """``n_proc`` simultaneous fits under ``config``; one result dict per process."""
    env = {k: v for k, v in os.environ.items() if k not in _THREAD_ENV}
    if config == "passive":  # OpenMP threads sleep at once at the end of a parallel region
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    procs = [
        subprocess.Popen([sys.executable, "-c", CHILD, config, json.dumps(params)], env=env,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for _ in range(n_proc)
    ]
    try:
        for p in procs:  # every process has imported and loaded its data
            line = p.stdout.readline()
            if line.strip() != "ready":
                raise RuntimeError(f"fit process failed to start ({config}): {line!r}")
        for p in procs:
            p.stdin.write("go\n")
            p.stdin.flush()
        out = []
        for p in procs:
            text, _ = p.communicate()
            if p.returncode:
                raise RuntimeError(f"fit process failed ({config}, exit {p.returncode})")
            out.append(json.loads(text.strip().splitlines()[-1]))
        return out
    finally:  # an interrupted benchmark leaves no fit running
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()


def summarise(trials, configs, levels):
    rows = []
    alone = {c: statistics.median([r["wall_s"] for t in trials if t["config"] == c and t["n_proc"] == 1
                                   for r in t["fits"]] or [float("nan")]) for c in configs}
    best_alone = min(alone.values())
    for c in configs:
        for n in levels:
            fits = [r for t in trials if t["config"] == c and t["n_proc"] == n for r in t["fits"]]
            if not fits:
                continue
            wall = statistics.median(r["wall_s"] for r in fits)
            rows.append({
                "config": c, "n_proc": n, "n_fits": len(fits),
                "wall_s_median": round(wall, 2),
                "wall_s_range": [round(min(r["wall_s"] for r in fits), 2),
                                 round(max(r["wall_s"] for r in fits), 2)],
                "cpu_s_median": round(statistics.median(r["cpu_s"] for r in fits), 2),
                "ratio_to_own_alone": round(wall / alone[c], 2),
                "ratio_to_best_alone": round(wall / best_alone, 2),
                "threads": sorted({r["dmh_threads"] if c != "old" else r["torch_threads"] for r in fits}),
            })
    return rows


def print_table(rows):
    print("| config | concurrent fits | wall per fit (median s) | range | CPU s per fit | "
          "x own alone | x best alone |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['config']} | {r['n_proc']} | {r['wall_s_median']:.1f} | "
              f"{r['wall_s_range'][0]:.1f}-{r['wall_s_range'][1]:.1f} | {r['cpu_s_median']:.1f} | "
              f"{r['ratio_to_own_alone']:.2f} | {r['ratio_to_best_alone']:.2f} |", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="old,default,1")
    parser.add_argument("--concurrency", default="1,2,3")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--bits", type=int, default=16)
    parser.add_argument("--param", action="append", default=None,
                        help="KEY=VALUE DMH parameter (default: " + ", ".join(_DEFAULT_PARAMS) + ")")
    parser.add_argument("--out", default="docs/results/bench_concurrency.json")
    parser.add_argument("--summarise", metavar="JSON", help="only print the table of a (partial) earlier run")
    args = parser.parse_args(argv)
    if args.summarise:
        trials = json.loads(Path(args.summarise).read_text())["trials"]
        configs = list(dict.fromkeys(t["config"] for t in trials))
        levels = sorted({t["n_proc"] for t in trials})
        print_table(summarise(trials, configs, levels))
        return
    configs = [c.strip() for c in args.configs.split(",") if c.strip()]
    levels = [int(n) for n in args.concurrency.split(",")]
    params = {"n_bits": args.bits}
    for item in args.param or _DEFAULT_PARAMS:
        key, value = item.split("=", 1)
        params[key] = ast.literal_eval(value)
    trials = []
    t_start = time.time()
    info = {
        "benchmark": "concurrent DMH fits, UCI digits training split",
        "command": "python benchmarks/bench_concurrency.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "params": params,
        "machine": {"cpus": os.cpu_count(), "affinity": len(os.sched_getaffinity(0)),
                    "processor": platform.processor() or platform.machine(),
                    "note": "shared with other users' jobs during the run; see loadavg_1min_before"},
        "complete": False,
        "trials": trials,
    }
    for rep in range(args.repeat):
        order = configs[rep % len(configs):] + configs[:rep % len(configs)]
        for n in levels:
            for c in order:
                load = os.getloadavg()[0]
                fits = trial(c, n, params)
                trials.append({"repeat": rep, "config": c, "n_proc": n, "loadavg_1min_before": load,
                               "fits": fits})
                walls = ", ".join(f"{f['wall_s']:.1f}" for f in fits)
                print(f"repeat {rep} {c:>8} x{n}: wall {walls} s (load {load:.1f})", flush=True)
                _write(args.out, info)  # partial results survive an interrupted run
    info["rows"] = summarise(trials, configs, levels)
    info["complete"] = True
    info["elapsed_s"] = round(time.time() - t_start, 1)
    print_table(info["rows"])
    _write(args.out, info)
    print(f"wrote {args.out}")


def _write(path, info):
    from dmh.report import atomic_write_text

    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps(info, indent=1) + "\n")


if __name__ == "__main__":
    main()
