"""Global Binary Embedding (GBE; paper Eqs. 7-11, 26, Algorithm 2), in PyTorch, computed in blocks.

The exact blockwise solver and the fit loop are here; the sampled O(n k) solver for large n is in
:mod:`dmh.methods.gbe_sampled`, built on this module's similarity definitions so that both solvers
minimise the same loss (tests hold them equal when the draws cover every pair).

Loss over relaxed codes ``Hh`` (n x c)::

    l2 = KL(S^Y || S^H(Hh)) + gamma * q(Hh),     q = (1/n) sum_i ||hh_i - sign(hh_i)||^2

``S^H_ij = (1 + D_ij)^-1 / sum_{k != l} (1 + D_kl)^-1`` with ``D_ij = 1/4 ||hh_i - hh_j||^2``
(Student t with one degree of freedom, Eq. 8); ``S^Y`` is a distribution over ordered pairs
``i != j`` built from inner products of the CLE features (Eq. 7).

The gradient (:func:`gbe_loss_and_grad`) is the exact gradient of this loss (tests compare it with
autograd). Its KL part is exactly the paper's Eq. 26; Eq. 26 places the quantisation gradient
``2 gamma (hh_i - h_i)`` inside the sum over ``j``, i.e. multiplies it by ``n - 1``, while its KL
part is O(1/n): the balance of the two terms would then depend on ``n``. We scale the quantisation
term by ``1/n`` (``quantization="mean"``, the default) so that ``gamma`` means the same on 2,000
and 20,000 objects; ``quantization="sum"`` uses ``sum_i ||hh_i - h_i||^2`` (Eq. 11 as printed).

Choices for ``S^Y`` when inner products are negative (Eq. 7 is then not a distribution):

* ``similarity="clip"`` (default): ``max(y_i'y_j, 0)``, renormalised. Dissimilar pairs get zero
  target similarity, as far pairs do in t-SNE, and act only through the normalisation of ``S^H``
  (repulsion). It keeps the paper's linear kernel wherever it is valid.
* ``similarity="shift"``: ``y_i'y_j - min_{k != l} y_k'y_l`` (an affine shift that keeps every
  pair's order, but makes the most dissimilar pair's target zero and compresses the rest).
* ``similarity="raw"``: Eq. 7 as printed; raises a ``ValueError`` if an inner product is negative.
* ``similarity="perplexity"``: t-SNE's P instead of inner products: for each object a Gaussian over
  the Euclidean distances to its ``3 * perplexity`` nearest neighbours in Y, its width set by
  bisection so that the conditional distribution has the given perplexity, symmetrised
  ``(P_j|i + P_i|j) / 2n``. Sparse and neighbour-calibrated: each object attracts its own
  neighbourhood, whatever the density around it (the clipped inner products of ``"clip"`` spread
  the target over every pair with a positive inner product, about half of all pairs).

``exaggeration`` ``rho`` multiplies the KL term's attraction, ``rho * sum_ij S^Y_ij log(S^Y_ij /
K_ij) + log Z`` (t-SNE's exaggeration, kept for the whole fit rather than its first steps: Böhm,
Berens and Kobak 2022, "Attraction-repulsion spectrum in neighbor embeddings"): neighbourhoods pull
together harder, so the codes form fewer, tighter groups; ``rho = 1`` is the paper's loss, bit for
bit. Both solvers support it.

Memory: ``S^Y`` is cached as a dense float32 n x n matrix when it fits in ``cache_bytes``;
otherwise it is recomputed block by block from ``Y`` at every iteration. Everything else is
O(n x chunk_size).
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field

import numpy as np
import torch
from sklearn.exceptions import ConvergenceWarning

from ..errors import DataError, ParameterError
from .gbe_base import (  # noqa: F401 - importable from dmh.methods.gbe too
    SIMILARITIES,
    _csr,
    _quant_scale,
    calibrated_conditionals,
    perplexity_similarity,
    sign_pm1,
)

#: from this many objects on, ``solver="auto"`` uses the approximate O(n k) solver (see fit_gbe)
APPROX_MIN_N = 10_000


class PairSimilarity:
    """``S^Y`` of Eq. 7 as a blockwise operator over ordered pairs i != j (diagonal is zero).

    For ``kind="perplexity"`` P is sparse (each object's ``3 * perplexity`` nearest neighbours,
    symmetrised): it is kept as its nonzeros in CSR order (``indptr``, ``ecol``, ``eval``; the
    normalised) and :func:`gbe_loss_and_grad` reads it there, so no n x n
    matrix of it is ever formed (``cache`` is None; :meth:`block` gives dense rows on request)."""

    #: the weight of the KL term's attraction (:func:`fit_gbe`'s ``exaggeration``; 1: the paper's loss)
    exaggeration = 1.0

    def __init__(self, Y: torch.Tensor, kind: str = "clip", chunk_size: int = 1024,
                 cache_bytes: int = 2 * 1024**3, perplexity: float = 30.0):
        if kind not in SIMILARITIES:
            raise ParameterError(f"similarity must be one of {SIMILARITIES}, got {kind!r}")
        self.Y = Y
        self.kind = kind
        self.chunk = chunk_size
        n = Y.shape[0]
        self.n = n
        self.shift = 0.0
        self.sparse = None
        self.cache = None
        if kind == "perplexity":
            self._from_sparse(perplexity_similarity(Y.detach().cpu().numpy(), perplexity, device=Y.device.type))
            return
        if kind == "shift":
            m = math.inf
            for s, e in self._blocks():
                G = self._gram(s, e)
                m = min(m, float(G.min()))
            self.shift = m
        total = 0.0
        plogp = 0.0
        for s, e in self._blocks():
            B = self._raw(s, e)
            if kind == "raw" and bool((B < 0).any()):
                raise DataError(
                    "similarity='raw': some inner products y_i'y_j are negative, so Eq. 7 is not a "
                    "distribution; use similarity='clip' or 'shift'"
                )
            total += float(B.sum(dtype=torch.float64))
        if not total > 0:
            raise DataError("all pairwise similarities of the CLE features are zero; cannot build S^Y")
        self.total = total
        if n * n * Y.element_size() <= cache_bytes:
            self.cache = torch.empty((n, n), dtype=Y.dtype, device=Y.device)
            for s, e in self._blocks():
                self.cache[s:e] = self._raw(s, e) / total
        for s, e in self._blocks():
            P = self.block(s, e)
            pos = P > 0
            plogp += float((P[pos] * torch.log(P[pos])).sum(dtype=torch.float64))
        self.plogp = plogp

    def _from_sparse(self, P):
        """Keep the sparse P (scipy CSR, zero diagonal) as its nonzeros, weighted and renormalised."""
        P = P.tocsr()
        P.sort_indices()
        rows = np.repeat(np.arange(self.n, dtype=np.int64), np.diff(P.indptr))
        vals = np.asarray(P.data, dtype=np.float64)
        total = float(vals.sum())
        if not total > 0:
            raise DataError("all pairwise similarities of the CLE features are zero; cannot build S^Y")
        vals = vals / total
        pos = vals > 0
        self.sparse = P
        self.total = 1.0
        self.plogp = float((vals[pos] * np.log(vals[pos])).sum())
        dev = self.Y.device
        self.indptr = P.indptr.astype(np.int64)
        self.erow = torch.as_tensor(rows, device=dev)
        self.ecol = torch.as_tensor(P.indices.astype(np.int64), device=dev)
        self.eval = torch.as_tensor(vals, dtype=self.Y.dtype, device=dev)

    def _blocks(self):
        for s in range(0, self.n, self.chunk):
            yield s, min(s + self.chunk, self.n)

    def _gram(self, s, e):
        G = self.Y[s:e] @ self.Y.T
        idx = torch.arange(s, e, device=G.device)
        G[idx - s, idx] = math.inf  # excluded from the minimum
        return G

    def _raw(self, s, e):
        G = self.Y[s:e] @ self.Y.T
        if self.kind == "clip":
            G.clamp_(min=0.0)
        elif self.kind == "shift":
            G -= self.shift
            G.clamp_(min=0.0)  # round-off only
        idx = torch.arange(s, e, device=G.device)
        G[idx - s, idx] = 0.0
        return G

    def nonzeros(self, s, e):
        """The sparse P's nonzeros in rows ``s:e``: (rows relative to ``s``, columns, values)."""
        a, z = int(self.indptr[s]), int(self.indptr[e])
        return self.erow[a:z] - s, self.ecol[a:z], self.eval[a:z]

    def block(self, s, e) -> torch.Tensor:
        """Rows ``s:e`` of ``S^Y`` as a dense (e - s) x n tensor."""
        if self.sparse is not None:
            r, c, v = self.nonzeros(s, e)
            B = torch.zeros((e - s, self.n), dtype=self.Y.dtype, device=self.Y.device)
            B[r, c] = v
            return B
        if self.cache is not None:
            return self.cache[s:e]
        return self._raw(s, e) / self.total


def gbe_loss_and_grad(H: torch.Tensor, S: PairSimilarity, gamma: float, quantization: str = "mean",
                      chunk_size: int = 1024, with_loss: bool = True) -> tuple[float, torch.Tensor]:
    """Loss l2 and its exact gradient with respect to the relaxed codes ``H``, in one blockwise pass.

    With ``K_ij = (1 + D_ij)^-1`` and ``Z = sum_{i != j} K_ij``, the KL gradient (Eq. 26) is
    ``sum_j (P_ij - K_ij / Z) K_ij (h_i - h_j)``; its two parts ``sum_j P_ij K_ij (h_i - h_j)`` and
    ``sum_j K_ij^2 (h_i - h_j)`` are accumulated in the same pass as ``Z`` and combined at the end.
    ``with_loss=False`` skips the (logarithm-heavy) loss value and returns ``nan`` for it.
    """
    n = H.shape[0]
    sq = (H * H).sum(1)
    Zq = 0.0
    cross = 0.0  # sum p log K
    g_att = torch.empty_like(H)
    g_rep = torch.empty_like(H)
    H1 = torch.cat([H, torch.ones_like(H[:, :1])], 1) if S.sparse is not None else None
    for s in range(0, n, chunk_size):
        e = min(s + chunk_size, n)
        # K = 1 / (1 + |h_i - h_j|^2 / 4), diagonal zero
        W = torch.addmm(sq[None, :], H[s:e], H.T, beta=1.0, alpha=-2.0)
        W.add_(sq[s:e, None]).clamp_(min=0.0).mul_(0.25).add_(1.0).reciprocal_()
        if S.sparse is not None:  # P's nonzeros only: w_ij gathered there (P_ii = 0)
            r, col, p = S.nonzeros(s, e)
            wv = W.view(-1)[r * n + col]
            if with_loss:
                cross += float((p * torch.log(wv)).sum(dtype=torch.float64))
        else:
            P = S.block(s, e)
            if with_loss:  # before the diagonal is zeroed (K_ii = 1 there, and P_ii = 0)
                cross += float((P * torch.log(W)).sum(dtype=torch.float64))
        idx = torch.arange(s, e, device=W.device)
        W[idx - s, idx] = 0.0
        K = W
        if S.sparse is not None:  # row sums in K's precision, then float64 (no float64 copy of K)
            Zq += float(K.sum(1).sum(dtype=torch.float64))
        else:
            Zq += float(K.sum(dtype=torch.float64))
        if S.sparse is not None:
            # sum_j A_ij (h_i - h_j) = (A 1)_i h_i - (A H)_i, both from one sparse product with [H 1]
            crow = torch.as_tensor(S.indptr[s:e + 1] - S.indptr[s], device=H.device)
            o = _csr(crow, col, p * wv, size=(e - s, n)) @ H1
            g_att[s:e] = o[:, -1:] * H[s:e] - o[:, :-1]
        else:
            A = P * W
            g_att[s:e] = A.sum(1, keepdim=True) * H[s:e] - A @ H
        K.mul_(W)  # K^2, in place
        g_rep[s:e] = K.sum(1, keepdim=True) * H[s:e] - K @ H
    rho = S.exaggeration
    if rho != 1.0:  # the attraction scaled (t-SNE's exaggeration), the repulsion not
        g_att.mul_(rho)
    grad = g_att.sub_(g_rep, alpha=1.0 / Zq)
    qs = _quant_scale(n, quantization)
    Rq = H - sign_pm1(H)
    grad += (2.0 * gamma * qs) * Rq
    loss = math.nan
    if with_loss:
        loss = rho * (S.plogp - cross) + math.log(Zq) + gamma * qs * float((Rq * Rq).sum(dtype=torch.float64))
    return loss, grad


def gbe_loss_dense(H: torch.Tensor, P: torch.Tensor, gamma: float, quantization: str = "mean",
                   exaggeration: float = 1.0) -> torch.Tensor:
    """Reference loss in plain dense torch (for tests: autograd of this = the blockwise gradient)."""
    n = H.shape[0]
    D = 0.25 * torch.cdist(H, H) ** 2
    K = 1.0 / (1.0 + D)
    off = ~torch.eye(n, dtype=torch.bool)
    Q = K[off] / K[off].sum()
    p = P[off]
    pos = p > 0
    kl = (p[pos] * torch.log(p[pos] / Q[pos])).sum()
    if exaggeration != 1.0:  # rho (sum p log p - sum p log K) + log Z, with sum p = 1
        kl = exaggeration * kl + (1.0 - exaggeration) * torch.log(K[off].sum())
    h = sign_pm1(H.detach())
    return kl + gamma * _quant_scale(n, quantization) * ((H - h) ** 2).sum()


@dataclass
class GBEResult:
    codes: np.ndarray  # int8 {-1,+1}
    relaxed: np.ndarray
    loss: list = field(default_factory=list)  # (iteration, value)
    n_iter: int = 0
    converged: bool = False


def init_codes(Y: np.ndarray, n_bits: int, how: str, rng: np.random.Generator) -> np.ndarray:
    """``"pca"``: the projections of Y on its top principal directions, keeping their relative
    scale (the first has unit variance; columns beyond the rank of Y are small random values);
    ``"projection"``: projections of the centred Y on ``n_bits`` random Gaussian directions, scaled
    to unit overall standard deviation; ``"random"``: standard normal (Algorithm 2).

    Keeping the spectrum matters: scaling every component to unit variance gives directions that
    carry almost nothing the same weight as the main ones. On Wikipedia (CLE features, fully
    paired) the training codes' MAP was 0.162 at 128 bits with unit-variance components, 0.144
    with random initial codes and 0.249 with the spectrum kept (64 bits: 0.452, 0.452, 0.474)."""
    n = Y.shape[0]
    if how == "random":
        return rng.standard_normal((n, n_bits))
    if how == "projection":
        # random hyperplanes through the centred features (SimHash): every bit mixes all
        # directions, weighted by their variance, and more bits approximate angles better
        H = (Y - Y.mean(0)) @ rng.standard_normal((Y.shape[1], n_bits))
        scale = H.std()
        return H / scale if scale > 0 else 0.01 * rng.standard_normal((n, n_bits))
    if how != "pca":
        raise ParameterError(f"gbe_init must be 'pca', 'projection' or 'random', got {how!r}")
    Yc = Y - Y.mean(0)
    U, s, _ = np.linalg.svd(Yc, full_matrices=False)
    r = int(min(n_bits, (s > s[0] * 1e-8).sum() if s.size and s[0] > 0 else 0))
    H = 0.01 * rng.standard_normal((n, n_bits))
    if r:
        comp = U[:, :r] * s[:r]
        H[:, :r] = comp / max(comp[:, 0].std(), 1e-12)
    return H


def fit_gbe(Y: np.ndarray, n_bits: int, *, gamma: float = 0.01, similarity: str = "clip",
            quantization: str = "mean", init: str = "pca", H_init: np.ndarray | None = None,
            lr: float = 0.05, max_iter: int = 100, tol: float = 1e-4, chunk_size: int = 256,
            check_every: int = 10,
            cache_bytes: int = 2 * 1024**3, rng: np.random.Generator | None = None,
            dtype=torch.float32, callback=None, solver: str = "exact", n_neighbors: int = 15,
            n_samples: int = 128, device: str = "cpu", timings: dict | None = None, perplexity: float = 30.0,
            schedule: str = "constant", exaggeration: float = 1.0) -> GBEResult:
    """Algorithm 2: gradient-based minimisation of l2 over the relaxed codes, then H = sign(Hh).

    The step is Adam (the gradient of the KL term is O(1/n), so a plain step size would have to
    change with n), of size ``lr`` throughout (``schedule="constant"``) or decaying from ``lr`` to
    zero over ``max_iter`` steps along a half cosine (``"cosine"``: large steps while the codes
    are far from a solution, small ones as they settle, so the loss settles within the budget).
    The loss is evaluated every ``check_every`` iterations (``loss`` holds ``(iteration, value)``
    pairs); it stops when it changes by less than ``tol`` (relative) between two evaluations, and
    warns (:class:`~sklearn.exceptions.ConvergenceWarning`) when ``max_iter`` ends it first.

    ``solver="exact"`` computes the full gradient over all n^2 pairs at every step;
    ``"approx"`` uses :func:`gbe_loss_and_grad_sampled` (``n_neighbors`` exact neighbours of S^Y,
    or for ``similarity="perplexity"`` the nonzeros of its sparse P, and ``n_samples`` fresh
    uniform draws per block of rows and step, O(n (k + m) (c + d)) per step; the loss it checks
    is estimated on one fixed set of draws, so successive values are comparable); ``"auto"``
    picks ``"approx"`` from :data:`APPROX_MIN_N` objects on. ``device`` is where the
    tensors live (``"cpu"`` or ``"cuda"``); the draws come from a CPU generator seeded by ``rng``,
    so they do not depend on the device. ``timings``, when given, accumulates seconds spent
    building S^Y (``"setup"``) and in the steps (``"steps"``). On a GPU, and on a CPU for the
    sparse ``similarity="perplexity"``, the approximate solver computes all blocks of a step at
    once (:func:`gbe_loss_and_grad_sampled_batched`).
    """
    if solver not in ("auto", "exact", "approx"):
        raise ParameterError(f"gbe_solver must be 'auto', 'exact' or 'approx', got {solver!r}")
    if schedule not in ("constant", "cosine"):
        raise ParameterError(f"gbe_schedule must be 'constant' or 'cosine', got {schedule!r}")
    if not (isinstance(exaggeration, (int, float)) and not isinstance(exaggeration, bool)
            and math.isfinite(exaggeration) and exaggeration > 0):
        raise ParameterError(f"gbe_exaggeration must be a positive number, got {exaggeration!r}")
    if solver == "auto":
        solver = "approx" if Y.shape[0] >= APPROX_MIN_N else "exact"
    from .gbe_sampled import (
        SampledSimilarity,
        draw_columns,
        gbe_loss_and_grad_sampled,
        gbe_loss_and_grad_sampled_batched,
    )

    t0 = time.perf_counter()
    rng = np.random.default_rng(rng)
    Yt = torch.as_tensor(np.ascontiguousarray(Y), dtype=dtype).to(device)
    if solver == "exact":
        S = PairSimilarity(Yt, similarity, chunk_size=chunk_size, cache_bytes=cache_bytes, perplexity=perplexity)
    else:
        S = SampledSimilarity(Yt, similarity, n_neighbors=n_neighbors, chunk_size=chunk_size,
                              perplexity=perplexity)
    S.exaggeration = float(exaggeration)
    H0 = init_codes(Y, n_bits, init, rng) if H_init is None else np.asarray(H_init)
    H = torch.tensor(H0, dtype=dtype, device=device)
    if solver == "approx":
        # all blocks at once (same draws, same estimates): on a GPU, where the loop is bound by kernel
        # launches, and on a CPU for the sparse P, where it is 1.6x faster (for the dense
        # similarities its n x k x m neighbour tests make it slower there: the CPU keeps the loop)
        sampled = gbe_loss_and_grad_sampled_batched if H.is_cuda or S.sparse else gbe_loss_and_grad_sampled
        gen = torch.Generator().manual_seed(int(rng.integers(2**62)))
        n, m = H.shape[0], int(n_samples)
        J_eval = draw_columns(n, m, chunk_size, gen).to(device)
    if timings is not None:
        timings["setup"] = timings.get("setup", 0.0) + time.perf_counter() - t0
    t0 = time.perf_counter()
    opt = torch.optim.Adam([H.requires_grad_()], lr=lr)
    losses = []
    converged = False
    it = 0
    for it in range(1, max_iter + 1):
        check = it == 1 or it % check_every == 0 or it == max_iter
        with torch.no_grad():
            if solver == "exact":
                loss, grad = gbe_loss_and_grad(H.detach(), S, gamma, quantization, chunk_size, with_loss=check)
            else:
                if check:
                    loss, _ = sampled(H.detach(), S, J_eval, gamma, quantization, chunk_size)
                J = draw_columns(n, m, chunk_size, gen).to(device)
                _, grad = sampled(H.detach(), S, J, gamma, quantization, chunk_size, with_loss=False)
        if check:
            losses.append((it, loss))
            if callback is not None:
                callback(it, loss)
            if len(losses) > 1 and abs(losses[-2][1] - loss) <= tol * (abs(loss) + 1e-12):
                converged = True
                break
        opt.zero_grad(set_to_none=False)
        H.grad = grad
        if schedule == "cosine":
            opt.param_groups[0]["lr"] = lr * 0.5 * (1.0 + math.cos(math.pi * (it - 1) / max_iter))
        opt.step()
    if not converged and max_iter >= 10:
        warnings.warn(f"GBE stopped at max_iter={max_iter} before its loss settled (tol {tol:g})",
                      ConvergenceWarning, stacklevel=2)
    if timings is not None:
        timings["steps"] = timings.get("steps", 0.0) + time.perf_counter() - t0
    Hd = H.detach().cpu().to(torch.float64).numpy()
    return GBEResult(codes=np.where(Hd > 0, 1, -1).astype(np.int8), relaxed=Hd, loss=losses,
                     n_iter=it, converged=converged)
