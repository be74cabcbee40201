"""Saving and loading a DMH: its header (the options the fit ran with, the ridge penalties, what
``use_unpaired`` chose) and its arrays (each network's weights, the standardisation, the ridge maps;
``block{j}.`` before each block's arrays when the code is made of blocks)."""

from __future__ import annotations

from .._validation import validate_params
from ..errors import ParameterError
from .dmh_options import PRESETS, DMHOptions

__all__ = ["DMHPersistence"]

MODALITIES = ("image", "text")


class DMHPersistence:
    """The persistence of :class:`~dmh.DMH` (a mixin: ``BaseHasher.save`` / ``load_model`` call these)."""

    def _extra_meta(self):
        options = getattr(self, "options_", None) or DMHOptions.of(self)
        meta = {"options": {k: getattr(options, k) for k in PRESETS[options.preset]}}
        ridges = getattr(self, "ridge_encoders_", {})
        if ridges:  # files without it encode every view by its network
            meta["ridge_alpha"] = {m: r.alpha for m, r in ridges.items()}
        blocks = getattr(self, "blocks_", None)
        if blocks:  # each block's ridge maps, where it has any
            meta["block_ridge_alpha"] = [{m: r.alpha for m, r in b.ridge_encoders_.items()} for b in blocks]
        if hasattr(self, "use_unpaired_"):  # what the fit used, and under "auto" why
            meta["use_unpaired"] = self.use_unpaired_
            meta["unpaired_choice"] = self.unpaired_choice_
        return meta

    def _set_extra_meta(self, meta):
        """The options the fit ran with: the header's where it names them, else the preset's."""
        saved = meta.get("options") or {}
        if not isinstance(saved, dict):
            raise ParameterError(f"'options' must be an object, got {saved!r}")
        self.options_ = DMHOptions.of(self)
        for name, value in saved.items():
            if name in PRESETS[self.options_.preset] and getattr(self, name) is None:
                setattr(self.options_, name, tuple(value) if isinstance(value, list) else value)
        options = vars(self.options_)
        validate_params(options, {k: self._parameter_constraints[k] for k in saved if k in options}, "DMH options")
        self._ridge_alpha = _ridge_alphas(meta.get("ridge_alpha") or {}, "ridge_alpha")
        n_blocks = len(self._block_sizes())
        block_alphas = meta.get("block_ridge_alpha") or [{}] * n_blocks
        if not isinstance(block_alphas, list) or len(block_alphas) != n_blocks:
            raise ParameterError(f"'block_ridge_alpha' must list one object per block ({n_blocks}), "
                                 f"got {block_alphas!r}")
        self._block_ridge_alpha = [_ridge_alphas(a, "block_ridge_alpha") for a in block_alphas]
        if "use_unpaired" in meta:  # files written before "auto" existed do not say
            used, choice = meta["use_unpaired"], meta.get("unpaired_choice")
            if not isinstance(used, bool) or not (choice is None or isinstance(choice, dict)):
                raise ParameterError(f"'use_unpaired' must be true or false and 'unpaired_choice' an object or null, "
                                     f"got {used!r} and {choice!r}")
            self.use_unpaired_, self.unpaired_choice_ = used, choice

    def _get_state(self):
        if getattr(self, "blocks_", None):
            return {f"block{j}.{k}": v for j, b in enumerate(self.blocks_) for k, v in b._get_state().items()}
        state = {}
        for m, net in self.nets_.items():
            for key, value in net.state_dict().items():
                state[f"{m}_net.{key}"] = value.detach().cpu().numpy()
            state[f"{m}_mean"], state[f"{m}_scale"] = self.scalers_[m]
        for m, ridge in getattr(self, "ridge_encoders_", {}).items():
            state[f"{m}_ridge_coef"], state[f"{m}_ridge_intercept"] = ridge.coef, ridge.intercept
        return state

    def _state_spec(self):
        import torch

        from . import dam

        if len(self._block_sizes()) > 1:
            return {f"block{j}.{k}": tuple(b.n_bits_ if want == "B" else want for want in shape)
                    for j, b in enumerate(self._block_shells()) for k, shape in b._state_spec().items()}
        spec = {}
        for m, dim in (("image", "I"), ("text", "T")):
            spec[f"{m}_mean"] = (dim,)
            spec[f"{m}_scale"] = (dim,)
            if m in getattr(self, "_ridge_alpha", {}):
                spec[f"{m}_ridge_coef"] = (dim, "B")
                spec[f"{m}_ridge_intercept"] = ("B",)
            with torch.device("meta"):  # shapes only: nothing is allocated
                net = dam.make_net(m, self.n_features_[m], self.n_bits_, (self.hidden_size,))
            for key, value in net.state_dict().items():
                spec[f"{m}_net.{key}"] = tuple(value.shape)
        return spec

    def _set_state(self, state):
        import torch

        from . import dam

        self.blocks_ = None
        if len(self._block_sizes()) > 1:
            self.blocks_ = self._block_shells()
            for j, b in enumerate(self.blocks_):
                prefix = f"block{j}."
                b._set_state({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)})
            first = self.blocks_[0]
            self.scalers_, self.encoders_, self.ridge_encoders_ = first.scalers_, first.encoders_, {}
            self.nets_ = None
            return
        self.scalers_ = {m: (state[f"{m}_mean"], state[f"{m}_scale"]) for m in ("image", "text")}
        self.nets_ = {}
        for m in ("image", "text"):
            net = dam.make_net(m, self.n_features_[m], self.n_bits_, (self.hidden_size,))
            prefix = f"{m}_net."
            sd = {k[len(prefix):]: torch.as_tensor(v) for k, v in state.items() if k.startswith(prefix)}
            net.load_state_dict(sd)
            net.eval()
            self.nets_[m] = net
        from .ridge_encoder import RidgeEncoder

        alphas = getattr(self, "_ridge_alpha", {})
        self.ridge_encoders_ = {m: RidgeEncoder(state[f"{m}_ridge_coef"], state[f"{m}_ridge_intercept"], a)
                                for m, a in alphas.items()}
        self.encoders_ = {m: "ridge" if m in alphas else "network" for m in MODALITIES}


def _ridge_alphas(alphas, name: str) -> dict:
    """A header's ridge penalties per view, checked: ``{"image"/"text": positive number}``."""
    if not isinstance(alphas, dict) or not set(alphas) <= set(MODALITIES) or \
            not all(isinstance(a, (int, float)) and not isinstance(a, bool) and a > 0 for a in alphas.values()):
        raise ParameterError(f"'{name}' must map 'image'/'text' to positive numbers, got {alphas!r}")
    return {m: float(a) for m, a in alphas.items()}
