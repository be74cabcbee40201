"""DMH-PCA, the binary-embedding ablation of DMH (``binary_embedding="pca"``): the sign of ``Y``'s
projections on its top principal directions instead of GBE, each round's bits aligned with the
previous round's."""

from __future__ import annotations

import numpy as np

__all__ = ["align_bits", "pca_codes"]


def align_bits(H: np.ndarray, H_ref: np.ndarray) -> np.ndarray:
    """Permute and flip the bits (columns) of ``H`` to agree best with ``H_ref``: the assignment
    maximising the total absolute agreement, then each bit's sign to make its agreement positive."""
    from scipy.optimize import linear_sum_assignment

    C = H.astype(np.int64).T @ H_ref.astype(np.int64)  # (bits of H) x (bits of H_ref)
    rows, cols = linear_sum_assignment(-np.abs(C))
    out = np.empty_like(H)
    for r, c in zip(rows, cols, strict=True):
        out[:, c] = H[:, r] if C[r, c] >= 0 else -H[:, r]
    return out


def pca_codes(Y: np.ndarray, n_bits: int) -> np.ndarray:
    """DMH-PCA: sign of the projections of centred Y on its top ``n_bits`` principal directions
    (directions beyond the rank of Y give constant bits)."""
    Yc = Y - Y.mean(0)
    _, _, Vt = np.linalg.svd(Yc, full_matrices=False)
    P = np.zeros((Y.shape[1], n_bits))
    r = min(n_bits, Vt.shape[0])
    P[:, :r] = Vt[:r].T
    return np.where(Yc @ P > 0, 1, -1).astype(np.int8)
