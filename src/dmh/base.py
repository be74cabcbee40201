"""The interface every hashing method shares, DMH and the baselines alike.

scikit-learn conventions: hyperparameters in ``__init__`` (stored unchanged), ``fit(data)`` returns
``self``, learned state ends in ``_``, ``random_state`` is turned into a generator inside ``fit``.
A cross-modal query is "encode one modality": ``encode(images, modality="image")`` searched against
``encode(texts, modality="text")``.

Saved models are ``.npz`` archives of plain arrays plus a JSON header (no pickle: loading an
untrusted file cannot run code), written atomically.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ._archive import META_KEY, json_bytes, read_archive
from ._atomic import atomic_path
from ._json import jsonable as _jsonable
from ._validation import check_features, check_modality, check_n_bits
from .data import CrossModalData
from .registry import get_method_class

__all__ = ["BaseHasher", "sign_codes", "load_model", "FORMAT_VERSION"]

FORMAT_VERSION = 1


def sign_codes(values: np.ndarray) -> np.ndarray:
    """The paper's sign: +1 where the input is positive, else -1 (so sign(0) = -1). int8 codes."""
    return np.where(np.asarray(values) > 0, 1, -1).astype(np.int8)


class BaseHasher(BaseEstimator):
    """Base class of every cross-modal hashing method in :mod:`dmh`.

    Subclasses implement ``_fit(data)``, ``_project(X, modality)`` (real-valued outputs whose
    sign is the code) and ``_get_state`` / ``_set_state`` (plain arrays for saving).
    """

    #: short name used by the CLI and in reports
    method_name = "base"
    #: True when the method can use image-only / text-only objects; False when it trains on the
    #: paired objects of semi-paired data only
    uses_unpaired = False
    #: fewest paired objects the method needs
    min_paired = 2

    # ------------------------------------------------------------------ fitting
    def fit(self, data: CrossModalData):
        """Learn hash functions from ``data`` (all its objects; use ``data.train()`` for a split)."""
        data = self._check_fit_data(data)
        self.n_bits_ = check_n_bits(self.n_bits)
        self.n_features_ = {"image": data.image.shape[1], "text": data.text.shape[1]}
        self._fit(data)
        return self

    def _check_fit_data(self, data) -> CrossModalData:
        if not isinstance(data, CrossModalData):
            raise TypeError(
                f"{type(self).__name__}.fit expects a dmh.CrossModalData, got {type(data).__name__}; "
                "build one with dmh.CrossModalData(image=..., text=..., image_mask=..., text_mask=...)"
            )
        for modality in ("image", "text"):
            if not data.mask(modality).any():
                raise ValueError(
                    f"{type(self).__name__} needs both modalities: the training data hold no {modality}"
                )
        n_paired = data.n_paired
        if n_paired < self.min_paired:
            raise ValueError(
                f"{type(self).__name__} needs at least {self.min_paired} paired objects (both image and "
                f"text), the training data hold {n_paired}"
            )
        return data

    def _fit(self, data: CrossModalData) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ encoding
    def encode(self, X, modality: str) -> np.ndarray:
        """Hash codes in {-1, +1} (int8, shape (n, n_bits)) for features ``X`` of one modality."""
        return sign_codes(self.project(X, modality))

    def encode_raw(self, texts=None, images=None, *, image_encoder=None) -> np.ndarray:
        """Hash codes of raw inputs: ``texts`` (strings) or ``images`` (file paths or PIL images),
        featurized as the training data were (the model's ``featurizer_``, recorded when it was
        fitted on a file from ``dmh featurize`` or in a collection). Give exactly one of the two."""
        if (texts is None) == (images is None):
            raise ValueError("give exactly one of texts= and images=")
        featurizer = getattr(self, "featurizer_", None)
        if featurizer is None:
            raise ValueError(
                "this model does not know how its inputs were featurized (it was fitted on features "
                "not made by dmh featurize); encode features with model.encode(X, modality)"
            )
        if texts is not None:
            if isinstance(texts, str):
                texts = [texts]
            return self.encode(featurizer.text_features(texts), modality="text")
        if isinstance(images, (str, Path)) or hasattr(images, "getpixel"):
            images = [images]
        return self.encode(featurizer.image_features(images, encoder=image_encoder), modality="image")

    def project(self, X, modality: str) -> np.ndarray:
        """Real-valued outputs before ``sign`` (shape (n, n_bits))."""
        check_is_fitted(self, "n_bits_")
        modality = check_modality(modality)
        X = check_features(X, f"{modality} features", n_cols=self.n_features_[modality])
        return np.asarray(self._project(X, modality), dtype=np.float64)

    def _project(self, X: np.ndarray, modality: str) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ persistence
    def _get_state(self) -> dict[str, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _set_state(self, state: dict[str, np.ndarray]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _extra_meta(self) -> dict:
        """JSON-serialisable fitted attributes (besides arrays) to save."""
        return {}

    def _set_extra_meta(self, meta: dict) -> None:
        pass

    def save(self, path) -> Path:
        """Write the fitted model to ``path`` (``.npz``), atomically."""
        check_is_fitted(self, "n_bits_")
        path = Path(path)
        state = self._get_state()
        bad = [k for k in state if k.startswith("__")]
        if bad:  # pragma: no cover - programming error
            raise RuntimeError(f"reserved state keys {bad}")
        meta = {
            "format": "dmh-model",
            "format_version": FORMAT_VERSION,
            "method": self.method_name,
            "class": type(self).__name__,
            "params": _jsonable(self.get_params(deep=False)),
            "n_bits": self.n_bits_,
            "n_features": self.n_features_,
            "extra": _jsonable(self._extra_meta()),
        }
        featurizer = getattr(self, "featurizer_", None)
        if featurizer is not None:  # how raw inputs become features (dmh.featurizer_spec)
            meta["featurizer"] = featurizer.to_dict()
        arrays = {k: np.ascontiguousarray(v) for k, v in state.items()}
        arrays[META_KEY] = json_bytes(meta)
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
        return path

    @classmethod
    def load(cls, path):
        """Load a model saved by :meth:`save` (any method when called on :class:`BaseHasher`)."""
        model = load_model(path)
        if cls is not BaseHasher and not isinstance(model, cls):
            raise TypeError(f"{path} holds a {type(model).__name__}, not a {cls.__name__}")
        return model


def load_model(path) -> BaseHasher:
    """Load any saved model; the method is read from the file's header."""
    meta, state = read_archive(path, "dmh-model", FORMAT_VERSION, "model")
    klass = get_method_class(meta["method"])
    params = meta["params"]
    valid = klass().get_params(deep=False)
    model = klass(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in params.items() if k in valid})
    model.n_bits_ = int(meta["n_bits"])
    model.n_features_ = {k: int(v) for k, v in meta["n_features"].items()}
    model._set_extra_meta(meta.get("extra", {}))
    model._set_state(state)
    if meta.get("featurizer"):
        from .featurizer_spec import FeaturizerSpec

        model.featurizer_ = FeaturizerSpec.from_dict(meta["featurizer"], f"{path} (featurizer)")
        model.featurizer_.warn_if_unavailable(str(path))
    return model
