"""CPU milliseconds per DAM training step (batch 128, hidden 4096, 64 bits), plain against lean
kernels (``HashNet.lean``: txtNet's first layer without the raw input's gradient, LRN by shifted
sums), alternated, ``--repeats`` times each, one thread (``--threads N``: wall milliseconds with N threads).

``--bf16`` adds the lean network with its first layer's products in bfloat16
(``HashNet.precision = "bfloat16"``, ``DMH(dam_precision="bfloat16")``; weights and Adam float32)
and the time of one 128 x d by d x 4096 product in float32 and in bfloat16. It tells whether
bfloat16 pays on this CPU (it does where the CPU multiplies bfloat16 natively, e.g. AVX512-BF16 or
AMX; elsewhere bfloat16 is emulated and slower).

    python benchmarks/bench_dam_step.py [--repeats 3] [--bf16] [--out FILE]
"""

import argparse
import json
import time

import numpy as np
import torch

from dmh.methods import dam


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--bf16", action="store_true", help="also time the lean network with bfloat16 products")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    from dmh.methods.dmh import native_bf16

    res = {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "native_bf16": native_bf16("cpu"),
           "threads": args.threads}
    clock = time.process_time if args.threads == 1 else time.perf_counter
    if args.bf16:
        for d in (4096, 1386):
            a, w = torch.randn(128, d), torch.randn(d, 4096)
            for dt in (torch.float32, torch.bfloat16):
                A, W = a.to(dt), w.to(dt)
                A @ W
                t = clock()
                for _ in range(20):
                    A @ W
                res.setdefault(f"matmul-128x{d}x4096-{str(dt)[6:]}", []).append(
                    round((clock() - t) / 20 * 1000, 1))
    for modality, d in (("image", 4096), ("text", 1386), ("text", 2000)):
        X = np.random.default_rng(0).normal(size=(1280, d)).astype(np.float32)
        H = np.sign(np.random.default_rng(1).normal(size=(1280, 64))).astype(np.float32)
        for _ in range(args.repeats):
            kinds = [("plain", False, "float32"), ("lean", True, "float32")]
            if args.bf16:
                kinds.append(("lean-bf16", True, "bfloat16"))
            for name, lean, precision in kinds:
                torch.manual_seed(0)
                net = dam.make_net(modality, d, 64, (4096,))
                net.lean = lean
                net.precision = precision
                t = clock()
                dam.train_net(net, X, H, epochs=1, lr=1e-3, batch_size=128, generator=torch.Generator().manual_seed(0))
                res.setdefault(f"{modality}-{d}-{name}", []).append(round((clock() - t) / 10 * 1000, 1))
    print(json.dumps(res))
    if args.out:
        from dmh.report import atomic_write_text

        atomic_write_text(args.out, json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
