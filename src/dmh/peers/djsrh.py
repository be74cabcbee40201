"""Deep Joint-Semantics Reconstructing Hashing (DJSRH): S. Su, Z. Zhong and C. Zhang, "Deep
Joint-Semantics Reconstructing Hashing for Large-Scale Unsupervised Cross-Modal Retrieval", ICCV 2019.

Objective, per minibatch of ``m`` paired objects (as in the paper and the authors' ``train.py``):

* modality similarities from the raw features, mapped to [-1, 1]:
  ``S_I = 2 cos(F_I, F_I) - 1``, ``S_T = 2 cos(F_T, F_T) - 1``;
* the joint-semantics matrix ``S~ = beta S_I + (1 - beta) S_T`` and its second-order refinement
  ``S = mu [(1 - eta) S~ + eta S~ S~^T / m]`` (:func:`djsrh_similarity`);
* codes ``B_* = tanh(alpha h_*)`` row-normalised, and the reconstruction loss

      L = lambda1 ||B_I B_I^T - S||^2 + ||B_I B_T^T - S||^2 + lambda2 ||B_T B_T^T - S||^2

  (each term a mean over the ``m x m`` entries, ``F.mse_loss``), with ``alpha = sqrt(epoch + 1)``.

Defaults are the authors' MIRFlickr settings (``settings.py`` of github.com/zs-zhong/DJSRH): batch 32,
SGD momentum 0.9, weight decay 5e-4, ``lr`` 0.001 (image) / 0.01 (text), ``beta`` 0.9, ``eta`` 0.4,
``mu`` 1.5, ``lambda1 = lambda2 = 0.1``, 80 epochs (Wikipedia there: beta 0.3, lambdas 0.3, lr 0.01,
200 epochs). Text network ``d -> 4096 -> bits``; the image network over given features is the part
of theirs after AlexNet's fc7, the hash layer ``fc_encode`` (``image_hidden=()``). A lighter setting
for CPU budgets, text width 1024, is :data:`dmh.peers.CPU_SETTINGS` (its cost in ``docs/peers.md``).
"""

from __future__ import annotations

import numpy as np

from .._validation import NON_NEGATIVE, POSITIVE, UNIT_INTERVAL
from ..base import store_init_args
from ._pairwise import SimilarityPeer

__all__ = ["DJSRH", "djsrh_similarity", "cosine_similarity"]


def cosine_similarity(A: np.ndarray, B: np.ndarray | None = None) -> np.ndarray:
    """Cosine similarity of the rows of ``A`` and ``B`` (``B = A`` when omitted; zero rows give 0)."""
    B = A if B is None else B
    na = np.linalg.norm(A, axis=1, keepdims=True)
    nb = np.linalg.norm(B, axis=1, keepdims=True)
    return (A / np.where(na > 0, na, 1.0)) @ (B / np.where(nb > 0, nb, 1.0)).T


def djsrh_similarity(Fi: np.ndarray, Ft: np.ndarray, beta: float, eta: float, mu: float) -> np.ndarray:
    """DJSRH's joint-semantics matrix of a batch of paired raw features ``(m, d_i)``, ``(m, d_t)``."""
    S_I = 2.0 * cosine_similarity(Fi) - 1.0
    S_T = 2.0 * cosine_similarity(Ft) - 1.0
    S_tilde = beta * S_I + (1.0 - beta) * S_T
    m = Fi.shape[0]
    return mu * ((1.0 - eta) * S_tilde + eta * (S_tilde @ S_tilde.T) / m)


class DJSRH(SimilarityPeer):
    """DJSRH (Su et al., ICCV 2019) over given image and text features; paired objects only.

    Parameters (source of each default in brackets)
    ----------
    n_bits : int
        Code length.
    beta, eta, mu : float [0.9, 0.4, 1.5; authors' MIRFlickr settings]
        Weight of the image similarity in ``S~``; weight of the second-order term; scale of ``S``.
    lambda1, lambda2 : float [0.1, 0.1]
        Weights of the image-image and text-text reconstruction terms.
    epochs : int [80; the authors' Wikipedia setting: 200]
        Passes over the paired objects.
    batch_size : int [32]
    image_lr, text_lr : float [0.001, 0.01]
        SGD learning rates.
    momentum, weight_decay : float [0.9, 5e-4]
    image_hidden : tuple of int [(); the hash layer over the given features, as the authors' code
        over fc7 features]
        Hidden widths of the image MLP.
    text_hidden : tuple of int [(4096,), the authors'; CPU setting (1024,)]
        Hidden widths of the text MLP.
    tol, patience : float, int [0, 5]
        Optional label-free stopping rule: stop when the epoch's training loss has not fallen by a
        relative ``tol`` for ``patience`` epochs (``tol=0`` runs all ``epochs``).
    input_scaling : {"none", "feature"} ["none": the authors' code feeds its features as given]
        How the networks see their inputs: as given, or z-scored per feature with the training
        statistics (which blows the rare words of a 0/1 bag of words up to large values).
    device : {"cpu", "cuda", "auto"}
    random_state : int, Generator or None

    Attributes
    ----------
    nets_ : dict modality -> torch module
    scalers_ : dict modality -> (mean, scale) of the training features
    loss_history_ : array (n_iter_,)
        Mean training loss per epoch.
    n_iter_ : int
        Epochs run.
    """

    _parameter_constraints = {
        **SimilarityPeer._parameter_constraints,
        "beta": [UNIT_INTERVAL], "eta": [UNIT_INTERVAL], "mu": [POSITIVE], "lambda1": [NON_NEGATIVE],
        "lambda2": [NON_NEGATIVE],
    }

    method_name = "djsrh"

    def __init__(self, n_bits=64, *, beta=0.9, eta=0.4, mu=1.5, lambda1=0.1, lambda2=0.1, epochs=80,
                 batch_size=32, image_lr=0.001, text_lr=0.01, momentum=0.9, weight_decay=5e-4,
                 image_hidden=(), text_hidden=(4096,), tol=0.0, patience=5, input_scaling="none", device="cpu",
                 random_state=None):
        store_init_args(self, locals())

    def _batch_similarity(self, Fi, Ft, idx):
        return djsrh_similarity(Fi[idx], Ft[idx], self.beta, self.eta, self.mu)

    def _loss(self, hi, ht, S):
        from torch.nn import functional as F

        bi = F.normalize(hi, dim=1)
        bt = F.normalize(ht, dim=1)
        return (self.lambda1 * F.mse_loss(bi @ bi.T, S) + F.mse_loss(bi @ bt.T, S)
                + self.lambda2 * F.mse_loss(bt @ bt.T, S))
