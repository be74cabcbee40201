"""Won, tied or lost: comparing two rows of results cell by cell, with the noise over seeds counted.

A *cell* is one (dataset, code length, direction) of a run; each row has there one value per seed.
Two rows are compared on the seeds they share, by the per-seed differences ``d_s = a_s - b_s``
(paired by seed: the same seed gives both rows the same semi-paired training set and the same
split, so the difference removes what the seed does to both):

* **won** when the mean difference is above ``z`` standard errors of that mean, ``mean(d) > z *
  sd(d) / sqrt(n)`` (sample standard deviation, ``ddof=1``), and above zero;
* **lost** when it is below ``-z`` standard errors;
* **tied** otherwise, a tie being no win: the difference is within the noise of the seeds;
* **untested** with fewer than two shared seeds (no spread to test against).

``z = 2`` by default (:data:`Z`): a difference larger than twice its standard error, about a 90%
two-sided level with 5 seeds (Student's t with 4 degrees of freedom). Values equal to 4 decimals
count as equal, so a row compared with itself, or with an identical run, ties.

Against a *field* of rivals, a cell is won when it is won against every rival, lost when it is lost
against at least one, tied otherwise (:func:`field_outcome`).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

__all__ = ["OUTCOMES", "Z", "Comparison", "FieldComparison", "field_outcome", "outcome_counts_text",
           "paired_outcome"]

#: the standard errors a paired mean difference must exceed to count as a win or a loss
Z = 2.0
OUTCOMES = ("won", "tied", "lost", "untested")


@dataclass(frozen=True)
class Comparison:
    """One row against another in one cell: the mean per-seed difference ``diff`` (own minus
    rival), its standard error ``se`` (``nan`` with one seed), the number of shared seeds ``n`` and
    the ``outcome`` (one of :data:`OUTCOMES`)."""

    diff: float
    se: float
    n: int
    outcome: str


@dataclass(frozen=True)
class FieldComparison:
    """One row against several in one cell: the ``outcome`` against the field, and each rival's
    :class:`Comparison` in ``against`` (name -> comparison)."""

    outcome: str
    against: dict

    @property
    def lost_to(self) -> list[str]:
        return [name for name, c in self.against.items() if c.outcome == "lost"]


def paired_outcome(own: Mapping, rival: Mapping, *, z: float = Z) -> Comparison:
    """Compare ``own`` with ``rival`` (each ``{seed: value}``) on their shared seeds; see the module
    docstring for the test."""
    seeds = sorted(set(own) & set(rival))
    n = len(seeds)
    if n == 0:
        return Comparison(float("nan"), float("nan"), 0, "untested")
    d = np.array([round(float(own[s]), 4) - round(float(rival[s]), 4) for s in seeds])
    diff = float(d.mean())
    if n < 2:
        return Comparison(diff, float("nan"), n, "untested")
    se = float(d.std(ddof=1) / math.sqrt(n))
    if abs(diff) < 1e-9:
        outcome = "tied"
    elif diff > z * se:
        outcome = "won"
    elif diff < -z * se:
        outcome = "lost"
    else:
        outcome = "tied"
    return Comparison(diff, se, n, outcome)


def field_outcome(own: Mapping, rivals: Mapping[str, Mapping], *, z: float = Z) -> FieldComparison:
    """Compare ``own`` (``{seed: value}``) with every rival (``{name: {seed: value}}``): lost if lost
    to any, won if won against all, untested if any comparison is untested and none lost, else tied."""
    against = {name: paired_outcome(own, vals, z=z) for name, vals in rivals.items()}
    outcomes = [c.outcome for c in against.values()]
    if not outcomes:
        return FieldComparison("untested", against)
    if "lost" in outcomes:
        result = "lost"
    elif "untested" in outcomes:
        result = "untested"
    elif all(o == "won" for o in outcomes):
        result = "won"
    else:
        result = "tied"
    return FieldComparison(result, against)


def outcome_counts_text(counts: Counter, cells: int | None = None) -> str:
    """``"won 12, tied 5, lost 7 of 24"`` (``untested`` only when there are some)."""
    cells = sum(counts.values()) if cells is None else cells
    parts = [f"won {counts['won']}", f"tied {counts['tied']}", f"lost {counts['lost']}"]
    if counts.get("untested"):
        parts.append(f"untested {counts['untested']}")
    return ", ".join(parts) + f" of {cells}"
