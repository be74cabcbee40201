"""Joint-modal Distribution-based Similarity Hashing (JDSH): S. Liu, S. Qian, Y. Guan, J. Zhan and
L. Ying, "Joint-modal Distribution-based Similarity Hashing for Large-scale Unsupervised Deep
Cross-modal Retrieval", SIGIR 2020.

Objective, per minibatch of paired objects (the paper; the authors' code as published in the
JDSH/DJSRH repositories that carry it):

* ``S_I = 2 cos(F_I, F_I) - 1``, ``S_T = 2 cos(F_T, F_T) - 1`` from the raw features;
* the joint-modal similarity ``S_high = cos(S_I, S_T)`` (rows of the two matrices compared) and
  ``S~ = alpha S_I + beta S_T + lamb (S_high + S_high^T) / 2`` (:func:`jdsh_joint_similarity`);
* Distribution-based Similarity Decision and Weighting (DSDW, :func:`dsdw_weighting`): entries below
  ``left = loc - a * scale_left`` are decided dissimilar and weighted
  ``(1 + L1 exp(s_min - s)) s``, entries above ``right = loc + b * scale_right`` similar and weighted
  ``(1 + L2 exp(s - s_max)) s``; the rest are kept; ``S = mu * weighted``;
* codes ``B = tanh(alpha_t h)`` row-normalised and

      L = intra ||B_I B_I^T - S||^2 + ||B_I B_T^T - S||^2 + ||B_T B_I^T - S||^2
          - mean_i <B_I,i, B_T,i> + intra ||B_T B_T^T - S||^2.

The distribution parameters (``loc``, the two scales, ``s_min``, ``s_max``) are constants fitted
offline to MIRFlickr in the authors' configuration (-0.49, 0.019, 0.088, -0.52, 0.68). This
implementation fits them to the training data at the start of ``fit`` (:func:`fit_distribution`),
label-free: over the off-diagonal entries of ``S~`` in ``n_fit_batches`` random batches, ``loc`` is
the mode of the histogram, each scale the root mean square distance to ``loc`` on its side (a
half-normal fit), ``s_min``/``s_max`` the extremes. ``distribution="mirflickr"`` uses the authors'
constants instead.

Defaults from the authors' MIRFlickr configuration: ``alpha`` 0.5, ``beta`` 0.1, ``lamb`` 0.4, ``mu``
1.4, ``intra`` 0.1, ``a`` (ALPHA) 2, ``b`` (BETA) 4, ``L1`` 0.1, ``L2`` 0.2, SGD lr 0.01 for both
networks, momentum 0.9, weight decay 5e-4, batch 32, 300 epochs; image network: the hash layer over
the frozen AlexNet's fc7 features (here: over the given features, ``image_hidden=()``), text network
``d -> 4096 -> bits``. A lighter setting for CPU budgets (text width 1024, 100 epochs) is
:data:`dmh.peers.CPU_SETTINGS` (its cost in ``docs/peers.md``).
"""

from __future__ import annotations

import numpy as np

from .._validation import NON_NEGATIVE, POSITIVE, POSITIVE_INT, Options
from ..base import store_init_args
from ._pairwise import SimilarityPeer
from .djsrh import cosine_similarity

__all__ = ["JDSH", "jdsh_joint_similarity", "dsdw_weighting", "fit_distribution", "MIRFLICKR_DISTRIBUTION"]

#: the distribution constants of the authors' MIRFlickr configuration (LOC_LEFT = LOC_RIGHT, SCALE_LEFT,
#: SCALE_RIGHT, MIN, MAX of ``JDSH_MIRFlickr.json``)
MIRFLICKR_DISTRIBUTION = {"loc": -0.49, "scale_left": 0.019, "scale_right": 0.088, "s_min": -0.52, "s_max": 0.68}


def jdsh_joint_similarity(Fi: np.ndarray, Ft: np.ndarray, alpha: float, beta: float, lamb: float) -> np.ndarray:
    """JDSH's joint-modal similarity ``S~`` of a batch of paired raw features."""
    S_I = 2.0 * cosine_similarity(Fi) - 1.0
    S_T = 2.0 * cosine_similarity(Ft) - 1.0
    S_high = cosine_similarity(S_I, S_T)
    return alpha * S_I + beta * S_T + lamb * (S_high + S_high.T) / 2.0


def dsdw_weighting(S: np.ndarray, left: float, right: float, s_min: float, s_max: float,
                   l1: float, l2: float) -> np.ndarray:
    """DSDW: weight the entries decided dissimilar (``< left``) and similar (``> right``)."""
    out = np.array(S, dtype=np.float64, copy=True)
    low = S < left
    high = S > right
    out[low] = (1.0 + l1 * np.exp(s_min - S[low])) * S[low]
    out[high] = (1.0 + l2 * np.exp(S[high] - s_max)) * S[high]
    return out


def fit_distribution(values: np.ndarray, n_bins: int = 200) -> dict:
    """``loc`` (histogram mode), half-normal ``scale_left``/``scale_right`` and the extremes of a
    sample of similarity values."""
    values = np.asarray(values, dtype=np.float64).ravel()
    counts, edges = np.histogram(values, bins=n_bins)
    k = int(np.argmax(counts))
    loc = 0.5 * (edges[k] + edges[k + 1])
    below = values[values < loc]
    above = values[values > loc]
    scale_left = float(np.sqrt(np.mean((below - loc) ** 2))) if below.size else 0.0
    scale_right = float(np.sqrt(np.mean((above - loc) ** 2))) if above.size else 0.0
    return {"loc": float(loc), "scale_left": scale_left, "scale_right": scale_right,
            "s_min": float(values.min()), "s_max": float(values.max())}


class JDSH(SimilarityPeer):
    """JDSH (Liu et al., SIGIR 2020) over given image and text features; paired objects only.

    Parameters (defaults: the authors' MIRFlickr configuration unless said otherwise)
    ----------
    n_bits : int
    alpha, beta, lamb : float [0.5, 0.1, 0.4]
        Weights of ``S_I``, ``S_T`` and the joint-modal term in ``S~``.
    mu : float [1.4]
        Scale of the weighted similarity.
    intra : float [0.1]
        Weight of the intra-modal reconstruction terms.
    a, b : float [2, 4]
        Decision thresholds in scales from ``loc`` (the configuration's ALPHA and BETA).
    l1, l2 : float [0.1, 0.2]
        Weighting strengths of the dissimilar and similar entries.
    distribution : {"fit", "mirflickr"} ["fit"]
        ``"fit"``: the distribution constants fitted to the training data (see the module);
        ``"mirflickr"``: the authors' constants, fitted to MIRFlickr (:data:`MIRFLICKR_DISTRIBUTION`).
    n_fit_batches : int [50; not in the paper]
        Random batches whose ``S~`` entries the distribution is fitted to.
    epochs : int [300, the authors' configuration; CPU setting 100]
    batch_size : int [32]
    image_lr, text_lr : float [0.01, 0.01]
    momentum, weight_decay : float [0.9, 5e-4]
    image_hidden, text_hidden : tuple of int [(), (4096,), the authors'; CPU setting (), (1024,)]
    tol, patience, device, random_state
        As in :class:`dmh.peers.djsrh.DJSRH`.

    Attributes
    ----------
    distribution_ : dict
        The fitted ``loc``, ``scale_left``, ``scale_right``, ``s_min``, ``s_max`` and the thresholds
        ``left``, ``right``.
    nets_, scalers_, loss_history_, n_iter_
        As in :class:`dmh.peers.djsrh.DJSRH`.
    """

    _parameter_constraints = {
        **SimilarityPeer._parameter_constraints,
        **dict.fromkeys(("alpha", "beta", "lamb", "intra", "a", "b", "l1", "l2"), [NON_NEGATIVE]),
        "mu": [POSITIVE], "n_fit_batches": [POSITIVE_INT], "distribution": [Options("fit", "mirflickr")],
    }

    method_name = "jdsh"

    def __init__(self, n_bits=64, *, alpha=0.5, beta=0.1, lamb=0.4, mu=1.4, intra=0.1, a=2.0, b=4.0,
                 l1=0.1, l2=0.2, distribution="fit", n_fit_batches=50, epochs=300, batch_size=32, image_lr=0.01,
                 text_lr=0.01,
                 momentum=0.9, weight_decay=5e-4, image_hidden=(), text_hidden=(4096,), tol=0.0,
                 patience=5, input_scaling="none", device="cpu", random_state=None):
        store_init_args(self, locals())

    def _setup(self, Fi, Ft, rng):
        if self.distribution == "mirflickr":
            dist = dict(MIRFLICKR_DISTRIBUTION)
        else:
            dist = self._fit_distribution(Fi, Ft, rng)
        dist["left"] = dist["loc"] - self.a * dist["scale_left"]
        dist["right"] = dist["loc"] + self.b * dist["scale_right"]
        self.distribution_ = dist

    def _fit_distribution(self, Fi, Ft, rng):
        n = Fi.shape[0]
        m = min(int(self.batch_size), n)
        values = []
        off = ~np.eye(m, dtype=bool)
        for _ in range(int(self.n_fit_batches)):
            idx = rng.choice(n, size=m, replace=False)
            S = jdsh_joint_similarity(Fi[idx], Ft[idx], self.alpha, self.beta, self.lamb)
            values.append(S[off])
        return fit_distribution(np.concatenate(values))

    def _batch_similarity(self, Fi, Ft, idx):
        d = self.distribution_
        S = jdsh_joint_similarity(Fi[idx], Ft[idx], self.alpha, self.beta, self.lamb)
        return self.mu * dsdw_weighting(S, d["left"], d["right"], d["s_min"], d["s_max"], self.l1, self.l2)

    def _loss(self, hi, ht, S):
        from torch.nn import functional as F

        bi = F.normalize(hi, dim=1)
        bt = F.normalize(ht, dim=1)
        return (self.intra * F.mse_loss(bi @ bi.T, S) + F.mse_loss(bi @ bt.T, S) + F.mse_loss(bt @ bi.T, S)
                - (bi * bt).sum(1).mean() + self.intra * F.mse_loss(bt @ bt.T, S))

    def _extra_meta(self):
        return {"distribution": self.distribution_}

    def _set_extra_meta(self, meta):
        if "distribution" in meta:
            self.distribution_ = {k: float(v) for k, v in meta["distribution"].items()}
