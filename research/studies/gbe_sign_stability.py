"""How GBE's codes settle over its steps: on the round-1 CLE features of the synthetic paper-shaped
inputs (``bench_fit.synthetic``), one GBE run (default calibrated S^Y, ``--solver``)
with the signs of the relaxed codes taken every 10 steps: the share of bits that flipped since
the last snapshot, the share that differ from the final codes, and the MAP of the snapshot's codes
(1,000 training objects as queries against all, relevant when they share a topic label of the
synthetic generator). Used to judge a stopping rule on the codes' stability (docs/speed.md).

    python research/studies/gbe_sign_stability.py [--n 10000] [--bits 64] [--steps 150] [--threads 1] [--solver auto]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))  # the benchmarks' shared helpers


def _map(C: np.ndarray, L: np.ndarray, q: np.ndarray) -> float:
    n = C.shape[0]
    S = C[q] @ C.T
    S[np.arange(q.size), q] = -np.inf  # a query does not retrieve itself
    rel = (L[q] @ L.T) > 0
    order = np.argsort(-S, 1, kind="stable")[:, : n - 1]
    r = np.take_along_axis(rel, order, 1)
    prec = np.cumsum(r, 1) / np.arange(1, n)
    return float(np.mean((prec * r).sum(1) / np.maximum(r.sum(1), 1)))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000)
    ap.add_argument("--bits", type=int, default=64)
    ap.add_argument("--steps", type=int, default=150)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--solver", choices=("auto", "exact", "approx"), default="auto",
                    help="GBE's solver (auto: as DMH picks it, the sampled one from 10,000 objects)")
    args = ap.parse_args(argv)
    if args.n < 1001 or args.bits < 1 or args.steps < 10 or args.threads < 1:
        ap.error("--n must be > 1000, --bits >= 1, --steps >= 10, --threads >= 1")
    import torch
    from bench_fit import synthetic
    from bench_large_n import cle_features

    import dmh
    from dmh.methods import gbe

    dmh.set_threads(args.threads)
    data = synthetic(args.n)
    t0 = time.perf_counter()
    Y = cle_features(data, 0)
    print(f"CLE features: {time.perf_counter() - t0:.1f} s", flush=True)
    snaps = {}
    step_count = [0]
    original = torch.optim.Adam.step

    def step(self, *a, **kw):  # GBE's optimiser: keep the signs of its one parameter every 10 steps
        out = original(self, *a, **kw)
        step_count[0] += 1
        if step_count[0] % 10 == 0:
            snaps[step_count[0]] = np.sign(self.param_groups[0]["params"][0].detach().cpu().numpy())
        return out

    torch.optim.Adam.step = step
    try:
        t0 = time.perf_counter()
        g = gbe.fit_gbe(Y, args.bits, max_iter=args.steps, tol=0.0, similarity="perplexity",
                        solver=args.solver, rng=np.random.default_rng(0))
    finally:
        torch.optim.Adam.step = original
    print(f"GBE: {time.perf_counter() - t0:.1f} s", flush=True)
    final = np.sign(g.relaxed)
    L = data.labels.astype(np.float32)
    q = np.random.default_rng(1).choice(args.n, 1000, replace=False)
    prev = None
    print("step | bits flipped in the last 10 steps | bits differing from the final codes | MAP")
    for s in sorted(snaps):
        C = snaps[s]
        flip = "-" if prev is None else f"{np.mean(C != prev):.4f}"
        print(f"{s} | {flip} | {np.mean(C != final):.4f} | {_map(C.astype(np.float32), L, q):.4f}", flush=True)
        prev = C


if __name__ == "__main__":
    main()
