"""Paired MAP and DAM epochs of DMH variants: each seed fits every variant on the same training set.

    python research/studies/dam_speed_pairs.py DATA BITS SEEDS OUT.jsonl VARIANT_JSON [VARIANT_JSON ...]

e.g. ``python research/studies/dam_speed_pairs.py uci-digits 16 0,1,2 pairs.jsonl
'{"dam_stop": "fixed", "dam_lean": false}' '{}'`` (the defaults before and after the DAM stopping
rule). One JSON line per fit (appended to OUT): MAP image->text / text->image as ``dmh evaluate``
scores it (fully paired training set of the data's split), fit seconds, DAM seconds, the epochs
each network trained per round and its bit agreement with GBE's codes after each epoch.
"""

import json
import sys
import time

from dmh import DMH, make_semi_paired
from dmh.datasets import load_dataset
from dmh.evaluation import evaluate_model


def main(argv):
    if len(argv) < 5 or argv[0] in ("-h", "--help"):
        sys.exit(__doc__)
    src, bits, seeds, out = argv[0], int(argv[1]), [int(s) for s in argv[2].split(",")], argv[3]
    variants = [json.loads(v) for v in argv[4:]]
    data = load_dataset(src)
    for seed in seeds:
        train = make_semi_paired(data.train(), 1.0, random_state=seed)
        for params in variants:
            model = DMH(n_bits=bits, random_state=seed, **params)
            t0 = time.perf_counter()
            model.fit(train)
            fit_s = time.perf_counter() - t0
            scores = evaluate_model(model, data.query(), data.database())
            hist = model.history_
            rec = dict(data=src, bits=bits, seed=seed, params=params, fit_s=round(fit_s, 2),
                       map={t: round(s["map"], 4) for t, s in scores.items()},
                       epochs={m: [len(x) for x in hist[f"dam_{m}"]] for m in ("image", "text")},
                       agreement={m: [[round(a, 4) for a in x] for x in hist[f"dam_{m}_agreement"]]
                                  for m in ("image", "text")},
                       dam_s=round(sum(t.get("dam", 0) for t in hist["time"]), 2))
            print(json.dumps(rec), flush=True)
            with open(out, "a") as f:
                f.write(json.dumps(rec) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
