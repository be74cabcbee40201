"""DMH's codes made of blocks (``block_bits``): independent fits side by side, each a DMH of its
bits with its own seed drawn from ``random_state``; the Hamming distance is the sum of the blocks'."""

from __future__ import annotations

import numpy as np

from .._validation import check_random_state
from ..data import CrossModalData
from .dmh_options import DMHOptions

__all__ = ["BlockEnsemble", "block_sizes"]


class BlockEnsemble:
    """The block ensemble of :class:`~dmh.DMH` (a mixin): the blocks' sizes, their fits, and the
    shells a saved model's blocks are read into."""

    def _block_sizes(self) -> list[int]:
        """The bits of each block of the code (``block_bits``; one block: ``[n_bits]``)."""
        n_bits = int(self.n_bits_)
        per = n_bits if self.block_bits is None else min(int(self.block_bits), n_bits)
        return block_sizes(n_bits, -(-n_bits // per))

    def _fit_blocks(self, data: CrossModalData) -> None:
        """The blocks' independent fits on ``data`` (already the pairs alone where the fit does not
        use the unpaired objects), their seeds drawn from ``random_state``; the blocks hold the
        networks, the model the concatenated codes."""
        sizes = self._block_sizes()
        seeds = check_random_state(self.random_state).integers(2**31, size=len(sizes))
        params = {**self.get_params(deep=False), "block_bits": None, "use_unpaired": True}
        self.blocks_ = []
        for j, (n_bits, seed) in enumerate(zip(sizes, seeds, strict=True)):
            if self.verbose:
                print(f"block {j + 1} of {len(sizes)}: {n_bits} bits")
            self.blocks_.append(type(self)(**{**params, "n_bits": n_bits, "random_state": int(seed)}).fit(data))
        first = self.blocks_[0]
        self.scalers_ = first.scalers_  # the training data's statistics: the same in every block
        self.cle_scaling_, self.dam_precision_ = first.cle_scaling_, first.dam_precision_
        self.dam_scaling_ = first.dam_scaling_
        self.encoders_ = first.encoders_
        self.ridge_encoders_ = {}
        self.codes_ = np.concatenate([b.codes_ for b in self.blocks_], axis=1)
        self.nets_ = self.features_ = self.history_ = self.rounds_ = None
        self.n_iter_ = int(self.options_.n_rounds)

    def _block_shells(self) -> list:
        """The blocks of a model read from a file, before their weights: each a DMH of its bits with
        the model's parameters and options, its features and its ridge penalties."""
        params = {**self.get_params(deep=False), "block_bits": None}
        sizes = self._block_sizes()
        alphas = getattr(self, "_block_ridge_alpha", None) or [{}] * len(sizes)
        shells = []
        for n_bits, alpha in zip(sizes, alphas, strict=True):
            b = type(self)(**{**params, "n_bits": n_bits})
            b.n_bits_, b.n_features_, b._ridge_alpha = n_bits, dict(self.n_features_), alpha
            b.options_ = DMHOptions(**{**vars(self.options_), "n_bits": n_bits})  # the header's, set before
            shells.append(b)
        return shells


def block_sizes(n_bits: int, n_blocks: int) -> list[int]:
    """The bits of each of ``n_blocks`` blocks of an ``n_bits`` code: as even as possible, the first
    ``n_bits % n_blocks`` blocks one bit longer."""
    q, r = divmod(int(n_bits), int(n_blocks))
    return [q + (j < r) for j in range(int(n_blocks))]
