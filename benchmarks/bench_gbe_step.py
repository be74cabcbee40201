"""Milliseconds per approximate GBE step (``gbe_solver="approx"``, the solver from 10,000 objects on)
on this machine's CPU: the block loop against all blocks at once (``gbe_loss_and_grad_sampled`` and
``gbe_loss_and_grad_sampled_batched``), on the same draws, alternated, ``--repeats`` rounds of
``--steps`` steps each; and whether the two give the same loss and gradient.

The features are synthetic (clustered, 512-d like CLE's output), the codes 64 relaxed bits; S^Y is
t-SNE's P (``--similarity perplexity``, the default of DMH) or a dense one (``clip``).

    python benchmarks/bench_gbe_step.py [--n 10000] [--threads 2] [--similarity perplexity] [--lookup keys] [--out FILE]
"""

import argparse
import json
import time

import numpy as np
import torch

from dmh.methods import gbe_sampled


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=10_000, help="objects (default 10,000)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads (default 2)")
    ap.add_argument("--similarity", choices=("perplexity", "clip"), default="perplexity")
    ap.add_argument("--steps", type=int, default=10, help="steps per timed round (default 10)")
    ap.add_argument("--repeats", type=int, default=3, help="alternated rounds per solver (default 3)")
    ap.add_argument("--lookup", choices=("auto", "keys"), default="auto",
                    help="how drawn pairs are found among P's nonzeros: auto = a bitmap up to "
                         "gbe_sampled.BITMAP_MAX_BYTES, keys = the binary search over P's sorted keys "
                         "(as before the bitmap)")
    ap.add_argument("--out", default=None, help="write the result as JSON here")
    args = ap.parse_args()
    if args.lookup == "keys":
        gbe_sampled.BITMAP_MAX_BYTES = 0
    torch.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    n, chunk, m = args.n, 256, 128  # DMH's chunk_size and n_samples
    centres = rng.normal(size=(20, 512))
    Y = (centres[rng.integers(20, size=n)] + 0.5 * rng.normal(size=(n, 512))).astype(np.float32)
    t = time.perf_counter()
    S = gbe_sampled.SampledSimilarity(torch.as_tensor(Y), args.similarity, n_neighbors=15, chunk_size=chunk,
                                      perplexity=30.0)
    res = {"n": n, "threads": args.threads, "similarity": args.similarity, "setup_s": round(time.perf_counter() - t, 2),
           "lookup": "bitmap" if getattr(S, "bitmap", None) is not None else "sorted keys" if S.sparse else None}
    H = torch.as_tensor(rng.normal(size=(n, 64)).astype(np.float32))
    gen = torch.Generator().manual_seed(0)
    Js = [gbe_sampled.draw_columns(n, m, chunk, gen) for _ in range(args.steps)]
    solvers = (("loop", gbe_sampled.gbe_loss_and_grad_sampled),
               ("batched", gbe_sampled.gbe_loss_and_grad_sampled_batched))
    for rep in range(args.repeats):
        for name, step in solvers if rep % 2 == 0 else solvers[::-1]:
            t = time.perf_counter()
            for J in Js:
                step(H, S, J, 0.01, "mean", chunk, with_loss=False)
            res.setdefault(f"{name}_ms", []).append(round((time.perf_counter() - t) / len(Js) * 1000, 1))
    (l1, g1), (l2, g2) = (step(H, S, Js[0], 0.01, "mean", chunk) for _, step in solvers)
    res["same_loss"] = l1 == l2
    res["max_grad_diff_rel"] = float((g1 - g2).abs().max() / g1.abs().max())
    print(json.dumps(res))
    if args.out:
        from dmh.report import atomic_write_text

        atomic_write_text(args.out, json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
