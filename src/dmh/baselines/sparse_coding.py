"""Sparse coding for the LSSH and STMH baselines: the lasso (FISTA) and the norm-constrained dictionary update.

Module-level pure functions, so that tests can check each against its definition (the lasso
solver against its optimality conditions, the dictionary update against the constraint, ...).
"""

from __future__ import annotations

import numpy as np

__all__ = ["lasso_fista", "lasso_objective", "project_rows_to_ball", "update_dictionary_rows"]


# ---------------------------------------------------------------------- sparse coding
def lasso_objective(X: np.ndarray, S: np.ndarray, D: np.ndarray, lam: float) -> np.ndarray:
    """Per-row value of ``||x_i - s_i D||^2 + lam * ||s_i||_1`` (rows are samples, D's rows atoms)."""
    R = X - S @ D
    return np.einsum("ij,ij->i", R, R) + lam * np.abs(S).sum(axis=1)


def _soft_inplace(V: np.ndarray, t: float) -> np.ndarray:
    """Soft thresholding ``sign(v) max(|v| - t, 0)`` written as ``v - clip(v, -t, t)``, in place."""
    V -= np.clip(V, -t, t)
    return V


def lasso_fista(X: np.ndarray, D: np.ndarray, lam: float, S0: np.ndarray | None = None,
                max_iter: int = 200, tol: float = 1e-4) -> np.ndarray:
    """Sparse codes ``S`` minimising ``sum_i ||x_i - s_i D||^2 + lam ||s_i||_1`` for every row.

    ``X`` is (n, m), ``D`` (K, m) holds one atom per row; returns ``S`` (n, K). FISTA (Beck &
    Teboulle 2009) on all rows at once, started from ``S0`` (zeros when None). FISTA is not monotone,
    so each row's result is compared with its start and the better of the two is kept: a row's
    objective never exceeds its value at ``S0``, which keeps the alternating fits that call this
    monotone although each lasso is solved only approximately. Stops when no code moves by more
    than ``tol`` times the largest code (checked every 5 iterations) or after ``max_iter``.
    """
    n, K = X.shape[0], D.shape[0]
    S = np.zeros((n, K)) if S0 is None else np.array(S0, dtype=np.float64, copy=True)
    if n == 0:
        return S
    L = 2.0 * _largest_sq_singular_value(D)  # Lipschitz constant of the gradient
    if L <= 0.0:
        return np.zeros((n, K))
    # The iterations run in float32 (they are memory-bound); objectives are compared in float64.
    f32 = np.float32
    # gradient step  V - grad(V) / L  =  V - (2/L) (V D D' - X D')
    XDt = ((X @ D.T) * (2.0 / L)).astype(f32)
    if K <= 2 * D.shape[1]:
        G = ((D @ D.T) * (2.0 / L)).astype(f32)
        D1 = D2 = None
    else:
        G = None
        D1 = np.ascontiguousarray(D, dtype=f32)
        D2 = np.ascontiguousarray(D.T * (2.0 / L), dtype=f32)
    thr = f32(lam / L)
    Y = S.astype(f32)
    S_prev = Y.copy()
    t = 1.0
    for it in range(1, max_iter + 1):
        Z = Y - (Y @ G if G is not None else (Y @ D1) @ D2)
        Z += XDt
        _soft_inplace(Z, thr)
        t_new = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        # Y = Z + (t - 1)/t_new (Z - S_prev)
        Y = Z - S_prev
        Y *= f32((t - 1.0) / t_new)
        Y += Z
        if it % 5 == 0 or it == max_iter:
            change = float(np.abs(Z - S_prev).max())
            if change <= tol * max(float(np.abs(Z).max()), 1e-12):
                S_prev = Z
                break
        S_prev, t = Z, t_new
    S_new = S_prev.astype(np.float64)
    if S0 is not None:
        worse = lasso_objective(X, S_new, D, lam) > lasso_objective(X, S, D, lam)
        if worse.any():
            S_new[worse] = S[worse]
    return S_new


def _largest_sq_singular_value(D: np.ndarray) -> float:
    """``||D||_2^2`` from the eigenvalues of the smaller Gram matrix (cheaper than an SVD)."""
    G = D.T @ D if D.shape[0] >= D.shape[1] else D @ D.T
    return float(np.linalg.eigvalsh(G)[-1]) if G.size else 0.0


# ---------------------------------------------------------------------- dictionary update
def project_rows_to_ball(B: np.ndarray, radius: float = 1.0) -> np.ndarray:
    """Rows with Euclidean norm above ``radius`` scaled back onto the sphere of that radius."""
    norms = np.linalg.norm(B, axis=1, keepdims=True)
    return B * np.minimum(1.0, radius / np.maximum(norms, 1e-300))


def update_dictionary_rows(X: np.ndarray, S: np.ndarray, B: np.ndarray, n_sweeps: int = 3,
                           radius: float = 1.0) -> np.ndarray:
    """Block-coordinate descent for ``min_B ||X - S B||^2  s.t. ||b_j|| <= radius`` (rows ``b_j``).

    Each atom's update is the exact minimiser over that atom with the others fixed: the
    unconstrained least-squares solution projected onto the ball (the problem in ``b_j`` is an
    isotropic quadratic, so projection is exact). The objective therefore never increases; the
    solution is the one the Lagrange dual of Lee et al. (NIPS 2006) reaches, obtained by a
    different route. Atoms no sample uses are left unchanged.
    """
    B = project_rows_to_ball(np.array(B, dtype=np.float64, copy=True), radius)
    G = S.T @ S  # (K, K)
    C = S.T @ X  # (K, m)
    diag = np.diag(G).copy()
    for _ in range(n_sweeps):
        for j in np.flatnonzero(diag > 1e-12):
            # residual correlation for atom j with atom j itself excluded
            target = (C[j] - G[j] @ B) / diag[j] + B[j]
            norm = np.linalg.norm(target)
            B[j] = target if norm <= radius else target * (radius / norm)
    return B
