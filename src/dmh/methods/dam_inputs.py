"""What DAM's networks are given and give back, as numpy arrays: per-column statistics without a copy
of the inputs (:func:`column_mean_std`), the standardised inputs computed when asked for
(:class:`Standardised`) and the hidden-layer features ``z^v`` that the next CLE round takes
(:func:`hidden_features`). PyTorch is imported only by :func:`hidden_features`."""

from __future__ import annotations

import numpy as np

__all__ = ["Standardised", "column_mean_std", "hidden_features"]


def column_mean_std(X: np.ndarray, rows: np.ndarray, step: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (population) standard deviation, in float64, of each column of ``X`` over the rows
    where the boolean ``rows`` is true: the values of ``X[rows].mean(0)`` and ``X[rows].std(0)`` on
    the float64 inputs, bit for bit (numpy sums a column's rows in order, so a running sum over
    blocks of rows adds the same numbers in the same order), but without a copy of ``X`` or an
    n x d float64 temporary, and the same for float32 inputs as for their float64 copy."""
    def blocks():
        idx = None if rows.all() else np.flatnonzero(rows)
        n = X.shape[0] if idx is None else idx.size
        for s in range(0, n, step):
            yield np.asarray(X[s : s + step] if idx is None else X[idx[s : s + step]], dtype=np.float64)

    def running_sum(parts):
        total = None
        for part in parts:  # the running total put first: the same additions, in the same order
            total = part.sum(0) if total is None else np.add.reduce(np.concatenate([total[None], part]), axis=0)
        return total

    count = int(rows.sum())
    mu = running_sum(blocks()) / count
    var = running_sum((b - mu) * (b - mu) for b in blocks()) / count
    return mu, np.sqrt(var)


class Standardised:
    """The networks' inputs ``(raw - mean) / scale`` of each modality (``scale`` per feature, or one
    for the view under ``dam_scaling``), computed when asked for
    (the same values every time) instead of kept: beyond 10^5 objects a kept copy of the inputs is
    gigabytes that CLE and GBE do not need."""

    def __init__(self, raws: dict, scalers: dict):
        self.raws, self.scalers = raws, scalers

    def __getitem__(self, m: str) -> np.ndarray:
        mu, sd = self.scalers[m]
        return (self.raws[m] - mu) / sd

    def float32(self, m: str, mask: np.ndarray | None = None, start: int = 0, stop: int | None = None,
                step: int = 8192) -> np.ndarray:
        """The rows of ``mask`` (all when None) as float32, computed by blocks of rows: the values the
        networks see (they cast to float32), without a float64 n x d_v temporary. ``start``,
        ``stop``: only those of them (positions among the rows of ``mask``; each row's values are
        the same however the rows are cut)."""
        raw = self.raws[m]
        mu, sd = self.scalers[m]
        rows = None if mask is None or mask.all() else np.flatnonzero(mask)
        total = raw.shape[0] if rows is None else rows.size
        stop = total if stop is None else min(stop, total)
        out = np.empty((max(stop - start, 0), raw.shape[1]), dtype=np.float32)
        for s in range(start, stop, step):
            e = min(s + step, stop)
            block = raw[s:e] if rows is None else raw[rows[s:e]]
            out[s - start : e - start] = (block - mu) / sd
        return out


def hidden_features(net, X_obs, mask: np.ndarray, width: int, rows_per_call: int = 8 * 2048) -> np.ndarray:
    """The hidden-layer features ``z^v`` of the observed objects (``X_obs``: their inputs, one row
    each, in order, or a function ``X_obs(start, stop)`` giving those rows, so that the whole input
    array is never held; zeros for the others), float32, written block by block into one n x width
    array (``dam.net_outputs``'s batches of 2048 rows are those of one call, so the values are too)."""
    from . import dam

    Z = np.zeros((mask.size, width), dtype=np.float32)  # exact: outputs are float32
    rows = np.flatnonzero(mask)
    for s in range(0, rows.size, rows_per_call):
        X_part = X_obs(s, s + rows_per_call) if callable(X_obs) else X_obs[s : s + rows_per_call]
        Z[rows[s : s + rows_per_call]] = dam.net_outputs(net, X_part, features=True)
    return Z
