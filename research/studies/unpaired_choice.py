"""Can held-out pairs tell, inside one fit, whether DMH should use the unpaired objects?

For each (dataset, seed, bits) of table1's 50% protocol (the same semi-paired training set as
``dmh reproduce table1``), hold out pairs (``dmh.selection.holdout_pairs``, ``--splits`` seeded
splits), fit DMH with ``use_unpaired=True`` and ``False`` on the rest (``--rounds`` rounds, the
default fit's other settings) and score both by pair retrieval on the held-out pairs (no labels).
The records say which side each split, and the mean over splits, prefers; set them beside test MAP
of the full fits (table1's DMH (50%) and DMH (pairs only) cells).

    python research/studies/unpaired_choice.py --data ../shared/data --bits 16,64 --seeds 0,1,2 --rounds 1 \\
        --splits 2 --out research/results/use_unpaired/choice_r1.json

``--rule`` records instead the choice ``use_unpaired="auto"`` makes inside a default fit (its split, its
candidates, its scores), per (set, seed, bits), to set beside the fits of both sides.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import dmh
from dmh.report import atomic_write_text
from dmh.selection import holdout_pairs, pair_retrieval_scores

SETS = {"wiki": "wiki/wiki_data.mat", "uci-digits": None, "fashion": "fashion/fashion_effl0.npz"}


def load(name, data_dir):
    return dmh.load_dataset("uci-digits" if SETS[name] is None else str(Path(data_dir) / SETS[name]))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="../shared/data")
    ap.add_argument("--sets", default="wiki,uci-digits,fashion")
    ap.add_argument("--bits", default="16,64")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--splits", type=int, default=2)
    ap.add_argument("--ratio", type=float, default=0.5)
    ap.add_argument("--rule", action="store_true",
                    help="run use_unpaired='auto''s own choice (dmh.methods.unpaired_choice.choose_unpaired: its split, "
                         "the full default fit) per (set, seed, bits) instead of --rounds/--splits")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    if args.rule:
        return rule(args)
    out = Path(args.out)
    records = json.loads(out.read_text()) if out.is_file() else []
    done = {(r["dataset"], r["seed"], r["n_bits"], r["split"], r["use_unpaired"]) for r in records}
    for name in args.sets.split(","):
        data = load(name, args.data)
        for seed in map(int, args.seeds.split(",")):
            train = dmh.make_semi_paired(data.train(), paired_ratio=args.ratio, random_state=seed)
            for bits in map(int, args.bits.split(",")):
                for split in range(args.splits):
                    fit_data, held = holdout_pairs(train, random_state=[seed, split])
                    for cand in (True, False):
                        if (name, seed, bits, split, cand) in done:
                            continue
                        t0 = time.perf_counter()
                        model = dmh.DMH(bits, random_state=seed, n_rounds=args.rounds, use_unpaired=cand)
                        model.fit(fit_data)
                        s = pair_retrieval_scores(model.encode(held.image, modality="image"),
                                                  model.encode(held.text, modality="text"))
                        records.append({"dataset": name, "seed": seed, "n_bits": bits, "split": split,
                                        "use_unpaired": cand, "rounds": args.rounds, "score": s["mrr"],
                                        "seconds": time.perf_counter() - t0})
                        print(json.dumps(records[-1]), flush=True)
                        atomic_write_text(out, json.dumps(records, indent=1))


def rule(args):
    """The choice a default fit makes, one record per (set, seed, bits), resumable."""
    from dmh.methods.unpaired_choice import choose_unpaired as choose

    out = Path(args.out)
    records = json.loads(out.read_text()) if out.is_file() else []
    done = {(r["dataset"], r["seed"], r["n_bits"]) for r in records}
    for name in args.sets.split(","):
        data = load(name, args.data)
        for seed in map(int, args.seeds.split(",")):
            train = dmh.make_semi_paired(data.train(), paired_ratio=args.ratio, random_state=seed)
            for bits in map(int, args.bits.split(",")):
                if (name, seed, bits) in done:
                    continue
                choice = choose(dmh.DMH(bits, random_state=seed), train)
                records.append({"dataset": name, "seed": seed, "n_bits": bits, **choice.as_dict()})
                print(json.dumps(records[-1]), flush=True)
                atomic_write_text(out, json.dumps(records, indent=1))


if __name__ == "__main__":
    main()
