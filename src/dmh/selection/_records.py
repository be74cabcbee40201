"""The analysis of ``dmh tune``'s records: one row per candidate and bit length
(:func:`summarize_candidates`), the choice by a rule (:func:`choose`), the paired difference of two candidates'
held-out pair scores (:func:`paired_score_difference`), the check of the criterion against test MAP
(:func:`rank_correlations`) and the reading of a results file (:func:`load_records`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..errors import DataError
from ..heldout import Scores, best_mean, mean_and_standard_error

__all__ = ["RecordScores", "choose", "load_records", "paired_score_difference", "rank_correlations", "spearman",
           "summarize_candidates"]


def spearman(x, y) -> float | None:
    """Spearman rank correlation (average ranks for ties); ``None`` with fewer than 3 values or a
    constant input."""
    from scipy.stats import spearmanr

    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(spearmanr(x, y).statistic)


def summarize_candidates(records: Sequence[dict]) -> list[dict]:
    """One row per (candidate, bits): the mean label-free score over seeds (and the mean test MAP
    where recorded, for reports only)."""
    groups: dict = {}
    for r in records:
        groups.setdefault((r["candidate"], r["n_bits"], r["paired_ratio"]), []).append(r)
    rows = []
    for (cand, b, p), rs in groups.items():
        row = {"candidate": cand, "params": rs[0]["params"], "n_bits": b, "paired_ratio": p,
               "n_seeds": len(rs), "score": float(np.mean([r["label_free"]["score"] for r in rs]))}
        if all("neighbourhood" in r["label_free"] for r in rs):
            row["neighbourhood_map"] = float(np.mean([r["label_free"]["neighbourhood"]["map"] for r in rs]))
        for key in ("bit_balance", "mean_abs_corr", "distinct"):
            row[key] = float(np.mean([(r["label_free"]["health_image"][key] + r["label_free"]["health_text"][key]) / 2
                                      for r in rs]))
        if all("test_map" in r for r in rs):
            row["test_map"] = float(np.mean([np.mean(list(r["test_map"].values())) for r in rs]))
        rows.append(row)
    rows.sort(key=lambda r: (r["paired_ratio"], r["n_bits"], -r["score"]))
    return rows


class RecordScores(Scores):
    """:class:`dmh.heldout.Scores` of a tune's records: a candidate's mean is its label-free score
    averaged over every bit length and seed run; the difference of two, paired by held-out pair, is
    :func:`paired_score_difference`."""

    def __init__(self, records: Sequence[dict]):
        by_cand: dict = {}
        for r in records:
            by_cand.setdefault(r["candidate"], []).append(r["label_free"]["score"])
        super().__init__({c: float(np.mean(v)) for c, v in by_cand.items()})
        self.records = list(records)

    def difference(self, a: str, b: str) -> tuple[float, float] | None:
        d = paired_score_difference(self.records, a, b)
        return None if d is None else (d["difference"], d["se"])


def choose(records: Sequence[dict], rule: Callable[[Scores], str] = best_mean) -> dict:
    """The chosen candidate: by ``rule`` (:func:`dmh.heldout.best_mean`, ``dmh tune``'s: the highest
    label-free score averaged over every bit length and seed run, one setting for all code lengths;
    :func:`dmh.heldout.one_standard_error`, or any callable of :class:`RecordScores`). Never reads
    test MAP.

    ``others`` sets every other candidate beside it, best first: its score, and, where the records
    hold each held-out pair's reciprocal rank (``pair_rr``, written by :func:`dmh.selection.tune`),
    the chosen candidate's lead over it as a paired difference with its standard error
    (:func:`paired_score_difference`) and whether that lead is within one standard error, i.e.
    whether the held-out pairs can tell the two apart."""
    scores = RecordScores(records)
    best = rule(scores)
    mean = scores.means
    others = []
    for c in sorted((c for c in mean if c != best), key=lambda c: -mean[c]):
        row = {"candidate": c, "score": mean[c], "lead": None, "lead_se": None, "within_one_se": None}
        d = scores.difference(best, c)
        if d is not None:
            row.update(lead=d[0], lead_se=d[1], within_one_se=bool(d[0] <= d[1]))
        others.append(row)
    return {"candidate": best, "params": json.loads(best), "score": mean[best], "others": others}


def paired_score_difference(records: Sequence[dict], a: str, b: str) -> dict | None:
    """Candidate ``a``'s held-out pair score minus ``b``'s, paired by held-out pair: per seed (one
    set of held-out pairs), each pair's reciprocal rank under ``a`` minus under ``b`` averaged over
    the bit lengths both have; the mean of these differences over every (seed, pair), and its
    standard error (their standard deviation over the square root of their number). ``None`` where
    the two share no (bits, seed) fit or a record lacks ``pair_rr`` (a file written before it was
    recorded)."""
    def fits(c):
        return {(r["seed"], r["n_bits"]): r["label_free"].get("pair_rr") for r in records if r["candidate"] == c}

    fa, fb = fits(a), fits(b)
    common = sorted(set(fa) & set(fb))
    if not common or any(fa[k] is None or fb[k] is None or len(fa[k]) != len(fb[k]) for k in common):
        return None
    per_seed: dict = {}
    for seed, n_bits in common:
        per_seed.setdefault(seed, []).append(np.asarray(fa[seed, n_bits]) - np.asarray(fb[seed, n_bits]))
    if any(len({len(d) for d in diffs}) > 1 for diffs in per_seed.values()):
        return None  # not the same held-out pairs at every length of a seed
    units = np.concatenate([np.mean(diffs, axis=0) for diffs in per_seed.values()])
    mean, se = mean_and_standard_error(units)
    return {"difference": mean, "se": se, "n": int(units.size)}


def rank_correlations(records: Sequence[dict]) -> list[dict]:
    """Validation of the criterion: per (bits, paired ratio), the Spearman correlation over candidates
    between the mean label-free score and the mean test MAP (records made with ``test_map=True``)."""
    rows = summarize_candidates(records)
    out = []
    for key in sorted({(r["n_bits"], r["paired_ratio"]) for r in rows}):
        sel = [r for r in rows if (r["n_bits"], r["paired_ratio"]) == key and "test_map" in r]
        rho = spearman([r["score"] for r in sel], [r["test_map"] for r in sel])
        row = {"n_bits": key[0], "paired_ratio": key[1], "n_candidates": len(sel), "spearman": rho}
        if sel and all("neighbourhood_map" in r for r in sel):
            row["spearman_neighbourhood"] = spearman([r["neighbourhood_map"] for r in sel],
                                                     [r["test_map"] for r in sel])
        out.append(row)
    return out


def load_records(path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    try:
        records = list(json.loads(path.read_text())["records"])
        malformed = [i for i, rec in enumerate(records)
                     if isinstance(rec, dict) and "key" in rec and not isinstance(json.loads(rec["key"]), dict)]
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path} is not a tune results file ({exc})") from None
    for i, rec in enumerate(records):
        missing = [f for f in _RECORD_FIELDS if not isinstance(rec, dict) or f not in rec]
        if missing:
            raise DataError(f"{path} is not a tune results file (record {i} lacks {missing})")
    if malformed:
        raise DataError(f"{path} is not a tune results file (record {malformed[0]} has a malformed key)")
    for i, rec in enumerate(records):  # optional (files before it lack it), but numbers where present
        rr = rec["label_free"].get("pair_rr") if isinstance(rec["label_free"], dict) else None
        if rr is not None and not (isinstance(rr, list) and all(isinstance(x, (int, float)) for x in rr)):
            raise DataError(f"{path} is not a tune results file (record {i}'s pair_rr is not a list of numbers)")
    return records


#: what every record of a tune results file holds (its ``key`` too, from this dmh on)
_RECORD_FIELDS = ("candidate", "params", "n_bits", "seed", "paired_ratio", "label_free")
