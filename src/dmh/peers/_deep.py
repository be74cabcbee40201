"""Shared parts of the deep peers (DJSRH, JDSH, DGCPN, UCCH, SADCH): networks over given feature
vectors, seeding, devices, the minibatch loop and saving networks as plain arrays.

All these methods were published with a CNN backbone (AlexNet / VGG) on raw images and a bag-of-words
text network. Here the image side is an MLP over the given image features (the papers' "fc7
features" setting: DJSRH/JDSH/DGCPN then train their fully connected layers and hash layer, UCCH's
``*_fea`` data sets train its ``ImageNet`` MLP), the text side the papers' text MLP. The networks
take each view as given (``input_scaling="none"``, as the authors' code feeds its pre-extracted
features) or z-scored per feature with the training statistics (``"feature"``); every similarity
matrix is built from the raw features, as the papers do.

This module imports PyTorch; it is only imported by the peer modules' ``_fit`` / ``_set_state``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from .._torch_nn import SPARSE_DENSITY, TransposedLinear
from ..errors import FitDivergedError, ParameterError

__all__ = [
    "HashMLP",
    "resolve_device",
    "torch_seed",
    "make_nets",
    "standardise",
    "fit_scalers",
    "apply_scaler",
    "net_state",
    "load_net",
    "minibatches",
    "cosine",
]


def resolve_device(device: str) -> torch.device:
    """``"auto"`` is CUDA when present, else the CPU; ``"cuda"`` without a GPU is an error."""
    if device == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cuda" and not torch.cuda.is_available():
        raise ParameterError("device='cuda' was asked for but torch finds no CUDA device; use 'cpu' or 'auto'")
    return torch.device(device)


def torch_seed(rng: np.random.Generator) -> int:
    """A torch seed drawn from the method's numpy generator (same ``random_state``, same seed)."""
    return int(rng.integers(2**62))


# ---------------------------------------------------------------------------- networks
def is_sparse(X: torch.Tensor) -> bool:
    """Whether at most :data:`SPARSE_DENSITY` of the entries of ``X`` (on the CPU) are non-zero."""
    if X.ndim != 2 or not X.numel() or X.device.type != "cpu":
        return False
    nonzero = sum(int(torch.count_nonzero(X[s:s + 8192])) for s in range(0, X.shape[0], 8192))
    return nonzero <= SPARSE_DENSITY * X.numel()


class _ActiveColumnsLinear(torch.autograd.Function):
    """``x W + b`` (``W = weight_t``, in x out) computed from the columns ``cols`` of ``x`` that
    hold its non-zero entries, that is from those rows of ``W``: the same function and weight
    gradient as the dense layer, equal up to floating-point rounding, at a cost that grows with
    those columns instead of the input's width (a batch of 32 product titles over a 2000-word
    vocabulary touches about 150). The input itself gets no gradient."""

    @staticmethod
    def forward(ctx, x, weight_t, bias, cols):
        xs = x[:, cols]
        ctx.save_for_backward(xs, cols)
        ctx.weight_shape = weight_t.shape
        return torch.addmm(bias, xs, weight_t.index_select(0, cols))

    @staticmethod
    def backward(ctx, g):
        xs, cols = ctx.saved_tensors
        grad_weight = grad_bias = None
        if ctx.needs_input_grad[1]:
            grad_weight = g.new_zeros(ctx.weight_shape).index_copy_(0, cols, xs.t() @ g)
        if ctx.needs_input_grad[2]:
            grad_bias = g.sum(0)
        return None, grad_weight, grad_bias, None


class HashMLP(nn.Module):
    """``Linear -> ReLU [-> Dropout] -> ... -> Linear(n_bits)``, then ``tanh(alpha * h)``; optionally
    each output row divided by its norm (UCCH's networks).

    ``hidden=()`` gives a linear hash layer. ``dropout`` (DGCPN: 0.5) acts after each hidden layer in
    training mode only. ``alpha`` is the DJSRH/JDSH continuation scale (``sqrt(epoch + 1)``), a plain
    attribute set by the training loop; encoding uses ``sign`` of the pre-activation, so it does not
    matter after training.
    """

    def __init__(self, n_in: int, hidden: Sequence[int], n_bits: int, normalise: bool = False,
                 dropout: float = 0.0):
        super().__init__()
        layers: list[nn.Module] = []
        width = n_in
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
            width = h
        layers.append(nn.Linear(width, n_bits))
        self.body = nn.Sequential(*layers)
        self.normalise = normalise
        self.alpha = 1.0

    def use_sparse_input(self, sparse: bool) -> None:
        """Train the first layer on a mostly-zero input (a bag of words) through
        :class:`_ActiveColumnsLinear`, its weight stored transposed meanwhile, or (``False``) as the
        plain ``nn.Linear`` again. Not a parameter: the network and its saved state are the same
        either way, its outputs equal up to floating-point rounding."""
        first = self.body[0]
        if sparse and not isinstance(first, TransposedLinear):
            self.body[0] = TransposedLinear(first)
        elif not sparse and isinstance(first, TransposedLinear):
            self.body[0] = first.to_linear()

    def pre(self, x: torch.Tensor) -> torch.Tensor:
        """Outputs before ``tanh`` (their sign is the code). On the sparse path
        (:meth:`use_sparse_input`) a batch whose non-zero entries lie in at most a quarter of the
        input's columns enters the first layer through those columns alone."""
        first = self.body[0]
        if isinstance(first, TransposedLinear) and x.dim() == 2 and len(x) and not x.requires_grad:
            cols = (x != 0).any(0).nonzero()[:, 0]
            if 4 * cols.numel() <= x.shape[1]:
                return self.body[1:](_ActiveColumnsLinear.apply(x, first.weight_t, first.bias, cols))
        return self.body(x)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.tanh(self.alpha * self.pre(x))
        if self.normalise:
            out = F.normalize(out, dim=1)
        return out


def make_nets(n_features: dict, hidden: dict, n_bits: int, seed: int, device: torch.device,
              normalise: bool = False, dropout: float = 0.0, hash_init_std: dict | None = None) -> dict:
    """One :class:`HashMLP` per modality, initialised from ``seed`` (torch's global generator is
    forked, so the caller's random state is left untouched). ``hash_init_std``: ``{modality: std}``
    draws that network's last weight matrix from ``N(0, std^2)`` instead of PyTorch's default."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        nets = {m: HashMLP(n_features[m], hidden[m], n_bits, normalise=normalise, dropout=dropout)
                for m in ("image", "text")}
        for m, std in (hash_init_std or {}).items():
            nn.init.normal_(nets[m].body[-1].weight, mean=0.0, std=std)
    return {m: net.to(device=device, dtype=torch.float32) for m, net in nets.items()}


def standardise(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-feature mean and scale (constant features get scale 1)."""
    mu = X.mean(0)
    sd = X.std(0)
    sd[sd < 1e-12] = 1.0
    return mu, sd


def fit_scalers(views: dict, how: str) -> dict:
    """``{modality: (mean, scale)}`` for :func:`apply_scaler`: the training rows' per-feature mean and
    standard deviation for ``how="feature"``, the identity (zeros, ones) for ``"none"``. Either way the
    pair is saved with the model, so encoding applies what training applied."""
    if how == "feature":
        return {m: standardise(X) for m, X in views.items()}
    return {m: (np.zeros(X.shape[1]), np.ones(X.shape[1])) for m, X in views.items()}


def apply_scaler(X: np.ndarray, scaler) -> np.ndarray:
    mu, sd = scaler
    return (X - mu) / sd


def net_state(nets: dict) -> dict[str, np.ndarray]:
    """Network weights as plain float32 arrays keyed ``"<modality>_net.<param>"``."""
    state = {}
    for m, net in nets.items():
        for key, value in net.state_dict().items():
            state[f"{m}_net.{key}"] = value.detach().cpu().numpy()
    return state


def load_net(state: dict, modality: str, n_in: int, hidden, n_bits: int, normalise: bool = False,
             dropout: float = 0.0):
    net = HashMLP(n_in, hidden, n_bits, normalise=normalise, dropout=dropout)
    prefix = f"{modality}_net."
    sd = {k[len(prefix):]: torch.as_tensor(np.asarray(v)) for k, v in state.items() if k.startswith(prefix)}
    net.load_state_dict(sd)
    net.eval()
    return net


@torch.no_grad()
def project(net: nn.Module, X: np.ndarray, chunk: int = 4096) -> np.ndarray:
    """Pre-``tanh`` outputs of ``net`` for rows of ``X`` (already standardised), on the CPU."""
    net = net.to("cpu").eval()
    Xt = torch.as_tensor(np.asarray(X), dtype=torch.float32)
    outs = [net.pre(Xt[s:s + chunk]) for s in range(0, len(Xt), chunk)]
    if not outs:
        return np.zeros((0, net.body[-1].out_features))
    return torch.cat(outs).numpy().astype(np.float64)


def scaled_project(nets: dict, scalers: dict, X: np.ndarray, modality: str) -> np.ndarray:
    """:func:`project` of the rows of ``X`` standardised with the fitted ``scalers[modality]``."""
    return project(nets[modality], apply_scaler(X, scalers[modality]))


def scaled_net_state(nets: dict, scalers: dict) -> dict[str, np.ndarray]:
    """:func:`net_state` plus each modality's standardisation (``<m>_mean``, ``<m>_scale``)."""
    state = net_state(nets)
    for m, (mu, sd) in scalers.items():
        state[f"{m}_mean"], state[f"{m}_scale"] = mu, sd
    return state


def load_scaled_nets(owner, state: dict, normalise: bool = False) -> tuple[dict, dict]:
    """``(scalers, nets)`` of both modalities from a :func:`scaled_net_state` state; the layer
    sizes come from ``owner``'s ``n_features_``, ``image_hidden`` / ``text_hidden`` and ``n_bits_``, the
    layer layout also from its ``dropout`` where it has one."""
    scalers = {m: (np.asarray(state[f"{m}_mean"]), np.asarray(state[f"{m}_scale"])) for m in ("image", "text")}
    hidden = owner._hidden()
    dropout = float(getattr(owner, "dropout", 0.0))
    nets = {m: load_net(state, m, owner.n_features_[m], hidden[m], owner.n_bits_, normalise=normalise,
                        dropout=dropout)
            for m in ("image", "text")}
    return scalers, nets


# ---------------------------------------------------------------------------- training helpers
def minibatches(n: int, batch_size: int, generator: torch.Generator, drop_last: bool = True):
    """Index batches of one shuffled epoch. ``drop_last`` as the papers' loaders do, unless the data
    hold fewer objects than one batch (then one batch of all of them)."""
    perm = torch.randperm(n, generator=generator)
    if n <= batch_size:
        return [perm]
    stop = n - n % batch_size if drop_last else n
    return [perm[s:s + batch_size] for s in range(0, stop, batch_size)]


def cosine(A: torch.Tensor, B: torch.Tensor) -> torch.Tensor:
    """Cosine similarity matrix of the rows of ``A`` and ``B`` (zero rows give 0)."""
    return F.normalize(A, dim=1) @ F.normalize(B, dim=1).T


def check_loss(value: float, owner: str, epoch: int) -> float:
    if not math.isfinite(value):
        raise FitDivergedError(
            f"{owner}: the training loss became {value} in epoch {epoch + 1}; lower the learning rate"
        )
    return value
