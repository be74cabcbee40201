"""Do the unpaired objects help? DMH at a given pairing ratio with the unpaired objects (under
candidate settings) against the same DMH on the paired half alone (docs/quality.md, "Unpaired
objects at 50% pairing").

    python benchmarks/quality_unpaired.py --data uci-digits,wiki,fashion --seeds 0,1,2 --bits 16 \
        --config 'paired-only=paired_only' --config 'default={}' --config 'w0.3={"unpaired_weight": 0.3}' \
        --out docs/results/quality/unpaired.json

Every fit uses the semi-paired training set (``make_semi_paired(train, ratio, seed)``) minus the
label-free held-out pairs (``holdout_pairs(..., random_state=seed)``, drawn from the paired
objects), so the configurations of one (data, seed) share the same held-out pairs and test set.
Records the held-out pair score (the label-free criterion) and test MAP (for diagnosis only).
Resumable: finished (data, config, bits, seed) records in ``--out`` are skipped.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from dmh import DMH, load_dataset, make_semi_paired
from dmh._atomic import atomic_write_text
from dmh._json import jsonable
from dmh.evaluation import evaluate_model
from dmh.selection import holdout_pairs, score_model

ALIASES = {"wiki": "wiki/wiki_data.mat", "fashion": "fashion/fashion_effl0.npz"}


def _config(spec: str):
    name, _, value = spec.partition("=")
    if value == "paired_only":
        return name, None
    return name, json.loads(value or "{}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="uci-digits,wiki,fashion")
    ap.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--bits", default="16")
    ap.add_argument("--ratio", type=float, default=0.5)
    ap.add_argument("--config", action="append", default=[],
                    help="NAME=JSON params of DMH, or NAME=paired_only (default params, paired objects only)")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    configs = [_config(c) for c in args.config] or [("paired-only", None), ("default", {})]
    out = Path(args.out)
    records = json.loads(out.read_text()) if out.exists() else []
    done = {(r["data"], r["config"], r["n_bits"], r["seed"]) for r in records}
    loaded = {}
    for seed in [int(s) for s in args.seeds.split(",")]:  # seed by seed: every set's first seed comes first
        for name in args.data.split(","):
            if name not in loaded:
                src = str(Path(args.data_dir) / ALIASES[name]) if name in ALIASES else name
                loaded[name] = load_dataset(src)
            data = loaded[name]
            query, database = data.query(), data.database()
            train = make_semi_paired(data.train(), args.ratio, random_state=seed)
            fit_all, held = holdout_pairs(train, random_state=seed)
            for b in [int(x) for x in args.bits.split(",")]:
                for cname, params in configs:
                    if (name, cname, b, seed) in done:
                        continue
                    fit_data = fit_all if params is not None else fit_all.subset(np.flatnonzero(fit_all.paired_mask))
                    t0 = time.perf_counter()
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        m = DMH(b, random_state=seed, **(params or {})).fit(fit_data)
                    fit_s = time.perf_counter() - t0
                    sc = score_model(m, held)
                    ev = evaluate_model(m, query, database)
                    rec = {"data": name, "config": cname, "params": params, "paired_only": params is None,
                           "n_bits": b, "seed": seed, "ratio": args.ratio, "fit_seconds": fit_s,
                           "stage_seconds": {k: sum(t.get(k, 0.0) for t in m.history_["time"])
                                             for k in ("cle", "gbe", "dam")},
                           "score": sc["score"], "selection": sc,
                           "map_i2t": ev["image->text"]["map"], "map_t2i": ev["text->image"]["map"]}
                    records.append(rec)
                    atomic_write_text(out, json.dumps(jsonable(records), indent=1))
                    print(f"{name} {b}b seed {seed} {cname:>14}: score {sc['score']:.4f}  "
                          f"MAP {rec['map_i2t']:.3f}/{rec['map_t2i']:.3f}  ({fit_s:.0f}s)", flush=True)


if __name__ == "__main__":
    main()
