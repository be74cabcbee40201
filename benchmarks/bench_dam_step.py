"""CPU milliseconds per DAM training step (batch 128, hidden 4096, 64 bits), plain against lean
kernels (``HashNet.lean``: txtNet's first layer without the raw input's gradient, LRN by shifted
sums), alternated, ``--repeats`` times each, one thread.

    python benchmarks/bench_dam_step.py [--repeats 3] [--out FILE]
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
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    res = {}
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
    print(json.dumps(res))
    if args.out:
        from dmh._atomic import atomic_write_text

        atomic_write_text(args.out, json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
