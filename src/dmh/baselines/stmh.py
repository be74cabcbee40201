"""STMH: Semantic Topic Multimodal Hashing (Wang, Gao, Wang & He, IJCAI 2015).

Texts are clustered into ``c = n_bits`` semantic topics (an object may hold several), images are
factorised robustly into ``c`` latent concepts, and a linear map ``R`` carries image concepts to
text topics. Each bit says whether the object holds that topic. Objective (rows are objects)::

    min  lambda sum_i ||x1_i - v1_i U1||_2                      (robust, l2,1 factorisation of images)
       + (1 - lambda) sum_i sum_j g_ij ||x2_i - u2_j||^2        (clustering of texts into topics)
       + mu ||G - V1 R||^2                                      (image concepts -> text topics)
       + gamma (||R||^2 + ||V1||^2 + ||U1||^2 + ||U2||^2)
    s.t. g_ij in {0, 1},  sum_j g_ij = m  for every object      (m topics per object, m = c / 2)

Alternating minimisation, each step exact given the others: ``U1`` (weighted ridge), ``U2``
(weighted centroids), ``R`` (ridge), ``V1`` (one ridge system per object), ``G`` (the ``m`` topics
of smallest cost), and the l2,1 norm by iteratively re-weighted least squares, i.e. the bound
``||e|| <= ||e||^2 / (2 ||e_old||) + ||e_old|| / 2`` (a majorise-minimise step, so the objective
never increases). The norm is smoothed as ``sqrt(||e||^2 + eps)``.

Hashing: a text gets +1 on its ``m`` nearest topic centres ``u2_j`` and -1 elsewhere; an image is
mapped to ``v1 = x1 U1' (U1 U1' + gamma/lambda I)^-1``, then to ``v1 R``, and gets +1 on its ``m``
largest entries (the authors' code thresholds at the median, the same for even ``c``). Every code
therefore has exactly ``m`` bits set to +1.

No preprocessing (the authors' code uses the features as given). See
``docs/baselines.md`` for the choices made where the description is not explicit.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.linalg import eigh, solve

from .._validation import NON_NEGATIVE, POSITIVE, POSITIVE_INT, Interval, check_int, check_random_state
from ..base import BaseHasher, store_init_args
from ..data import CrossModalData
from ..errors import ParameterError
from .fitting import paired_views, settled, warn_not_converged

__all__ = ["STMH", "stmh_objective", "top_m_indicator", "top_m_margin"]


def top_m_indicator(cost: np.ndarray, m: int) -> np.ndarray:
    """0/1 matrix with a 1 at the ``m`` smallest entries of each row of ``cost`` (stable ties)."""
    idx = np.argsort(cost, axis=1, kind="stable")[:, :m]
    G = np.zeros(cost.shape)
    np.put_along_axis(G, idx, 1.0, axis=1)
    return G


def top_m_margin(score: np.ndarray, m: int) -> np.ndarray:
    """``score`` minus, per row, the midpoint between its ``m``-th and ``(m+1)``-th largest value:
    positive exactly on the ``m`` largest entries (when they are not tied with the next)."""
    c = score.shape[1]
    if m >= c:
        return np.abs(score) + 1.0
    part = -np.sort(-score, axis=1)
    thr = 0.5 * (part[:, m - 1] + part[:, m])
    return score - thr[:, None]


def stmh_objective(X1, X2, V1, U1, U2, G, R, *, lambda_, mu, gamma, eps) -> float:
    """The STMH objective above (with the smoothed l2,1 norm)."""
    E = X1 - V1 @ U1
    robust = np.sqrt(np.einsum("ij,ij->i", E, E) + eps).sum()
    D2 = _sq_dist(X2, U2)
    topics = float((G * D2).sum())
    return float(
        lambda_ * robust
        + (1.0 - lambda_) * topics
        + mu * np.sum((G - V1 @ R) ** 2)
        + gamma * (np.sum(R**2) + np.sum(V1**2) + np.sum(U1**2) + np.sum(U2**2))
    )


def _sq_dist(X, C):
    d = (X * X).sum(1)[:, None] - 2.0 * X @ C.T + (C * C).sum(1)[None, :]
    return np.maximum(d, 0.0)


class STMH(BaseHasher):
    """Semantic Topic Multimodal Hashing (Wang et al., IJCAI 2015), fully paired.

    Parameters (paper symbol; default and its source in brackets)
    ----------
    n_bits : int
        Code length = number of semantic topics ``c``.
    lambda_ : float (lambda) [0.5]
        Trade-off between the image and the text terms (weights ``lambda`` and ``1 - lambda``).
    mu : float (mu) [1e-6]
        Weight of the image-concept-to-topic correlation term.
    gamma : float (gamma) [1e-6]
        Weight of the Frobenius regulariser.
    n_active : int or None [None = round(n_bits / 2)]
        Topics per object ``m`` (= bits set to +1 in every code); the authors' ``numzeros``.
    max_iter : int [30]
        Alternating iterations (the authors' code stops after 5 or when the objective changes by
        less than 0.01 in absolute value; see the docs).
    tol : float [1e-4]
        Stop when the objective decreases by less than ``tol`` times its value.
    eps : float [1e-8]
        Smoothing of the l2,1 norm, relative to the mean squared norm of the image features.
    random_state : int, Generator or None
        Seed of the random initial ``V1`` and topic indicators; same seed, same codes.

    Defaults of ``lambda_``, ``mu``, ``gamma`` and ``n_active`` are those of the authors' released
    MATLAB code (``main_STMH.m``); we could not check them against the paper's text.

    Attributes
    ----------
    image_basis_ : (c, d_img) ``U1``. topic_centres_ : (c, d_txt) ``U2``. topic_map_ : (c, c) ``R``.
    n_active_ : int. objective_ : objective after initialisation and after every iteration.
    n_iter_ : iterations run.
    """

    _parameter_constraints = {
        **BaseHasher._parameter_constraints,
        "lambda_": [Interval(numbers.Real, 0, 1, closed="neither")], "mu": [POSITIVE], "gamma": [POSITIVE],
        "n_active": [None, POSITIVE_INT], "max_iter": [POSITIVE_INT], "tol": [NON_NEGATIVE], "eps": [POSITIVE],
    }

    method_name = "stmh"
    uses_unpaired = False
    min_paired = 2

    def __init__(self, n_bits=32, *, lambda_=0.5, mu=1e-6, gamma=1e-6, n_active=None, max_iter=30,
                 tol=1e-4, eps=1e-8, random_state=None):
        store_init_args(self, locals())

    def _check_param_combinations(self, n_bits):
        if self.n_active is not None and self.n_active > n_bits:
            raise ParameterError(f"STMH: n_active must be at most n_bits ({n_bits}), got {self.n_active}")

    # ------------------------------------------------------------------ fitting
    def _fit(self, data: CrossModalData) -> None:
        c = self.n_bits_
        # m active topics per object (default: MATLAB's round(c / 2))
        m = max(1, int(np.floor(c / 2 + 0.5))) if self.n_active is None else int(self.n_active)
        X1, X2 = paired_views(data, "STMH", max(c, 2), f"it clusters them into {c} topics")
        rng = check_random_state(self.random_state)
        n = X1.shape[0]
        lam, mu, gamma = float(self.lambda_), float(self.mu), float(self.gamma)
        eps = float(self.eps) * max(float(np.mean(np.einsum("ij,ij->i", X1, X1))), 1e-300)
        eye = np.eye(c)

        # initialisation (as the authors' code): random V1, random m-hot topic indicators
        V1 = rng.standard_normal((n, c))
        G = top_m_indicator(rng.random((n, c)), m)
        w = np.ones(n)  # IRLS weights of the l2,1 term
        U1 = self._update_U1(X1, V1, w, lam, gamma)
        w = self._weights(X1, V1, U1, eps)
        U2 = self._update_U2(X2, G, lam, gamma)
        R = solve(V1.T @ V1 + (gamma / mu) * eye, V1.T @ G, assume_a="pos")
        kw = dict(lambda_=lam, mu=mu, gamma=gamma, eps=eps)
        history = [stmh_objective(X1, X2, V1, U1, U2, G, R, **kw)]
        for _ in range(int(self.max_iter)):
            U1 = self._update_U1(X1, V1, w, lam, gamma)
            U2 = self._update_U2(X2, G, lam, gamma)
            R = solve(V1.T @ V1 + (gamma / mu) * eye, V1.T @ G, assume_a="pos")
            V1 = self._update_V1(X1, G, U1, R, w, lam, mu, gamma)
            cost = (1.0 - lam) * _sq_dist(X2, U2) - 2.0 * mu * (V1 @ R)
            G = top_m_indicator(cost, m)
            w = self._weights(X1, V1, U1, eps)
            history.append(stmh_objective(X1, X2, V1, U1, U2, G, R, **kw))
            if settled(history, self.tol):
                break
        else:
            warn_not_converged("STMH", int(self.max_iter))
        self.objective_, self.n_iter_ = history, len(history) - 1
        self.n_active_ = m
        self.image_basis_, self.topic_centres_, self.topic_map_ = U1, U2, R
        self.train_indicators_ = G  # kept for inspection; not saved

    @staticmethod
    def _weights(X1, V1, U1, eps):
        E = X1 - V1 @ U1
        return 0.5 / np.sqrt(np.einsum("ij,ij->i", E, E) + eps)

    @staticmethod
    def _update_U1(X1, V1, w, lam, gamma):
        # min lam sum_i w_i ||x_i - v_i U1||^2 + gamma ||U1||^2
        Vw = V1 * w[:, None]
        lhs = lam * (V1.T @ Vw) + gamma * np.eye(V1.shape[1])
        return solve(lhs, lam * (Vw.T @ X1), assume_a="pos")

    @staticmethod
    def _update_U2(X2, G, lam, gamma):
        # min (1 - lam) sum_ij g_ij ||x_i - u_j||^2 + gamma ||U2||^2  (weighted centroids)
        counts = G.sum(axis=0)
        return ((1.0 - lam) * (G.T @ X2)) / ((1.0 - lam) * counts + gamma)[:, None]

    @staticmethod
    def _update_V1(X1, G, U1, R, w, lam, mu, gamma):
        """Row i solves (lam w_i U1 U1' + mu R R' + gamma I) v_i' = lam w_i U1 x_i' + mu R g_i'.

        The matrices differ only by the scalar ``w_i``, so one generalised eigendecomposition
        ``P V = Q V diag(d)``, ``V' Q V = I`` (``P = lam U1 U1'``, ``Q = mu R R' + gamma I``) gives
        ``(w_i P + Q)^-1 = V diag(1 / (w_i d + 1)) V'`` for every row at once.
        """
        c = U1.shape[0]
        P = lam * (U1 @ U1.T)
        Q = mu * (R @ R.T) + gamma * np.eye(c)
        d, V = eigh(P, Q)  # P V = Q V diag(d), V' Q V = I
        rhs = lam * w[:, None] * (X1 @ U1.T) + mu * (G @ R.T)
        # (w P + Q)^-1 = V diag(1 / (w d + 1)) V'
        return ((rhs @ V) / (w[:, None] * d[None, :] + 1.0)) @ V.T

    # ------------------------------------------------------------------ encoding
    def _project(self, X: np.ndarray, modality: str) -> np.ndarray:
        m = self.n_active_
        if modality == "text":
            return top_m_margin(-_sq_dist(X, self.topic_centres_), m)
        U1 = self.image_basis_
        reg = float(self.gamma) / float(self.lambda_)
        V1 = solve(U1 @ U1.T + reg * np.eye(U1.shape[0]), U1 @ X.T, assume_a="pos").T
        return top_m_margin(V1 @ self.topic_map_, m)

    # ------------------------------------------------------------------ persistence
    def _get_state(self):
        return {
            "image_basis": self.image_basis_,
            "topic_centres": self.topic_centres_,
            "topic_map": self.topic_map_,
            "objective": np.asarray(self.objective_, dtype=np.float64),
        }

    def _state_spec(self):
        return {"image_basis": ("R", "I"), "topic_centres": ("B", "T"), "topic_map": ("R", "B"),
                "objective": (None,)}

    def _set_state(self, state):
        self.image_basis_ = np.asarray(state["image_basis"], dtype=np.float64)
        self.topic_centres_ = np.asarray(state["topic_centres"], dtype=np.float64)
        self.topic_map_ = np.asarray(state["topic_map"], dtype=np.float64)
        self.objective_ = [float(v) for v in state["objective"]]

    def _extra_meta(self):
        return {"n_iter": self.n_iter_, "n_active": self.n_active_}

    def _set_extra_meta(self, meta):
        self.n_iter_ = int(meta.get("n_iter", 0))
        self.n_active_ = check_int(meta["n_active"], "n_active")
        if self.n_active_ > self.n_bits_:
            raise ParameterError(f"n_active must be at most n_bits ({self.n_bits_}), got {self.n_active_}")
