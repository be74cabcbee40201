"""One DMH fit: the state its stages share (:class:`FitState`) and the round loop that runs them
(:func:`run_rounds`), CLE -> binary embedding -> DAM for ``n_rounds`` rounds."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import partial

import numpy as np

from .._validation import check_random_state
from ..data import CrossModalData
from .dam_inputs import Standardised, column_mean_std
from .dmh_options import DMHOptions, native_bf16, resolve_device
from .dmh_stages import MODALITIES, Stages
from .stage_clock import StageClock

__all__ = ["FitState", "run_rounds", "start"]


@dataclass
class FitState:
    """What the stages share over one fit; each round reads and replaces ``Y``, ``H`` and ``Zs``."""

    opts: DMHOptions  #: every parameter, the preset's values filled in
    stages: Stages  #: the stages' components, the same values
    device: str  #: where GBE and DAM run
    rng: np.random.Generator  #: CLE's and GBE's randomness
    gen: object  #: torch's generator (DAM's batches)
    masks: list  #: [image observed, text observed]
    paired: np.ndarray  #: both observed
    train_masks: list  #: the objects each network is trained on
    raws: dict  #: the inputs as given, per view
    X: Standardised  #: the inputs standardised (recomputed when read)
    scalers: dict  #: per view, (mean, scale) of the networks' inputs
    input_scalings: dict  #: how each view is scaled for the networks, "feature" or "view"
    scalings: dict  #: how each view enters CLE's first round
    encoders: dict  #: what encodes each view, "network" or "ridge"
    nets: dict  #: the two hash networks
    precision: str  #: DAM's precision, resolved
    cle_dtype: np.dtype  #: CLE's precision, resolved
    clock: StageClock
    history: dict
    rounds: list | None = None  #: each round's arrays (``record_diagnostics``)
    Zs: list = field(default_factory=lambda: [None, None])  #: refreshed features (None: the inputs)
    adam: dict = field(default_factory=lambda: {"image": None, "text": None})  #: optimizers, kept across rounds
    trained: set = field(default_factory=set)  #: the networks trained so far
    agree_last: dict = field(default_factory=lambda: {"image": None, "text": None})  #: last epoch's agreement
    Y: np.ndarray | None = None  #: CLE's features
    H: np.ndarray | None = None  #: the codes
    H_relaxed: np.ndarray | None = None  #: GBE's relaxed codes (the next round's start)

    def record_round(self) -> None:
        """This round's Y, codes, losses and network weights, for :mod:`dmh.diagnostics`."""
        history = self.history
        self.rounds.append({
            "Y": np.asarray(self.Y, dtype=np.float32).copy(), "codes": self.H.copy(),
            "gbe_loss": history["gbe"][-1][-1][1] if history["gbe"][-1] else None,
            "nets": {m: {k: v.detach().cpu().clone() for k, v in self.nets[m].state_dict().items()}
                     for m in MODALITIES},
            "dam_loss": {m: history[f"dam_{m}"][-1][-1] if history[f"dam_{m}"][-1] else None for m in MODALITIES},
        })


def start(data: CrossModalData, opts: DMHOptions, stages: Stages, *, device: str, random_state, verbose: bool,
          record: bool) -> FitState:
    """The state of a fit about to start: seeded generators, masks, the inputs' standardisation,
    the two networks (seeded), each view's scaling and encoder (checked before any work)."""
    import torch

    from . import dam

    device = resolve_device(device)
    rng = check_random_state(random_state)
    torch_seed = int(rng.integers(2**62))
    masks = [data.image_mask, data.text_mask]
    paired = masks[0] & masks[1]
    # objects each hash network is trained on (unpaired_dam=False: the paired objects only)
    train_masks = masks if stages.dam.unpaired else [paired, paired]
    raws = {"image": data.image, "text": data.text}
    scalers = {}
    input_scalings = stages.dam.input_scalings(raws, masks)
    for m, mask in zip(MODALITIES, masks, strict=True):
        mu, sd = column_mean_std(raws[m], mask)
        if input_scalings[m] == "view":
            scale = float(np.sqrt(np.mean(sd * sd)))
            sd = np.full_like(sd, scale if scale > 1e-12 else 1.0)
        else:
            sd[sd < 1e-12] = 1.0
        scalers[m] = (mu, sd)
    scalings = stages.cle.view_scalings(raws, masks)
    encoders = stages.dam.part("encoder").views(raws, train_masks)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(torch_seed)
        nets = {m: dam.make_net(m, raws[m].shape[1], opts.n_bits, (opts.hidden_size,)) for m in MODALITIES}
    precision = stages.dam.precision
    if precision == "auto":
        precision = "bfloat16" if native_bf16(device) else "float32"
    for net in nets.values():
        net.to(device)
        net.lean = bool(stages.dam.lean)
        net.precision = precision
    history = {"cle": [], "gbe": [], "dam_image": [], "dam_text": [], "time": []}
    return FitState(
        opts=opts, stages=stages, device=device, rng=rng, gen=torch.Generator().manual_seed(torch_seed),
        masks=masks, paired=paired, train_masks=train_masks, raws=raws,
        X=Standardised(raws, scalers),  # recomputed when used: one n x d_v copy at a time
        scalers=scalers, input_scalings=input_scalings, scalings=scalings, encoders=encoders, nets=nets,
        precision=precision,
        cle_dtype=stages.cle.precision(data.n_objects), history=history,
        clock=StageClock(history["time"], 3 * int(opts.n_rounds), verbose), rounds=[] if record else None,
    )


def run_rounds(state: FitState) -> None:
    """``n_rounds`` rounds of CLE -> binary embedding -> DAM (without refreshed features, CLE and
    the embedding run in the first round only); the networks end on the CPU."""
    stages, clock = state.stages, state.clock
    try:
        for r in range(int(state.opts.n_rounds)):
            clock.new_round()
            if r == 0 or stages.cle.refresh_features:
                stages.cle.run(state, r)
                stages.gbe.run(state)
            else:
                state.history["cle"].append([])
                state.history["gbe"].append([])
                clock.advance(2)
            stages.dam.run(state, r)
            clock.end_round()
    finally:
        clock.close()
    for net in state.nets.values():
        net.use_sparse_input(None)  # the plain layer again (the same weights)
        net.to("cpu")  # encoding and saving need no GPU


def ridge_encoders(state: FitState) -> dict:
    """The ridge map of each view ``state.encoders`` names ``"ridge"``, fitted on the objects that
    view's network was trained on."""
    from .ridge_encoder import fit_ridge_encoder

    return {m: fit_ridge_encoder(partial(_row_blocks, state.X, m, mask), state.H[mask])
            for m, mask in zip(MODALITIES, state.train_masks, strict=True) if state.encoders[m] == "ridge"}


def _row_blocks(X, m, mask, step: int = 8192):
    """The standardised rows of view ``m`` where ``mask`` holds, block by block (float32)."""
    n = int(mask.sum())
    return (X.float32(m, mask, s, min(s + step, n)) for s in range(0, n, step))
