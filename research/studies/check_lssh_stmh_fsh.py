"""Check the LSSH, STMH and FSH baselines on Wikipedia and the UCI two-view digits.

For every method, code length (16/32/64/128 bits) and seed (0..4) it fits on the training pairs
and scores cross-modal MAP over the whole retrieval set (relevant = same class):

* image->text: ``encode(query.image, "image")`` against ``encode(database.text, "text")``
* text->image: ``encode(query.text, "text")`` against ``encode(database.image, "image")``

and prints markdown tables (mean ± std over seeds) with the published LSSH numbers on Wikipedia
(SePH, CVPR 2015, reprinted by LCMFH). Two extra rows reproduce the retrieval sets the authors'
own code builds, to explain gaps (see docs/baselines.md):

* ``LSSH (paired db)``: database codes from both modalities of each retrieval pair
  (:meth:`dmh.baselines.lssh.LSSH.encode_paired`), as the authors' LSSH evaluation code does;
* ``STMH (text db)``: the text-side codes serve as database codes in both directions, as the
  authors' STMH code does (its database codes are the training topic indicators).

Usage (from the repository root; a full run takes tens of minutes on 2 busy cores)::

    nice -n 10 python research/studies/check_lssh_stmh_fsh.py
    python research/studies/check_lssh_stmh_fsh.py --methods fsh --datasets uci --bits 16 32 --seeds 0 1
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
from sklearn.exceptions import ConvergenceWarning

import dmh
from dmh.methods import make_method

DATA_DIR = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
DATASETS = {
    "wiki": ("Wikipedia (2173 train/db, 693 queries)", Path("wiki") / "wiki_data.mat"),
    "uci": ("UCI two-view digits (1500 train/db, 500 queries)",
            Path("uci_handwritten") / "uci_all.mat"),
}
METHODS = ("lssh", "stmh", "fsh")
BITS = (16, 32, 64, 128)
SEEDS = (0, 1, 2, 3, 4)

#: published LSSH MAP on Wikipedia (SePH, CVPR 2015, Table 2; reprinted by LCMFH)
PUBLISHED = {
    ("wiki", "lssh", "image->text"): (0.214, 0.221, 0.221, 0.221),
    ("wiki", "lssh", "text->image"): (0.503, 0.522, 0.529, 0.534),
}


def evaluate(method: str, data, n_bits: int, seed: int) -> dict[str, float]:
    train, query, db = data.train(), data.query(), data.database()
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ConvergenceWarning)
        model = make_method(method, n_bits=n_bits, random_state=seed).fit(train)
    fit_s = time.perf_counter() - t0
    mAP = dmh.mean_average_precision
    q_img, q_txt = model.encode(query.image, "image"), model.encode(query.text, "text")
    db_img, db_txt = model.encode(db.image, "image"), model.encode(db.text, "text")
    out = {
        "image->text": mAP(q_img, db_txt, query.labels, db.labels),
        "text->image": mAP(q_txt, db_img, query.labels, db.labels),
        "fit_s": fit_s,
        "n_iter": float(model.n_iter_),
        "warned": float(any(issubclass(w.category, ConvergenceWarning) for w in caught)),
    }
    if method == "lssh":
        db_pair = model.encode_paired(db.image, db.text)
        out["paired db: image->text"] = mAP(q_img, db_pair, query.labels, db.labels)
        out["paired db: text->image"] = mAP(q_txt, db_pair, query.labels, db.labels)
    if method == "stmh":
        out["text db: image->text"] = out["image->text"]
        out["text db: text->image"] = mAP(q_txt, db_txt, query.labels, db.labels)
    return out


def fmt(values) -> str:
    v = np.asarray(values, dtype=float)
    return f"{v.mean():.3f} ± {v.std():.3f}"


def table(key: str, results: dict, bits, methods) -> list[str]:
    lines = ["| method | task | " + " | ".join(f"{b} bits" for b in bits) + " |",
             "|---|---|" + "---|" * len(bits)]
    for method in methods:
        for task in ("image->text", "text->image"):
            cells = [fmt([r[task] for r in results[method, b]]) for b in bits]
            lines.append(f"| {method.upper()} | {task} | " + " | ".join(cells) + " |")
            pub = PUBLISHED.get((key, method, task))
            if pub is not None:
                idx = [BITS.index(b) for b in bits]
                lines.append(f"| LSSH published (SePH) | {task} | "
                             + " | ".join(f"{pub[i]:.3f}" for i in idx) + " |")
        extra = {"lssh": "paired db", "stmh": "text db"}.get(method)
        if extra:
            for task in ("image->text", "text->image"):
                cells = [fmt([r[f"{extra}: {task}"] for r in results[method, b]]) for b in bits]
                lines.append(f"| {method.upper()} ({extra}) | {task} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("| method | " + " | ".join(f"{b} bits" for b in bits) + " |")
    lines.append("|---|" + "---|" * len(bits))
    for method in methods:
        cells = []
        for b in bits:
            rs = results[method, b]
            warned = int(sum(r["warned"] for r in rs))
            cells.append(f"{np.mean([r['fit_s'] for r in rs]):.1f} s, {np.mean([r['n_iter'] for r in rs]):.0f} it"
                         + (f", {warned}/{len(rs)} hit max_iter" if warned else ""))
        lines.append(f"| {method.upper()} fit time, iterations | " + " | ".join(cells) + " |")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--methods", nargs="+", default=list(METHODS), choices=METHODS)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=list(DATASETS))
    parser.add_argument("--bits", nargs="+", type=int, default=list(BITS), choices=BITS)
    parser.add_argument("--seeds", nargs="+", type=int, default=list(SEEDS))
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    for key in args.datasets:
        title, rel = DATASETS[key]
        path = args.data_dir / rel
        if not path.exists():
            print(f"## {title}\n\nskipped: data file absent ({path})\n", flush=True)
            continue
        data = dmh.load_dataset(path)
        results = {}
        for method in args.methods:
            for b in args.bits:
                results[method, b] = []
                for seed in args.seeds:
                    r = evaluate(method, data, b, seed)
                    results[method, b].append(r)
                    print(f"# {key} {method} {b} bits seed {seed}: i->t {r['image->text']:.4f} "
                          f"t->i {r['text->image']:.4f} ({r['fit_s']:.1f} s)", file=sys.stderr,
                          flush=True)
        print(f"## {title}\n\nMAP over the whole retrieval set, mean ± std over seeds "
              f"{', '.join(map(str, args.seeds))}.\n")
        print("\n".join(table(key, results, args.bits, args.methods)) + "\n", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
