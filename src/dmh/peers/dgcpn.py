"""Deep Graph-neighbor Coherence Preserving Network (DGCPN): J. Yu, H. Zhou, Y. Zhan and D. Tao,
"Deep Graph-neighbor Coherence Preserving Network for Unsupervised Cross-modal Hashing", AAAI 2021
(github.com/Atmegal/DGCPN).

Target similarity (:func:`dgcpn_similarity`), once over all ``n`` paired training objects, from the
raw features:

* ``S_pair = a1 cos(F_T, F_T) + (1 - a1) cos(F_I, F_I)``;
* graph neighbours (:func:`neighbour_weights`): each row of ``S_pair`` keeps its ``k`` largest
  entries except the largest one (the object itself), the others are set to 0, and the row is
  normalised to sum 1, giving ``P``; the graph-neighbour coherence is ``C = scale P P^T`` with
  ``scale = coherence_scale * k`` (two objects are coherent when they share neighbours);
* ``S = 2 [(1 - a2) S_pair + a2 C] - 1``; each minibatch uses its block of ``S``.

Loss (:func:`dgcpn_loss`) of image and text outputs ``c_I``, ``c_T`` of a batch of ``m`` objects,
rows normalised to ``B_I``, ``B_T``, off-diagonal mask ``O = 1 - I``, ``mse`` a mean over entries::

    L = mse(diag(B_I B_T^T), K)                                             (paired objects)
        + dw [mse(O B_T B_T^T, O S) + mse(O B_I B_T^T, O S) + mse(O B_I B_I^T, O S)]
        + cw [mse(B_I B_T^T, B_I B_I^T) + mse(B_I B_T^T, B_T B_T^T) + mse(B_I B_I^T, B_T B_T^T)
              + mse(B_I B_T^T, B_T B_I^T)]                                  (consistency)

Three updates per batch (:meth:`DGCPN._update`, the half-real, half-binary optimisation): both
networks on ``L(c_I, c_T)``; then, from a new forward pass, the image network on
``L(c_I, sign(c_T))`` and the text network on ``L(sign(c_I), c_T)`` (the signs without gradient).
The outputs are ``c = tanh(h)``: DGCPN does not use DJSRH's ``tanh(sqrt(epoch + 1) h)``.

Defaults from the authors' ``train.py`` (MIRFlickr): SGD lr 0.005 for both networks, momentum 0.9,
weight decay 5e-4, batch 32, ``a1`` 0.01, ``a2`` 0.3, ``K`` 1.5, ``dw = cw = 1``, 100 epochs; image
network ``fc1`` (4096) + dropout 0.5 + hash layer, text network ``fc1`` (4096) + dropout 0.5 + hash
layer drawn from ``N(0, 0.3^2)``. Their code's ``knn_number`` 3000 is the number of entries *removed*
from each row of the 5,000 training objects, so the paper's ``k`` is 2,000 (``knn_fraction`` 0.4), and
its ``scale`` 4000 is ``2 k`` (``coherence_scale`` 2). A lighter setting for CPU budgets (width 1024,
35 epochs) is :data:`dmh.peers.CPU_SETTINGS` (its cost in ``docs/peers.md``).
"""

from __future__ import annotations

import numbers

import numpy as np

from .._validation import NON_NEGATIVE, POSITIVE, UNIT_INTERVAL, Interval
from ..base import store_init_args
from ._pairwise import SimilarityPeer
from .djsrh import cosine_similarity

__all__ = ["DGCPN", "dgcpn_similarity", "neighbour_weights", "dgcpn_loss"]


def neighbour_weights(S_pair: np.ndarray, k: int) -> np.ndarray:
    """Each row of ``S_pair`` kept on its ``k`` largest entries less the largest one, normalised to
    sum 1 (in ascending order with ties by column, the first ``n - k`` entries and the last are
    zeroed; a row whose kept entries do not sum to a positive number is left zero)."""
    n = S_pair.shape[0]
    k = min(max(int(k), 1), n)
    order = np.argsort(S_pair, axis=1, kind="stable")
    P = np.array(S_pair, dtype=np.float64, copy=True)
    rows = np.arange(n)[:, None]
    P[rows, order[:, : n - k]] = 0.0
    P[np.arange(n), order[:, -1]] = 0.0
    sums = P.sum(1, keepdims=True)
    return np.where(sums > 0, P / np.where(sums > 0, sums, 1.0), 0.0)


def dgcpn_similarity(Fi: np.ndarray, Ft: np.ndarray, a1: float, a2: float, k: int,
                     coherence_scale: float) -> np.ndarray:
    """DGCPN's target similarity over all paired objects (see the module docstring)."""
    S_pair = a1 * cosine_similarity(Ft) + (1.0 - a1) * cosine_similarity(Fi)
    P = neighbour_weights(S_pair, k)
    C = (coherence_scale * min(max(int(k), 1), S_pair.shape[0])) * (P @ P.T)
    return 2.0 * ((1.0 - a2) * S_pair + a2 * C) - 1.0


def dgcpn_loss(ci, ct, S, pair_target: float = 1.5, dis_weight: float = 1.0, cons_weight: float = 1.0):
    """DGCPN's loss of a batch's outputs (torch ``(m, bits)``; either may be a detached sign)."""
    import torch
    from torch.nn import functional as F

    bi = F.normalize(ci, dim=1)
    bt = F.normalize(ct, dim=1)
    ii, tt, it = bi @ bi.T, bt @ bt.T, bi @ bt.T
    off = 1.0 - torch.eye(S.shape[0], dtype=S.dtype, device=S.device)
    pair = F.mse_loss(it.diagonal(), torch.full_like(it.diagonal(), pair_target))
    dis = F.mse_loss(tt * off, S * off) + F.mse_loss(it * off, S * off) + F.mse_loss(ii * off, S * off)
    cons = F.mse_loss(it, ii) + F.mse_loss(it, tt) + F.mse_loss(ii, tt) + F.mse_loss(it, it.T)
    return pair + dis_weight * dis + cons_weight * cons


class DGCPN(SimilarityPeer):
    """DGCPN (Yu et al., AAAI 2021) over given image and text features; paired objects only.

    The target similarity is an ``n x n`` matrix over the paired training objects (memory
    ``4 n^2`` bytes during the fit).

    Parameters (defaults: the authors' ``train.py``, MIRFlickr, unless said otherwise)
    ----------
    n_bits : int
    a1 : float [0.01]
        Weight of the text similarity in ``S_pair``.
    a2 : float [0.3]
        Weight of the graph-neighbour coherence in ``S``.
    knn_fraction : float [0.4]
        ``k`` as a fraction of the training objects (the authors: 2,000 of 5,000); at least 1.
    coherence_scale : float [2.0]
        The coherence ``P P^T`` is multiplied by ``coherence_scale * k`` (the authors: 4000 = 2 x 2000).
    pair_target : float [1.5]
        ``K``, the target of the paired objects' cross-modal similarities.
    dis_weight, cons_weight : float [1.0, 1.0]
        ``dw`` and ``cw``, the weights of the similarity and consistency terms.
    dropout : float [0.5]
        After each hidden layer of both networks, in training.
    text_init_std : float [0.3]
        Standard deviation of the text hash layer's initial weights.
    epochs : int [100, the authors' (they keep the epoch of the best labelled validation MAP; here the
        last); CPU setting 35]
    batch_size : int [32]
    image_lr, text_lr : float [0.005, 0.005]
    momentum, weight_decay : float [0.9, 5e-4]
    image_hidden, text_hidden : tuple of int [(4096,), (4096,), the authors'; CPU setting (1024,), (1024,)]
    tol, patience, input_scaling, device, random_state
        As in :class:`dmh.peers.djsrh.DJSRH`.

    Attributes
    ----------
    n_neighbours_ : int
        ``k``.
    nets_, scalers_, loss_history_, n_iter_
        As in :class:`dmh.peers.djsrh.DJSRH`.
    """

    _parameter_constraints = {
        **SimilarityPeer._parameter_constraints,
        "a1": [UNIT_INTERVAL], "a2": [UNIT_INTERVAL], "knn_fraction": [Interval(numbers.Real, 0, 1, closed="right")],
        **dict.fromkeys(("coherence_scale", "pair_target", "dis_weight", "cons_weight"), [NON_NEGATIVE]),
        "dropout": [Interval(numbers.Real, 0, 1, closed="left")], "text_init_std": [POSITIVE],
    }

    method_name = "dgcpn"
    _drop_last = False  # the authors' loader keeps the last, smaller batch

    def __init__(self, n_bits=64, *, a1=0.01, a2=0.3, knn_fraction=0.4, coherence_scale=2.0, pair_target=1.5,
                 dis_weight=1.0, cons_weight=1.0, dropout=0.5, text_init_std=0.3, epochs=100, batch_size=32,
                 image_lr=0.005, text_lr=0.005, momentum=0.9, weight_decay=5e-4, image_hidden=(4096,),
                 text_hidden=(4096,), tol=0.0, patience=5, input_scaling="none", device="cpu", random_state=None):
        store_init_args(self, locals())

    def _hash_init_std(self):
        return {"text": float(self.text_init_std)}

    def _alpha(self, epoch):
        return 1.0

    def _setup(self, Fi, Ft, rng):
        n = Fi.shape[0]
        self.n_neighbours_ = max(1, int(round(self.knn_fraction * n)))
        self._S = dgcpn_similarity(Fi, Ft, self.a1, self.a2, self.n_neighbours_,
                                   self.coherence_scale).astype(np.float32)

    def _batch_similarity(self, Fi, Ft, idx):
        return self._S[np.ix_(idx, idx)]

    def _end(self):
        self._S = None  # the n x n target is not part of the model

    def _loss(self, ci, ct, S):
        return dgcpn_loss(ci, ct, S, self.pair_target, self.dis_weight, self.cons_weight)

    def _update(self, run, xi, xt, S):
        """Both networks on ``L(c_I, c_T)``; then, from a new forward pass, the image network on
        ``L(c_I, sign(c_T))`` and the text network on ``L(sign(c_I), c_T)``. Returns the first loss."""
        nets, opts = run.nets, run.opts
        loss = self._loss(nets["image"](xi), nets["text"](xt), S)
        for opt in opts.values():
            opt.zero_grad()
        loss.backward()
        for opt in opts.values():
            opt.step()
        ci, ct = nets["image"](xi), nets["text"](xt)
        loss_i = self._loss(ci, ct.sign().detach(), S)
        opts["image"].zero_grad()
        loss_i.backward()
        opts["image"].step()
        loss_t = self._loss(ci.sign().detach(), ct, S)
        opts["text"].zero_grad()
        loss_t.backward()
        opts["text"].step()
        return float(loss.detach())

    def _extra_meta(self):
        return {"n_neighbours": self.n_neighbours_}

    def _set_extra_meta(self, meta):
        if "n_neighbours" in meta:
            self.n_neighbours_ = int(meta["n_neighbours"])
