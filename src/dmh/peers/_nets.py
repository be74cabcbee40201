"""Encoding and saving shared by the deep peers: two networks over standardised features.

A subclass fits ``nets_`` (one network per modality), ``scalers_`` (the training statistics its
inputs are standardised with) and ``loss_history_``; this base class projects, saves and loads them.
PyTorch is imported only when one of these methods runs.
"""

from __future__ import annotations

import numpy as np

from ..base import BaseHasher


class ScaledNetsHasher(BaseHasher):
    """A :class:`~dmh.base.BaseHasher` whose hash functions are ``nets_`` over standardised inputs."""

    uses_torch = True
    #: whether the saved networks end in a normalisation layer to rebuild on load (UCCH)
    _normalised_nets = False

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
