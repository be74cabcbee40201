"""SPDH: semi-paired discrete hashing, **reconstructed from the published description** of

X. Shen, F. Shen, Q.-S. Sun, Y.-H. Yuan and H. T. Shen, "Semi-paired discrete hashing: learning
latent hash codes for semi-paired cross-view retrieval", IEEE Trans. Cybernetics 47(12), 2017
(arXiv/online 2016).

What the paper states (its abstract, and the DMH paper's summary of it): SPDH learns one latent hash
code per object in a common latent space where paired and unpaired objects are aligned; the
similarities of semi-paired data are preserved through a *cross-view similarity graph built with the
help of anchor data pairs*; latent features and hash codes are learned jointly by a
*factorization-based coding scheme*; the optimisation alternates, and the binary codes are learned
*bit by bit, each bit in closed form*. The paper's full text (its exact objective, weights, graph
construction, hash-function form and default hyperparameters) and code were not available to this
implementation, so the following parts are **choices made here**, each the simplest one consistent
with that description (see ``docs/peers_linear.md``):

Objective, over codes ``B`` in {-1,+1}^(N x k) for all ``N`` training objects (paired, image-only,
text-only), factor matrices ``U_m`` (k x d_m) and linear hash functions ``W_m`` (d_m x k)::

    J = sum_m ||X_m - B_m U_m||^2                 factorization: codes reconstruct each view
      + alpha * tr(B^T L B)                       cross-view anchor graph
      + beta  * sum_m ||B_m - X_m W_m||^2         hash functions fit the codes
      + rho   * sum_m (||U_m||^2 + ||W_m||^2)

where ``B_m`` are the codes of the objects that observe modality ``m`` and ``X_m`` their centred
features, scaled so that the mean squared row norm is ``k`` (the squared norm of a code), which
makes the default unit weights comparable across data sets. The graph: ``n_anchors`` paired
objects (a seeded random sample) are the anchor pairs; each object is linked to its ``n_nearest``
nearest anchors in each view it observes (cosine geometry: rows L2-normalised; heat-kernel weights
with the bandwidth set to the mean distance to those anchors; rows summing to one), averaged over
its views, giving ``Z`` (N x n_anchors); ``L = I - Z diag(1^T Z)^{-1} Z^T`` is the anchor-graph
Laplacian (Liu et al., ICML 2011). An image-only and a text-only object are thereby similar when
they lie near the same anchor pair in their own views: the cross-view similarity.

Alternation (each step does not increase ``J``): ridge updates of ``U_m`` and ``W_m`` (exact), then
one sweep over the bits; with the other bits fixed, every term is linear in a bit column ``b``
except ``-alpha ||Lambda^{-1/2} Z^T b||^2``, which is concave and replaced by its tangent at the
current ``b`` (a majorizer), so each bit is ``sgn`` of a closed-form vector. Codes start from the
anchor-graph spectral embedding (the top non-trivial eigenvectors of the normalised anchor graph,
as in anchor graph hashing). Queries: ``sgn((x - mean_m) @ W_m)`` (scaling folded into ``W_m``).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import pairwise_distances

from .._validation import NON_NEGATIVE, POSITIVE, POSITIVE_INT, check_random_state
from ..base import BaseHasher, store_init_args
from ..baselines.fitting import LinearHashMixin, l2_normalize_rows, settled
from ..data import CrossModalData
from ..errors import DataError, ParameterError

__all__ = ["SPDH", "anchor_affinity", "spdh_objective", "update_bits"]

MODALITIES = ("image", "text")


def anchor_affinity(X: np.ndarray, anchors: np.ndarray, n_nearest: int) -> np.ndarray:
    """Rows summing to one: heat-kernel weights of each row of ``X`` to its ``n_nearest`` nearest
    ``anchors`` (Euclidean distance), zero elsewhere. The bandwidth is the mean of those distances.
    """
    D = pairwise_distances(X, anchors)
    s = min(int(n_nearest), anchors.shape[0])
    idx = np.argpartition(D, s - 1, axis=1)[:, :s]
    d = np.take_along_axis(D, idx, axis=1)
    sigma = float(d.mean()) if d.size else 1.0
    sigma = sigma if sigma > 0 else 1.0
    w = np.exp(-(d**2) / (2.0 * sigma**2))
    w /= np.maximum(w.sum(axis=1, keepdims=True), 1e-300)
    Z = np.zeros((X.shape[0], anchors.shape[0]))
    np.put_along_axis(Z, idx, w, axis=1)
    return Z


def _graph_factor(Z: np.ndarray) -> np.ndarray:
    """``A = Z Lambda^{-1/2}`` so that ``Z Lambda^{-1} Z^T = A A^T`` (anchors no object uses dropped)."""
    lam = Z.sum(axis=0)
    keep = lam > 1e-12
    return Z[:, keep] / np.sqrt(lam[keep])


def spdh_objective(B, Xs, rows, Us, Ws, A, alpha, beta, rho) -> float:
    """``J`` of the module docstring. ``Xs``/``rows``/``Us``/``Ws`` are per-modality lists: features,
    the rows of ``B`` that observe the modality, factor and hash matrices. ``A`` is the graph
    factor (``L = I - A A^T``)."""
    J = 0.0
    for X, r, U, W in zip(Xs, rows, Us, Ws, strict=True):
        Bm = B[r]
        J += float(((X - Bm @ U) ** 2).sum())
        J += beta * float(((Bm - X @ W) ** 2).sum())
        J += rho * float((U**2).sum() + (W**2).sum())
    J += alpha * (float((B * B).sum()) - float(((A.T @ B) ** 2).sum()))
    return J


def update_bits(B, Xs, rows, Us, Ws, A, alpha, beta) -> np.ndarray:
    """One sweep over the bits of ``B``: each column set to the minimiser of the objective with
    the other columns fixed and the graph term majorized by its tangent (see the module docstring).
    Returns the new ``B`` (a copy); ``J`` never increases."""
    B = np.array(B, dtype=np.float64, copy=True)
    k = B.shape[1]
    # residuals of the factorizations with all bits, updated as bits change
    R = [X - B[r] @ U for X, r, U in zip(Xs, rows, Us, strict=True)]
    H = [X @ W for X, W in zip(Xs, Ws, strict=True)]
    for j in range(k):
        b = B[:, j]
        q = alpha * (A @ (A.T @ b))  # tangent of  alpha * ||A^T b||^2
        for r, U, Rm, Hm in zip(rows, Us, R, H, strict=True):
            # ||X - B'U' - b u^T||^2 is linear in b (b_i^2 = 1): coefficient (R + b u^T) u
            u = U[j]
            q[r] += Rm @ u + b[r] * (u @ u) + beta * Hm[:, j]
        new = np.where(q > 0, 1.0, np.where(q < 0, -1.0, b))
        changed = new != b
        if changed.any():
            for r, U, Rm in zip(rows, Us, R, strict=True):
                moved = np.flatnonzero(changed[r])
                if moved.size:
                    Rm[moved] -= np.outer(new[r][moved] - b[r][moved], U[j])
            B[:, j] = new
    return B


class SPDH(LinearHashMixin, BaseHasher):
    """Semi-paired discrete hashing (Shen et al., TCYB 2017), reconstructed from its description.

    Uses **all** training objects (paired, image-only, text-only): ``uses_unpaired = True``. The
    objective, graph and defaults are this implementation's choices (the paper's full text was not
    available); see the module docstring and ``docs/peers_linear.md``.

    Parameters
    ----------
    n_bits : int
        Code length.
    alpha : float [1.0]
        Weight of the cross-view anchor-graph term.
    beta : float [1.0]
        Weight of the hash-function fit.
    rho : float [1e-2]
        Ridge on the factor and hash matrices (relative to ``N``, the number of objects).
    n_anchors : int [300]
        Anchor pairs (a seeded random sample of the paired objects; all of them if fewer).
    n_nearest : int [5]
        Anchors each object is linked to, per view.
    max_iter : int [20]
        Alternations (factor and hash updates, then one sweep over the bits).
    tol : float [1e-4]
        Stop when the objective falls by less than ``tol`` times its value in one alternation.
    random_state : int, Generator or None
        Seeds the choice of anchor pairs.

    Attributes
    ----------
    projections_, means_ : dicts modality -> array
        Codes are ``sign((x - means_[m]) @ projections_[m])``.
    codes_ : array (N, n_bits) int8
        Training codes.
    objective_ : array (n_iter_ + 1,)
        ``J`` at the start and after each alternation (non-increasing).
    n_iter_ : int
    """

    _parameter_constraints = {
        **BaseHasher._parameter_constraints,
        "alpha": [NON_NEGATIVE], "beta": [POSITIVE], "rho": [POSITIVE], "n_anchors": [POSITIVE_INT],
        "n_nearest": [POSITIVE_INT], "max_iter": [POSITIVE_INT], "tol": [NON_NEGATIVE],
    }
    _saved_arrays = {"codes": (None, "B"), "anchor_rows": (None,), "objective": (None,)}

    method_name = "spdh"
    uses_unpaired = True
    min_paired = 2

    def __init__(self, n_bits=64, *, alpha=1.0, beta=1.0, rho=1e-2, n_anchors=300, n_nearest=5,
                 max_iter=20, tol=1e-4, random_state=None):
        store_init_args(self, locals())

    # ------------------------------------------------------------------ fitting
    def _prepare(self, data: CrossModalData, rng):
        """Scaled views, their rows, means, scales and the graph factor ``A``."""
        k = self.n_bits_
        rows, Xs, means, scales = [], [], {}, {}
        for m in MODALITIES:
            r = np.flatnonzero(data.mask(m))
            X = getattr(data, m)[r]
            mean = X.mean(axis=0)
            Xc = X - mean
            ms = float((Xc**2).sum(axis=1).mean())
            scale = np.sqrt(k / ms) if ms > 0 else 1.0
            rows.append(r)
            Xs.append(Xc * scale)
            means[m], scales[m] = mean, scale
        paired = np.flatnonzero(data.paired_mask)
        n_a = min(int(self.n_anchors), paired.size)
        anchor_rows = np.sort(rng.choice(paired, size=n_a, replace=False))
        s = int(self.n_nearest)
        N = data.n_objects
        Z = np.zeros((N, n_a))
        count = np.zeros(N)
        for m in MODALITIES:
            V = getattr(data, m)
            r = np.flatnonzero(data.mask(m))
            Z[r] += anchor_affinity(l2_normalize_rows(V[r]), l2_normalize_rows(V[anchor_rows]), s)
            count[r] += 1
        Z /= count[:, None]
        return Xs, rows, means, scales, _graph_factor(Z), anchor_rows

    def _fit(self, data: CrossModalData) -> None:
        name = type(self).__name__
        alpha, beta, rho = float(self.alpha), float(self.beta), float(self.rho)
        max_iter, tol = int(self.max_iter), float(self.tol)
        rng = check_random_state(self.random_state)
        k, N = self.n_bits_, data.n_objects
        if N <= k:
            raise DataError(f"{name} needs more training objects than bits ({k}); the data hold {N}")
        Xs, rows, means, scales, A, anchor_rows = self._prepare(data, rng)
        if A.shape[1] <= k:
            raise ParameterError(
                f"{name} needs more anchor pairs than bits for its spectral start: {A.shape[1]} "
                f"anchors (paired objects used: {anchor_rows.size}) for n_bits={k}; the training "
                f"data hold {data.n_paired} paired objects"
            )
        B = self._initial_codes(A, k)
        reg = rho * N

        # the hash functions' normal matrices do not change: factor them once
        chol = [linalg.cho_factor(beta * (X.T @ X) + reg * np.eye(X.shape[1])) for X in Xs]

        def solve_factors(B):
            Us, Ws = [], []
            for X, r, c in zip(Xs, rows, chol, strict=True):
                Bm = B[r]
                Us.append(linalg.solve(Bm.T @ Bm + reg * np.eye(k), Bm.T @ X, assume_a="pos"))
                Ws.append(linalg.cho_solve(c, beta * (X.T @ Bm)))
            return Us, Ws

        Us, Ws = solve_factors(B)
        history = [spdh_objective(B, Xs, rows, Us, Ws, A, alpha, beta, rho * N)]
        for _ in range(max_iter):
            B = update_bits(B, Xs, rows, Us, Ws, A, alpha, beta)
            Us, Ws = solve_factors(B)
            history.append(spdh_objective(B, Xs, rows, Us, Ws, A, alpha, beta, rho * N))
            if settled(history, tol):
                break
        else:
            warnings.warn(f"{name} did not converge within max_iter={max_iter} alternations; "
                          "increase max_iter or tol", ConvergenceWarning, stacklevel=3)
        self.projections_ = {m: W * scales[m] for m, W in zip(MODALITIES, Ws, strict=True)}
        self.means_ = means
        self.codes_ = B.astype(np.int8)
        self.anchor_rows_ = anchor_rows
        self.objective_ = np.asarray(history)
        self.n_iter_ = len(history) - 1

    @staticmethod
    def _initial_codes(A: np.ndarray, k: int) -> np.ndarray:
        """Signs of the top ``k`` non-trivial eigenvectors of ``A A^T`` (anchor graph hashing's
        spectral embedding), from the small ``A^T A``."""
        M = A.T @ A
        evals, evecs = linalg.eigh(M)
        order = np.argsort(evals)[::-1][1 : k + 1]  # drop the trivial top (eigenvalue 1)
        V = A @ (evecs[:, order] / np.sqrt(np.maximum(evals[order], 1e-12)))
        idx = np.argmax(np.abs(V), axis=0)
        V *= np.sign(V[idx, np.arange(V.shape[1])])
        return np.where(V > 0, 1.0, -1.0)

    # ------------------------------------------------------------------ persistence
    def _set_state(self, state):
        super()._set_state(state)
        self.n_iter_ = len(self.objective_) - 1
