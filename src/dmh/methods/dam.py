"""Deep Adaptive Mapping (DAM; paper Eq. 12, Algorithm 3): imgNet and txtNet over feature vectors.

* imgNet: ``Linear -> ReLU -> LRN`` for each hidden layer (default one layer of 4096 units, the
  role of CNN-F's fc7 when the input is a pre-extracted CNN feature), then ``Linear(c) -> tanh``.
* txtNet: the multi-scale fusion of SSAH (Li et al., CVPR 2018), then a two-layer MLP
  (``4096 -> c``) with ``ReLU, LRN`` between the layers and a ``tanh`` output.

The multi-scale fusion average-pools the text vector with kernels (= strides) 50, 30, 15, 10 and 5,
passes each pooled vector through a 1x1 convolution (a scalar weight and bias) and ReLU, and
combines them with the raw vector. SSAH resizes each pooled vector back to the input length,
concatenates the six channels and applies a fully connected layer; resizing is linear, so a fully
connected layer applied directly to ``[x, pooled_1, ..., pooled_5]`` spans exactly the same
functions with about 4x fewer multiply-adds. Scales whose kernel exceeds the text dimension are
skipped.

The last hidden layer (after ReLU and LRN) is the feature ``z^v`` that CLE uses in the next round.
LRN is AlexNet's (size 5, alpha 1e-4, beta 0.75, k 2), applied across the hidden units.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

SSAH_KERNELS = (50, 30, 15, 10, 5)


class LRN(nn.LocalResponseNorm):
    """Local response normalisation across the units of a flat (batch, units) activation."""

    def forward(self, x):
        return super().forward(x[:, :, None])[:, :, 0]


def _lrn() -> nn.Module:
    return LRN(size=5, alpha=1e-4, beta=0.75, k=2.0)


class MultiScaleFusion(nn.Module):
    def __init__(self, in_features: int, kernels=SSAH_KERNELS):
        super().__init__()
        self.kernels = tuple(int(k) for k in kernels if 1 < k <= in_features)
        self.scale = nn.Parameter(torch.ones(len(self.kernels)))
        self.bias = nn.Parameter(torch.zeros(len(self.kernels)))
        self.out_features = in_features + sum(in_features // k for k in self.kernels)

    def forward(self, x):
        parts = [x]
        for i, k in enumerate(self.kernels):
            pooled = nn.functional.avg_pool1d(x[:, None, :], kernel_size=k, stride=k)[:, 0, :]
            parts.append(torch.relu(self.scale[i] * pooled + self.bias[i]))
        return torch.cat(parts, dim=1)


class HashNet(nn.Module):
    """``[fusion] -> (Linear -> ReLU -> LRN) x len(hidden) -> Linear -> tanh``."""

    def __init__(self, in_features: int, n_bits: int, hidden=(4096,), multiscale: bool = False):
        super().__init__()
        self.fusion = MultiScaleFusion(in_features) if multiscale else None
        width = self.fusion.out_features if multiscale else in_features
        layers = []
        for h in hidden:
            layers += [nn.Linear(width, int(h)), nn.ReLU(), _lrn()]
            width = int(h)
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, n_bits)

    def features(self, x):
        if self.fusion is not None:
            x = self.fusion(x)
        return self.body(x)

    def forward(self, x):
        return torch.tanh(self.head(self.features(x)))


def make_net(modality: str, in_features: int, n_bits: int, hidden) -> HashNet:
    return HashNet(in_features, n_bits, hidden=hidden, multiscale=(modality == "text"))


def train_net(net: HashNet, X: np.ndarray, H: np.ndarray, *, epochs: int, lr: float, batch_size: int,
              generator: torch.Generator, optimizer: torch.optim.Optimizer | None = None,
              progress=None, weight_decay: float = 0.0) -> tuple[list, torch.optim.Optimizer]:
    """Fit Eq. 12 for one network by mini-batch Adam (L2 ``weight_decay``, 0 = the paper); returns the
    mean loss of each epoch."""
    Xt = torch.as_tensor(X, dtype=torch.float32)
    Ht = torch.as_tensor(H, dtype=torch.float32)
    opt = optimizer if optimizer is not None else torch.optim.Adam(net.parameters(), lr=lr,
                                                                   weight_decay=weight_decay)
    net.train()
    history = []
    n = Xt.shape[0]
    for _ in range(epochs):
        perm = torch.randperm(n, generator=generator)
        total = 0.0
        for s in range(0, n, batch_size):
            idx = perm[s : s + batch_size]
            out = net(Xt[idx])
            loss = ((out - Ht[idx]) ** 2).sum(1).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += float(loss.detach()) * idx.numel()
            if progress is not None:
                progress(idx.numel())
        history.append(total / n)
    return history, opt


@torch.no_grad()
def net_outputs(net: HashNet, X: np.ndarray, batch_size: int = 2048, features: bool = False) -> np.ndarray:
    net.eval()
    Xt = torch.as_tensor(X, dtype=torch.float32)
    outs = []
    for s in range(0, Xt.shape[0], batch_size):
        xb = Xt[s : s + batch_size]
        outs.append(net.features(xb) if features else net(xb))
    return torch.cat(outs).numpy()
