"""The timer of a DMH fit: seconds per stage of each round (``DMH.history_["time"]``) and a
progress bar over the stages."""

from __future__ import annotations

import time
from contextlib import contextmanager

__all__ = ["StageClock"]


class StageClock:
    """The one timer of a fit: seconds per stage of each round, into ``rounds`` (a list that gets a
    dict per round: ``history_["time"]``), and with ``verbose`` a progress bar over the stages."""

    def __init__(self, rounds: list, n_stages: int, verbose: bool):
        self.rounds = rounds
        self.bar = None
        if verbose:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=n_stages, desc="DMH", unit="stage", leave=False, disable=None)

    def new_round(self) -> None:
        self.rounds.append({})

    @contextmanager
    def stage(self, key: str, step: bool = False):
        """Time the block as ``key`` of this round (``step``: one stage of the progress bar)."""
        t0 = time.perf_counter()
        yield
        self.rounds[-1][key] = time.perf_counter() - t0
        if step:
            self.advance(1)

    def add(self, prefix: str, parts: dict) -> None:
        """Parts of a stage timed inside it (CLE's and GBE's steps), under ``prefix``."""
        self.rounds[-1].update({prefix + key: v for key, v in parts.items()})

    def advance(self, n: int) -> None:
        if self.bar:
            self.bar.update(n)

    def end_round(self) -> None:
        if self.bar:
            t = self.rounds[-1]
            self.bar.set_postfix({k: f"{t[k]:.1f}s" for k in ("cle", "gbe", "dam") if k in t})

    def close(self) -> None:
        if self.bar:
            self.bar.close()
