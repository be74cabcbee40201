"""Encoding and saving shared by the deep peers: two networks over standardised features.

A subclass fits ``nets_`` (one network per modality), ``scalers_`` (the training statistics its
inputs are standardised with) and ``loss_history_``; this base class declares the parameters every
deep peer has (the networks' hidden widths, how they see their inputs, the device), and projects,
saves and loads the networks. PyTorch is imported only when one of these methods runs.
"""

from __future__ import annotations

import numpy as np

from .._validation import IntSequence, Options
from ..base import BaseHasher

#: how a deep peer's networks see their inputs: as given, or z-scored per feature
INPUT_SCALINGS = ("none", "feature")


class ScaledNetsHasher(BaseHasher):
    """A :class:`~dmh.base.BaseHasher` whose hash functions are ``nets_`` over standardised inputs."""

    _parameter_constraints = {
        **BaseHasher._parameter_constraints,
        "image_hidden": [IntSequence(1)], "text_hidden": [IntSequence(1)],
        "input_scaling": [Options(*INPUT_SCALINGS)], "device": [Options("cpu", "cuda", "auto")],
    }

    uses_torch = True
    #: whether the saved networks end in a normalisation layer to rebuild on load (UCCH)
    _normalised_nets = False

    def _hidden(self) -> dict:
        """The hidden layers' widths of each modality's network (``image_hidden``, ``text_hidden``)."""
        return {"image": tuple(int(h) for h in self.image_hidden), "text": tuple(int(h) for h in self.text_hidden)}

    def _project(self, X, modality):
        from . import _deep

        return _deep.scaled_project(self.nets_, self.scalers_, X, modality)

    def _get_state(self):
        from . import _deep

        state = _deep.scaled_net_state(self.nets_, self.scalers_)
        state["loss_history"] = self.loss_history_
        return state

    def _set_state(self, state):
        from . import _deep

        self.scalers_, self.nets_ = _deep.load_scaled_nets(self, state, normalise=self._normalised_nets)
        self.loss_history_ = np.asarray(state["loss_history"])
        self.n_iter_ = len(self.loss_history_)
