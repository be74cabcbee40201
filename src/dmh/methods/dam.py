"""Deep Adaptive Mapping (DAM; paper Eq. 12, Algorithm 3): training imgNet and txtNet to copy GBE's
codes, and their outputs. The networks (and the kernels that train them cheaply) are defined in
:mod:`dmh.methods.dam_nets`; their names are importable from here too.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .dam_nets import (  # noqa: F401 - the networks, importable from dmh.methods.dam
    _STALE,
    LRN,
    SPARSE_DENSITY,
    SSAH_KERNELS,
    HashNet,
    MultiScaleFusion,
    column_base,
    make_net,
)


def _zero_grads(opt: torch.optim.Optimizer, kept: torch.Tensor | None) -> None:
    """Zero the gradients before a training step: ``set_to_none`` without a kept buffer; with one
    (``kept``, the weight whose gradient :func:`dmh.methods.dam_nets._weight_grad_into` fills) the others are zeroed in
    place and ``kept``'s buffer is only marked, so that the next product overwrites it instead of
    adding to zeros written first: the same values bit for bit (``mm`` and ``addmm`` into zeros are
    one kernel), one 64 MiB write fewer per imgNet step at paper scale (about 4 ms of 75 on two
    threads)."""
    if kept is None:
        opt.zero_grad(set_to_none=True)
        return
    for group in opt.param_groups:
        for p in group["params"]:
            if p.grad is None:
                continue
            if p is kept:
                p.__dict__[_STALE] = True
            else:
                p.grad.zero_()


def train_net(net: HashNet, X: np.ndarray, H: np.ndarray, *, epochs: int, lr: float, batch_size: int,
              generator: torch.Generator, optimizer: torch.optim.Optimizer | None = None,
              progress=None, device: str = "cpu", agreement: list | None = None,
              agree_tol: float | None = None, agree_ref: float | None = None,
              agree_target: float | None = None, partner: np.ndarray | None = None,
              contrastive: float = 0.0) -> tuple[list, torch.optim.Optimizer]:
    """Fit Eq. 12 for one network by mini-batch Adam (fused kernel); returns the mean loss of each
    epoch.

    ``net`` must already be on ``device``; the data are moved there, the batch order is drawn by
    ``generator`` on the CPU (so it does not depend on the device).

    ``agreement`` (a list) receives each epoch's bit agreement: the fraction of target bits whose
    sign the network's outputs reproduced on that epoch's batches (measured as they were trained,
    so it costs nothing extra). With ``agree_tol`` set, training stops after the first epoch that
    raises the agreement by less than ``agree_tol`` over the previous epoch; after the first epoch
    it stops when the agreement is already within ``agree_tol`` of ``agree_ref`` (the agreement
    this network had reached on its previous targets), so a warm-started network whose targets
    barely changed trains for one pass. With ``agree_target`` set, training stops after the first
    epoch whose agreement reaches it. At most ``epochs`` epochs; labels play no part.

    ``partner`` (rows x bits, NaN rows for objects without one) holds the other network's outputs
    for this network's paired objects; with ``contrastive > 0`` each batch adds ``contrastive``
    times the cross-modal InfoNCE loss over its paired objects (their cosine similarities to the
    batch's partners over :data:`CONTRASTIVE_TEMPERATURE`, the true partner the class), beside
    copying ``H`` for every object."""
    Xt = torch.as_tensor(X, dtype=torch.float32).to(device)
    Ht = torch.as_tensor(H, dtype=torch.float32).to(device)
    if optimizer is None and getattr(net, "lean", False):
        # a lean network (cheaper kernels, the same model) over a sparse input trains the sparse way
        # until the caller turns it back (use_sparse_input(None)); set before the optimizer sees its
        # parameters, and kept for later calls that pass that optimizer
        net.use_sparse_input(column_base(Xt))
    opt = optimizer if optimizer is not None else torch.optim.Adam(net.parameters(), lr=lr, fused=True)
    history = []
    n = Xt.shape[0]
    fracs = []
    pair_t = has_partner = None
    if contrastive > 0 and partner is not None:
        pair_t = torch.as_tensor(np.nan_to_num(partner), dtype=torch.float32).to(device)
        pair_t = nn.functional.normalize(pair_t, dim=1)
        has_partner = torch.as_tensor(~np.isnan(partner).any(axis=1)).to(device)
    net.train()
    # lean float32 nets accumulate their hidden layer's weight gradient into a kept buffer: zero it,
    # keep it (the bfloat16 path keeps its own buffers and sets the gradient afresh)
    kept = getattr(net, "kept_grad_weight", None)
    for _ in range(epochs):
        perm = torch.randperm(n, generator=generator).to(device)
        total = torch.zeros((), dtype=torch.float64, device=device)  # no host sync per batch
        agree = torch.zeros((), dtype=torch.int64, device=device)
        for s in range(0, n, batch_size):
            idx = perm[s : s + batch_size]
            out = net(Xt[idx])
            loss = ((out - Ht[idx]) ** 2).sum(1).mean()
            if pair_t is not None:
                loss = loss + contrastive * _info_nce(out, pair_t[idx], has_partner[idx])
            _zero_grads(opt, kept)
            loss.backward()
            opt.step()
            total += loss.detach().double() * idx.numel()
            agree += ((out.detach() > 0) == (Ht[idx] > 0)).sum()
            if progress is not None:
                progress(idx.numel())
        history.append(float(total) / n)
        fracs.append(float(agree) / max(1, n * Ht.shape[1]))
        if agreement is not None:
            agreement.append(fracs[-1])
        if agree_target is not None and fracs[-1] >= agree_target:
            break
        if agree_tol is not None:
            if len(fracs) == 1:
                stop = agree_ref is not None and fracs[-1] >= agree_ref - agree_tol
            else:
                stop = fracs[-1] - fracs[-2] < agree_tol
            if stop:
                break
    return history, opt


#: the temperature of DAM's optional cross-modal contrastive term (``DMH(dam_contrastive=...)``)
CONTRASTIVE_TEMPERATURE = 0.2


def _info_nce(out: torch.Tensor, partners: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Cross-entropy of each paired row's true partner among the batch's partners, by cosine
    similarity over :data:`CONTRASTIVE_TEMPERATURE` (``partners`` already unit length); zero for a
    batch with fewer than two paired rows."""
    if int(rows.sum()) < 2:
        return out.new_zeros(())
    o = nn.functional.normalize(out[rows], dim=1)
    logits = o @ partners[rows].t() / CONTRASTIVE_TEMPERATURE
    return nn.functional.cross_entropy(logits, torch.arange(logits.shape[0], device=logits.device))


@torch.no_grad()
def net_outputs(net: HashNet, X: np.ndarray, batch_size: int = 2048, features: bool = False,
                device: str | None = None) -> np.ndarray:
    """Outputs (or hidden features) of ``net`` for the rows of ``X``, as float32 numpy; computed on
    ``device`` (default: where the network's parameters are)."""
    net.eval()
    if device is None:
        device = next(net.parameters()).device
    Xt = torch.as_tensor(X, dtype=torch.float32)
    outs = []
    for s in range(0, Xt.shape[0], batch_size):
        xb = Xt[s : s + batch_size].to(device)
        outs.append((net.features(xb) if features else net(xb)).cpu())
    return torch.cat(outs).numpy()
