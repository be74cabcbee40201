"""What the baselines' fits and encoders share: the paired training rows, centring and row
normalisation, linear hash functions ``sign((x - mean) @ P)`` with their saved arrays, the stopping
rule of the alternating solvers and the convergence warning. Hyperparameter constraints are in
:mod:`dmh._validation`."""

from __future__ import annotations

import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..errors import DataError

__all__ = ["EigenHashMixin", "LinearHashMixin", "centre", "l2_normalize_rows", "paired_views", "settled",
           "warn_not_converged"]


def centre(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(X - mean, mean)`` with the column means of ``X`` (the fit-time mean kept for encoding)."""
    mean = X.mean(axis=0)
    return X - mean, mean


def l2_normalize_rows(X: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Each row divided by its Euclidean norm (rows of norm < ``eps`` are left unchanged)."""
    norms = np.linalg.norm(X, axis=1, keepdims=True)
    return X / np.where(norms < eps, 1.0, norms)


def paired_views(data, method: str, min_paired: int, why: str) -> tuple[np.ndarray, np.ndarray]:
    """The image and text rows of the paired objects of ``data`` (the fully paired methods train
    on these only), after checking there are at least ``min_paired`` of them."""
    paired = data.paired_mask
    n = int(paired.sum())
    if n < min_paired:
        raise DataError(
            f"{method} trains on paired objects only and needs at least {min_paired} of them "
            f"({why}); the training data hold {n}"
        )
    return data.image[paired], data.text[paired]


def settled(history, tol: float, floor: float = 0.0) -> bool:
    """Whether an objective that should not increase has stopped falling: its last value is less
    than ``tol`` times ``max(|previous|, floor)`` below the previous one."""
    return history[-2] - history[-1] <= tol * max(abs(history[-2]), floor)


def warn_not_converged(method: str, max_iter: int, detail: str = "") -> None:
    warnings.warn(
        f"{method} did not converge within max_iter={max_iter} iterations{detail}; "
        "increase max_iter or tol",
        ConvergenceWarning,
        stacklevel=3,
    )


class LinearHashMixin:
    """For methods whose hash functions are ``sign((x - mean_v) @ P_v)``: projection, and the
    saved state of ``projections_`` and ``means_`` plus the fitted arrays a subclass names in
    :attr:`_saved_arrays` (state key ``k`` is the attribute ``k_``) and :attr:`_optional_arrays`."""

    #: fitted arrays saved with the model: state key -> the shape a loaded file must give it
    #: (see :meth:`dmh.base.BaseHasher._state_spec`)
    _saved_arrays: dict = {}
    #: fitted arrays saved with the model that a file may lack: state key -> the value then
    _optional_arrays: dict = {}

    def _project(self, X, modality):
        return (X - self.means_[modality]) @ self.projections_[modality]

    def _state_spec(self) -> dict:
        return {"image_projection": ("I", "B"), "text_projection": ("T", "B"), "image_mean": ("I",),
                "text_mean": ("T",), **self._saved_arrays}

    def _get_state(self) -> dict:
        state = {f"{m}_projection": self.projections_[m] for m in ("image", "text")}
        state.update({f"{m}_mean": self.means_[m] for m in ("image", "text")})
        state.update({key: getattr(self, key + "_") for key in (*self._saved_arrays, *self._optional_arrays)})
        return state

    def _set_state(self, state) -> None:
        self.projections_ = {m: np.asarray(state[f"{m}_projection"]) for m in ("image", "text")}
        self.means_ = {m: np.asarray(state[f"{m}_mean"]) for m in ("image", "text")}
        for key in self._saved_arrays:
            setattr(self, key + "_", np.asarray(state[key]))
        for key, default in self._optional_arrays.items():
            setattr(self, key + "_", np.asarray(state[key]) if key in state else np.array(default))


class EigenHashMixin(LinearHashMixin):
    """For the closed-form methods whose hash functions are eigenvectors (CVH, IMH): their
    ``eigenvalues_`` are saved, the objective is their sum and there is one "iteration"."""

    _saved_arrays = {"eigenvalues": (None,)}

    def _set_eigenvalues(self, eigenvalues: np.ndarray) -> None:
        self.eigenvalues_ = eigenvalues
        self.objective_ = float(eigenvalues.sum())
        self.n_iter_ = 1

    def _set_state(self, state) -> None:
        super()._set_state(state)
        self._set_eigenvalues(self.eigenvalues_)
