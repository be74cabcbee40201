"""Do the label-free figures order candidate settings as test MAP does? Reads `dmh tune --test-map`
files and compares, over the candidates of each file (means over its seeds) and over every pair of
candidates within one seed, the held-out pair MRR (``score``) and the neighbourhood MAP
(``label_free.neighbourhood.map``) with the mean test MAP of the two directions. Test MAP is read
here only to validate the figures, never to choose.

    python research/studies/quality_score_check.py TUNE.json [TUNE.json ...] [--md OUT.md]
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

from dmh.selection import spearman


def _minus_mean_rank(r):
    """Minus the partner's mean rank (a fraction of the held-out objects; both directions): where
    the MRR is dominated by the top of the ranking (the very partner), the mean rank is moved by
    the bulk (how far off the partner lands)."""
    lf = r["label_free"]
    ranks = [lf[task]["mean_rank"] for task in ("image->text", "text->image") if "mean_rank" in lf.get(task, {})]
    return -float(np.mean(ranks)) if len(ranks) == 2 else None


def _recall(k):
    def fig(r):
        lf = r["label_free"]
        vals = [lf.get(task, {}).get(f"recall@{k}") for task in ("image->text", "text->image")]
        return None if None in vals else float(np.mean(vals))
    return fig


ALL_FIGURES = {"MRR": lambda r: r["label_free"]["score"],
               "neighbourhood": lambda r: r["label_free"].get("neighbourhood", {}).get("map"),
               "mean rank": _minus_mean_rank,
               **{f"recall@{k}": _recall(k) for k in (1, 5, 10)}}
FIGURES = tuple((name, ALL_FIGURES[name]) for name in ("MRR", "neighbourhood", "mean rank"))


def _mean_map(r) -> float:
    return float(np.mean(list(r["test_map"].values())))


def rows_of(path: Path, figures=FIGURES) -> list[dict]:
    doc = json.loads(path.read_text())
    recs = [r for r in doc["records"] if "test_map" in r]
    data = Path(doc["config"]["data"]).stem
    out = []
    for (bits, ratio), group in itertools.groupby(sorted(recs, key=lambda r: (r["n_bits"], r["paired_ratio"])),
                                                  key=lambda r: (r["n_bits"], r["paired_ratio"])):
        group = list(group)
        cands = sorted({r["candidate"] for r in group})
        seeds = sorted({r["seed"] for r in group})
        row = {"data": data, "bits": bits, "ratio": ratio, "candidates": len(cands), "seeds": seeds,
               "file": path.name}
        by = {(r["candidate"], r["seed"]): r for r in group}
        full = [c for c in cands if all((c, s) in by for s in seeds)]
        mean_map = [np.mean([_mean_map(by[(c, s)]) for s in seeds]) for c in full]
        row["best_map"] = max(mean_map) if mean_map else None
        for name, fig in figures:
            vals = [[fig(by[(c, s)]) for s in seeds] for c in full]
            if any(v is None for vs in vals for v in vs):
                row[name] = None
                continue
            means = [float(np.mean(v)) for v in vals]
            agree = total = 0
            for s in seeds:
                for a, b in itertools.combinations([c for c in cands if (c, s) in by], 2):
                    fa, fb = fig(by[(a, s)]), fig(by[(b, s)])
                    ma, mb = _mean_map(by[(a, s)]), _mean_map(by[(b, s)])
                    if fa != fb and ma != mb:
                        total += 1
                        agree += (fa > fb) == (ma > mb)
            chosen = int(np.argmax(means))
            row[name] = {"spearman": spearman(means, mean_map), "pairs_agree": agree, "pairs": total,
                         "chosen": full[chosen], "chosen_map": mean_map[chosen]}
        out.append(row)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", nargs="+")
    ap.add_argument("--md", default=None, help="also write the table here")
    ap.add_argument("--figures", default=",".join(n for n, _ in FIGURES),
                    help=f"comma-separated, of: {', '.join(ALL_FIGURES)}")
    args = ap.parse_args(argv)
    names = [n.strip() for n in args.figures.split(",")]
    unknown = [n for n in names if n not in ALL_FIGURES]
    if unknown or not names:
        ap.error(f"--figures: unknown {unknown}; known: {', '.join(ALL_FIGURES)}")
    figures = tuple((n, ALL_FIGURES[n]) for n in names)
    for f in args.files:
        try:
            doc = json.loads(Path(f).read_text())
            doc["config"]["data"], doc["records"]  # noqa: B018 - a tune results file has both
        except (OSError, ValueError, KeyError, TypeError) as exc:
            ap.error(f"{f} is not a readable `dmh tune` results file ({exc})")
    head = " | ".join(f"{name}: Spearman / pairs agreeing / MAP of its choice" for name, _ in figures)
    lines = [f"| data | bits | paired | candidates | seeds | {head} | best MAP | file |",
             "|---|---|---|---|---|" + "---|" * len(figures) + "---|---|"]
    totals = {name: [0, 0, 0.0, 0] for name, _ in figures}  # pairs agreeing, pairs, regret, rows
    for f in args.files:
        for r in rows_of(Path(f), figures):
            cells = []
            for name, _ in figures:
                v = r[name]
                if v is None:
                    cells.append("-")
                    continue
                rho = "n/a" if v["spearman"] is None else f"{v['spearman']:+.2f}"
                cells.append(f"{rho} / {v['pairs_agree']} of {v['pairs']} / {v['chosen_map']:.3f}")
                t = totals[name]
                t[0] += v["pairs_agree"]
                t[1] += v["pairs"]
                t[2] += r["best_map"] - v["chosen_map"]
                t[3] += 1
            seeds = ",".join(str(s) for s in r["seeds"])
            lines.append(f"| {r['data']} | {r['bits']} | {r['ratio']:g} | {r['candidates']} | {seeds} | "
                         f"{' | '.join(cells)} | {r['best_map']:.3f} | `{r['file']}` |")
    lines.append("")
    for name, (agree, pairs, regret, n) in totals.items():
        if n:
            lines.append(f"{name}: {agree} of {pairs} candidate pairs ordered as test MAP orders them; test MAP lost "
                         f"by its choices {regret:.3f} in all over {n} rows (mean {regret / n:.4f})")
    text = "\n".join(lines)
    print(text)
    if args.md:
        Path(args.md).write_text(text + "\n")


if __name__ == "__main__":
    main()
