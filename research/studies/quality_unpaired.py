"""Do the unpaired objects help? DMH at a given pairing ratio with the unpaired objects (under
candidate settings) against the same DMH on the paired half alone (research/log/quality.md
section 7).

    python research/studies/quality_unpaired.py --data uci-digits,wiki,fashion --seeds 0,1,2 --bits 16 \
        --config 'paired-only=paired_only' --config 'default={}' --config 'dam-paired={"unpaired_dam": false}' \
        --out research/results/quality/unpaired.json

Every fit uses the semi-paired training set (``make_semi_paired(train, ratio, seed)``) minus the
label-free held-out pairs (``holdout_pairs(..., random_state=seed)``, drawn from the paired
objects), so the configurations of one (data, seed) share the same held-out pairs and test set.
Records the held-out pair score (the label-free criterion) and test MAP (for diagnosis only).
Resumable: finished (data, config, bits, seed) records in ``--out`` are skipped.

    python research/studies/quality_unpaired.py --report research/results/quality/unpaired.json [--baseline paired-only]

prints the tables of research/log/quality.md from such a file: every record, the per-seed paired
differences of each configuration against ``--baseline`` (and against ``default``), and the Spearman
correlation, per (data, seed), between the label-free score and test MAP over the configurations.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings
from pathlib import Path

import numpy as np

from dmh import DMH, load_dataset, make_semi_paired
from dmh.report import atomic_write_text
from dmh.report import jsonable
from dmh.evaluation import evaluate_model
from dmh.selection import holdout_pairs, score_model

ALIASES = {"wiki": "wiki/wiki_data.mat", "fashion": "fashion/fashion_effl0.npz"}


def _config(spec: str):
    name, _, value = spec.partition("=")
    if value == "paired_only":
        return name, None
    return name, json.loads(value or "{}")


def _mean_map(r):
    return (r["map_i2t"] + r["map_t2i"]) / 2


def _row(*cells):
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _header(*cells):
    return [_row(*cells), "|" + "---|" * len(cells)]


def _per_seed(values):
    return " ".join(f"{x:+.3f}" for x in values)


def report(records, baselines=("paired-only", "default")):
    """Markdown tables of a results file (see the module docstring)."""
    from dmh.selection import spearman

    recs = {(r["data"], r["n_bits"], r["config"], r["seed"]): r for r in records}
    groups = sorted({(r["data"], r["n_bits"]) for r in records})
    configs = {g: list(dict.fromkeys(r["config"] for r in records if (r["data"], r["n_bits"]) == g)) for g in groups}
    lines = _header("data", "bits", "config", "seeds", "held-out MRR (per seed)", "test MAP I->T (per seed)",
                    "test MAP T->I (per seed)")
    for d, b in groups:
        for c in configs[(d, b)]:
            rs = [recs[k] for k in sorted(k for k in recs if k[:3] == (d, b, c))]
            cells = [" ".join(f"{r[key]:.3f}" for r in rs) for key in ("score", "map_i2t", "map_t2i")]
            lines.append(_row(d, b, c, ",".join(str(r["seed"]) for r in rs), *cells))
    for base in baselines:
        lines += ["", f"Paired differences against `{base}` (same data, seed and held-out pairs), per seed:", ""]
        lines += _header("data", "bits", "config", "seeds", "d MRR", "d MAP I->T", "d MAP T->I", "mean d I->T / T->I")
        for d, b in groups:
            for c in configs[(d, b)]:
                seeds = sorted(k[3] for k in recs if k[:3] == (d, b, c) and (d, b, base, k[3]) in recs)
                if c == base or not seeds:
                    continue
                diff = {key: [recs[(d, b, c, s)][key] - recs[(d, b, base, s)][key] for s in seeds]
                        for key in ("score", "map_i2t", "map_t2i")}
                mean = {key: sum(v) / len(v) for key, v in diff.items()}
                lines.append(_row(d, b, c, ",".join(map(str, seeds)), _per_seed(diff["score"]),
                                  _per_seed(diff["map_i2t"]), _per_seed(diff["map_t2i"]),
                                  f"{mean['map_i2t']:+.3f} / {mean['map_t2i']:+.3f}"))
    lines += ["", "Label-free score against test MAP (mean of the two tasks), over the configurations of one "
              "(data, seed):", ""]
    lines += _header("data", "bits", "seed", "configs", "Spearman", "chosen by score", "its MAP", "best MAP")
    for d, b in groups:
        for s in sorted({k[3] for k in recs if k[:2] == (d, b)}):
            rs = [r for k, r in recs.items() if k[:2] == (d, b) and k[3] == s]
            if len(rs) < 3:
                continue
            rho = spearman([r["score"] for r in rs], [_mean_map(r) for r in rs])
            best = max(rs, key=lambda r: r["score"])
            lines.append(_row(d, b, s, len(rs), "-" if rho is None else f"{rho:.2f}", best["config"],
                              f"{_mean_map(best):.3f}", f"{max(_mean_map(r) for r in rs):.3f}"))
    return "\n".join(lines)


def complement_check(data, ratio, seed, k=3):
    """How well each view's missing counterpart is predicted, on the paired objects (5-fold
    cross-validation over them; pairs only, no labels): relative squared error (1 = predicting the
    mean) of the average of the ``k`` nearest paired neighbours in the observed view (Eq. 5 with
    uniform weights; Eq. 5's weights come from Y) and of the ridge map of ``dmh.methods.unpaired``."""
    from sklearn.model_selection import KFold

    from dmh.methods import cle, unpaired

    train = make_semi_paired(data.train(), ratio, random_state=seed)
    masks = [train.image_mask, train.text_mask]
    views = [cle.scale_view(train.image, masks[0]), cle.scale_view(train.text, masks[1])]
    P = np.flatnonzero(masks[0] & masks[1])
    out = {}
    for v, name in ((1, "text from image"), (0, "image from text")):
        u = 1 - v
        err = {"neighbours": 0.0, "ridge": 0.0}
        total = 0.0
        for fit_i, test_i in KFold(5, shuffle=True, random_state=seed).split(P):
            a, t = P[fit_i], P[test_i]
            nb = cle.unpaired_neighbours(views[u][t], views[u][a], k)
            pred_nb = views[v][a][nb].mean(axis=1)
            m = [np.zeros(len(views[0]), bool), np.zeros(len(views[0]), bool)]
            m[u][np.r_[a, t]] = True
            m[v][a] = True
            pred_r = unpaired.ridge_complement(views, m)[v][t]
            total += float(np.sum((views[v][t] - views[v][a].mean(0)) ** 2))
            err["neighbours"] += float(np.sum((views[v][t] - pred_nb) ** 2))
            err["ridge"] += float(np.sum((views[v][t] - pred_r) ** 2))
        out[name] = {key: e / total for key, e in err.items()}
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="uci-digits,wiki,fashion")
    ap.add_argument("--data-dir", default=str(Path(__file__).resolve().parents[2] / ".." / "shared" / "data"))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--bits", default="16")
    ap.add_argument("--ratio", type=float, default=0.5)
    ap.add_argument("--config", action="append", default=[],
                    help="NAME=JSON params of DMH, or NAME=paired_only (default params, paired objects only)")
    ap.add_argument("--out")
    ap.add_argument("--report", help="print the tables of a results file and exit")
    ap.add_argument("--baseline", action="append", help="configurations to difference against")
    ap.add_argument("--complement-check", action="store_true",
                    help="print how well Eq. 5's neighbours and the ridge map predict a missing view, and exit")
    args = ap.parse_args(argv)
    if args.report:
        print(report(json.loads(Path(args.report).read_text()), tuple(args.baseline or ("paired-only", "default"))))
        return
    if args.complement_check:
        for name in args.data.split(","):
            src = str(Path(args.data_dir) / ALIASES[name]) if name in ALIASES else name
            for seed in [int(s) for s in args.seeds.split(",")]:
                res = complement_check(load_dataset(src), args.ratio, seed)
                print(name, seed, json.dumps({k: {m: round(x, 3) for m, x in v.items()} for k, v in res.items()}))
        return
    if not args.out:
        ap.error("--out is required (or --report)")
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
