"""Complemented Local Embedding (CLE; paper Eqs. 2-6, 14-25, Algorithm 1), in numpy.

Objective (Eq. 6), with ``n`` objects, views ``v = 1, 2``, descriptions ``Z^v`` (n x d_v, missing
rows complemented into ``Zbar^v``), modality-invariant features ``Y`` (n x d), projections
``Q^v`` (d_v x d) and neighbour weights ``W`` (n x k, rows sum to one)::

    l1 = 1/(2n) sum_v ||Zbar^v - Y Q^v'||^2  +  lambda/n ||Y - W Y||^2  +  eta ||Y||^2
    s.t. Q^v' Q^v = I,  sum_j W_ij = 1

Each function below implements one step of Algorithm 1 and is tested against its definition; the
Y-step (Eq. 25 and the exact minimiser of Eq. 6 over ``Y``) is in :mod:`dmh.methods.cle_solver`.

Choices where the paper is silent or loose (each an option of :func:`fit_cle`):

* ``q_update="procrustes"`` (default): the exact minimiser of the Q-subproblem under its
  constraint, i.e. the orthogonal Procrustes solution ``polar(Zbar' Y)`` when ``d_v >= d``. When a
  view has fewer dimensions than ``d`` (the Wikipedia text is 10-d, d = 512), no ``d_v x d`` matrix
  has orthonormal columns; we then require orthonormal *rows* (``Q Q' = I``, the nearest
  semi-orthogonal matrix) and minimise with generalised power iterations (Nie et al., 2017), which
  never increase the objective. ``"paper"`` orthogonalises Eq. 16 (``polar(Zbar'Y (Y'Y)^-1)``)
  as the paper does; it is not guaranteed to decrease the objective.
* ``y_update="exact"`` (default): the exact minimiser over ``Y`` of Eq. 6 (a sparse Sylvester
  equation, solved by conjugate gradients), so every step of Algorithm 1 that minimises something
  decreases the objective. ``"jacobi"`` is Eq. 25 literally, which treats the neighbours
  ``y_ij`` as constants; it can increase the objective.
* ``W`` (Eq. 22) is solved with ``A_i + w_reg * tr(A_i) I`` (``w_reg = 0.1``; ``0`` gives Eq. 22
  exactly, regularised only where ``A_i`` is singular). Without it CLE does not settle on
  semi-paired data: an unpaired object's ``y_i`` is pulled into the affine hull of its neighbours
  by both its complemented description (Eq. 5) and the local term, which makes ``A_i`` nearly
  singular and its weights large, and the complement step feeds them back. Measured on Wikipedia
  at 50% pairing: with ``w_reg = 1e-3`` Eq. 6 rose from 0.781 to 0.927 over 30 iterations and
  weights reached 3.7 in magnitude (24 without regularisation); with ``0.1`` it settled at 0.789.
* Neighbours of a paired object: ``neighbour_pool`` nearest paired objects in each description
  space; those in both lists come first, ordered by the sum of their two ranks; when fewer than
  ``k`` are common, the list is filled with the remaining candidates by the same order (a
  candidate missing from one list counts with rank ``neighbour_pool`` there). Neighbours of an
  unpaired object: its ``k`` nearest paired objects in its own modality.
* The complement step (Eq. 5) is an imputation rule, not a minimisation of Eq. 6, and is not
  monotone; the objective history is recorded after every full iteration.
"""

from __future__ import annotations

import time
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field

import numpy as np
from scipy import sparse
from sklearn.exceptions import ConvergenceWarning
from threadpoolctl import threadpool_limits

from ..errors import ParameterError
from . import cle_gram
from .cle_solver import (  # noqa: F401 - CLE's Y-step
    CG_BLOCK_ROWS,
    LOWP_CG_TOL,
    ROTATE_MIN_LAM,
    _sq,
    y_update_exact,
    y_update_jacobi,
)
from .knn import find_neighbours, paired_neighbours, unpaired_neighbours  # noqa: F401 - CLE's neighbours


def polar(M: np.ndarray) -> np.ndarray:
    """Nearest matrix with orthonormal columns (or rows, when wide): ``U V'`` of the thin SVD."""
    wide = M.shape[0] < M.shape[1]
    G = M @ M.T if wide else M.T @ M
    with threadpool_limits(1):  # a small eigenproblem: threads only add synchronisation cost
        lam, V = np.linalg.eigh((G + G.T) * 0.5)
    if lam[0] > 1e-10 * max(lam[-1], np.finfo(float).tiny):
        inv_sqrt = (V / np.sqrt(lam)) @ V.T
        return inv_sqrt @ M if wide else M @ inv_sqrt
    U, _, Vt = np.linalg.svd(M, full_matrices=False)  # rank deficient: the SVD form is well defined
    return U @ Vt


# ---------------------------------------------------------------------------------- W (Eq. 22)
def lle_weights(Y: np.ndarray, nbrs: np.ndarray, w_reg: float = 0.1, rcond: float = 1e-10,
                singular_reg: float = 1e-3) -> np.ndarray:
    """Eq. 22: ``W_i = A_i^-1 1 / (1' A_i^-1 1)`` with ``A_i = B_i' B_i``, ``B_i = [y_i - y_ij]_j``,
    with ``A_i`` replaced by ``A_i + w_reg * tr(A_i) I`` (``w_reg = 0``: Eq. 22 exactly).

    ``nbrs`` (n x k) holds global row indices into ``Y``. Rows whose ``A_i`` is singular (smallest
    eigenvalue below ``rcond`` times the largest) get at least ``singular_reg * tr(A_i)``; rows with
    ``A_i = 0`` (all neighbours equal to ``y_i``) get uniform weights.
    """
    n, k = nbrs.shape
    if Y.dtype == np.float64:
        Bt = Y[:, None, :] - Y[nbrs]  # (n, k, d): rows of B_i'
        A = np.einsum("nkd,nld->nkl", Bt, Bt)
    else:  # float32 Y (large n): the n x k x d differences by blocks of rows, the k x k Gram in float64
        A = np.empty((n, k, k))
        for s in range(0, n, 8192):
            Bt = Y[s : s + 8192, None, :] - Y[nbrs[s : s + 8192]]
            A[s : s + 8192] = np.einsum("nkd,nld->nkl", Bt, Bt, dtype=np.float64)
    eig = np.linalg.eigvalsh(A)
    tr = np.trace(A, axis1=1, axis2=2)
    singular = eig[:, 0] <= rcond * np.maximum(eig[:, -1], np.finfo(float).tiny)
    ridge = np.where(singular, max(w_reg, singular_reg), w_reg) * np.maximum(tr, np.finfo(float).tiny)
    if np.any(ridge > 0):
        A += ridge[:, None, None] * np.eye(k)
    w = np.linalg.solve(A, np.ones((n, k, 1)))[..., 0]
    s = w.sum(axis=1, keepdims=True)
    bad = ~np.isfinite(w).all(axis=1) | (np.abs(s[:, 0]) < 1e-300) | (tr <= 0)
    w = np.divide(w, s, out=np.full_like(w, 1.0 / k), where=~bad[:, None])
    w[bad] = 1.0 / k
    return w


def weight_matrix(nbrs: np.ndarray, w: np.ndarray, n: int) -> sparse.csr_matrix:
    rows = np.repeat(np.arange(n), nbrs.shape[1])
    return sparse.csr_matrix((w.ravel(), (rows, nbrs.ravel())), shape=(n, n))


# ---------------------------------------------------------------------------------- Q (Eq. 16)
def q_update(Zbar: np.ndarray, Y: np.ndarray, Q_prev: np.ndarray | None, method: str = "procrustes",
             max_inner: int = 20, tol: float = 1e-9, M: np.ndarray | None = None) -> np.ndarray:
    """Update Q^v (d_v x d) for one view; see the module docstring for the two methods.
    ``M = Zbar' Y`` may be passed when already computed."""
    d_v, d = Zbar.shape[1], Y.shape[1]
    if M is None:
        M = Zbar.T @ Y  # d_v x d
    if method == "paper":
        C = (Y.T @ Y).astype(np.float64, copy=False)
        return polar(np.linalg.solve(C + 1e-12 * np.trace(C) * np.eye(d), M.T).T)
    if method != "procrustes":
        raise ParameterError(f"q_update must be 'procrustes' or 'paper', got {method!r}")
    if d_v >= d:
        return polar(M)
    # orthonormal rows: minimise tr(Q C Q') - 2 tr(Q' M) over Q Q' = I by generalised power iteration
    C = (Y.T @ Y).astype(np.float64, copy=False)
    with threadpool_limits(1):
        alpha = np.linalg.eigvalsh(C)[-1]
    Q = polar(M) if Q_prev is None else Q_prev
    f_old = np.sum((Q @ C) * Q) - 2.0 * np.sum(Q * M)
    for _ in range(max_inner):
        QC = Q @ C
        Q = polar(M + alpha * Q - QC)
        f = np.sum((Q @ C) * Q) - 2.0 * np.sum(Q * M)
        if f_old - f <= tol * (abs(f) + 1.0):
            break
        f_old = f
    return Q


# ---------------------------------------------------------------------------------- objective
def cle_objective(Zbars, Qs, Wm: sparse.csr_matrix, Y: np.ndarray, lam: float, eta: float,
                  Ms=None, sq_norms=None) -> float:
    """Eq. 6. ``Ms`` (``Zbar^v' Y``) and ``sq_norms`` (``||Zbar^v||^2``) may be passed to avoid
    recomputing them: ``||Z - Y Q'||^2 = ||Z||^2 - 2 tr(Q' Z'Y) + tr(Q'Q Y'Y)``."""
    lowp = Y.dtype != np.float64  # float32 (large n): sums accumulated in float64, no n x d_v temporaries
    if Ms is None:
        Ms = [(Z.T @ Y).astype(np.float64, copy=False) for Z in Zbars]
    if sq_norms is None:
        sq_norms = [_sq(Z) if lowp else np.sum(Z * Z) for Z in Zbars]
    terms = [(zz, np.sum(Q * M), Q.T @ Q) for zz, Q, M in zip(sq_norms, Qs, Ms, strict=True)]
    return _objective(terms, Wm, Y, lam, eta)


def _objective(terms, Wm: sparse.csr_matrix, Y: np.ndarray, lam: float, eta: float) -> float:
    """Eq. 6 from each view's ``(||Zbar||^2, tr(Q' Zbar'Y), Q'Q)``."""
    n = Y.shape[0]
    lowp = Y.dtype != np.float64
    C = (Y.T @ Y).astype(np.float64, copy=False)
    rec = sum(zz - 2.0 * qm + np.sum(QtQ * C) for zz, qm, QtQ in terms) / (2.0 * n)
    if lowp:
        return float(rec + lam / n * _sq(Y - Wm @ Y) + eta * _sq(Y))
    loc = lam / n * np.sum((Y - Wm @ Y) ** 2)
    return float(rec + loc + eta * np.sum(Y * Y))


def complement(Z: np.ndarray, observed: np.ndarray, nbrs: np.ndarray, w: np.ndarray, how: str = "lle") -> np.ndarray:
    """Eq. 5: rows of ``Z`` whose modality is missing become ``sum_j W_ij z_j`` (their neighbours are
    paired objects, so ``z_j`` exists); ``how="zero"`` fills them with zeros (DMH-ZERO)."""
    missing = ~observed
    if not missing.any():
        return Z  # nothing to complement (callers never modify Zbar in place)
    Zbar = Z.copy()
    if how == "zero":
        Zbar[missing] = 0.0
    elif how == "lle":
        Zbar[missing] = np.einsum("nk,nkd->nd", w[missing], Z[nbrs[missing]])
    else:
        raise ParameterError(f"complement must be 'lle' or 'zero', got {how!r}")
    return Zbar


def _given(Zbar: np.ndarray, G: np.ndarray | None) -> np.ndarray:
    """``Zbar`` with the rows of ``G`` that are not ``nan`` put in their place."""
    if G is None:
        return Zbar
    rows = ~np.isnan(G[:, 0])
    Zbar = Zbar.copy()
    Zbar[rows] = G[rows]
    return Zbar


# ---------------------------------------------------------------------------------- driver
@contextmanager
def _timed(timings: dict | None, key: str):
    """Add the wall time of the block to ``timings[key]`` (nothing when ``timings`` is None)."""
    if timings is None:
        yield
        return
    t0 = time.perf_counter()
    try:
        yield
    finally:
        timings[key] = timings.get(key, 0.0) + time.perf_counter() - t0


@dataclass
class CLEResult:
    Y: np.ndarray
    Qs: list
    nbrs: np.ndarray
    W: np.ndarray
    Zbars: list
    objective: list = field(default_factory=list)
    n_iter: int = 0
    converged: bool = False


def fit_cle(Zs, masks, *, d: int = 512, k: int = 3, lam: float = 0.1, eta: float = 0.01,
            max_iter: int = 30, tol: float = 1e-4, complement_how: str = "lle",
            q_method: str = "procrustes", y_method: str = "exact", w_reg: float = 0.1,
            neighbour_pool: int = 30, rng: np.random.Generator | None = None,
            Y_init: np.ndarray | None = None, nbrs: np.ndarray | None = None,
            timings: dict | None = None, dtype=np.float64, complement_given=None,
            device: str = "cpu", gram: bool | None = None) -> CLEResult:
    """Algorithm 1. ``Zs``: the two description matrices (n x d_v; missing rows are ignored),
    ``masks``: their observed masks. Returns Y and the fitted state with the objective history.
    ``complement_given``, when given, holds one (n x d_v) array (or ``None``) per view: its rows
    that are not ``nan`` replace the complement of Eq. 5 for those objects (e.g.
    :func:`dmh.methods.unpaired.ridge_complement`).
    ``timings``, when given, accumulates the wall time of each step (``"neighbours"``, ``"q"``,
    ``"w"``, ``"complement"``, ``"y"``, ``"objective"``, and ``"gram"`` for the Gram matrices) in
    seconds.

    ``dtype=np.float32`` keeps every n x d array (Y, the conjugate-gradient vectors; pass the views
    in float32 too, see :func:`scale_view`) in single precision, halving CLE's memory for large n;
    sums and the small d_v x d / d x d matrices (Q, ``Zbar'Y``, ``Y'Y``) stay in float64 and the
    Y-update's conjugate gradients stop at relative residual :data:`LOWP_CG_TOL` (float32 cannot
    reach the default 1e-8). ``np.float64`` (default) is the reference path, unchanged.
    ``device`` (a torch device name) runs the neighbour search's distance products there (exact
    either way; the rest of CLE stays on the CPU).

    ``gram``: hold a view by its Gram matrix ``Zbar Zbar'`` (:mod:`dmh.methods.cle_gram`: the same
    iterates up to rounding, much less work for a view with more features than objects). ``None``
    (default): for each float64 view with more features than objects (and at least ``d`` objects)
    whose ``Zbar`` stays fixed through the iterations (nothing missing, ``complement_how="zero"``,
    or every missing row in ``complement_given``), with ``q_method="procrustes"`` and
    ``y_method="exact"``; ``False``: never; ``True``: for every float64 view with at least ``d``
    features where those conditions allow, whatever the sizes. ``CLEResult.Qs`` holds ``None`` for
    such a view (its Q, d_v x d, is never formed)."""
    rng = np.random.default_rng(rng)
    n = masks[0].size
    lowp = np.dtype(dtype) != np.float64
    # views held by their Gram matrices: Zbar fixed for the whole fit (Algorithm 1's first Q-update
    # sees the zero complement, D Zbar with D zeroing the missing rows; see cle_gram.GramView.begin)
    grams = [None, None]
    if gram is not False and not lowp and q_method == "procrustes" and y_method == "exact":
        for v, (Z, m) in enumerate(zip(Zs, masks, strict=True)):
            G = None if complement_given is None else complement_given[v]
            fixed = m.all() or complement_how == "zero" or (G is not None and not np.isnan(G[~m, 0]).any())
            if fixed and Z.shape[1] >= d and (gram or cle_gram.worth_it(Z.shape[1], n, d)):
                with _timed(timings, "gram"):
                    grams[v] = cle_gram.GramView(_given(complement(Z, m, None, None, "zero"), G))
    if nbrs is None:
        with _timed(timings, "neighbours"):
            nbrs = find_neighbours(Zs, masks, k, neighbour_pool, device=device, grams=grams)
    k = nbrs.shape[1]
    # Algorithm 1 initialisation: random Y, uniform W, missing descriptions complemented with zeros
    Y = rng.standard_normal((n, d)) / np.sqrt(d) if Y_init is None else Y_init.copy()
    if lowp:
        Y = Y.astype(dtype)
    w = np.full((n, k), 1.0 / k)
    Zbars = [None if g is not None else complement(Z, m, nbrs, w, "zero")
             for Z, m, g in zip(Zs, masks, grams, strict=True)]
    for g, m in zip(grams, masks, strict=True):
        if g is not None:
            g.begin(Y if m.all() else np.where(m[:, None], Y, 0.0))
    Qs = [None, None]
    history = []
    converged = False
    change = np.inf
    it = 0
    Ms = [None, None]
    if lowp:  # Q's first update from float64 Zbar'Y too
        Ms = [(Zb.T @ Y).astype(np.float64) for Zb in Zbars]
    sq_norms = [None if g is None else g.trace for g in grams]
    for it in range(1, max_iter + 1):  # noqa: B007 - `it` is reported after the loop
        with _timed(timings, "q"):
            for v, g in enumerate(grams):
                if g is None:
                    Qs[v] = q_update(Zbars[v], Y, Qs[v], q_method, M=Ms[v])
                else:
                    g.q_update()
        with _timed(timings, "w"):
            w = lle_weights(Y, nbrs, w_reg=w_reg)
            Wm = weight_matrix(nbrs, w, n)
            if lowp:
                Wm = Wm.astype(dtype)
        with _timed(timings, "complement"):
            for v, (Z, m, g) in enumerate(zip(Zs, masks, grams, strict=True)):
                if g is None:
                    Zbars[v] = complement(Z, m, nbrs, w, complement_how)
                    if complement_given is not None:
                        Zbars[v] = _given(Zbars[v], complement_given[v])
        direct = [v for v, g in enumerate(grams) if g is None]
        with _timed(timings, "y"):
            if y_method == "exact":
                extra = [(g.rhs(), g.QtQ) for g in grams if g is not None]
                Y = y_update_exact([Zbars[v] for v in direct], [Qs[v] for v in direct], Wm, Y, lam, eta,
                                   overwrite=True, extra=extra)  # Y is this fit's own
            elif y_method == "jacobi":
                Y = y_update_jacobi(Zbars, Qs, Wm, Y, lam, eta)
            else:
                raise ParameterError(f"y_update must be 'exact' or 'jacobi', got {y_method!r}")
        with _timed(timings, "objective"):
            terms = []
            for v, g in enumerate(grams):
                if g is None:
                    Ms[v] = Zbars[v].T @ Y  # reused by the next Q-update (Zbar and Y unchanged until then)
                    if lowp:
                        Ms[v] = Ms[v].astype(np.float64)
                    terms.append((_sq(Zbars[v]) if lowp else np.sum(Zbars[v] * Zbars[v]), np.sum(Qs[v] * Ms[v]),
                                  Qs[v].T @ Qs[v]))
                else:
                    QtQ = g.QtQ
                    terms.append((sq_norms[v], g.advance(Y), QtQ))  # advance: G Y for the next Q-update
            history.append(_objective(terms, Wm, Y, lam, eta))
        # Eq. 6 is invariant to (Y, Q^v) -> (Y R, Q^v R) for any rotation R, so Y itself is only
        # defined up to rotation; convergence is judged on the objective (what S^Y sees, Y Y', is
        # rotation invariant too).
        if len(history) > 1:
            change = abs(history[-2] - history[-1]) / max(abs(history[-2]), np.finfo(float).tiny)
            if change < tol:
                converged = True
                break
    if not converged:
        warnings.warn(
            f"CLE did not converge in {max_iter} iterations (relative change of the objective "
            f"{change:.2e} > tol {tol:g})",
            ConvergenceWarning,
            stacklevel=2,
        )
    return CLEResult(Y=Y, Qs=Qs, nbrs=nbrs, W=w, Zbars=Zbars, objective=history, n_iter=it, converged=converged)


def scale_view(Z: np.ndarray, observed: np.ndarray, dtype=np.float64, inplace: bool = False) -> np.ndarray:
    """Centre a view on its observed rows and scale it so their mean squared row norm is one, so
    that neither view dominates the reconstruction term of Eq. 6 by its units alone.

    ``dtype=np.float32`` (with :func:`fit_cle`'s ``dtype``) returns a single-precision view, its
    mean and scale accumulated in float64 by blocks of rows; ``inplace=True`` then overwrites
    ``Z`` when it already has that dtype (no second n x d_v array)."""
    if np.dtype(dtype) != np.float64:
        return _scale_view_lowp(Z, observed, np.dtype(dtype), inplace)
    Z = np.asarray(Z, dtype=np.float64)
    obs = Z[observed]
    mu = obs.mean(axis=0)
    scale = np.sqrt(np.mean(np.sum((obs - mu) ** 2, axis=1)))
    out = (Z - mu) / (scale if scale > 0 else 1.0)
    out[~observed] = 0.0
    return out


def _scale_view_lowp(Z: np.ndarray, observed: np.ndarray, dtype, inplace: bool) -> np.ndarray:
    out = Z if inplace and Z.dtype == dtype and Z.flags.c_contiguous else np.array(Z, dtype=dtype)
    rows = np.flatnonzero(observed)
    step = 8192
    every = rows.size == out.shape[0]  # all rows observed: blocks are slices, not copies
    mu = np.zeros(out.shape[1])
    for s in range(0, rows.size, step):
        mu += (out[s : s + step] if every else out[rows[s : s + step]]).sum(0, dtype=np.float64)
    mu /= max(rows.size, 1)
    ss = 0.0
    for s in range(0, rows.size, step):
        block = (out[s : s + step] if every else out[rows[s : s + step]]) - mu
        ss += float(np.einsum("ij,ij->", block, block))
    scale = np.sqrt(ss / max(rows.size, 1))
    mu32 = mu.astype(dtype)
    inv = dtype.type(1.0 / (scale if scale > 0 else 1.0))
    for s in range(0, out.shape[0], step):
        block = out[s : s + step]
        block -= mu32
        block *= inv
    out[~observed] = 0.0
    return out
