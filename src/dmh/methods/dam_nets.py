"""The networks of Deep Adaptive Mapping (DAM; paper Eq. 12, Algorithm 3): imgNet and txtNet over
feature vectors, and the kernels that train them cheaply. Their training is :mod:`dmh.methods.dam`.

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

import warnings

import torch
from torch import nn

from .._torch_nn import SPARSE_DENSITY
from .._torch_nn import TransposedLinear as _TransposedLinear
from ..errors import ParameterError

SSAH_KERNELS = (50, 30, 15, 10, 5)


class LRN(nn.LocalResponseNorm):
    """Local response normalisation across the units of a flat (batch, units) activation.

    With ``lean`` set, the window sum of squares is a sum of ``size`` shifted copies instead of
    torch's average pooling over a (batch, 1, units, 1) view: the same formula, about half the time
    forward and backward (14 vs 7 ms per step of a 4096-unit layer at batch 128, one thread),
    equal up to floating-point rounding."""

    lean = False

    def forward(self, x):
        if not self.lean:
            return super().forward(x[:, :, None])[:, :, 0]
        units = x.shape[1]
        padded = nn.functional.pad(x * x, (self.size // 2, (self.size - 1) // 2))
        window = padded[:, :units]
        for i in range(1, self.size):
            window = window + padded[:, i : i + units]
        return x / (window * (self.alpha / self.size) + self.k) ** self.beta


def _lrn() -> nn.Module:
    return LRN(size=5, alpha=1e-4, beta=0.75, k=2.0)


class MultiScaleFusion(nn.Module):
    def __init__(self, in_features: int, kernels=SSAH_KERNELS):
        super().__init__()
        self.kernels = tuple(int(k) for k in kernels if 1 < k <= in_features)
        self.scale = nn.Parameter(torch.ones(len(self.kernels)))
        self.bias = nn.Parameter(torch.zeros(len(self.kernels)))
        self.out_features = in_features + sum(in_features // k for k in self.kernels)

    def pooled(self, x):
        """The pooled channels, each through its 1x1 convolution and ReLU."""
        parts = []
        for i, k in enumerate(self.kernels):
            pooled = nn.functional.avg_pool1d(x[:, None, :], kernel_size=k, stride=k)[:, 0, :]
            parts.append(torch.relu(self.scale[i] * pooled + self.bias[i]))
        return parts

    def forward(self, x):
        return torch.cat([x, *self.pooled(x)], dim=1)


def _weight_grad_into(weight: torch.Tensor, grad: torch.Tensor, inp: torch.Tensor) -> None:
    """Accumulate ``grad' inp`` into ``weight.grad`` in place (allocating it once).

    A hidden layer's weight gradient is 4096 x d floats (64 MiB for imgNet's 4096-d input); letting
    autograd return a fresh tensor each step costs a fresh allocation each step, which the system
    hands out as new zeroed pages: 40 ms for a product that takes 24 ms into a kept buffer (two
    threads). With ``zero_grad(set_to_none=False)`` the buffer stays; the values are the same
    product, bit for bit (``addmm`` into zeros)."""
    if weight.grad is None:
        weight.grad = grad.t().mm(inp)
    elif weight.__dict__.pop(_STALE, False):  # zeroed in name only (:func:`_zero_grads`): overwrite
        torch.mm(grad.t(), inp, out=weight.grad)
    else:
        torch.addmm(weight.grad, grad.t(), inp, out=weight.grad)


#: the attribute by which :func:`dmh.methods.dam._zero_grads` marks a kept gradient buffer as zero
#: without writing it
_STALE = "_dmh_grad_stale"


class _Bf16Layer:
    """Kept buffers of one layer trained with bfloat16 products (``HashNet.precision``): the
    weight in bfloat16 (refilled from the float32 weight at each forward) and the weight gradient
    (a bfloat16 product, copied into a kept float32 buffer that becomes ``weight.grad``).

    Products into kept buffers are what makes bfloat16 pay on a CPU: a 4096 x 4096 weight gradient
    from a batch of 128 takes 10 ms into a kept bfloat16 buffer against 24 ms into a fresh one and
    41 ms in float32, and refilling the bfloat16 weight by ``copy_`` 2.6 ms against 16 ms for
    ``.to`` (one thread, a CPU with AVX512-BF16; ``benchmarks/bench_dam_step.py``). The float32
    weight, its Adam state and everything else of the network stay float32."""

    def __init__(self):
        self.weight = None
        self.grad = None
        self.grad32 = None

    @staticmethod
    def _kept(buf, like, dtype):
        if buf is None or buf.shape != like.shape or buf.device != like.device or buf.dtype != dtype:
            return torch.empty(like.shape, dtype=dtype, device=like.device)
        return buf

    def weight_of(self, weight: torch.Tensor) -> torch.Tensor:
        self.weight = self._kept(self.weight, weight, torch.bfloat16)
        with torch.no_grad():
            self.weight.copy_(weight)
        return self.weight

    def grad_into(self, weight: torch.Tensor, grad: torch.Tensor, inp: torch.Tensor) -> None:
        """``weight.grad += grad' inp`` (both bfloat16): set when ``weight.grad`` is None (the
        training loop zeroes by ``set_to_none``), accumulated otherwise."""
        self.grad = self._kept(self.grad, weight, torch.bfloat16)
        torch.mm(grad.t(), inp, out=self.grad)
        if weight.grad is None:
            self.grad32 = self._kept(self.grad32, weight, weight.dtype)
            self.grad32.copy_(self.grad)
            weight.grad = self.grad32
        else:
            weight.grad.add_(self.grad)


def _bf16_forward(ctx, inp, weight, bias, bufs):
    """``inp @ weight' + bias`` with the product in bfloat16 (output float32); keeps what the
    backward needs on ``ctx``."""
    inp_b = inp.to(torch.bfloat16)
    w_b = bufs.weight_of(weight)
    ctx.bf16 = (inp_b, w_b, bufs)  # w_b is a kept buffer: not saved for backward (no version check)
    ctx.save_for_backward(weight)
    return torch.mm(inp_b, w_b.t()).float().add_(bias)


class _FirstLinear(torch.autograd.Function):
    """The first hidden layer in lean mode: ``nn.Linear`` (the same ``addmm``) over ``x``, or over
    ``cat([x, pooled])`` for txtNet, whose weight gradient goes into a kept buffer
    (:func:`_weight_grad_into`), and which skips the gradient of txtNet's raw input.

    Autograd computes the gradient of the whole concatenated input (the fusion's scales need the
    pooled part's) and drops the raw part, which is most of its columns: for a 2000-d text input
    that is a (batch x hidden x 2000) product per step thrown away. Here the backward computes the
    weight's, the bias's and the gradient of the input after its first ``n_raw`` columns only: all
    of ``x`` without ``pooled``, the pooled columns with it (equal to autograd's up to
    floating-point rounding). With ``bufs`` (a :class:`_Bf16Layer`) the products run in bfloat16
    instead."""

    @staticmethod
    def forward(ctx, x, pooled, weight, bias, bufs=None):
        inp = x if pooled is None else torch.cat([x, pooled], dim=1)
        ctx.n_raw = 0 if pooled is None else x.shape[1]
        ctx.grad_at = 0 if pooled is None else 1  # the input whose gradient is returned
        if bufs is not None:
            return _bf16_forward(ctx, inp, weight, bias, bufs)
        ctx.bf16 = None
        ctx.save_for_backward(inp, weight)
        return torch.addmm(bias, inp, weight.t())

    @staticmethod
    def backward(ctx, grad):
        grad_bias = grad.sum(0) if ctx.needs_input_grad[3] else None
        want_input = ctx.needs_input_grad[ctx.grad_at]
        if ctx.bf16 is not None:
            inp_b, w_b, bufs = ctx.bf16
            (weight,) = ctx.saved_tensors
            grad_b = grad.to(torch.bfloat16)
            grad_in = grad_b.mm(w_b[:, ctx.n_raw:]).float() if want_input else None
            if ctx.needs_input_grad[2]:
                bufs.grad_into(weight, grad_b, inp_b)
        else:
            inp, weight = ctx.saved_tensors
            grad_in = grad.mm(weight[:, ctx.n_raw:]) if want_input else None
            if ctx.needs_input_grad[2]:
                _weight_grad_into(weight, grad, inp)
        grads = [None, None, None, grad_bias, None]
        grads[ctx.grad_at] = grad_in
        return tuple(grads)


# ------------------------------------------------------------------------------ sparse inputs
def column_base(X: torch.Tensor) -> torch.Tensor | None:
    """The value each column of ``X`` mostly holds (its median, which is that value wherever more
    than half of the column holds it), or ``None`` when more than :data:`SPARSE_DENSITY` of
    ``X``'s values differ from it: a standardised bag of words is its columns' base values plus a
    few entries per row, and :class:`_SparseFirstLayer` trains on it as such."""
    if X.ndim != 2 or X.shape[0] < 2 or X.device.type != "cpu":
        return None
    base = X.median(dim=0).values
    differ = sum(int((X[s : s + 8192] != base).sum()) for s in range(0, X.shape[0], 8192))  # no n x d temporary
    if differ > SPARSE_DENSITY * X.numel():
        return None
    return base.contiguous()


def _csr(t: torch.Tensor) -> torch.Tensor:
    """``t`` in CSR form, without torch's note that CSR support is in beta (the products used here
    are the documented ``torch.sparse.mm`` and ``addmm`` of a CSR and a dense matrix)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta", category=UserWarning)
        return t.to_sparse_csr()


def _sparse_weight_grad_into(weight_t, A, gs, g, ST) -> None:
    """Accumulate ``A gs' + S' g`` (``ST``: ``S'`` in CSR form) into ``weight_t.grad`` in place, as
    :func:`_weight_grad_into` does for the dense layer."""
    if weight_t.grad is None:
        weight_t.grad = torch.outer(A, gs)
    elif weight_t.__dict__.pop(_STALE, False):
        torch.outer(A, gs, out=weight_t.grad)
    else:
        weight_t.grad.addr_(A, gs)
    weight_t.grad.addmm_(ST, g)


class _SparseFirstLayer(torch.autograd.Function):
    """The first hidden layer (and txtNet's fusion before it) over an input that is its columns'
    base values plus a few entries, computed from those entries: the same function and gradients
    as the dense layer, equal up to floating-point rounding, at a cost that grows with the entries
    instead of the input's width.

    With ``D = x - base`` (mostly zeros), each pooled channel of the fusion is ``P D + P base``;
    after its scale, bias and ReLU it is ``a + R``, where ``a = relu(s P base + b)`` is one value per
    column and ``R`` is zero wherever ``P D`` is. The layer's input is then ``S + 1 A'`` with ``S =
    [D, R]`` sparse and ``A = [base, a]``, so ``h = S Wt + A' Wt + c``; the weight's gradient is
    ``S' g + A (1' g)``, and the fusion's scales and biases need ``dL/du = g Wt'`` summed over the
    batch per column (one product ``Wt (1' g)``) plus, where ``P D`` is not zero, corrections
    ``C' g`` for a sparse ``C`` (CSR products throughout)."""

    @staticmethod
    def forward(ctx, x, scale, sbias, weight_t, bias, base, pooled_base, sidx, kernels):
        D = x - base
        d = D.shape[1]
        if kernels:
            PD = torch.cat([nn.functional.avg_pool1d(D[:, None, :], kernel_size=k, stride=k)[:, 0, :]
                            for k in kernels], dim=1)
            s, sb = scale.detach()[sidx], sbias.detach()[sidx]
            a_pre = s * pooled_base + sb
            q = s * (PD + pooled_base) + sb  # where PD == 0 this is a_pre, bit for bit
            a = torch.relu(a_pre)
            S = torch.cat([D, torch.relu(q) - a], dim=1)
            A = torch.cat([base, a])
        else:
            PD = q = a_pre = None
            S, A = D, base
        out = torch.sparse.mm(_csr(S), weight_t)
        out += torch.addmv(bias, weight_t.t(), A)
        ctx.save_for_backward(weight_t)
        ctx.sparse = (S, A, PD, q, a_pre, pooled_base, sidx, d, len(kernels or ()))
        return out

    @staticmethod
    def backward(ctx, g):
        (weight_t,) = ctx.saved_tensors
        S, A, PD, q, a_pre, pooled_base, sidx, d, n_scales = ctx.sparse
        gs = g.sum(0)
        grad_scale = grad_sbias = None
        if ctx.needs_input_grad[3]:
            _sparse_weight_grad_into(weight_t, A, gs, g, _csr(S.t()))
        if n_scales and (ctx.needs_input_grad[1] or ctx.needs_input_grad[2]):
            Wp = weight_t[d:]
            m0 = (a_pre > 0).to(g.dtype)
            ws_b = m0 * Wp.mv(gs)  # every entry at its column's base value: dL/du summed over the batch
            ws_s = ws_b * pooled_base
            at = PD != 0  # the entries that differ from their column's value
            cols = at.any(0).nonzero()[:, 0]
            if cols.numel():
                at, PDc, Pb, m0c = at[:, cols], PD[:, cols], pooled_base[cols], m0[cols]
                M = (q[:, cols] > 0).to(g.dtype)
                zero = torch.zeros((), dtype=g.dtype)
                C = torch.cat([torch.where(at, M - m0c, zero), torch.where(at, M * (PDc + Pb) - m0c * Pb, zero)], 1)
                CTg = torch.sparse.mm(_csr(C.t()), g)  # (2 |cols|) x hidden
                Wc = Wp[cols]
                k = cols.numel()
                ws_b = ws_b.index_add(0, cols, (CTg[:k] * Wc).sum(1))
                ws_s = ws_s.index_add(0, cols, (CTg[k:] * Wc).sum(1))
            grad_sbias = torch.zeros(n_scales, dtype=g.dtype).index_add_(0, sidx, ws_b)
            grad_scale = torch.zeros(n_scales, dtype=g.dtype).index_add_(0, sidx, ws_s)
        return None, grad_scale, grad_sbias, None, gs if ctx.needs_input_grad[4] else None, None, None, None, None


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
        self._lean = False
        self._bf16 = None  # a _Bf16Layer for the first hidden layer when precision is "bfloat16"
        self._sparse = None  # (base, pooled base, pooled columns' scale): training on a sparse input

    @property
    def lean(self) -> bool:
        """Cheaper training kernels for the same model: txtNet's first layer through
        :class:`_FirstLinear` (no gradient for the raw input) and :class:`LRN`'s shifted-sum
        window. Not a parameter: the saved state is the same either way, and the outputs are equal
        up to floating-point rounding."""
        return self._lean

    @lean.setter
    def lean(self, value: bool) -> None:
        self._lean = bool(value)
        for module in self.modules():
            if isinstance(module, LRN):
                module.lean = self._lean

    @property
    def precision(self) -> str:
        """``"float32"`` or ``"bfloat16"``: the precision of the first hidden layer's products in
        training (forward, weight gradient, the pooled channels' gradient); weights, Adam, the
        other layers and every output computed without gradients (features, codes) stay float32.
        A network on the sparse path (:meth:`use_sparse_input`) trains in float32 either way.
        Not a parameter: the saved state is float32 either way."""
        return "float32" if self._bf16 is None else "bfloat16"

    @precision.setter
    def precision(self, value: str) -> None:
        if value not in ("float32", "bfloat16"):
            raise ParameterError(f"precision must be 'float32' or 'bfloat16', got {value!r}")
        self._bf16 = _Bf16Layer() if value == "bfloat16" else None

    @property
    def keeps_weight_grad(self) -> bool:
        """Whether training should zero gradients in place (``set_to_none=False``) so that the
        first layer's kept float32 gradient buffer is reused (lean, float32); the bfloat16 path
        keeps its own buffers and wants ``set_to_none=True``."""
        return self._lean and self._bf16 is None

    @property
    def kept_grad_weight(self) -> torch.Tensor | None:
        """The weight whose gradient training leaves to :func:`_weight_grad_into` alone (the first
        hidden layer of a lean float32 network that takes the custom path of :meth:`features`), or
        ``None``: only such a gradient may be marked zero instead of written (:func:`_zero_grads`)."""
        if self._sparse is not None:
            return self.body[0].weight_t
        if not self.keeps_weight_grad or not len(self.body):
            return None
        if self.fusion is not None and not self.fusion.kernels:
            return None  # the plain path: autograd accumulates this gradient itself
        return self.body[0].weight

    def use_sparse_input(self, base: torch.Tensor | None) -> None:
        """Train on inputs that are ``base`` (one value per column) plus a few entries through
        :class:`_SparseFirstLayer` (the first hidden layer stored transposed meanwhile), or, with
        ``None``, the dense way again (the plain ``nn.Linear``). Not a parameter: the model and its
        saved state are the same either way, the outputs equal up to floating-point rounding."""
        if not len(self.body):
            return
        first = self.body[0]
        if base is None:
            self._sparse = None
            if isinstance(first, _TransposedLinear):
                self.body[0] = first.to_linear()
            return
        if not isinstance(first, _TransposedLinear):
            self.body[0] = _TransposedLinear(first)
        kernels = self.fusion.kernels if self.fusion is not None else ()
        pooled = [nn.functional.avg_pool1d(base[None, None, :], kernel_size=k, stride=k)[0, 0] for k in kernels]
        # each pooled column's scale, once (the forward pass indexes the fusion's scales and biases by it)
        sidx = torch.cat([torch.full((p.shape[0],), i, dtype=torch.long) for i, p in enumerate(pooled)]) \
            if pooled else None
        self._sparse = (base, torch.cat(pooled) if pooled else None, sidx)

    @property
    def sparse_input(self) -> bool:
        """Whether training takes the sparse path (:meth:`use_sparse_input`)."""
        return self._sparse is not None

    def features(self, x):
        if self._sparse is not None and torch.is_grad_enabled() and not x.requires_grad:
            first = self.body[0]
            base, pooled_base, sidx = self._sparse
            fusion = self.fusion
            kernels = fusion.kernels if fusion is not None else ()
            h = _SparseFirstLayer.apply(x, fusion.scale if kernels else None, fusion.bias if kernels else None,
                                        first.weight_t, first.bias, base, pooled_base, sidx, kernels)
            return self.body[1:](h)
        custom = (self._lean or self._bf16 is not None) and len(self.body) and torch.is_grad_enabled() \
            and not x.requires_grad
        if not custom:
            return self.body(self.fusion(x) if self.fusion is not None else x)
        first = self.body[0]
        pooled = None
        if self.fusion is not None and not self.fusion.kernels:
            # no pooled channels (text too short): nothing for lean mode to skip
            if self._bf16 is None:
                return self.body(self.fusion(x))
            x = self.fusion(x)
        elif self.fusion is not None:
            pooled = torch.cat(self.fusion.pooled(x), dim=1)
        return self.body[1:](_FirstLinear.apply(x, pooled, first.weight, first.bias, self._bf16))

    def forward(self, x):
        return torch.tanh(self.head(self.features(x)))


def make_net(modality: str, in_features: int, n_bits: int, hidden) -> HashNet:
    return HashNet(in_features, n_bits, hidden=hidden, multiscale=(modality == "text"))
