"""GBE's approximate solver for large n (:func:`dmh.methods.gbe.fit_gbe` with ``solver="approx"``):
each object's neighbours of S^Y summed exactly, every other object estimated from uniform draws
(negative sampling as in LargeVis and UMAP, the t-SNE normalisation kept), O(n (k + m) (c + d)) a
step instead of the exact solver's O(n^2 c). It reads the similarity definitions of
:mod:`dmh.methods.gbe`, so both solvers minimise the same loss."""

from __future__ import annotations

import math

import numpy as np
import torch

from ..errors import DataError, ParameterError
from .gbe_base import SIMILARITIES, _csr, _quant_scale, perplexity_similarity, sign_pm1

#: the largest bitmap of P's nonzero pattern (one bit per pair) the approximate solver keeps for its
#: lookups of drawn pairs: up to about 46,000 objects (256 MiB there, far below the fit's other arrays
#: at that size; a step at 40,000 objects took 300 ms with it against 424 ms by the search); above, it
#: searches P's sorted keys
BITMAP_MAX_BYTES = 256 * 1024**2


class SampledSimilarity:
    """``S^Y`` for the approximate solver: each object's ``n_neighbors`` largest entries of its
    row (kept exactly), and any other entry computed on demand from ``Y`` (O(d) per pair).

    One blockwise pass over all pairs (O(n^2 d) time once, O(n chunk) memory) finds the
    neighbours, the normaliser and ``sum P log P``; nothing n x n is stored."""

    #: the weight of the KL term's attraction (:func:`dmh.methods.gbe.fit_gbe`'s ``exaggeration``)
    exaggeration = 1.0

    def __init__(self, Y: torch.Tensor, kind: str = "clip", n_neighbors: int = 15, chunk_size: int = 1024,
                 perplexity: float = 30.0):
        if kind not in SIMILARITIES:
            raise ParameterError(f"similarity must be one of {SIMILARITIES}, got {kind!r}")
        n = Y.shape[0]
        self.Y, self.kind, self.n = Y, kind, n
        self.sparse = kind == "perplexity"
        if self.sparse:
            self._from_sparse(perplexity)
            return
        k = int(min(n_neighbors, n - 1))
        self.shift = 0.0
        if kind == "shift":
            m = math.inf
            for s in range(0, n, chunk_size):
                e = min(s + chunk_size, n)
                G = Y[s:e] @ Y.T
                idx = torch.arange(s, e, device=G.device)
                G[idx - s, idx] = math.inf
                m = min(m, float(G.min()))
            self.shift = m
        total = 0.0
        glogg = 0.0
        nbrs = torch.empty((n, k), dtype=torch.long, device=Y.device)
        vals = torch.empty((n, k), dtype=Y.dtype, device=Y.device)
        for s in range(0, n, chunk_size):
            e = min(s + chunk_size, n)
            G = self._f(Y[s:e] @ Y.T)
            idx = torch.arange(s, e, device=G.device)
            G[idx - s, idx] = 0.0
            pos = G > 0
            total += float(G.sum(dtype=torch.float64))
            glogg += float((G[pos] * torch.log(G[pos])).sum(dtype=torch.float64))
            G[idx - s, idx] = -1.0  # never one's own neighbour
            v, j = torch.topk(G, k, dim=1)
            vals[s:e], nbrs[s:e] = v.clamp_(min=0.0), j
        if not total > 0:
            raise DataError("all pairwise similarities of the CLE features are zero; cannot build S^Y")
        self.total = total
        self.plogp = glogg / total - math.log(total)  # sum (G/T) log(G/T)
        self.nbrs = nbrs
        self.p_nbrs = vals / total

    def _from_sparse(self, perplexity: float):
        """t-SNE's P (:func:`perplexity_similarity`): its nonzeros are the neighbours (a different
        number per row, kept as an edge list in CSR order), every other entry is zero."""
        Y = self.Y
        P = perplexity_similarity(Y.detach().cpu().numpy(), perplexity, device=Y.device.type)
        P.sort_indices()
        n = self.n
        dev = Y.device
        self.total = 1.0
        self.plogp = float((P.data * np.log(P.data)).sum())
        self.indptr = P.indptr.astype(np.int64)
        self.crow = torch.as_tensor(self.indptr, device=dev)  # P's row pointers on the device (batched step)
        self.degree = torch.as_tensor(np.diff(self.indptr), device=dev)
        rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(self.indptr))
        self.erow = torch.as_tensor(rows, device=dev)
        self.ecol = torch.as_tensor(P.indices.astype(np.int64), device=dev)
        self.eval = torch.as_tensor(P.data, dtype=Y.dtype, device=dev)
        keys = self.erow * n + self.ecol  # sorted (CSR order)
        # which pairs are neighbours: one bit per pair where that is small (a lookup is one cached
        # read), else P's sorted keys (a binary search over all n k of them)
        if n * n <= 8 * BITMAP_MAX_BYTES:
            bits = np.zeros(-(-n * n // 8), dtype=np.uint8)
            k = keys.cpu().numpy()
            np.bitwise_or.at(bits, k >> 3, (1 << (k & 7)).astype(np.uint8))
            self.bitmap, self.keys = torch.as_tensor(bits, device=dev), None
        else:
            self.bitmap, self.keys = None, keys

    def is_neighbour(self, key: torch.Tensor) -> torch.Tensor:
        """Whether each pair ``key = i * n + j`` (int64) is a neighbour pair, a nonzero of P (sparse P)."""
        if self.bitmap is not None:
            return (self.bitmap[key >> 3] >> (key & 7).to(torch.uint8)) & 1 == 1
        at = torch.searchsorted(self.keys, key.reshape(-1)).clamp_(max=self.keys.numel() - 1).view_as(key)
        return self.keys[at] == key

    def _f(self, G: torch.Tensor) -> torch.Tensor:
        if self.kind == "clip":
            return G.clamp_(min=0.0)
        if self.kind == "shift":
            return G.sub_(self.shift).clamp_(min=0.0)
        if bool((G < 0).any()):
            raise DataError(
                "similarity='raw': some inner products y_i'y_j are negative, so Eq. 7 is not a "
                "distribution; use similarity='clip' or 'shift'"
            )
        return G

    def block(self, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        """``S^Y`` of every pair ``(rows[i], cols[j])`` that is not a neighbour pair (pairs of an
        object with itself give 0; for the sparse ``"perplexity"`` P every such entry is 0)."""
        if self.sparse:
            return torch.zeros((len(rows), len(cols)), dtype=self.Y.dtype, device=self.Y.device)
        G = self._f(self.Y[rows] @ self.Y[cols].T)
        return G.masked_fill_(cols[None, :] == rows[:, None], 0.0).div_(self.total)


def draw_columns(n: int, n_samples: int, chunk_size: int, generator: torch.Generator) -> torch.Tensor:
    """Uniform draws for :func:`gbe_loss_and_grad_sampled`: ``n_samples`` objects for each block
    of ``chunk_size`` rows (shared by the rows of a block, so each block is two matrix products)."""
    return torch.randint(n, (-(-n // chunk_size), n_samples), generator=generator)


def _sampled_result(H, S, g_att, g_rep, Zq: float, cross: float, gamma: float, quantization: str,
                    with_loss: bool) -> tuple[float, torch.Tensor]:
    """The sampled solvers' last step: gradient from the attraction, the repulsion and the
    normaliser ``Zq``, plus the quantisation term; the loss when asked for."""
    rho = S.exaggeration
    if rho != 1.0:
        g_att.mul_(rho)
    grad = g_att.sub_(g_rep, alpha=1.0 / Zq)
    qs = _quant_scale(H.shape[0], quantization)
    Rq = H - sign_pm1(H)
    grad += (2.0 * gamma * qs) * Rq
    loss = math.nan
    if with_loss:
        loss = rho * (S.plogp - float(cross)) + math.log(Zq) + gamma * qs * float((Rq * Rq).sum(dtype=torch.float64))
    return loss, grad


def gbe_loss_and_grad_sampled(H: torch.Tensor, S: SampledSimilarity, J: torch.Tensor, gamma: float,
                              quantization: str = "mean", chunk_size: int = 1024,
                              with_loss: bool = True) -> tuple[float, torch.Tensor]:
    """Unbiased estimates of the sums in :func:`gbe_loss_and_grad`, in O(n (k + m) (c + d)) per step.

    Each object's sum over ``j`` is split into its ``k`` neighbours of ``S^Y`` (summed exactly)
    and all other objects, estimated from ``m`` uniform draws (``J``, one row of ``m`` objects
    per block of ``chunk_size`` rows, see :func:`draw_columns`; draws that hit the object itself
    or one of its neighbours count zero, the others ``(n - 1) / m``): the attraction
    ``sum_j P_ij K_ij (h_i - h_j)``, the repulsion ``sum_j K_ij^2 (h_i - h_j)``, the normaliser
    ``Z`` and ``sum P log K`` alike. This is negative sampling as in LargeVis and UMAP, but the
    normalised t-SNE-style objective is kept, so both solvers minimise the same loss.

    For the sparse ``similarity="perplexity"`` (``S.sparse``) the neighbours are the nonzeros of
    P, so the attraction and ``sum P log K`` are exact and only ``Z`` and the repulsion are
    estimated; rows have different numbers of neighbours, so a block's rows of P are a sparse
    CSR matrix (``torch.sparse.sampled_addmm`` for ``h_i'h_j`` on its nonzeros, then sparse
    times dense products): O(nnz(P) c) per step."""
    n, m = H.shape[0], J.shape[1]
    nb, pnb = (None, None) if S.sparse else (S.nbrs, S.p_nbrs)
    sq = (H * H).sum(1)
    Zq = 0.0
    cross = 0.0
    g_att = torch.empty_like(H)
    g_rep = torch.empty_like(H)
    scale = n / m  # a draw is one of n objects: E[(n / m) sum over m draws] = the sum over the rest
    H1 = torch.cat([H, torch.ones_like(H[:, :1])], 1) if S.sparse else None
    for b, s in enumerate(range(0, n, chunk_size)):
        e = min(s + chunk_size, n)
        rows = torch.arange(s, e, device=H.device)
        cols = J[b]
        Hi = H[s:e]
        if S.sparse:  # P's nonzeros, exact, as sparse rows: h_i'h_j on them only, then sparse products
            a, z = int(S.indptr[s]), int(S.indptr[e])
            crow = torch.as_tensor(S.indptr[s:e + 1] - a, device=H.device)
            col = S.ecol[a:z]
            pattern = _csr(crow, col, torch.zeros_like(S.eval[a:z]), size=(e - s, n))
            dots = torch.sparse.sampled_addmm(pattern, Hi, H.T).values()
            Kn = (sq[S.erow[a:z]] + sq[col]).sub_(dots, alpha=2.0).clamp_(min=0.0)
            Kn.mul_(0.25).add_(1.0).reciprocal_()
            if with_loss:
                cross += float((S.eval[a:z] * torch.log(Kn)).sum(dtype=torch.float64))
        else:  # the k neighbours of every row: gathered, exact
            dn = Hi[:, None, :] - H[nb[s:e]]  # (b, k, c)
            Kn = (dn * dn).sum(-1).mul_(0.25).add_(1.0).reciprocal_()
            if with_loss:
                cross += float((pnb[s:e] * torch.log(Kn)).sum(dtype=torch.float64))
        # drawn objects: one block of pairs, by matrix products
        Hc = H[cols]
        Ks = torch.addmm(sq[cols][None, :], Hi, Hc.T, beta=1.0, alpha=-2.0)
        Ks.add_(sq[s:e, None]).clamp_(min=0.0).mul_(0.25).add_(1.0).reciprocal_()
        if S.sparse:
            hit = S.is_neighbour(rows[:, None] * n + cols[None, :]) | (cols[None, :] == rows[:, None])
        else:
            hit = (nb[s:e][:, :, None] == cols[None, None, :]).any(1) | (cols[None, :] == rows[:, None])
        w = (~hit).to(H.dtype).mul_(scale)
        wK = w.mul_(Ks)
        Zq += float(Kn.sum(dtype=torch.float64)) + float(wK.sum(dtype=torch.float64))
        if S.sparse:  # drawn pairs outside the neighbours: S^Y is zero there
            # sum_j A_ij (h_i - h_j) = (A 1)_i h_i - (A H)_i, both from one product with [H 1]
            o = _csr(crow, col, S.eval[a:z] * Kn, size=(e - s, n)) @ H1
            g_att[s:e] = o[:, -1:] * Hi - o[:, :-1]
            o = _csr(crow, col, Kn.mul_(Kn), size=(e - s, n)) @ H1
            g_rep[s:e] = o[:, -1:] * Hi - o[:, :-1]
        else:
            An = pnb[s:e] * Kn
            g_att[s:e] = (An[:, :, None] * dn).sum(1)
            Ps = S.block(rows, cols)
            if with_loss:
                cross += float((wK / Ks * Ps * torch.log(Ks)).sum(dtype=torch.float64))
            A = Ps.mul_(wK)  # w P K over the drawn pairs
            g_att[s:e] += A.sum(1, keepdim=True) * Hi - A @ Hc
            Kn.mul_(Kn)
            g_rep[s:e] = (Kn[:, :, None] * dn).sum(1)
        R = wK.mul_(Ks)  # w K^2
        g_rep[s:e] += R.sum(1, keepdim=True) * Hi - R @ Hc
    return _sampled_result(H, S, g_att, g_rep, Zq, cross, gamma, quantization, with_loss)


def gbe_loss_and_grad_sampled_batched(H: torch.Tensor, S: SampledSimilarity, J: torch.Tensor, gamma: float,
                                      quantization: str = "mean", chunk_size: int = 1024,
                                      with_loss: bool = True) -> tuple[float, torch.Tensor]:
    """:func:`gbe_loss_and_grad_sampled` with every block of rows at once (the same estimates from
    the same draws ``J``, summed in another order): P's nonzeros as one n x n sparse matrix, the
    drawn pairs as batched matrix products over the blocks, and one device synchronisation per
    call instead of several per block. For a GPU, where the block loop is bound by kernel
    launches and synchronisations (391 blocks a step at 100,000 objects), and for the sparse P on
    a CPU too (44 against 71 ms a step at 10,000 objects, 64 bits, two threads); it holds n x m
    drawn pairs (and, for the dense similarities, n x k x m neighbour tests, which make it slower
    than the loop on a CPU) at once."""
    n, c = H.shape
    nblk, m = J.shape
    dev, dt = H.device, H.dtype
    sq = (H * H).sum(1)
    cross = torch.zeros((), dtype=torch.float64, device=dev)
    if S.sparse:  # P's nonzeros, exact: one sparse pattern over all rows
        crow = S.crow
        pattern = _csr(crow, S.ecol, torch.zeros_like(S.eval), size=(n, n))
        dots = torch.sparse.sampled_addmm(pattern, H, H.T).values()
        Kn = (sq[S.erow] + sq[S.ecol]).sub_(dots, alpha=2.0).clamp_(min=0.0)
        Kn.mul_(0.25).add_(1.0).reciprocal_()
        if with_loss:
            cross = cross + (S.eval * torch.log(Kn)).sum(dtype=torch.float64)
        Zq = Kn.sum(dtype=torch.float64)
        H1 = torch.cat([H, torch.ones_like(H[:, :1])], 1)
        o = _csr(crow, S.ecol, S.eval * Kn, size=(n, n)) @ H1
        g_att = o[:, -1:] * H - o[:, :-1]
        o = _csr(crow, S.ecol, Kn.mul_(Kn), size=(n, n)) @ H1
        g_rep = o[:, -1:] * H - o[:, :-1]
    else:  # the k neighbours of every row, gathered
        nb, pnb = S.nbrs, S.p_nbrs
        dn = H[:, None, :] - H[nb]  # (n, k, c)
        Kn = (dn * dn).sum(-1).mul_(0.25).add_(1.0).reciprocal_()
        if with_loss:
            cross = cross + (pnb * torch.log(Kn)).sum(dtype=torch.float64)
        Zq = Kn.sum(dtype=torch.float64)
        g_att = ((pnb * Kn)[:, :, None] * dn).sum(1)
        g_rep = ((Kn * Kn)[:, :, None] * dn).sum(1)
        del dn
    # drawn objects: block b's rows against its m draws J[b], all blocks in one batched product
    npad = nblk * chunk_size
    rows = torch.arange(npad, device=dev).view(nblk, chunk_size)
    Hp = torch.zeros((npad, c), dtype=dt, device=dev)
    Hp[:n] = H
    Hp = Hp.view(nblk, chunk_size, c)
    sqp = torch.zeros(npad, dtype=dt, device=dev)
    sqp[:n] = sq
    Hc = H[J]  # (nblk, m, c)
    Ks = torch.baddbmm(sq[J][:, None, :], Hp, Hc.transpose(1, 2), beta=1.0, alpha=-2.0)
    Ks.add_(sqp.view(nblk, chunk_size, 1)).clamp_(min=0.0).mul_(0.25).add_(1.0).reciprocal_()
    self_hit = J[:, None, :] == rows[:, :, None]
    if S.sparse:
        key = (rows.clamp(max=n - 1) * n)[:, :, None] + J[:, None, :]  # padding rows: w = 0 below anyway
        hit = S.is_neighbour(key) | self_hit
        del key
    else:
        nbp = torch.full((npad, nb.shape[1]), -1, dtype=nb.dtype, device=dev)
        nbp[:n] = nb
        hit = (nbp.view(nblk, chunk_size, -1, 1) == J[:, None, None, :]).any(2) | self_hit
        del nbp
    hit |= (rows >= n)[:, :, None]  # padding rows of the last block
    w = (~hit).to(dt).mul_(n / m)
    del hit, self_hit
    wK = w * Ks
    Zq = Zq + wK.sum(dtype=torch.float64)
    if not S.sparse:
        Yp = torch.zeros((npad, S.Y.shape[1]), dtype=S.Y.dtype, device=dev)
        Yp[:n] = S.Y
        Ps = S._f(torch.bmm(Yp.view(nblk, chunk_size, -1), S.Y[J].transpose(1, 2)))
        Ps.div_(S.total)  # the self pairs and padding rows carry w = 0 below
        del Yp
        if with_loss:
            cross = cross + (w * Ps * torch.log(Ks)).sum(dtype=torch.float64)
        A = Ps.mul_(wK)
        g_att += (A.sum(2, keepdim=True) * Hp - torch.bmm(A, Hc)).view(npad, c)[:n]
        del A, Ps
    del w
    R = wK.mul_(Ks)  # w K^2
    g_rep += (R.sum(2, keepdim=True) * Hp - torch.bmm(R, Hc)).view(npad, c)[:n]
    sums = torch.stack([Zq, cross]).cpu()  # the one synchronisation
    Zq, cross = float(sums[0]), float(sums[1])
    return _sampled_result(H, S, g_att, g_rep, Zq, cross, gamma, quantization, with_loss)
