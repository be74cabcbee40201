"""FSH: Fusion Similarity Hashing (Liu, Ji, Wu, Huang & Zhang, CVPR 2017).

FSH relates every training object to ``l`` anchors through an asymmetric (objects x anchors)
graph that fuses both modalities, embeds that graph into binary codes of the objects (``B``) and of
the anchors (``Bbar``), and learns one linear hash function per modality that predicts ``B``.

Fusion similarity. The anchors are ``l`` k-means centres of the paired objects (both modalities
concatenated), so anchor ``a`` has an image part and a text part. With ``N^v(i)`` the ``s``
nearest anchors of object ``i`` in modality ``v`` and ``K^v`` a Gaussian kernel between anchors in
modality ``v``, the similarity of object ``i`` and anchor ``a`` seen from modality ``v`` is the mean
kernel between ``i``'s neighbourhood in ``v`` and ``a``'s anchor neighbourhood in the *other*
modality ``v'``::

    A^v_ia = (1 / s^2) sum_{p in N^v(i)} sum_{q in N^{v'}(a)} K^v(anchor_p, anchor_q)
    i.e. A^v = Z^v K^v Zbar^{v'}'   (Z: objects -> anchors, Zbar: anchors -> anchors, 1/s weights)

and the fused graph is ``F = sum_v eta_v^r A^v`` with modality weights ``eta`` on the simplex.

Objective (codes ``B`` (n x c), ``Bbar`` (l x c) in {-1, +1}, projections ``W^v``)::

    min  sum_v eta_v^r sum_{i,a} A^v_ia (c - b_i . bbar_a)             (graph embedding)
       + lambda sum_v (||B - X^v W^v||^2 + ridge ||W^v||^2)            (linear hash functions)
    s.t. eta_v >= 0, sum_v eta_v = 1

Alternating, every step exact: ``B = sign(F Bbar + 2 lambda sum_v X^v W^v)``,
``Bbar = sign(F' B)``, ``W^v`` by ridge regression, ``eta_v ∝ L_v^(1 / (1 - r))`` with ``L_v`` the
graph term of modality ``v``. Hash functions: ``h^v(x) = sign(x W^v)``.

Preprocessing: every sample scaled to unit norm, then centred with the training mean (as in the
authors' public re-implementation's demo). Where the paper could not be checked (the form of the
fusion similarity, the kernel width, the weight update), see ``docs/baselines.md``.
"""

from __future__ import annotations

import numbers

import numpy as np
from scipy.linalg import solve
from sklearn.cluster import KMeans
from sklearn.metrics import pairwise_distances

from .._validation import NON_NEGATIVE, POSITIVE, POSITIVE_INT, Interval, Options, check_random_state
from ..base import BaseHasher, store_init_args
from ..data import CrossModalData
from ..errors import ParameterError
from .fitting import l2_normalize_rows, paired_views, settled, warn_not_converged

__all__ = ["AUTO_RIDGES", "FSH", "auto_ridge", "effective_dof", "fsh_objective", "fusion_similarity",
           "knn_uniform"]


def knn_uniform(D: np.ndarray, s: int) -> np.ndarray:
    """Row-stochastic matrix with ``1/s`` on the ``s`` smallest entries of each row of ``D``
    (distances; ties broken by column order)."""
    idx = np.argsort(D, axis=1, kind="stable")[:, :s]
    Z = np.zeros(D.shape)
    np.put_along_axis(Z, idx, 1.0 / s, axis=1)
    return Z


def fusion_similarity(X: list[np.ndarray], anchors: list[np.ndarray], s: int,
                      sigmas: list[float]) -> list[np.ndarray]:
    """The two asymmetric graphs ``A^v = Z^v K^v Zbar^{v'}'`` (objects x anchors), see above."""
    Z, Zbar, K = [], [], []
    for Xv, Av, sig in zip(X, anchors, sigmas, strict=True):
        Z.append(knn_uniform(pairwise_distances(Xv, Av), s))
        Daa = pairwise_distances(Av, Av)
        Zbar.append(knn_uniform(Daa, s))
        K.append(np.exp(-(Daa**2) / (2.0 * sig**2)))
    return [Z[0] @ K[0] @ Zbar[1].T, Z[1] @ K[1] @ Zbar[0].T]


def fsh_objective(A, eta, r, B, Bbar, X, W, lambda_, ridge) -> float:
    """The objective above; ``ridge`` is one number or one per modality."""
    c = B.shape[1]
    ridges = np.broadcast_to(np.asarray(ridge, dtype=np.float64), (2,))
    graph = sum(eta[v] ** r * float((A[v] * (c - B @ Bbar.T)).sum()) for v in range(2))
    reg = sum(float(np.sum((B - X[v] @ W[v]) ** 2) + ridges[v] * np.sum(W[v] ** 2)) for v in range(2))
    return float(graph + lambda_ * reg)


#: ridges tried by ``ridge="auto"`` (half-decades from 1e-2, the value that suits Wikipedia and UCI digits)
AUTO_RIDGES = tuple(1e-2 * 10 ** (j / 2) for j in range(11))
#: ``ridge="auto"``: at most this share of the samples as effective parameters per regression
AUTO_DOF_SHARE = 0.1


def effective_dof(eigenvalues: np.ndarray, ridge: float) -> float:
    """Effective degrees of freedom ``sum_j s_j / (s_j + ridge)`` of a ridge regression whose
    Gram matrix ``X'X`` has the eigenvalues ``s_j`` (the trace of its hat matrix)."""
    s = np.maximum(np.asarray(eigenvalues, dtype=np.float64), 0.0)
    return float((s / (s + ridge)).sum())


def auto_ridge(X: np.ndarray, share: float = AUTO_DOF_SHARE, grid=AUTO_RIDGES) -> float:
    """The smallest ridge of ``grid`` whose regression on ``X`` (n x d) has at most ``share * n``
    effective degrees of freedom (the largest of ``grid`` when none has)."""
    s = np.linalg.eigvalsh(X.T @ X) if X.shape[1] <= X.shape[0] else np.linalg.eigvalsh(X @ X.T)
    limit = share * X.shape[0]
    for ridge in grid:
        if effective_dof(s, ridge) <= limit:
            return float(ridge)
    return float(grid[-1])


def _sign(V):
    return np.where(V > 0, 1.0, -1.0)


class FSH(BaseHasher):
    """Fusion Similarity Hashing (Liu et al., CVPR 2017), fully paired.

    Parameters (default and its source in brackets)
    ----------
    n_bits : int
        Code length.
    n_anchors : int [50]
        Number of anchors ``l`` (authors' public demo: 50).
    n_neighbors : int [10]
        Nearest anchors ``s`` per object and per anchor (authors' demo: 10).
    lambda_ : float [300]
        Weight of the hash-function (regression) term against the graph term (authors' demo: 300).
    r : float [2]
        Exponent of the modality weights ``eta_v^r`` (> 1); 2 corresponds to the demo's 0.5.
    ridge : "auto" or float ["auto"]
        Ridge of the per-modality regressions (not in the re-implementation's description; ours).
        ``"auto"``: per modality, the smallest of :data:`AUTO_RIDGES` (1e-2 .. 1e3) leaving the
        regression at most ``n / 10`` effective degrees of freedom, so the hash functions cannot
        interpolate the codes when the features have nearly as many dimensions as there are pairs
        (on Wikipedia and UCI digits it is 1e-2; see ``docs/baselines.md``). A number fixes it
        for both modalities.
    sigma : float or None [None]
        Kernel width between anchors; None takes each modality's mean anchor-anchor distance.
    max_iter : int [100]
        Alternating iterations (authors' demo: 100).
    tol : float [1e-6]
        Stop when the objective decreases by less than ``tol`` times its absolute value.
    random_state : int, Generator or None
        Seed of k-means and of the random initial projections; same seed, same codes.

    Attributes
    ----------
    image_mean_, text_mean_ : training means (after unit-norm scaling).
    ridges_ : (2,) the ridges used (image, text).
    image_weights_, text_weights_ : (d, n_bits) hash projections ``W^v``.
    anchor_codes_ : (l, n_bits) ``Bbar``. eta_ : (2,) modality weights (image, text).
    objective_ : objective after initialisation and after every iteration. n_iter_ : iterations.
    """

    _parameter_constraints = {
        **BaseHasher._parameter_constraints,
        "n_anchors": [Interval(numbers.Integral, 2, None)], "n_neighbors": [POSITIVE_INT], "lambda_": [POSITIVE],
        "r": [Interval(numbers.Real, 1, None, closed="right")], "ridge": [Options("auto"), POSITIVE],
        "sigma": [None, POSITIVE], "max_iter": [POSITIVE_INT], "tol": [NON_NEGATIVE],
    }

    method_name = "fsh"
    uses_unpaired = False
    min_paired = 2

    def __init__(self, n_bits=32, *, n_anchors=50, n_neighbors=10, lambda_=300.0, r=2.0,
                 ridge="auto", sigma=None, max_iter=100, tol=1e-6, random_state=None):
        store_init_args(self, locals())

    def _check_param_combinations(self, n_bits):
        if self.n_neighbors > self.n_anchors:
            raise ParameterError(
                f"FSH: n_neighbors must be at most n_anchors ({self.n_anchors}), got {self.n_neighbors}"
            )

    # ------------------------------------------------------------------ fitting
    def _fit(self, data: CrossModalData) -> None:
        l_, s = int(self.n_anchors), int(self.n_neighbors)
        c = self.n_bits_
        Xi, Xt = paired_views(data, "FSH", l_, f"it places n_anchors={l_} anchors among them")
        rng = check_random_state(self.random_state)
        Xi = l2_normalize_rows(Xi)
        Xt = l2_normalize_rows(Xt)
        self.image_mean_ = Xi.mean(axis=0)
        self.text_mean_ = Xt.mean(axis=0)
        X = [Xi - self.image_mean_, Xt - self.text_mean_]
        di = X[0].shape[1]

        km = KMeans(n_clusters=l_, n_init=1, random_state=int(rng.integers(2**31 - 1)))
        centres = km.fit(np.hstack(X)).cluster_centers_
        anchors = [centres[:, :di], centres[:, di:]]
        if self.sigma is None:
            sigmas = []
            for Av in anchors:
                D = pairwise_distances(Av, Av)
                sig = float(D[np.triu_indices(l_, 1)].mean())
                sigmas.append(sig if sig > 0 else 1.0)
        else:
            sigmas = [float(self.sigma)] * 2
        A = fusion_similarity(X, anchors, s, sigmas)

        lam, r = float(self.lambda_), float(self.r)
        if self.ridge == "auto":
            ridges = [auto_ridge(Xv) for Xv in X]
        else:
            ridges = [float(self.ridge)] * 2
        # ridge regression operators (X'X + ridge I)^-1 X', computed once
        P = [solve(Xv.T @ Xv + rv * np.eye(Xv.shape[1]), Xv.T, assume_a="pos")
             for Xv, rv in zip(X, ridges, strict=True)]

        def objective(L, eta, B, XW, W):
            reg = sum(float(np.sum((B - XW[v]) ** 2) + ridges[v] * np.sum(W[v] ** 2)) for v in range(2))
            return float(eta[0] ** r * L[0] + eta[1] ** r * L[1] + lam * reg)

        def graph_terms(B, Bbar):
            M = c - B @ Bbar.T
            return np.array([float((A[v] * M).sum()) for v in range(2)])

        # initialisation (as the authors' demo): random projections, codes from the text side
        W = [rng.standard_normal((Xv.shape[1], c)) for Xv in X]
        XW = [X[v] @ W[v] for v in range(2)]
        B = _sign(XW[1])
        Bbar = _sign(anchors[1] @ W[1])
        eta = np.array([0.5, 0.5])
        history = [objective(graph_terms(B, Bbar), eta, B, XW, W)]
        for _ in range(int(self.max_iter)):
            F = eta[0] ** r * A[0] + eta[1] ** r * A[1]
            B = _sign(F @ Bbar + 2.0 * lam * (XW[0] + XW[1]))
            Bbar = _sign(F.T @ B)
            W = [P[v] @ B for v in range(2)]
            XW = [X[v] @ W[v] for v in range(2)]
            L = graph_terms(B, Bbar)
            eta = _simplex_weights(L, r)
            history.append(objective(L, eta, B, XW, W))
            if settled(history, self.tol):
                break
        else:
            warn_not_converged("FSH", int(self.max_iter))
        self.objective_, self.n_iter_ = history, len(history) - 1
        self.image_weights_, self.text_weights_ = W
        self.anchor_codes_ = Bbar.astype(np.int8)
        self.eta_ = eta
        self.sigmas_ = np.asarray(sigmas)
        self.ridges_ = np.asarray(ridges)

    # ------------------------------------------------------------------ encoding
    def _project(self, X: np.ndarray, modality: str) -> np.ndarray:
        if modality == "image":
            return (l2_normalize_rows(X) - self.image_mean_) @ self.image_weights_
        return (l2_normalize_rows(X) - self.text_mean_) @ self.text_weights_

    # ------------------------------------------------------------------ persistence
    _STATE = ("image_mean_", "text_mean_", "image_weights_", "text_weights_", "eta_", "sigmas_", "ridges_")

    def _get_state(self):
        state = {name.rstrip("_"): getattr(self, name) for name in self._STATE}
        state["anchor_codes"] = self.anchor_codes_
        state["objective"] = np.asarray(self.objective_, dtype=np.float64)
        return state

    def _state_spec(self):
        return {"image_mean": ("I",), "text_mean": ("T",), "image_weights": ("I", "B"),
                "text_weights": ("T", "B"), "eta": (2,), "sigmas": (2,), "anchor_codes": (None, "B"),
                "objective": (None,)}

    def _set_state(self, state):
        for name in self._STATE:
            key = name.rstrip("_")
            if key == "ridges" and key not in state:  # a model file without the ridges used
                self.ridges_ = np.full(2, np.nan)
                continue
            setattr(self, name, np.asarray(state[key], dtype=np.float64))
        self.anchor_codes_ = np.asarray(state["anchor_codes"], dtype=np.int8)
        self.objective_ = [float(v) for v in state["objective"]]

    def _extra_meta(self):
        return {"n_iter": self.n_iter_}

    def _set_extra_meta(self, meta):
        self.n_iter_ = int(meta.get("n_iter", 0))


def _simplex_weights(L: np.ndarray, r: float) -> np.ndarray:
    """argmin over the simplex of ``sum_v eta_v^r L_v`` (r > 1, L_v >= 0):
    ``eta_v ∝ L_v^(1 / (1 - r))``; a modality with ``L_v = 0`` takes all the weight."""
    L = np.maximum(np.asarray(L, dtype=np.float64), 0.0)
    zero = L <= 0.0
    if zero.any():
        return zero / zero.sum()
    w = L ** (1.0 / (1.0 - r))
    return w / w.sum()
