"""Deep Graph-neighbor Coherence Preserving Network (DGCPN): J. Yu, H. Zhou, Y. Zhan and D. Tao,
"Deep Graph-neighbor Coherence Preserving Network for Unsupervised Cross-modal Hashing", AAAI 2021.

DGCPN's idea (paper abstract and method section): the similarity of two objects should not rest on
their own features only but also on their neighbours in a graph over the training data
(*graph-neighbour coherence*), combined with the similarity the two modalities agree on (*coexistent
similarity*); codes preserve it within and across modalities (*intra- and inter-modality
consistency*), and a *half-real, half-binary* optimisation compares real-valued outputs with the
other side's binary codes to reduce the quantisation error.

Implemented (:func:`dgcpn_similarity`), over all ``n`` paired training objects:

* ``S_pair = a1 cos(F_T, F_T) + (1 - a1) cos(F_I, F_I)`` from the raw features (coexistent);
* ``P``: each row of ``max(S_pair, 0)`` kept on its ``k`` largest entries and normalised to sum 1;
  the graph-neighbour coherence ``C = c k P P^T`` (``c k`` rescales: with ``k`` equal weights
  ``k <P_i, P_i> = 1``);
* ``S = 2 [(1 - a2) S_pair + a2 C] - 1``; each batch uses its block of ``S``.

Loss per batch, with ``H = tanh(alpha h)`` and ``B = sign(h)`` (no gradient through ``B``), all rows
normalised (``mse`` = mean squared difference to ``S``):

    L = [mse(H_I H_T^T) + mse(H_I B_T^T) + mse(H_T B_I^T)]                  (inter-modal)
        + gamma [mse(H_I H_I^T) + mse(H_T H_T^T) + mse(H_I B_I^T) + mse(H_T B_T^T)]   (intra-modal)

**What could not be checked.** The paper's text and the authors' code (github.com/Atmegal/DGCPN) were
not available to us; the construction above (top-``k`` row-normalised neighbour weights, their inner
products as coherence, the blend with ``S_pair``, the ``2 S - 1`` map) and the defaults ``a1`` (text
weight) 0.1, ``a2`` 0.3, ``k`` = 3000 of 20,015 MIRFlickr training objects (``knn_fraction`` 0.15)
and the coherence scale 4000 / 3000 (``c`` = 4/3) are from our recollection of the authors' code and
are marked as such in ``docs/peers.md``. The loss composition and ``gamma`` (1.0) are our reading of
the three similarity types and the half-real/half-binary strategy named in the abstract. Training
settings follow DJSRH, on whose code DGCPN builds: SGD momentum 0.9, weight decay 5e-4, batch 32,
lr 0.001 (image) / 0.01 (text).
"""

from __future__ import annotations

import numpy as np

from ._pairwise import PairwiseDeepPeer
from .djsrh import cosine_similarity

__all__ = ["DGCPN", "dgcpn_similarity", "neighbour_weights"]


def neighbour_weights(S_pair: np.ndarray, k: int) -> np.ndarray:
    """Rows of ``max(S_pair, 0)`` kept on their ``k`` largest entries (ties: lower index first),
    each normalised to sum 1 (an all-zero row stays zero)."""
    n = S_pair.shape[0]
    k = min(k, n)
    W = np.maximum(S_pair, 0.0)
    order = np.argsort(-W, axis=1, kind="stable")[:, :k]
    P = np.zeros_like(W)
    rows = np.arange(n)[:, None]
    P[rows, order] = W[rows, order]
    sums = P.sum(1, keepdims=True)
    return P / np.where(sums > 0, sums, 1.0)


def dgcpn_similarity(Fi: np.ndarray, Ft: np.ndarray, a1: float, a2: float, k: int, c: float) -> np.ndarray:
    """DGCPN's target similarity over all paired objects (see the module docstring)."""
    S_pair = a1 * cosine_similarity(Ft) + (1.0 - a1) * cosine_similarity(Fi)
    P = neighbour_weights(S_pair, k)
    C = c * min(k, S_pair.shape[0]) * (P @ P.T)
    return 2.0 * ((1.0 - a2) * S_pair + a2 * C) - 1.0


class DGCPN(PairwiseDeepPeer):
    """DGCPN (Yu et al., AAAI 2021) over given image and text features; paired objects only.

    The target similarity is an ``n x n`` matrix over the paired training objects (memory
    ``4 n^2`` bytes). See the module docstring for which parts are reconstructed.

    Parameters
    ----------
    n_bits : int
    a1 : float [0.1]
        Weight of the text similarity in ``S_pair``.
    a2 : float [0.3]
        Weight of the graph-neighbour coherence in ``S``.
    knn_fraction : float [0.15]
        Neighbours per object, as a fraction of the training objects (3000 / 20,015 in the authors'
        MIRFlickr setting); at least 1.
    coherence_scale : float [4/3]
        ``c`` in ``C = c k P P^T``.
    gamma : float [1.0]
        Weight of the intra-modal terms.
    epochs : int [20]
    batch_size : int [32]
    image_lr, text_lr : float [0.001, 0.01]
    momentum, weight_decay : float [0.9, 5e-4]
    image_hidden, text_hidden : tuple of int [(512,), (512,)]
    tol, patience, device, random_state
        As in :class:`dmh.peers.djsrh.DJSRH`.

    Attributes
    ----------
    n_neighbours_ : int
    nets_, scalers_, loss_history_, n_iter_
        As in :class:`dmh.peers.djsrh.DJSRH`.
    """

    method_name = "dgcpn"

    def __init__(self, n_bits=64, *, a1=0.1, a2=0.3, knn_fraction=0.15, coherence_scale=4.0 / 3.0, gamma=1.0,
                 epochs=20, batch_size=32, image_lr=0.001, text_lr=0.01, momentum=0.9, weight_decay=5e-4,
                 image_hidden=(512,), text_hidden=(512,), tol=0.0, patience=5, input_scaling="none", device="cpu",
                 random_state=None):
        self.n_bits = n_bits
        self.a1 = a1
        self.a2 = a2
        self.knn_fraction = knn_fraction
        self.coherence_scale = coherence_scale
        self.gamma = gamma
        self.epochs = epochs
        self.batch_size = batch_size
        self.image_lr = image_lr
        self.text_lr = text_lr
        self.momentum = momentum
        self.weight_decay = weight_decay
        self.image_hidden = image_hidden
        self.text_hidden = text_hidden
        self.tol = tol
        self.patience = patience
        self.input_scaling = input_scaling
        self.device = device
        self.random_state = random_state

    def _check_method_params(self):
        from . import _deep

        _deep.check_float(self, "a1", 0.0, 1.0)
        _deep.check_float(self, "a2", 0.0, 1.0)
        _deep.check_float(self, "knn_fraction", 0.0, 1.0, low_open=True)
        _deep.check_float(self, "coherence_scale", 0.0)
        _deep.check_float(self, "gamma", 0.0)

    def _setup(self, Fi, Ft, rng):
        n = Fi.shape[0]
        self.n_neighbours_ = max(1, int(round(self.knn_fraction * n)))
        self._S = dgcpn_similarity(Fi, Ft, self.a1, self.a2, self.n_neighbours_,
                                   self.coherence_scale).astype(np.float32)

    def _batch_similarity(self, Fi, Ft, idx):
        return self._S[np.ix_(idx, idx)]

    def _fit(self, data):
        try:
            super()._fit(data)
        finally:
            self._S = None  # the n x n target is not part of the model

    def _loss(self, hi, ht, S):
        import torch
        from torch.nn import functional as F

        ni = F.normalize(hi, dim=1)
        nt = F.normalize(ht, dim=1)
        bi = F.normalize(torch.where(hi > 0, 1.0, -1.0).detach(), dim=1)
        bt = F.normalize(torch.where(ht > 0, 1.0, -1.0).detach(), dim=1)
        inter = F.mse_loss(ni @ nt.T, S) + F.mse_loss(ni @ bt.T, S) + F.mse_loss(nt @ bi.T, S)
        intra = (F.mse_loss(ni @ ni.T, S) + F.mse_loss(nt @ nt.T, S)
                 + F.mse_loss(ni @ bi.T, S) + F.mse_loss(nt @ bt.T, S))
        return inter + self.gamma * intra

    def _extra_meta(self):
        return {"n_neighbours": self.n_neighbours_}

    def _set_extra_meta(self, meta):
        if "n_neighbours" in meta:
            self.n_neighbours_ = int(meta["n_neighbours"])
