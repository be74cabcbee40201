"""DMH's three stages as components, one slot each on :class:`~dmh.DMH`: :class:`CLE` (the shared
features ``Y``), a binary embedding (:class:`GBE`, or :class:`PCA` for the DMH-PCA ablation) and
:class:`DAM` (the hash networks). Each holds its own settings, validates them (``check``) and does
its stage of a round on the fit's state (:class:`dmh.methods.dmh_fit.FitState`).

A setting left as ``None`` takes the value of DMH's ``preset``; ``DMH.stages()`` gives the stages
with every such value filled in. The module docstrings of :mod:`dmh.methods.cle`,
:mod:`dmh.methods.gbe` and :mod:`dmh.methods.dam` describe the algorithms; docs/method.md says why
each default is what it is.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from functools import partial
from typing import ClassVar

import numpy as np

from .._memory import release_free_memory
from .._validation import (
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    UNIT_INTERVAL,
    Boolean,
    Interval,
    Options,
)
from .dmh_options import GAMMA_REFERENCE_BITS, GBE_WARM_LR, GBE_WARM_STEPS, cle_precision, sparse_view
from .dmh_parts import COMPLEMENTS, ENCODERS, SIMILARITIES, Complement, Component, Encoder, Similarity

__all__ = ["CLE", "DAM", "GBE", "PCA", "Embedding", "Stages"]

MODALITIES = ("image", "text")


def view_scalings(setting: str, raws: dict, masks) -> dict:
    """``{"image": "feature"|"view", "text": ...}`` for a scaling ``setting``: itself, or under
    ``"auto"`` ``"view"`` for a sparse view (:func:`dmh.methods.dmh_options.sparse_view`)."""
    if setting != "auto":
        return {m: setting for m in MODALITIES}
    return {m: "view" if sparse_view(raws[m], mask) else "feature" for m, mask in zip(MODALITIES, masks, strict=True)}


@dataclass
class CLE(Component):
    """Complemented Local Embedding: both views embedded in one space ``Y`` (Eq. 6).

    ``complement``: how a missing description is filled in (``"lle"``: Eq. 5, ``"zero"``: the
    DMH-ZERO ablation, or a :class:`~dmh.methods.dmh_parts.Complement`); ``q_update`` /
    ``y_update``: the updates of the rotations and of ``Y`` (:mod:`dmh.methods.cle`); ``max_iter`` and
    ``tol``: its most iterations per round and the relative change of the objective at which it
    stops; ``neighbour_pool``: candidates from which the ``k`` neighbours are picked; ``w_reg``: the
    regulariser of the reconstruction weights; ``scaling``: how the inputs enter the first round
    (``"feature"``: each feature standardised, the paper; ``"view"``: each view centred and scaled as
    a whole; ``"auto"``: ``"view"`` for a sparse view); ``dtype``: precision of the n x d arrays
    (``"auto"``: float32 from :data:`dmh.methods.gbe.APPROX_MIN_N` objects on); ``gram``: hold a view
    with more features than objects by its Gram matrix (the same iterates up to rounding);
    ``refresh_features``: refresh the features from DAM's hidden layers after each round (``False``:
    the DMH-FIX ablation)."""

    name: ClassVar[str] = "cle"
    _fields = {
        "q_update": ("q_update", [Options("procrustes", "paper")]),
        "y_update": ("y_update", [Options("exact", "jacobi")]),
        "max_iter": ("cle_max_iter", [POSITIVE_INT]), "tol": ("cle_tol", [NON_NEGATIVE]),
        "neighbour_pool": ("neighbour_pool", [POSITIVE_INT]), "w_reg": ("w_reg", [NON_NEGATIVE]),
        "scaling": ("cle_scaling", [Options("feature", "view", "auto"), None]),
        "dtype": ("cle_dtype", [Options("auto", "float64", "float32"), None]),
        "gram": ("cle_gram", [Boolean(), None]), "refresh_features": ("refresh_features", [Boolean()]),
    }
    _parts = {"complement": (Complement, COMPLEMENTS)}
    complement: str | Complement = "lle"
    q_update: str = "procrustes"
    y_update: str = "exact"
    max_iter: int = 30
    tol: float = 1e-4
    neighbour_pool: int = 30
    w_reg: float = 0.1
    scaling: str | None = None
    dtype: str | None = None
    gram: bool | None = None
    refresh_features: bool = True

    def precision(self, n: int) -> np.dtype:
        """The precision of the n x d arrays for ``n`` objects (``dtype`` resolved)."""
        return cle_precision(self.dtype, n)

    def view_scalings(self, raws: dict, masks) -> dict:
        """How each view enters the first round: ``{"image": "feature"|"view", "text": ...}``."""
        return view_scalings(self.scaling, raws, masks)

    def run(self, state, r: int) -> None:
        """Round ``r``: ``state.Y`` from the views (the inputs in the first round, the refreshed
        features after), the missing descriptions complemented."""
        from . import cle as cle_mod

        opts, clock = state.opts, state.clock
        with clock.stage("cle", step=True):
            with clock.stage("cle_scale"):
                if r == 0:
                    views = [_first_view(state, m, mask) for m, mask in zip(MODALITIES, state.masks, strict=True)]
                else:  # refreshed features are this fit's own: scaled in place where the dtype allows
                    views = [cle_mod.scale_view(Z, mask, state.cle_dtype, inplace=True)
                             for Z, mask in zip(state.Zs, state.masks, strict=True)]
                    state.Y = None  # the last round's Y is not read again: free it before CLE makes the next
                state.Zs = [None, None]
            complement = self.part("complement")
            given = None
            if complement.predicts and not state.paired.all():
                with clock.stage("cle_ridge"):
                    given = complement.given(views, state.masks, state.paired)
            parts = {}
            res = cle_mod.fit_cle(
                views, state.masks, d=opts.d, k=opts.k, lam=opts.lambda_, eta=opts.eta, max_iter=self.max_iter,
                tol=self.tol, complement_how=complement.name, q_method=self.q_update, y_method=self.y_update,
                w_reg=self.w_reg, neighbour_pool=self.neighbour_pool, rng=state.rng, timings=parts,
                dtype=state.cle_dtype, complement_given=given, device=state.device,
                gram=None if self.gram else False,
            )
            clock.add("cle_", parts)
            state.Y = res.Y
            state.history["cle"].append(res.objective)
            del views, res, given  # the scaled views are the largest arrays of a fit: free them now
            release_free_memory()


def _first_view(state, m, mask):
    """View ``m`` as CLE's first round sees it, per ``state.scalings``."""
    from . import cle as cle_mod

    if state.scalings[m] == "view":  # the inputs as given, the view scaled as a whole (a copy)
        return cle_mod.scale_view(state.raws[m], mask, state.cle_dtype)
    if state.input_scalings[m] == "view":  # the networks' inputs are not standardised per feature: CLE's are
        from .dam_inputs import column_mean_std

        mu, sd = column_mean_std(state.raws[m], mask)
        sd[sd < 1e-12] = 1.0
        return cle_mod.scale_view((state.raws[m] - mu) / sd, mask, state.cle_dtype, inplace=True)
    if state.cle_dtype == np.float64:  # every feature standardised
        return cle_mod.scale_view(state.X[m], mask)
    return cle_mod.scale_view(state.X.float32(m), mask, state.cle_dtype, inplace=True)  # a float32 copy, in place


class Embedding(Component):
    """How CLE's ``Y`` becomes the binary codes the networks learn."""

    _kind = "binary_embedding"


@dataclass
class GBE(Embedding):
    """Global Binary Embedding: relaxed codes whose similarities S^H match S^Y (Eq. 11), by Adam.

    ``similarity``: how S^Y is made (``"clip"``: the paper; ``"perplexity"``: t-SNE's P, with its
    own ``perplexity``; or a :class:`~dmh.methods.dmh_parts.Similarity`); ``quantization``: the
    quantisation term per object (``"mean"``) or summed as printed (``"sum"``); ``init``: the first
    round's relaxed codes (later rounds warm-start); ``gamma_scaling``: ``"bits"`` weighs the
    quantisation by ``gamma * 16 / n_bits``; ``lr``, ``max_iter``, ``tol``: Adam's step, its most
    steps and the relative change of the loss at which it stops; ``schedule``: that step throughout
    (``"constant"``) or along a half cosine (``"cosine"``, the warm-started rounds from
    :data:`~dmh.methods.dmh_options.GBE_WARM_LR` of the step with
    :data:`~dmh.methods.dmh_options.GBE_WARM_STEPS` of the budget); ``exaggeration``: the attraction
    weight ``rho`` of t-SNE (1: the paper's loss); ``solver``: the gradient over all pairs
    (``"exact"``), its O(n k) estimate (``"approx"``) or ``"auto"`` (approximate from
    :data:`~dmh.methods.gbe.APPROX_MIN_N` objects on); ``chunk_size``: rows per block of the exact
    gradient; ``block_bits``: the code solved as independent GBE problems of at most this many bits
    (blocks of :func:`dmh.blocks.blocks_of`), each from its own draws of the fit's generator and
    warm-started from its own relaxed codes, side by side (a length of at least ``n_bits``: one problem
    of ``n_bits``, as the paper; ``None``: the preset's, 16 under ``"default"``, one problem under
    ``"paper"``); CLE and DAM stay one, on the whole code."""

    name: ClassVar[str] = "gbe"
    _fields = {
        "quantization": ("quantization", [Options("mean", "sum")]),
        "init": ("gbe_init", [Options("pca", "projection", "random")]),
        "gamma_scaling": ("gamma_scaling", [Options("none", "bits"), None]),
        "lr": ("gbe_lr", [POSITIVE, None]), "max_iter": ("gbe_max_iter", [POSITIVE_INT, None]),
        "tol": ("gbe_tol", [NON_NEGATIVE, None]), "schedule": ("gbe_schedule", [Options("constant", "cosine"), None]),
        "exaggeration": ("gbe_exaggeration", [Interval(numbers.Real, 0, None, closed="neither"), None]),
        "solver": ("gbe_solver", [Options("auto", "exact", "approx")]), "chunk_size": ("chunk_size", [POSITIVE_INT]),
        "block_bits": ("gbe_block_bits", [POSITIVE_INT, None]),
    }
    _parts = {"similarity": (Similarity, SIMILARITIES)}
    similarity: str | Similarity | None = None
    quantization: str = "mean"
    init: str = "projection"
    gamma_scaling: str | None = None
    lr: float | None = None
    max_iter: int | None = None
    tol: float | None = None
    schedule: str | None = None
    exaggeration: float | None = None
    solver: str = "auto"
    chunk_size: int = 256
    block_bits: int | None = None

    def quantization_weight(self, gamma: float, n_bits: int) -> float:
        """The quantisation weight: ``gamma``, times ``16 / n_bits`` under ``gamma_scaling="bits"``."""
        if self.gamma_scaling == "bits":
            return float(gamma) * GAMMA_REFERENCE_BITS / n_bits
        return float(gamma)

    def budget(self, warm: bool) -> tuple[float, int]:
        """The first step size and most steps: ``lr`` and ``max_iter``, or for a round that
        warm-starts under the cosine schedule their shares ``GBE_WARM_LR`` and ``GBE_WARM_STEPS``."""
        lr, max_iter = float(self.lr), int(self.max_iter)
        if warm and self.schedule == "cosine":
            return lr * GBE_WARM_LR, max(1, int(round(max_iter * GBE_WARM_STEPS)))
        return lr, max_iter

    def run(self, state) -> None:
        """The codes ``state.H`` (and the relaxed ones, the next round's start) from ``state.Y``."""
        from . import gbe

        from ..blocks import blocks_of

        opts = state.opts
        sizes = blocks_of(opts.n_bits, self.block_bits)
        with state.clock.stage("gbe", step=True):
            parts = {}
            lr, max_iter = self.budget(warm=state.H_relaxed is not None)
            starts = ([None] * len(sizes) if state.H_relaxed is None
                      else np.split(state.H_relaxed, np.cumsum(sizes)[:-1], axis=1))
            codes, relaxed, losses = [], [], []
            for n_bits, start in zip(sizes, starts, strict=True):
                g = gbe.fit_gbe(
                    state.Y, n_bits, gamma=self.quantization_weight(opts.gamma, n_bits),
                    quantization=self.quantization, init=self.init, H_init=start, lr=lr, max_iter=max_iter,
                    tol=self.tol, schedule=self.schedule, exaggeration=float(self.exaggeration),
                    chunk_size=self.chunk_size, rng=state.rng, solver=self.solver, device=state.device,
                    timings=parts, **self.part("similarity").gbe_args(),
                )
                codes.append(g.codes)
                relaxed.append(g.relaxed)
                losses.append(g.loss)
                del g
            state.clock.add("gbe_", parts)
            if len(sizes) == 1:
                state.H, state.H_relaxed = codes[0], relaxed[0]
                state.history["gbe"].append(losses[0])
            else:
                state.H, state.H_relaxed = np.concatenate(codes, axis=1), np.concatenate(relaxed, axis=1)
                state.history["gbe"].append([[i, sum(v)] for i, *v in _aligned(losses)])
            release_free_memory()


@dataclass
class PCA(Embedding):
    """The sign of the top principal components of ``Y`` (the DMH-PCA ablation)."""

    name: ClassVar[str] = "pca"

    def run(self, state) -> None:
        from .pca_embedding import align_bits, pca_codes

        with state.clock.stage("gbe", step=True):
            # a principal direction's sign (and, for close eigenvalues, its rank) is arbitrary: keep
            # bit identities from round to round, as GBE's warm start does, since the networks carry
            # over between rounds
            H_pca = pca_codes(state.Y, state.opts.n_bits)
            state.H = H_pca if state.H is None else align_bits(H_pca, state.H)
            state.history["gbe"].append([])


EMBEDDINGS = {c.name: c for c in (GBE, PCA)}


@dataclass
class DAM(Component):
    """Deep Adaptive Mapping: one network per view trained to give GBE's codes.

    ``encoder``: what encodes new objects (``"network"``: the paper; ``"ridge"``: a ridge map to
    the codes; ``"auto"``: ridge for a sparse view; or a :class:`~dmh.methods.dmh_parts.Encoder`,
    with its ``weight``); ``precision``: of the first layer's products in training
    (``"float32"``, ``"bfloat16"``, or ``"auto"``: bfloat16 where the device multiplies it
    natively); ``stop``: ``"fixed"`` passes, or from the second round on ``"agreement"``: a network
    stops once a pass raises its bit agreement with GBE's codes by less than ``agree_tol`` (a share
    of the bits) or brings it within that of the previous round's; ``agree_target``: a network also
    stops once its agreement reaches this level, in the first round ``first_target`` where given;
    ``last_epochs``: the most passes of the last round where they differ from ``dam_epochs``;
    ``lean``: cheaper kernels for the same networks; ``contrastive``: weight of a cross-modal
    InfoNCE term; ``unpaired``: whether the unpaired objects train the networks too (the paper);
    ``scaling``: how the networks' inputs are scaled (:meth:`input_scalings`)."""

    name: ClassVar[str] = "dam"
    _fields = {
        "precision": ("dam_precision", [Options("float32", "bfloat16", "auto")]),
        "stop": ("dam_stop", [Options("fixed", "agreement"), None]),
        "agree_tol": ("dam_agree_tol", [NON_NEGATIVE]), "agree_target": ("dam_agree_target", [UNIT_INTERVAL, None]),
        "first_target": ("dam_first_target", [UNIT_INTERVAL, None]),
        "last_epochs": ("dam_last_epochs", [NON_NEGATIVE_INT, None]), "lean": ("dam_lean", [Boolean(), None]),
        "contrastive": ("dam_contrastive", [NON_NEGATIVE]), "unpaired": ("unpaired_dam", [Boolean(), None]),
        "scaling": ("dam_scaling", [Options("feature", "view", "auto"), None]),
    }
    _parts = {"encoder": (Encoder, ENCODERS)}
    encoder: str | Encoder | None = None
    precision: str = "float32"
    stop: str | None = None
    agree_tol: float = 1e-3
    agree_target: float | None = None
    first_target: float | None = None
    last_epochs: int | None = None
    lean: bool | None = None
    contrastive: float = 0.0
    unpaired: bool | None = None
    scaling: str | None = None

    def input_scalings(self, raws: dict, masks) -> dict:
        """How each view is scaled for the networks (and a ridge map): ``"feature"``, each feature
        standardised (the paper), or ``"view"``, each feature centred and the view divided by one
        scale, the root of its features' mean variance (the same total variance, spread as the
        data spread it); ``"auto"``: ``"view"`` for a sparse view."""
        return view_scalings(self.scaling or "feature", raws, masks)

    def epochs_of_round(self, r: int, n_rounds: int, epochs: int) -> int:
        """The most passes in round ``r`` (0-based): ``last_epochs`` in the last round where given,
        else ``epochs`` (DMH's ``dam_epochs``)."""
        if r == n_rounds - 1 and self.last_epochs is not None:
            return int(self.last_epochs)
        return int(epochs)

    def agreement_target(self, r: int):
        """The agreement target of round ``r`` (0-based): ``first_target`` in the first round where
        given, else ``agree_target``."""
        if r == 0 and self.first_target is not None:
            return self.first_target
        return self.agree_target

    def run(self, state, r: int) -> None:
        """Round ``r``: each network trained to copy ``state.H``, then (before another round) the
        refreshed features ``state.Zs`` from their hidden layers."""
        from . import dam
        from .dam_inputs import hidden_features

        opts, clock, history = state.opts, state.clock, state.history
        with clock.stage("dam", step=True):
            for m, mask in zip(MODALITIES, state.train_masks, strict=True):
                with clock.stage(f"dam_{m}"):
                    agreement = []
                    warm_stop = self.stop == "agreement" and r > 0
                    partner = _partner_outputs(state, m, mask) if self.contrastive else None
                    losses, state.adam[m] = dam.train_net(
                        state.nets[m], state.X.float32(m, mask), state.H[mask].astype(np.float32),
                        epochs=self.epochs_of_round(r, opts.n_rounds, opts.dam_epochs), lr=getattr(opts, f"{m}_lr"),
                        batch_size=opts.batch_size, generator=state.gen, optimizer=state.adam[m],
                        device=state.device, agreement=agreement, agree_tol=self.agree_tol if warm_stop else None,
                        agree_ref=state.agree_last[m], agree_target=self.agreement_target(r), partner=partner,
                        contrastive=float(self.contrastive),
                    )
                    state.trained.add(m)
                    if agreement:
                        state.agree_last[m] = agreement[-1]
                    history.setdefault(f"dam_{m}_agreement", []).append(agreement)
                    history[f"dam_{m}"].append(losses)
                    release_free_memory()  # after one modality's float32 inputs, before the next
            if state.rounds is not None:
                state.record_round()
            with clock.stage("refresh"):
                if opts.refresh_features and r + 1 < opts.n_rounds:
                    for i, (m, mask) in enumerate(zip(MODALITIES, state.masks, strict=True)):
                        state.Zs[i] = hidden_features(state.nets[m], partial(state.X.float32, m, mask), mask,
                                                      opts.hidden_size)
                        release_free_memory()


def _partner_outputs(state, m, mask):
    """For ``contrastive``: the other network's outputs for the paired objects among the rows
    ``mask`` (NaN rows for the others), or ``None`` while that network is untrained (the image
    network's first round)."""
    from . import dam

    other = "text" if m == "image" else "image"
    if other not in state.trained:
        return None
    rows = state.paired[mask]
    out = np.full((int(mask.sum()), state.nets[other].head.out_features), np.nan, dtype=np.float32)
    out[rows] = dam.net_outputs(state.nets[other], state.X.float32(other, state.paired))
    return out


@dataclass
class Stages:
    """One component per stage, every setting filled in (``DMH.stages()``)."""

    cle: CLE
    gbe: Embedding
    dam: DAM

    @classmethod
    def from_flat(cls, flat: dict) -> Stages:
        """The stages from DMH's flat parameters (presets resolved)."""
        return cls(CLE.from_flat(flat), EMBEDDINGS[flat["binary_embedding"]].from_flat(flat), DAM.from_flat(flat))


#: DMH's slots: the stage families and the names that choose a member
SLOTS = {"cle": (CLE, {"cle": CLE}), "gbe": (Embedding, EMBEDDINGS), "dam": (DAM, {"dam": DAM})}


def _aligned(losses: list[list]) -> list[tuple]:
    """The blocks' GBE losses (each ``[(iteration, value), ...]``) at the iterations every block
    checked, as ``(iteration, value of block 1, value of block 2, ...)``."""
    common = sorted(set.intersection(*(set(i for i, _ in loss) for loss in losses)))
    by_block = [dict(loss) for loss in losses]
    return [(i, *(b[i] for b in by_block)) for i in common]
