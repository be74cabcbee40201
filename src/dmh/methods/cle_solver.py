"""CLE's Y-step (paper Eq. 25; Algorithm 1): the exact minimiser of Eq. 6 over ``Y`` by conjugate
gradients on its sparse Sylvester equation (:func:`y_update_exact`, float64 or float32), and Eq. 25
as printed (:func:`y_update_jacobi`). :func:`dmh.methods.cle.fit_cle` runs them; the objective and
the other steps are in :mod:`dmh.methods.cle`, whose docstring says when each is used.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

from ..errors import ParameterError


# ---------------------------------------------------------------------------------- Y (Eq. 25)
#: from this ``lambda_`` on, :func:`y_update_exact` iterates in the eigenbasis of ``A`` (see there)
ROTATE_MIN_LAM = 1.0


def y_update_exact(Zbars, Qs, Wm: sparse.csr_matrix, Y0: np.ndarray, lam: float, eta: float,
                   max_iter: int = 500, tol: float = 1e-8, overwrite: bool = False,
                   extra=None) -> np.ndarray:
    """Exact minimiser of Eq. 6 over Y: solves ``Y A + 2 lam M Y + 2 eta n Y = sum_v Zbar^v Q^v``,
    ``A = sum_v Q^v'Q^v``, ``M = (I - W)'(I - W)``, by conjugate gradients (warm-started at ``Y0``).

    From ``lam >=`` :data:`ROTATE_MIN_LAM` the iteration runs in the eigenbasis of the d x d matrix
    ``A + 2 eta n I = V diag(s) V'`` (``Y~ = Y V``): there the operator is ``Y~ diag(s) + 2 lam M
    Y~``, so an iteration costs O(nnz(M) d + n d) instead of the O(n d^2) of the product with
    ``A``. A large ``lam`` makes the system ill-conditioned (hundreds of iterations), which is where
    this pays (fig5's grid runs ``lambda_`` to 1000). The change of basis is orthogonal, so the
    iterates are the plain iteration's up to rounding; but rounding differences can still flip a
    code bit several stages later, so below the threshold (the default 0.1 included) the plain
    iteration runs, and the results recorded with it are reproduced bit for bit.

    ``overwrite=True`` lets the float32 plain iteration update ``Y0`` in place (one n x d array
    less; :func:`dmh.methods.cle.fit_cle` passes it, as it replaces its Y by the result anyway).

    ``extra``: views given by their terms instead, a list of ``(Zbar Q, Q'Q)`` (float64; the
    views held by their Gram matrices, :mod:`dmh.methods.cle_gram`). Where ``A`` is a multiple of
    the identity (every view's ``Q'Q = I`` exactly, as such a view's is) the product with it is a
    scaling."""
    n, d = Y0.shape
    extra = extra or []
    A = sum(Q.T @ Q for Q in Qs) + sum(QtQ for _, QtQ in extra) + 2.0 * eta * n * np.eye(d)
    IW = sparse.identity(n, format="csr") - Wm
    IWt = IW.T.tocsr()
    rotate = lam >= ROTATE_MIN_LAM
    if rotate:
        s, V = np.linalg.eigh((A + A.T) * 0.5)
    if Y0.dtype != np.float64:  # float32 (large n): every n x d array in float32, sums in float64
        if extra:
            raise ParameterError("y_update_exact: views given by their terms need float64")
        low = Y0.dtype
        if not rotate:
            return _cg_lowp(A.astype(low), IW.astype(low), IWt.astype(low), lam,
                            _sum_products(Zbars, [Q.astype(low) for Q in Qs]), Y0 if overwrite else Y0.copy(),
                            max_iter, max(tol, LOWP_CG_TOL), diagonal=False)
        Vl = V.astype(low)
        Yt = _cg_lowp(s.astype(low), IW.astype(low), IWt.astype(low), lam,
                      _sum_products(Zbars, [(Q @ V).astype(low) for Q in Qs]), Y0 @ Vl,
                      max_iter, max(tol, LOWP_CG_TOL), diagonal=True)
        return Yt @ Vl.T

    if rotate:
        def op(Y):
            return Y * s + 2.0 * lam * (IWt @ (IW @ Y))

        rhs = sum(Z @ (Q @ V) for Z, Q in zip(Zbars, Qs, strict=True)) + sum(R @ V for R, _ in extra)
        Y = Y0 @ V
    else:
        scalar = A[0, 0] if np.array_equal(A, A[0, 0] * np.eye(d)) else None

        def op(Y):
            return (Y * scalar if scalar is not None else Y @ A) + 2.0 * lam * (IWt @ (IW @ Y))

        rhs = sum(Z @ Q for Z, Q in zip(Zbars, Qs, strict=True)) + sum(R for R, _ in extra)
        Y = Y0.copy()
    R = rhs - op(Y)
    P = R.copy()
    rr = np.sum(R * R)
    stop = tol * tol * max(np.sum(rhs * rhs), np.finfo(float).tiny)
    for _ in range(max_iter):
        if rr <= stop:
            break
        AP = op(P)
        alpha = rr / np.sum(P * AP)
        Y += alpha * P
        R -= alpha * AP
        rr_new = np.sum(R * R)
        P = R + (rr_new / rr) * P
        rr = rr_new
    return Y @ V.T if rotate else Y


def _sum_products(Zs, Qs) -> np.ndarray:
    """``sum(Z @ Q for Z, Q in zip(Zs, Qs))``, the same values, in place: one n x d temporary at a
    time (``sum`` adds the first product to 0 into a new array, then each next into another)."""
    out = None
    for Z, Q in zip(Zs, Qs, strict=True):
        if out is None:
            out = Z @ Q
            out += 0  # as sum's 0 + first product: -0.0 becomes 0.0
        else:
            out += Z @ Q
    return out


#: rows of ``(I - W)'`` per sparse product in the float32 conjugate gradients' operator
CG_BLOCK_ROWS = 8192

#: relative residual at which the float32 conjugate gradients stop (float32 cannot reach 1e-8)
LOWP_CG_TOL = 1e-5


def _sq(X: np.ndarray) -> float:
    """``sum(X * X)`` accumulated in float64, by blocks of rows (no full-size temporary)."""
    return float(sum(np.einsum("ij,ij->", X[s : s + 8192], X[s : s + 8192], dtype=np.float64)
                     for s in range(0, X.shape[0], 8192)))


def _dot(X: np.ndarray, Y: np.ndarray) -> float:
    return float(sum(np.einsum("ij,ij->", X[s : s + 8192], Y[s : s + 8192], dtype=np.float64)
                     for s in range(0, X.shape[0], 8192)))


def _cg_lowp(A, IW, IWt, lam, rhs, Y0, max_iter, tol, diagonal: bool = False):
    """:func:`y_update_exact`'s conjugate gradients with the n x d arrays in ``Y0``'s (low)
    precision and the scalars in float64 (Python floats keep the arrays' dtype); stops at relative
    residual ``tol``. ``A`` is the d x d matrix, or with ``diagonal`` its eigenvalues (the iteration
    in its eigenbasis). ``rhs`` is overwritten (it becomes the residual), ``Y0`` is updated in place
    and returned."""
    step = CG_BLOCK_ROWS
    IWt_rows = [IWt[s : s + step] for s in range(0, IWt.shape[0], step)]  # a CSR row slice keeps each row's sum order

    def op(Y, out):
        """``Y @ A + (2 lam) * (IWt @ (IW @ Y))`` into ``out``, the same operations elementwise, with
        one more n x d array (``IW @ Y``) and a block of rows alive instead of three."""
        t = IW @ Y
        if diagonal:
            np.multiply(Y, A, out=out)
        else:
            np.matmul(Y, A, out=out)
        for i, rows in enumerate(IWt_rows):
            block = rows @ t
            block *= 2.0 * lam
            out[i * step : i * step + block.shape[0]] += block
        return out

    stop = tol * tol * max(_sq(rhs), np.finfo(float).tiny)
    Y = Y0
    R = rhs
    AP = op(Y, np.empty_like(Y))  # one buffer for every product of the iteration
    R -= AP
    P = R.copy()
    rr = _sq(R)
    for _ in range(max_iter):
        if rr <= stop:
            break
        op(P, AP)
        alpha = rr / _dot(P, AP)
        AP *= alpha  # R -= alpha * AP and Y += alpha * P, the same elementwise products, in AP's memory
        R -= AP
        np.multiply(P, alpha, out=AP)
        Y += AP
        rr_new = _sq(R)
        P *= rr_new / rr
        P += R
        rr = rr_new
    return Y


def y_update_jacobi(Zbars, Qs, Wm: sparse.csr_matrix, Y: np.ndarray, lam: float, eta: float) -> np.ndarray:
    """Eq. 25 as printed: neighbours ``y_ij`` taken from the current ``Y``."""
    n, d = Y.shape
    A = sum(Q.T @ Q for Q in Qs) + 2.0 * (lam + eta * n) * np.eye(d)
    rhs = sum(Z @ Q for Z, Q in zip(Zbars, Qs, strict=True)) + 2.0 * lam * (Wm @ Y)
    return np.linalg.solve(A, rhs.T).T
