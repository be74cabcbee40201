"""What each candidate of ``dmh build --method auto`` costs and scores on a built collection's own
features: the fit's CPU seconds (one thread) and its held-out pair score, by Hamming distance alone
and re-ranked, exactly as ``auto`` fits and scores it (the same seeded hold-out; no labels).

    python benchmarks/bench_auto_candidates.py COLLECTION [--methods dmh,cca-itq,fsh,spdh,djsrh,jdsh,dgcpn,ucch,sadch]
        [--bits 64] [--seed 0] [--out auto_candidates.json]

CPU seconds (``time.process_time`` of the fitting process, one thread) are reported beside wall
seconds: on a machine shared with other jobs the wall time says more about the other jobs than
about the fit. This is the measurement behind auto's fit budget per candidate (``FIT_BUDGET_CPU_S``)
(docs/collection.md, "Which method for a collection").
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("collection", help="a built collection folder (its features.npz is used)")
    ap.add_argument("--methods", default="dmh,cca-itq,fsh,spdh,djsrh,jdsh,dgcpn,ucch,sadch")
    ap.add_argument("--bits", type=int, default=64)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=None, help="the results (JSON)")
    args = ap.parse_args(argv)

    import dmh
    from dmh.app.collection import AUTO_HOLDOUT, collection_features
    from dmh.app.rerank import reranked_pair_scores
    from dmh.peers import CPU_SETTINGS
    from dmh.registry import get_method_class
    from dmh.selection import holdout_pairs, score_model

    dmh.set_threads(1)
    data, _ = collection_features(args.collection)
    fit_data, held = holdout_pairs(data, AUTO_HOLDOUT, random_state=args.seed)
    load0 = os.getloadavg()
    rows = []
    print(f"{data.n_objects} items ({data.n_paired} pairs); fitted on {fit_data.n_objects}, {held.n} held-out pairs, "
          f"{args.bits} bits, one thread", flush=True)
    for name in [m.strip() for m in args.methods.split(",") if m.strip()]:
        # as auto makes each candidate: a deep peer in its CPU setting
        model = get_method_class(name)(n_bits=args.bits, random_state=args.seed, **CPU_SETTINGS.get(name, {}))
        c0, t0 = time.process_time(), time.perf_counter()
        model.fit(fit_data)
        cpu, wall = time.process_time() - c0, time.perf_counter() - t0
        s = score_model(model, held)
        r = reranked_pair_scores(model.project(held.image, modality="image"), model.project(held.text, modality="text"))
        row = {"method": name, "fit_cpu_s": round(cpu, 1), "fit_wall_s": round(wall, 1),
               "hamming_score": round(s["score"], 4), "reranked_score": round(r["mrr"], 4),
               "hamming_recall@10": round((s["image->text"]["recall@10"] + s["text->image"]["recall@10"]) / 2, 4),
               "reranked_recall@10": round((r["image->text"]["recall@10"] + r["text->image"]["recall@10"]) / 2, 4)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| method | fit CPU s | fit wall s | held-out pair score: Hamming | re-ranked | recall@10: Hamming | "
          "re-ranked |\n|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['method']} | {r['fit_cpu_s']:.1f} | {r['fit_wall_s']:.1f} | {r['hamming_score']:.3f} | "
              f"{r['reranked_score']:.3f} | {r['hamming_recall@10']:.3f} | {r['reranked_recall@10']:.3f} |")
    if args.out:
        from dmh.report import atomic_write_text

        result = {"benchmark": "auto_candidates", "command": "python benchmarks/bench_auto_candidates.py "
                  + " ".join(argv if argv is not None else sys.argv[1:]),
                  "date": datetime.datetime.now().isoformat(timespec="seconds"),
                  "load_average": {"start": load0, "end": os.getloadavg()}, "n_items": int(data.n_objects),
                  "n_pairs": int(data.n_paired), "n_fit": int(fit_data.n_objects), "n_heldout_pairs": int(held.n),
                  "n_bits": args.bits, "seed": args.seed, "rows": rows}
        atomic_write_text(Path(args.out), json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
