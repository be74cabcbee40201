"""A cross-modal hashing method of one's own: canonical correlation analysis, then the sign.

Both modalities are projected onto the directions in which the paired images and texts correlate
most; the sign of each projection is a bit. It learns from the paired objects only.
"""

import numbers

import numpy as np

from dmh import BaseHasher
from dmh.constraints import Interval
from dmh.errors import DataError


class CCAHasher(BaseHasher):
    """CCA + sign. ``reg``: ridge added to each view's covariance (a positive number)."""

    def __init__(self, n_bits=32, *, reg=1e-3, random_state=None):
        self.n_bits = n_bits
        self.reg = reg
        self.random_state = random_state  # the harness passes one; CCA does not need it

    #: the values each hyperparameter may take, checked once by fit (a ParameterError of one line)
    _parameter_constraints = {**BaseHasher._parameter_constraints,
                              "reg": [Interval(numbers.Real, 0, None, closed="neither")]}

    def _fit(self, data):
        X, Y = data.image[data.paired_mask], data.text[data.paired_mask]
        if self.n_bits_ > min(X.shape[1], Y.shape[1]):
            raise DataError(f"n_bits={self.n_bits_} is more than the features of a view ({X.shape[1]}, {Y.shape[1]})")
        self.means_ = {"image": X.mean(0), "text": Y.mean(0)}
        X, Y = X - self.means_["image"], Y - self.means_["text"]
        Wx, Wy = _whitener(X.T @ X / len(X), self.reg), _whitener(Y.T @ Y / len(Y), self.reg)
        U, _, Vt = np.linalg.svd(Wx @ (X.T @ Y / len(X)) @ Wy)
        self.projections_ = {"image": Wx @ U[:, : self.n_bits_], "text": Wy @ Vt.T[:, : self.n_bits_]}

    def _project(self, X, modality):
        return (X - self.means_[modality]) @ self.projections_[modality]

    def _get_state(self):
        return {f"{m}_{k}": v[m] for k, v in (("mean", self.means_), ("proj", self.projections_)) for m in v}

    def _set_state(self, state):
        self.means_ = {m: state[f"{m}_mean"] for m in ("image", "text")}
        self.projections_ = {m: state[f"{m}_proj"] for m in ("image", "text")}

    def _state_spec(self):  # the shapes load_model checks a file against
        return {"image_mean": ("I",), "text_mean": ("T",), "image_proj": ("I", "B"), "text_proj": ("T", "B")}


def _whitener(C, reg):
    """C^(-1/2) of a covariance with ``reg`` added to its diagonal."""
    values, vectors = np.linalg.eigh(C + reg * np.eye(len(C)))
    return vectors @ np.diag(values ** -0.5) @ vectors.T
