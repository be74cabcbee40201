"""CPU milliseconds per DAM training step (batch 128, hidden 4096, 64 bits), plain against lean
kernels (``HashNet.lean``: txtNet's first layer without the raw input's gradient, LRN by shifted
sums), alternated, ``--repeats`` times each, one thread.

``--bf16`` adds a probe (not an option of DMH): the plain network's step under
``torch.autocast("cpu", dtype=torch.bfloat16)`` (matrix products in bfloat16, weights and Adam in
float32), and the time of one 128 x d by d x 4096 product in float32 and in bfloat16. It tells
whether a mixed-precision DAM would pay on this CPU (it does where the CPU multiplies bfloat16
natively, e.g. AVX512-BF16 or AMX; elsewhere bfloat16 is emulated and slower).

    python benchmarks/bench_dam_step.py [--repeats 3] [--bf16] [--out FILE]
"""

import argparse
import json
import time

import numpy as np
import torch

from dmh.methods import dam


def _autocast_epoch_ms(modality: str, d: int, X: np.ndarray, H: np.ndarray) -> float:
    """Milliseconds per step of one epoch of the plain network under bfloat16 autocast (the same
    batches and Adam as :func:`dam.train_net`)."""
    torch.manual_seed(0)
    net = dam.make_net(modality, d, 64, (4096,))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3, fused=True)
    Xt, Ht = torch.as_tensor(X), torch.as_tensor(H)
    perm = torch.randperm(len(Xt), generator=torch.Generator().manual_seed(0))
    t = time.process_time()
    for s in range(0, len(Xt), 128):
        idx = perm[s : s + 128]
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = net(Xt[idx])
        loss = ((out.float() - Ht[idx]) ** 2).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return round((time.process_time() - t) / 10 * 1000, 1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bf16", action="store_true", help="also time the plain network under bfloat16 autocast")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    res = {"cpu_capability": torch.backends.cpu.get_cpu_capability()}
    if args.bf16:
        for d in (4096, 1386):
            a, w = torch.randn(128, d), torch.randn(d, 4096)
            for dt in (torch.float32, torch.bfloat16):
                A, W = a.to(dt), w.to(dt)
                A @ W
                t = time.process_time()
                for _ in range(20):
                    A @ W
                res.setdefault(f"matmul-128x{d}x4096-{str(dt)[6:]}", []).append(
                    round((time.process_time() - t) / 20 * 1000, 1))
    for modality, d in (("image", 4096), ("text", 1386), ("text", 2000)):
        X = np.random.default_rng(0).normal(size=(1280, d)).astype(np.float32)
        H = np.sign(np.random.default_rng(1).normal(size=(1280, 64))).astype(np.float32)
        for _ in range(args.repeats):
            for lean in (False, True):
                torch.manual_seed(0)
                net = dam.make_net(modality, d, 64, (4096,))
                net.lean = lean
                t = time.process_time()
                dam.train_net(net, X, H, epochs=1, lr=1e-3, batch_size=128, generator=torch.Generator().manual_seed(0))
                key = f"{modality}-{d}-{'lean' if lean else 'plain'}"
                res.setdefault(key, []).append(round((time.process_time() - t) / 10 * 1000, 1))
            if args.bf16:
                res.setdefault(f"{modality}-{d}-plain-bf16", []).append(_autocast_epoch_ms(modality, d, X, H))
    print(json.dumps(res))
    if args.out:
        from dmh._atomic import atomic_write_text

        atomic_write_text(args.out, json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
