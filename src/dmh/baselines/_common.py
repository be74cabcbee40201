"""Numerical helpers shared by the LSSH, STMH and FSH baselines.

Module-level pure functions, so that tests can check each against its definition (the lasso
solver against its optimality conditions, the dictionary update against the constraint, ...).
"""

from __future__ import annotations

import numbers
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.utils import check_random_state

from ..errors import DataError, ParameterError

__all__ = [
    "check_int",
    "check_real",
    "l2_normalize_rows",
    "lasso_fista",
    "lasso_objective",
    "make_rng",
    "paired_views",
    "project_rows_to_ball",
    "update_dictionary_rows",
    "warn_not_converged",
]


# ---------------------------------------------------------------------- parameter checks
def check_int(value, name: str, minimum: int = 1) -> int:
    """``value`` as an int >= ``minimum``, or a ValueError naming the hyperparameter."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ParameterError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def check_real(value, name: str, *, low: float = 0.0, low_inclusive: bool = True,
               high: float | None = None, high_inclusive: bool = True) -> float:
    """``value`` as a finite float in the given interval, or a ValueError naming it."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and np.isfinite(value)
    if ok:
        value = float(value)
        ok = value >= low if low_inclusive else value > low
        if ok and high is not None:
            ok = value <= high if high_inclusive else value < high
    if not ok:
        lo = "[" if low_inclusive else "("
        hi = ("]" if high_inclusive else ")") if high is not None else ")"
        raise ParameterError(
            f"{name} must be a finite number in {lo}{low}, {'inf' if high is None else high}{hi}, "
            f"got {value!r}"
        )
    return value


def make_rng(random_state) -> np.random.Generator:
    """A numpy Generator from ``None``, an int, a Generator or a legacy RandomState."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, numbers.Integral):
        return np.random.default_rng(random_state)
    legacy = check_random_state(random_state)
    return np.random.default_rng(legacy.randint(np.iinfo(np.int32).max))


def paired_views(data, method: str, min_paired: int, why: str) -> tuple[np.ndarray, np.ndarray]:
    """The image and text rows of the paired objects of ``data`` (the fully paired methods train
    on these only), after checking there are at least ``min_paired`` of them."""
    paired = data.paired_mask
    n = int(paired.sum())
    if n < min_paired:
        raise DataError(
            f"{method} trains on paired objects only and needs at least {min_paired} of them "
            f"({why}); the training data hold {n}"
        )
    return data.image[paired], data.text[paired]


def warn_not_converged(method: str, max_iter: int, detail: str = "") -> None:
    warnings.warn(
        f"{method} did not converge within max_iter={max_iter} iterations{detail}; "
        "increase max_iter or tol",
        ConvergenceWarning,
        stacklevel=3,
    )


# ---------------------------------------------------------------------- preprocessing
def l2_normalize_rows(X: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Each row divided by its Euclidean norm (rows of norm < ``eps`` are left unchanged)."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms < eps, 1.0, norms)


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
