"""Layers shared by DMH's networks and the deep peers' (imports PyTorch; imported only by modules
that train networks)."""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["SPARSE_DENSITY", "TransposedLinear"]

#: a training input takes a network's sparse first-layer path (DAM's and the deep peers') when at
#: most this fraction of its values differ from their column's base value (zero for the peers,
#: which take the features as given): a bag of words is about 0.3% on the shared fashion set
SPARSE_DENSITY = 0.05


class TransposedLinear(nn.Linear):
    """``nn.Linear`` whose weight is stored as its transpose, ``weight_t`` (in x out, contiguous):
    the rows that one input column multiplies are contiguous, which the sparse first layers (DAM's
    ``_SparseFirstLayer``, the deep peers' ``_ActiveColumnsLinear``) read and write, and the fused
    optimiser kernels (which want contiguous parameters) still apply. ``weight`` is its transposed
    view; the state is saved and loaded as an ``nn.Linear``'s."""

    def __init__(self, linear: nn.Linear):
        nn.Module.__init__(self)
        self.in_features, self.out_features = linear.in_features, linear.out_features
        self.weight_t = nn.Parameter(linear.weight.detach().t().contiguous())
        self.bias = linear.bias

    @property
    def weight(self):  # noqa: D401 - nn.Linear's name for the (out x in) weight
        return self.weight_t.t()

    def forward(self, x):
        return torch.addmm(self.bias, x, self.weight_t)

    def to_linear(self) -> nn.Linear:
        linear = nn.Linear(self.in_features, self.out_features, device=self.weight_t.device)
        with torch.no_grad():
            linear.weight.copy_(self.weight_t.t())
        linear.bias = self.bias
        return linear

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        destination[prefix + "weight"] = self.weight if keep_vars else self.weight.detach()
        destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing_keys, unexpected_keys,
                              error_msgs):
        weight = state_dict.get(prefix + "weight")
        if weight is None:
            missing_keys.append(prefix + "weight")
        else:
            with torch.no_grad():
                self.weight_t.copy_(weight.t())
        bias = state_dict.get(prefix + "bias")
        if bias is None:
            missing_keys.append(prefix + "bias")
        else:
            with torch.no_grad():
                self.bias.copy_(bias)
