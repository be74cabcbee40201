"""Any hashing method fitted as a block code: independent fits side by side, their codes concatenated.

``BlockHasher(method, block_bits=32)`` wraps a method as scikit-learn's ensembles wrap an
estimator: a code of ``n_bits`` is ``ceil(n_bits / block_bits)`` blocks of as even a length as
possible (the first blocks one bit longer), each block a clone of ``method`` with that many bits
and its own seed, all fitted on the same data. The Hamming distance between two codes is then the
sum of the blocks' distances. ``DMH(block_bits=...)`` is this for DMH::

    import dmh
    from dmh.registry import make_method

    model = dmh.BlockHasher(make_method("fsh"), n_bits=64, block_bits=32, random_state=0).fit(train)
    codes = model.encode(images, modality="image")  # the two blocks' codes side by side
"""

from __future__ import annotations

import numpy as np
from sklearn.base import clone

from ._validation import POSITIVE_INT, RANDOM_STATE, InstanceOf, check_random_state
from .base import BaseHasher, header_method_class, header_params
from .data import CrossModalData
from .errors import ParameterError
from .registry import method_key

__all__ = ["BlockHasher", "block_sizes"]


def block_sizes(n_bits: int, n_blocks: int) -> list[int]:
    """The bits of each of ``n_blocks`` blocks of an ``n_bits`` code: as even as possible, the first
    ``n_bits % n_blocks`` blocks one bit longer."""
    q, r = divmod(int(n_bits), int(n_blocks))
    return [q + (j < r) for j in range(int(n_blocks))]


def blocks_of(n_bits: int, block_bits: int | None) -> list[int]:
    """The bits of each block of an ``n_bits`` code of blocks of at most ``block_bits`` bits
    (``None``, or ``block_bits >= n_bits``: one block of ``n_bits``)."""
    n_bits = int(n_bits)
    per = n_bits if block_bits is None else min(int(block_bits), n_bits)
    return block_sizes(n_bits, -(-n_bits // per))


class BlockHasher(BaseHasher):
    """A code made of independent fits of one method, side by side.

    Parameters
    ----------
    method : BaseHasher
        The method each block is a clone of (unfitted; its own ``n_bits`` and ``random_state`` are
        replaced in each block by the block's bits and seed).
    n_bits : int or None, default=None
        Bits of the whole code; ``None``: the wrapped method's ``n_bits``.
    block_bits : int, default=32
        Most bits of one block; ``block_bits >= n_bits`` is one block, the method's own fit.
    random_state : int, numpy Generator or None, default=None
        Where the blocks' seeds come from (``integers(2**31)``, one per block, as ``DMH(block_bits=...)``
        draws them); ``None``: the wrapped method's ``random_state``. With one block that
        ``random_state`` is the block's own.

    Attributes
    ----------
    blocks_ : list of BaseHasher
        The fitted blocks, in the order their codes are concatenated.
    seeds_ : list of int or None
        The ``random_state`` each block was fitted with.
    """

    method_name = "blocks"

    _parameter_constraints = {
        "method": [InstanceOf(BaseHasher, "a dmh.BaseHasher instance (a hashing method, e.g. dmh.DMH(...))")],
        "n_bits": [None, POSITIVE_INT],
        "block_bits": [POSITIVE_INT],
        "random_state": RANDOM_STATE,
    }

    def __init__(self, method=None, *, n_bits=None, block_bits=32, random_state=None):
        self.method = method
        self.n_bits = n_bits
        self.block_bits = block_bits
        self.random_state = random_state

    # ------------------------------------------------------------------ what the wrapped method says
    def _method(self) -> BaseHasher:
        if not isinstance(self.method, BaseHasher):
            what = "a class" if isinstance(self.method, type) else f"{type(self.method).__name__} {self.method!r}"
            shown = " ".join(what.split())[:100]
            raise ParameterError(f"BlockHasher: method must be a dmh.BaseHasher instance (a hashing method, "
                                 f"e.g. dmh.DMH(...)), got {shown}")
        return self.method

    def _n_bits_param(self):
        return self._method().n_bits if self.n_bits is None else self.n_bits

    @property
    def min_paired(self) -> int:
        return getattr(self.method, "min_paired", BaseHasher.min_paired)

    @property
    def uses_unpaired(self) -> bool:
        return getattr(self.method, "uses_unpaired", False)

    def _thread_limit(self):
        """The wrapped method's thread limit (its ``n_threads``, where it takes one)."""
        return self._method()._thread_limit()

    def _check_param_combinations(self, n_bits: int) -> None:
        method = self._method()
        for size in sorted(set(blocks_of(n_bits, self.block_bits))):
            method.check_hyperparameters(size)  # a bad value of the method's fails before the data

    # ------------------------------------------------------------------ fitting
    def _seeds(self, n_blocks: int) -> list:
        """Each block's ``random_state``: drawn as ``DMH(block_bits=...)`` draws them; with one
        block, the ``random_state`` itself."""
        random_state = self.method.random_state if self.random_state is None else self.random_state
        if n_blocks == 1:
            return [random_state]
        return [int(s) for s in check_random_state(random_state).integers(2**31, size=n_blocks)]

    def _block(self, n_bits: int, seed) -> BaseHasher:
        """An unfitted block: a clone of the method with the block's bits and seed."""
        return clone(self.method).set_params(n_bits=n_bits, random_state=seed)

    def _fit(self, data: CrossModalData) -> None:
        sizes = blocks_of(self.n_bits_, self.block_bits)
        self.seeds_ = self._seeds(len(sizes))
        self.blocks_ = [self._block(n, seed).fit(data) for n, seed in zip(sizes, self.seeds_, strict=True)]

    # ------------------------------------------------------------------ encoding
    def _project(self, X: np.ndarray, modality: str) -> np.ndarray:
        return np.concatenate([b._project(X, modality) for b in self.blocks_], axis=1)

    # ------------------------------------------------------------------ persistence
    def _header_params(self) -> dict:
        method = self._method()
        return {**self.get_params(deep=False),
                "method": {"method": method_key(type(method)), "params": method._header_params()}}

    @classmethod
    def _params_from_header(cls, params: dict, path) -> dict:
        spec = params.get("method")
        if not (isinstance(spec, dict) and set(spec) == {"method", "params"} and isinstance(spec["method"], str)
                and isinstance(spec["params"], dict)):
            raise ParameterError(f"'method' must be an object of 'method' (a name) and 'params', got {spec!r}")
        klass = header_method_class(spec["method"], path)
        return {**params, "method": klass(**header_params(klass, spec["method"], spec["params"], path))}

    def _extra_meta(self) -> dict:
        return {"seeds": self.seeds_, "blocks": [b._extra_meta() for b in self.blocks_]}

    def _set_extra_meta(self, meta: dict) -> None:
        """The blocks before their weights: each a clone of the method with its bits, seed and
        fitted header values."""
        sizes = blocks_of(self.n_bits_, self.block_bits)
        seeds, extras = meta.get("seeds"), meta.get("blocks")
        for name, value in (("seeds", seeds), ("blocks", extras)):
            if not isinstance(value, list) or len(value) != len(sizes):
                raise ParameterError(f"'{name}' must list one value per block ({len(sizes)}), got {value!r}")
        self.seeds_ = seeds
        self.blocks_ = []
        for n_bits, seed, extra in zip(sizes, seeds, extras, strict=True):
            if not isinstance(extra, dict):
                raise ParameterError(f"each of 'blocks' must be an object, got {extra!r}")
            block = self._block(n_bits, seed)
            block.n_bits_, block.n_features_ = n_bits, dict(self.n_features_)
            block._validate_params(n_bits)
            block._set_extra_meta(extra)
            self.blocks_.append(block)

    def _get_state(self) -> dict[str, np.ndarray]:
        return {f"block{j}.{k}": v for j, b in enumerate(self.blocks_) for k, v in b._get_state().items()}

    def _state_spec(self) -> dict[str, tuple]:
        """Each block's arrays under ``block{j}.``: ``"B"`` is the block's bits, and a size letter of
        its own agrees within the block only."""
        def dim(want, j, b):
            if want == "B":
                return b.n_bits_
            return f"{want}.block{j}" if isinstance(want, str) and want not in ("I", "T") else want

        return {f"block{j}.{k}": tuple(dim(want, j, b) for want in shape)
                for j, b in enumerate(self.blocks_) for k, shape in b._state_spec().items()}

    def _set_state(self, state: dict[str, np.ndarray]) -> None:
        for j, b in enumerate(self.blocks_):
            prefix = f"block{j}."
            b._set_state({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)})
