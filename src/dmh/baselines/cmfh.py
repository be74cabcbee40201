"""Collective Matrix Factorization Hashing (CMFH): G. Ding, Y. Guo and J. Zhou, "Collective matrix
factorization hashing for multimodal data", CVPR 2014; G. Ding, Y. Guo, J. Zhou and Y. Gao,
"Large-scale cross-modality search via collective matrix factorization hashing", IEEE TIP 2016.

With the centred features of the ``n`` paired objects as columns, ``X1`` (image, ``d1 x n``) and
``X2`` (text, ``d2 x n``), CMFH factorises both views with one shared latent representation
``V`` (``k x n``, ``k = n_bits``) and learns linear hash functions ``P1``, ``P2`` (``k x d_m``)
that map each view into it:

    min  lambda ||X1 - U1 V||^2 + (1 - lambda) ||X2 - U2 V||^2
       + mu (||V - P1 X1||^2 + ||V - P2 X2||^2)
       + gamma (||U1||^2 + ||U2||^2 + ||V||^2 + ||P1||^2 + ||P2||^2)

Every block has a closed-form minimiser given the others, and one iteration updates them in turn:

    U1 = X1 V^T (V V^T + (gamma / lambda) I)^{-1}
    U2 = X2 V^T (V V^T + (gamma / (1 - lambda)) I)^{-1}
    V  = (lambda U1^T U1 + (1 - lambda) U2^T U2 + (2 mu + gamma) I)^{-1}
         (lambda U1^T X1 + (1 - lambda) U2^T X2 + mu (P1 X1 + P2 X2))
    P_m = V X_m^T (X_m X_m^T + (gamma / mu) I)^{-1}

so the objective never increases. Codes are ``sign(P_m (x - mean_m))`` for every object, the
database included (the out-of-sample rule; the training objects' ``sign(V)`` is not used).

CMFH trains on the **paired objects only** (``uses_unpaired = False``). The features are centred
with the training means, which are stored and reused at encode time.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import linalg
from sklearn.exceptions import ConvergenceWarning

from .._validation import NON_NEGATIVE, POSITIVE, POSITIVE_INT, UNIT_INTERVAL, Options, check_random_state
from ..base import BaseHasher, store_init_args
from ..data import CrossModalData
from .fitting import LinearHashMixin, centre, settled

__all__ = ["CMFH", "cmfh_objective", "update_U", "update_V", "update_P"]


def cmfh_objective(X1, X2, U1, U2, V, P1, P2, lambda_: float, mu: float, gamma: float,
                   gamma_p=None) -> float:
    """The CMFH objective from its definition (features as columns, ``d_m x n``). ``gamma_p``:
    the regulariser weights of ``P1``, ``P2`` (one number or two; default ``gamma``, the paper's)."""
    gp = np.broadcast_to(np.asarray(gamma if gamma_p is None else gamma_p, dtype=np.float64), (2,))
    rec = lambda_ * np.sum((X1 - U1 @ V) ** 2) + (1.0 - lambda_) * np.sum((X2 - U2 @ V) ** 2)
    hash_fit = mu * (np.sum((V - P1 @ X1) ** 2) + np.sum((V - P2 @ X2) ** 2))
    reg = gamma * sum(np.sum(M**2) for M in (U1, U2, V)) + gp[0] * np.sum(P1**2) + gp[1] * np.sum(P2**2)
    return float(rec + hash_fit + reg)


def update_U(X, V, weight: float, gamma: float) -> np.ndarray:
    """``argmin_U weight ||X - U V||^2 + gamma ||U||^2 = X V^T (V V^T + (gamma/weight) I)^{-1}``."""
    k = V.shape[0]
    if weight == 0:
        return np.zeros((X.shape[0], k))
    A = V @ V.T + (gamma / weight) * np.eye(k)
    return linalg.solve(A, V @ X.T, assume_a="pos").T


def update_V(X1, X2, U1, U2, P1, P2, lambda_: float, mu: float, gamma: float) -> np.ndarray:
    """``argmin_V`` of the objective for fixed ``U1, U2, P1, P2``."""
    k = U1.shape[1]
    A = lambda_ * U1.T @ U1 + (1.0 - lambda_) * U2.T @ U2 + (2.0 * mu + gamma) * np.eye(k)
    rhs = lambda_ * U1.T @ X1 + (1.0 - lambda_) * U2.T @ X2 + mu * (P1 @ X1 + P2 @ X2)
    return linalg.solve(A, rhs, assume_a="pos")


def update_P(V, XtM) -> np.ndarray:
    """``P = V X^T (X X^T + (gamma/mu) I)^{-1}`` given ``XtM = X^T (X X^T + (gamma/mu) I)^{-1}``
    (fixed over the iterations, so computed once; see :func:`hash_solver`)."""
    return V @ XtM


def hash_solver(X, mu: float, gamma: float, ridge: float | None = None) -> np.ndarray:
    """``X^T (X X^T + r I)^{-1}`` (``n x d``), the fixed part of the ``P`` update, with the ridge
    ``r = gamma / mu`` (the paper's) unless ``ridge`` is given."""
    d = X.shape[0]
    r = gamma / mu if ridge is None else ridge
    return linalg.solve(X @ X.T + r * np.eye(d), X, assume_a="pos").T


def auto_hash_ridge(X, base: float) -> float:
    """``hash_ridge="auto"`` for centred features ``X`` (``d x n``): ``base`` (the paper's
    ``gamma / mu``) when its regression keeps at most ``n / 10`` effective degrees of freedom
    (FSH's rule, :func:`dmh.baselines.fsh.effective_dof`), else the smallest ridge above it of
    :data:`dmh.baselines.fsh.AUTO_RIDGES` times the mean squared norm of the rows (scale-free)
    that does (the largest when none does)."""
    from .fsh import AUTO_DOF_SHARE, AUTO_RIDGES, effective_dof

    d, n = X.shape
    s = np.linalg.eigvalsh(X @ X.T) if d <= n else np.linalg.eigvalsh(X.T @ X)
    limit = AUTO_DOF_SHARE * n
    if effective_dof(s, base) <= limit:
        return float(base)
    scale = float(np.mean(np.sum(X * X, axis=0)))
    scale = scale if scale > 0 else 1.0
    candidates = [g * scale for g in AUTO_RIDGES if g * scale > base]
    for ridge in candidates:
        if effective_dof(s, ridge) <= limit:
            return float(ridge)
    return float(candidates[-1]) if candidates else float(base)


class CMFH(LinearHashMixin, BaseHasher):
    """Collective Matrix Factorization Hashing (Ding et al., CVPR 2014 / TIP 2016).

    Trains on the **paired** objects of the data only (image-only and text-only objects of
    semi-paired data are ignored). Needs at least 2 paired objects (centring); with fewer paired
    objects than bits the centred training data span fewer than ``n_bits`` dimensions, so some bits
    are linear combinations of others on the training set (allowed, but such codes are redundant).

    Parameters (defaults from the CMFH papers' experiments)
    ----------
    n_bits : int
        Code length ``k``.
    lambda_ : float [0.5]
        The paper's lambda: weight of the image factorisation (the text gets ``1 - lambda``).
    mu : float [100]
        The paper's mu: weight of the hash-function (projection) terms.
    gamma : float [0.01]
        The paper's gamma: weight of the Frobenius regulariser on all variables (on ``P1``, ``P2``
        too when ``hash_ridge=None``).
    hash_ridge : "auto", None or float ["auto"]
        Ridge ``r_m`` of the hash-function regressions ``P_m = V X_m^T (X_m X_m^T + r_m I)^{-1}``
        (their regulariser is ``mu r_m ||P_m||^2``). ``None``: the paper's ``r = gamma / mu``
        (1e-4). ``"auto"`` (``docs/baselines.md``, "The six baselines on dense CNN features"):
        per modality the paper's ``gamma / mu`` when its regression keeps at most ``n / 10``
        effective degrees of freedom (FSH's rule), else the smallest larger ridge, relative to the
        mean squared norm of the centred rows, that does;
        with ``1e-4`` the regressions interpolate ``V`` when a modality has nearly as many
        dimensions as there are pairs (:func:`auto_hash_ridge`).
    max_iter : int [100]
        Most alternating iterations.
    tol : float [1e-5]
        Stop when the objective's relative decrease over one iteration falls below ``tol``.
    random_state : int, Generator or None
        Seeds the random initial ``V`` (entries ``N(0, 1)``); same seed, same codes.

    Attributes
    ----------
    projections_ : dict modality -> array (d, n_bits)
        ``P_m^T``: codes are ``sign((x - means_[m]) @ projections_[m])``.
    means_ : dict modality -> array (d,)
        Training means of the paired objects.
    objective_ : array (n_iter_ + 1,)
        The objective after initialisation (``V`` random, then ``U``, ``P`` at their optima given
        ``V``) and after each iteration; non-increasing.
    n_iter_ : int
        Iterations run.
    hash_ridges_ : array (2,)
        The ridges ``r_m`` used (image, text).
    latent_ : array (n_paired, n_bits)
        ``V^T``, the shared latent representation of the training pairs (``sign`` of it is CMFH's
        "unified code" of a training object). Kept after ``fit`` for diagnostics; not saved.
    """

    _parameter_constraints = {
        **BaseHasher._parameter_constraints,
        "lambda_": [UNIT_INTERVAL], "mu": [POSITIVE], "gamma": [POSITIVE],
        "hash_ridge": [Options("auto"), None, POSITIVE], "max_iter": [POSITIVE_INT], "tol": [NON_NEGATIVE],
    }
    _saved_arrays = {"objective": (None,)}
    _optional_arrays = {"hash_ridges": (np.nan, np.nan)}

    method_name = "cmfh"
    uses_unpaired = False
    min_paired = 2

    def __init__(self, n_bits=64, *, lambda_=0.5, mu=100.0, gamma=0.01, hash_ridge="auto", max_iter=100,
                 tol=1e-5, random_state=None):
        store_init_args(self, locals())

    def _fit(self, data: CrossModalData) -> None:
        name = type(self).__name__
        lambda_, mu, gamma = float(self.lambda_), float(self.mu), float(self.gamma)
        max_iter, tol = int(self.max_iter), float(self.tol)
        rng = check_random_state(self.random_state)
        k = self.n_bits_
        paired = data.paired_mask
        Xi, mean_i = centre(data.image[paired])
        Xt, mean_t = centre(data.text[paired])
        X1, X2 = Xi.T, Xt.T
        n = X1.shape[1]

        if self.hash_ridge is None:
            ridges = np.array([gamma / mu, gamma / mu])
        elif isinstance(self.hash_ridge, str):  # "auto"
            ridges = np.array([auto_hash_ridge(X1, gamma / mu), auto_hash_ridge(X2, gamma / mu)])
        else:
            ridges = np.array([float(self.hash_ridge)] * 2)
        gamma_p = mu * ridges
        S1, S2 = hash_solver(X1, mu, gamma, ridges[0]), hash_solver(X2, mu, gamma, ridges[1])
        V = rng.standard_normal((k, n))
        U1, U2 = update_U(X1, V, lambda_, gamma), update_U(X2, V, 1.0 - lambda_, gamma)
        P1, P2 = update_P(V, S1), update_P(V, S2)
        obj = [cmfh_objective(X1, X2, U1, U2, V, P1, P2, lambda_, mu, gamma, gamma_p)]
        for n_iter in range(1, max_iter + 1):  # noqa: B007 - n_iter_ is the count run
            U1 = update_U(X1, V, lambda_, gamma)
            U2 = update_U(X2, V, 1.0 - lambda_, gamma)
            V = update_V(X1, X2, U1, U2, P1, P2, lambda_, mu, gamma)
            P1, P2 = update_P(V, S1), update_P(V, S2)
            obj.append(cmfh_objective(X1, X2, U1, U2, V, P1, P2, lambda_, mu, gamma, gamma_p))
            if settled(obj, tol, np.finfo(float).tiny):
                break
        else:
            warnings.warn(
                f"{name} did not converge in {max_iter} iterations (relative decrease of the "
                f"objective {(obj[-2] - obj[-1]) / abs(obj[-2]):.2e} > tol {tol:g})",
                ConvergenceWarning,
                stacklevel=3,
            )
        self.projections_ = {"image": P1.T.copy(), "text": P2.T.copy()}
        self.means_ = {"image": mean_i, "text": mean_t}
        self.objective_ = np.asarray(obj)
        self.n_iter_ = n_iter
        self.latent_ = V.T.copy()
        self.hash_ridges_ = ridges

    def _set_state(self, state):
        super()._set_state(state)
        self.n_iter_ = self.objective_.size - 1
