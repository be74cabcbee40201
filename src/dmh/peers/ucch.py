"""Unsupervised Contrastive Cross-modal Hashing (UCCH): P. Hu, H. Zhu, J. Lin, D. Peng, Y.-P. Zhao and
X. Peng, "Unsupervised Contrastive Cross-modal Hashing", IEEE TPAMI 2022 (github.com/penghu-cs/UCCH).

Networks: an image MLP and a text MLP whose outputs ``u = tanh(h) / ||tanh(h)||`` are compared with
binary codes; the code of an object is ``sign(h)``.

Loss per minibatch of paired objects ``(u_i, v_i)``, ``L = alpha L_c + (1 - alpha) L_r``:

* **Contrastive hashing with a momentum memory** (:class:`BinaryMemory`): a memory ``M`` (n x bits,
  unit rows) holds one vector per training object; object ``i`` is contrasted with the *binary*
  vectors ``sign(M_j)`` of itself (the positive) and of ``K`` objects drawn uniformly with
  replacement (the negatives)::

      L_c = -mean_i log softmax_j(<sign(M_j), u_i> / T')_{j = i}  -  same with v_i,   T' = T sqrt(bits)

  After each step ``M_i <- normalise(m M_i + (1 - m) normalise((u_i + v_i) / 2))``. During the first
  ``warmup_epochs`` epochs the momentum is 0 and the negatives are the other objects of the batch
  (their ``sign((u_j + v_j) / 2)``), as in the authors' code.
* **Cross-modal ranking learning** (:func:`crl_loss`): with ``s = u v^T``, entries more than
  ``margin`` below their row's (column's) diagonal are shifted down by ``shift``, and

      L_r = mean_i [-s_ii + log sum_j exp(s'_ij) + margin] + (same over columns).

Defaults: the feature-input command of the authors' README (``--alpha 0.7 --num_hiden_layers 3 2
--margin 0.2 --max_epochs 20 --train_batch_size 256 --shift 0.1 --lr 0.0001 --optimizer Adam``) over
their ``utils/config.py``: Adam weight decay 1e-6, ``K`` 4096, ``T`` 0.9, memory momentum 0.4, 1
warm-up epoch, gradient norm clipped at 1, learning rate x0.1 at epochs 30, 60, 90, 120; image MLP
with 2 hidden layers and text MLP with 1, each 8192 wide as in their code. A lighter setting for CPU
budgets (2048 wide) is :data:`dmh.peers.CPU_SETTINGS` (its cost in ``docs/peers.md``).
"""

from __future__ import annotations

import math
import numbers

from .._validation import NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE, POSITIVE_INT, UNIT_INTERVAL, Interval, IntSequence
from ..base import store_init_args
from ._pairwise import PairedNetsPeer

__all__ = ["UCCH", "crl_loss"]


def crl_loss(u, v, margin: float, shift: float):
    """UCCH's cross-modal ranking loss for row-normalised codes ``u``, ``v`` (torch, (m, bits))."""
    import torch

    scores = u @ v.T
    diag = scores.diag().view(-1, 1)
    mask_rows = (scores >= diag - margin).float().detach()
    cost_rows = scores * mask_rows + (1.0 - mask_rows) * (scores - shift)
    mask_cols = (scores >= diag.T - margin).float().detach()
    cost_cols = scores * mask_cols + (1.0 - mask_cols) * (scores - shift)
    lr = (-cost_rows.diag() + torch.logsumexp(cost_rows, dim=1) + margin).mean()
    lc = (-cost_cols.diag() + torch.logsumexp(cost_cols, dim=0) + margin).mean()
    return lr + lc


class BinaryMemory:
    """UCCH's momentum memory of one unit vector per training object."""

    def __init__(self, n: int, n_bits: int, generator, device):
        import torch

        stdv = 1.0 / math.sqrt(n_bits / 3.0)
        rnd = torch.randn(n, n_bits, generator=generator) * 2 * stdv - stdv  # as the authors' NCEAverage
        self.memory = torch.nn.functional.normalize(torch.where(rnd > 0, 1.0, -1.0), dim=1).to(device)

    def scores(self, u, v, idx, n_negatives: int, T: float, generator, in_batch: bool):
        """Logits ``(m, 1 + negatives)`` of ``u`` and of ``v``; column 0 is the positive."""
        import torch

        m, bits = u.shape
        if in_batch:
            w = (u + v).detach() / 2.0
            order = torch.arange(m, device=u.device)
            others = order.repeat(m, 1)[~torch.eye(m, dtype=torch.bool, device=u.device)].view(m, m - 1)
            cand = torch.cat([order.view(-1, 1), others], dim=1)
            weight = w[cand]
        else:
            neg = torch.randint(0, self.memory.shape[0], (m, n_negatives), generator=generator).to(u.device)
            cand = torch.cat([idx.view(-1, 1), neg], dim=1)
            # <sign(M_j), u_i> for every memory row, then the sampled columns (the same numbers as
            # gathering the (m, K + 1, bits) sampled rows first, at a fraction of the memory traffic)
            signs = torch.where(self.memory > 0, 1.0, -1.0)
            return (u @ signs.T).gather(1, cand) / T, (v @ signs.T).gather(1, cand) / T
        weight = torch.where(weight > 0, 1.0, -1.0)
        out_u = torch.bmm(weight, u.view(m, bits, 1)).squeeze(2) / T
        out_v = torch.bmm(weight, v.view(m, bits, 1)).squeeze(2) / T
        return out_u, out_v

    def update(self, u, v, idx, momentum: float):
        import torch
        from torch.nn import functional as F

        with torch.no_grad():
            new = F.normalize((u + v) / 2.0, dim=1)
            pos = self.memory[idx] * momentum + new * (1.0 - momentum)
            self.memory[idx] = F.normalize(pos, dim=1)


def nce_loss(logits):
    """``-mean log softmax(logits)[:, 0]``."""
    import torch

    return -torch.log_softmax(logits, dim=1)[:, 0].mean()


class UCCH(PairedNetsPeer):
    """UCCH (Hu et al., TPAMI 2022) over given image and text features; paired objects only.

    Parameters (defaults: the authors' README command for features, else their ``utils/config.py``)
    ----------
    n_bits : int
    alpha : float [0.7; config.py: 0.9]
        Weight of the contrastive term (``1 - alpha`` for the ranking term).
    n_negatives : int [4096]
        ``K``, negatives drawn from the memory per object.
    temperature : float [0.9]
        ``T``; the logits are divided by ``T sqrt(n_bits)``.
    memory_momentum : float [0.4]
    margin, shift : float [0.2, 0.1; config.py's shift: 1]
        Of the cross-modal ranking loss.
    warmup_epochs : int [1]
        Epochs with in-batch negatives and no memory momentum.
    epochs : int [20; config.py: 100]
    lr_milestones : tuple of int [(30, 60, 90, 120)]
        Epochs after which the learning rate is multiplied by 0.1.
    batch_size : int [256]
    lr, weight_decay : float [1e-4, 1e-6]
        Adam.
    clip_norm : float [1.0]
        Gradient norm clipping.
    image_hidden, text_hidden : tuple of int [(8192, 8192), (8192,), the authors'; CPU setting 2048 wide]
    input_scaling, device, random_state
        As in :class:`dmh.peers.djsrh.DJSRH` (inputs as given by default, as the authors' code).

    Attributes
    ----------
    nets_, scalers_, loss_history_, n_iter_
        As in :class:`dmh.peers.djsrh.DJSRH`.
    """

    _parameter_constraints = {
        **PairedNetsPeer._parameter_constraints,
        "alpha": [UNIT_INTERVAL], "n_negatives": [POSITIVE_INT], "temperature": [POSITIVE],
        "memory_momentum": [Interval(numbers.Real, 0, 1, closed="left")], "margin": [NON_NEGATIVE],
        "shift": [NON_NEGATIVE], "warmup_epochs": [NON_NEGATIVE_INT], "lr_milestones": [IntSequence(1)],
        "lr": [POSITIVE], "weight_decay": [NON_NEGATIVE], "clip_norm": [POSITIVE],
    }

    method_name = "ucch"
    _normalised_nets = True

    def __init__(self, n_bits=64, *, alpha=0.7, n_negatives=4096, temperature=0.9, memory_momentum=0.4,
                 margin=0.2, shift=0.1, warmup_epochs=1, epochs=20, lr_milestones=(30, 60, 90, 120),
                 batch_size=256, lr=1e-4, weight_decay=1e-6, clip_norm=1.0, image_hidden=(8192, 8192),
                 text_hidden=(8192,), input_scaling="none", device="cpu", random_state=None):
        store_init_args(self, locals())

    def _begin(self, run):
        import torch

        run.params = list(run.nets["image"].parameters()) + list(run.nets["text"].parameters())
        run.opt = torch.optim.Adam(run.params, lr=float(self.lr), weight_decay=float(self.weight_decay))
        milestones = sorted(int(e) for e in self.lr_milestones)
        run.sched = torch.optim.lr_scheduler.MultiStepLR(run.opt, milestones, gamma=0.1)
        run.memory = BinaryMemory(run.X["image"].shape[0], self.n_bits_, run.gen, run.device)
        run.T = float(self.temperature) * math.sqrt(self.n_bits_)

    def _begin_epoch(self, run):
        run.warm = run.epoch < int(self.warmup_epochs)
        run.momentum = 0.0 if run.warm else float(self.memory_momentum)

    def _train_batch(self, run, idx):
        import torch

        nets, alpha = run.nets, float(self.alpha)
        idx_d = idx.to(run.device)
        u = nets["image"](run.X["image"][idx_d])
        v = nets["text"](run.X["text"][idx_d])
        out_u, out_v = run.memory.scores(u, v, idx_d, int(self.n_negatives), run.T, run.gen, in_batch=run.warm)
        lc = nce_loss(out_u) + nce_loss(out_v)
        lr_ = crl_loss(u, v, float(self.margin), float(self.shift))
        loss = alpha * lc + (1.0 - alpha) * lr_
        run.opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(run.params, float(self.clip_norm))
        run.opt.step()
        run.memory.update(u.detach(), v.detach(), idx_d, run.momentum)
        return float(loss.detach())

    def _end_epoch(self, run):
        run.sched.step()
