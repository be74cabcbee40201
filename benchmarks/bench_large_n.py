"""Benchmark: GBE beyond 10^4 objects, the approximate O(n k) solver against the exact one.

Part 1 (``--compare-n``, default 10,000): CLE features of synthetic inputs of the paper's shape
(see ``bench_fit.synthetic``; their topic labels give the relevance), then GBE from the same
initial codes with ``solver="exact"`` and ``solver="approx"``: wall time, steps, the *exact* loss
l2 of each solution (both evaluated with the full gradient code), and MAP of the codes (1,000
training objects as queries against all of them, relevant when they share a topic label).

Part 2 (``--fit-n``, e.g. 100000): one full DMH fit at that size with the default
``gbe_solver="auto"`` (approximate from 10,000 objects on), by ``bench_fit.py``; prints its
per-stage table and peak memory.

    python benchmarks/bench_large_n.py [--compare-n 10000] [--seeds 0,1,2] [--similarity clip] [--fit-n 0]
        [--bits 64] [--device cpu] [--threads N] [--out large_n.json]
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np


def cle_features(data, seed: int = 0) -> np.ndarray:
    """Round-1 CLE features Y as DMH computes them (standardised inputs, default parameters)."""
    from dmh.methods import cle

    masks = [data.image_mask, data.text_mask]
    views = []
    for raw, m in zip((data.image, data.text), masks, strict=True):
        mu, sd = raw[m].mean(0), raw[m].std(0)
        sd[sd < 1e-12] = 1.0
        views.append(cle.scale_view((raw - mu) / sd, m))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cle.fit_cle(views, masks, d=512, rng=np.random.default_rng(seed)).Y


def compare(n: int, bits: int, device: str, samples: list[int], seed: int = 0, similarity: str = "clip") -> dict:
    import torch
    from bench_fit import synthetic

    from dmh.methods import gbe
    from dmh.metrics import mean_average_precision

    data = synthetic(n)
    t0 = time.perf_counter()
    Y = cle_features(data, seed)
    t_cle = time.perf_counter() - t0
    H0 = gbe.init_codes(Y, bits, "projection", np.random.default_rng(seed))
    S = gbe.PairSimilarity(torch.as_tensor(Y, dtype=torch.float32), similarity)
    q = np.arange(min(1000, n))
    clock = "cpu" if time.perf_counter is time.process_time else "wall"
    out = {"n": n, "bits": bits, "similarity": similarity, "device": device, "clock": clock,
           "cle_seconds": round(t_cle, 1), "runs": []}
    runs = [("exact", {})] + [("approx", {"n_samples": m}) for m in samples]
    for solver, extra in runs:
        t = {}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            t0 = time.perf_counter()
            g = gbe.fit_gbe(Y, bits, H_init=H0, max_iter=150, tol=1e-5, solver=solver, device=device,
                            similarity=similarity,
                            rng=np.random.default_rng(seed), timings=t, **extra)
            wall = time.perf_counter() - t0
        H = torch.as_tensor(g.relaxed, dtype=torch.float32)
        loss, _ = gbe.gbe_loss_and_grad(H, S, 0.01)
        mp = mean_average_precision(g.codes[q], g.codes, data.labels[q], data.labels)
        row = {"solver": solver, **extra, "seconds": round(wall, 2), "setup_seconds": round(t["setup"], 2),
               "steps": g.n_iter, "seconds_per_step": round(t["steps"] / g.n_iter, 4),
               "exact_loss": round(loss, 5), "map": round(mp, 4)}
        print(json.dumps(row), flush=True)
        out["runs"].append(row)
    init_loss, _ = gbe.gbe_loss_and_grad(torch.as_tensor(H0, dtype=torch.float32), S, 0.01)
    out["initial_exact_loss"] = round(init_loss, 5)
    out["initial_map"] = round(mean_average_precision(np.where(H0[q] > 0, 1, -1), np.where(H0 > 0, 1, -1),
                                                      data.labels[q], data.labels), 4)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--compare-n", type=int, default=10_000, help="0 skips the exact/approximate comparison")
    ap.add_argument("--samples", default="30", help="comma-separated n_samples of the approximate runs")
    ap.add_argument("--fit-n", type=int, default=0, help="objects of the end-to-end fit (0: none)")
    ap.add_argument("--bits", type=int, default=64)
    ap.add_argument("--seeds", default="0",
                    help="comma-separated seeds of the comparison (CLE, initial codes and draws; same data)")
    ap.add_argument("--similarity", choices=("clip", "perplexity"), default="clip",
                    help="S^Y of the comparison (perplexity: the default of DMH, 30)")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="cpu")
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--cpu-clock", action="store_true",
                    help="time in CPU seconds of this process (for --threads 1 on a busy machine)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    if args.cpu_clock:
        time.perf_counter = time.process_time

    import torch  # noqa: F401 - loaded first, so that set_threads applies to its pool too

    import dmh
    from dmh.methods.dmh import resolve_device

    if args.threads is not None:
        dmh.set_threads(args.threads)
    from dmh.errors import ParameterError

    try:
        device = resolve_device(args.device)
    except ParameterError as exc:
        ap.error(str(exc))
    result = {}
    if args.compare_n:
        seeds = [int(s) for s in args.seeds.split(",")]
        runs = [compare(args.compare_n, args.bits, device, [int(s) for s in args.samples.split(",")],
                        seed=seed, similarity=args.similarity) for seed in seeds]
        for seed, run in zip(seeds, runs, strict=True):
            run["seed"] = seed
        result["compare"] = runs[0] if len(runs) == 1 else runs
        print(json.dumps(result["compare"], indent=1), flush=True)
    if args.fit_n:
        import bench_fit

        fit_out = Path(args.out).with_suffix(".fit.json") if args.out else None
        fit_args = ["--n", str(args.fit_n), "--bits", str(args.bits), "--device", args.device]
        if args.threads is not None:
            fit_args += ["--threads", str(args.threads)]
        if args.cpu_clock:
            fit_args += ["--cpu-clock"]
        if fit_out:
            fit_args += ["--out", str(fit_out)]
        bench_fit.main(fit_args)
        if fit_out:
            result["fit"] = json.loads(fit_out.read_text())
    result["peak_rss_gib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2, 2)
    if args.out:
        from dmh.report import atomic_write_text

        atomic_write_text(args.out, json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
