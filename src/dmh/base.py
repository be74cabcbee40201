"""The interface every hashing method shares, DMH and the baselines alike.

scikit-learn conventions: hyperparameters in ``__init__`` (stored unchanged), ``fit(data)`` returns
``self``, learned state ends in ``_``, ``random_state`` is turned into a generator inside ``fit``.
A cross-modal query is "encode one modality": ``encode(images, modality="image")`` searched against
``encode(texts, modality="text")``.

Threads: ``fit`` and ``project``/``encode`` run inside :func:`dmh._threads.thread_limit`, one
limit for torch, BLAS/OpenMP and faiss. A method that accepts ``n_threads`` in its ``__init__``
(DMH does) uses that value; every other method (and ``n_threads=None``) uses the process setting
(:func:`dmh.set_threads`, ``dmh --threads``, ``DMH_THREADS``, ``OMP_NUM_THREADS``, else the
physical cores available). A subclass sets ``uses_torch = True`` so that torch's pools are limited
too (torch is imported before the limit is applied).

Saved models are ``.npz`` archives of plain arrays plus a JSON header (no pickle: loading an
untrusted file cannot run code), written atomically.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from sklearn.base import BaseEstimator
from sklearn.utils.validation import check_is_fitted

from ._archive import META_KEY, json_bytes, read_archive
from ._atomic import atomic_path
from ._json import jsonable as _jsonable
from ._keys import model_params
from ._threads import thread_limit
from ._validation import RANDOM_STATE, check_features, check_modality, check_n_bits, validate_params
from .data import CrossModalData
from .errors import DataError, DataTypeError, DmhError, ModelFileError, ParameterError
from .registry import get_method_class, method_key

__all__ = ["BaseHasher", "check_method_output", "encode_checked", "sign_codes", "load_model", "FORMAT_VERSION"]

FORMAT_VERSION = 1


def store_init_args(obj, args: dict) -> None:
    """Keep every argument of a method's ``__init__`` as the attribute of its name, unchanged
    (scikit-learn's convention: parameters are validated in ``fit``, and ``get_params`` reads
    them back); ``args`` is the ``locals()`` of that ``__init__``."""
    for name, value in args.items():
        if name not in ("self", "__class__"):
            setattr(obj, name, value)


def sign_codes(values: np.ndarray) -> np.ndarray:
    """The paper's sign: +1 where the input is positive, else -1 (so sign(0) = -1). int8 codes."""
    return np.where(np.asarray(values) > 0, 1, -1).astype(np.int8)


def method_label(klass: type) -> str:
    """How an error names a method: its import path ``package.module:Class``, after its registered
    name where it has one (``my-hash (my_package.hashing:MyHasher)``)."""
    path = f"{klass.__module__}:{klass.__qualname__}"
    key = method_key(klass)
    return path if key == path else f"{key} ({path})"


def check_method_output(model, values, n_rows: int, modality: str, call: str = "encode") -> np.ndarray:
    """``values``, what ``model``'s ``call`` returned for ``n_rows`` objects of ``modality``, as an
    array, checked where dmh takes it from a method (its own or one plugged in): numbers (bool,
    integer or float; not objects, strings or complex), one row per object and ``n_bits`` columns
    (the bit length asked for). Codes (``call="encode"``) must moreover be finite and in
    ``{-1, +1}``; real values (``"_project"``, ``"project"``) may be NaN, which a fit reports as a
    diverged one. A problem raises :class:`dmh.errors.DataError` in one line naming the method and
    the call: ``method my_pkg.hashing:MyHasher: encode(modality='image') returned 32 columns for
    n_bits=64``."""
    n_bits = getattr(model, "n_bits_", None)  # as fitted (fit sets it to the n_bits asked for)
    if n_bits is None:
        n_bits = getattr(model, "n_bits", None)

    def refuse(problem: str, error=DataError):
        raise error(f"method {method_label(type(model))}: {call}(modality={modality!r}) returned {problem}")

    try:
        arr = np.asarray(values)
    except (TypeError, ValueError):  # ragged rows
        refuse(f"a {type(values).__name__} that is not an array of numbers", DataTypeError)
    if arr.dtype.kind not in "biuf":
        refuse(f"{'None' if values is None else f'values of dtype {arr.dtype}'}, not numbers (bool, integer or "
               "float)", DataTypeError)
    if arr.ndim != 2:
        refuse(f"an array of shape {arr.shape}; expected (n_objects, n_bits) = ({n_rows}, {n_bits})")
    if arr.shape[0] != n_rows:
        refuse(f"{arr.shape[0]} rows for {n_rows} objects")
    if n_bits is not None and arr.shape[1] != n_bits:
        refuse(f"{arr.shape[1]} columns for n_bits={n_bits}")
    if call == "encode":
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            refuse("NaN or infinite values")
        if arr.dtype.kind == "b" or not (np.abs(arr) == 1).all():
            refuse("values other than -1 and +1 (codes are {-1, +1}; 0/1 bits map to them by 2 * bits - 1)")
    return arr


def encode_checked(model, X, modality: str) -> np.ndarray:
    """``model.encode(X, modality=modality)``, checked (:func:`check_method_output`): how dmh's
    commands and evaluation take codes from a method."""
    n_rows = X.shape[0] if hasattr(X, "shape") else len(X)
    return check_method_output(model, model.encode(X, modality=modality), n_rows, modality)


class BaseHasher(BaseEstimator):
    """Base class of every cross-modal hashing method in :mod:`dmh`.

    Subclasses implement ``_fit(data)``, ``_project(X, modality)`` (real-valued outputs whose
    sign is the code) and ``_get_state`` / ``_set_state`` (plain arrays for saving).
    """

    #: short name of the method (a built-in's registered name); a saved model and a result cell name
    #: their method by :func:`dmh.registry.method_key` (the registered name, else ``module:Class``)
    method_name = "base"
    #: True when the method can use image-only / text-only objects; False when it trains on the
    #: paired objects of semi-paired data only
    uses_unpaired = False
    #: fewest paired objects the method needs
    min_paired = 2
    #: True when ``_fit`` / ``_project`` use torch (its thread pools are then limited as well)
    uses_torch = False

    # ------------------------------------------------------------------ threads
    def _thread_limit(self):
        """The thread limit of this estimator's work: ``self.n_threads`` when the class takes
        that parameter (``None`` there means the process setting), else the process setting."""
        return thread_limit(getattr(self, "n_threads", None), torch=self.uses_torch)

    # ------------------------------------------------------------------ fitting
    #: the values each hyperparameter may take, checked once by :meth:`fit` (:func:`dmh._validation.
    #: validate_params`): name -> list of constraints (``None`` for the value None). Every parameter but
    #: ``n_bits`` (checked by :func:`dmh._validation.check_n_bits`) is declared; a subclass extends
    #: its base's dict. Checks that involve several parameters are code: :meth:`_check_param_combinations`.
    _parameter_constraints: dict = {"random_state": RANDOM_STATE}

    def fit(self, data: CrossModalData):
        """Learn hash functions from ``data`` (all its objects; use ``data.train()`` for a split)."""
        n_bits = check_n_bits(self._n_bits_param())
        self._validate_params(n_bits)  # before the data: a bad value must not wait for a large check
        data = self._check_fit_data(data)
        self.n_bits_ = n_bits
        self.n_features_ = {"image": data.image.shape[1], "text": data.text.shape[1]}
        with self._thread_limit():
            self._fit(data)
            self._warn_degenerate_bits(data)
        return self

    def check_hyperparameters(self, n_bits=None) -> None:
        """Check every hyperparameter as :meth:`fit` does, without data: a bad value raises
        :class:`dmh.errors.ParameterError` (one line naming it). ``n_bits``: the bit length to check
        the values against (some, e.g. STMH's ``n_active``, are bounded by it); default ``self.n_bits``.
        The command line calls this for every method and bit length before it loads any data."""
        self._validate_params(check_n_bits(self._n_bits_param() if n_bits is None else n_bits))

    def _n_bits_param(self):
        """The bit length the parameters ask for, before it is checked: ``n_bits`` (a wrapper such
        as :class:`dmh.BlockHasher` may take it from the method it wraps)."""
        return self.n_bits

    def _validate_params(self, n_bits: int) -> None:
        """The declared constraints (:attr:`_parameter_constraints`), then the combinations."""
        validate_params(self.get_params(deep=False), self._parameter_constraints, type(self).__name__)
        self._check_param_combinations(n_bits)
        legacy = getattr(self, "_check_params", None)
        if legacy is not None:  # a subclass written for the hand-written checks: still run, with n_bits_ set
            import warnings

            warnings.warn(f"{type(self).__name__}._check_params is deprecated: declare _parameter_constraints "
                          "and put checks of several parameters in _check_param_combinations", DeprecationWarning,
                          stacklevel=3)
            probe = type(self)(**self.get_params(deep=False))
            probe.n_bits_ = n_bits
            probe._check_params()

    def _check_param_combinations(self, n_bits: int) -> None:
        """Checks that involve several hyperparameters (or the bit length ``n_bits``), after each
        one was checked alone; raise :class:`dmh.errors.ParameterError`. None by default."""

    #: a bit is "near-constant" when this fraction (or more) of the training codes share its value
    degenerate_fraction = 0.99
    #: at most this many training rows per modality are encoded for the check (evenly spaced)
    _degenerate_sample = 2000

    def _warn_degenerate_bits(self, data: CrossModalData) -> None:
        """Warn (:class:`dmh.errors.DegenerateCodesWarning`) when the fitted hash functions give
        constant or near-constant bits on the training data (a diverged or collapsed fit): such bits
        carry no information, and identical codes make every ranking a tie."""
        import warnings

        from .errors import DegenerateCodesWarning

        for modality in ("image", "text"):
            rows = np.flatnonzero(data.mask(modality))
            if rows.size < 2:
                continue
            if rows.size > self._degenerate_sample:
                rows = rows[np.linspace(0, rows.size - 1, self._degenerate_sample).astype(np.int64)]
            X = (data.image if modality == "image" else data.text)[rows]
            values = self.project(X, modality)
            if not np.isfinite(values).all():
                warnings.warn(
                    f"{type(self).__name__}: the fitted {modality} hash functions give NaN or infinite outputs "
                    "on the training data (a diverged fit); its codes are meaningless",
                    DegenerateCodesWarning, stacklevel=3,
                )
                continue
            codes = sign_codes(values)
            share = np.maximum((codes > 0).mean(0), (codes < 0).mean(0))
            constant = int((share >= 1.0).sum())
            near = int((share >= self.degenerate_fraction).sum()) - constant
            if constant + near == 0:
                continue
            if np.unique(codes, axis=0).shape[0] == 1:
                detail = "every training object gets the same code"
            else:
                detail = (f"{constant} of {self.n_bits_} bits are constant and {near} more near-constant "
                          f"(>= {self.degenerate_fraction:.0%} of the objects share the value)")
            warnings.warn(
                f"{type(self).__name__} ({self.n_bits_} bits): on the {modality} training data {detail}; "
                "such bits carry no information (a collapsed or diverged fit?)",
                DegenerateCodesWarning, stacklevel=3,
            )

    def _check_fit_data(self, data) -> CrossModalData:
        if not isinstance(data, CrossModalData):
            raise DataTypeError(
                f"{type(self).__name__}.fit expects a dmh.CrossModalData, got {type(data).__name__}; "
                "build one with dmh.CrossModalData(image=..., text=..., image_mask=..., text_mask=...)"
            )
        for modality in ("image", "text"):
            if not data.mask(modality).any():
                raise DataError(
                    f"{type(self).__name__} needs both modalities: the training data hold no {modality}"
                )
        n_paired = data.n_paired
        if n_paired < self.min_paired:
            raise DataError(
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
            raise ParameterError("give exactly one of texts= and images=")
        featurizer = getattr(self, "featurizer_", None)
        if featurizer is None:
            raise ParameterError(
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
        """Real-valued outputs before ``sign`` (shape (n, n_bits)); what ``_project`` returns is
        checked (:func:`check_method_output`): a method may be one's own."""
        check_is_fitted(self, "n_bits_")
        modality = check_modality(modality)
        X = check_features(X, f"{modality} features", n_cols=self.n_features_[modality])
        with self._thread_limit():
            values = self._project(X, modality)
        return check_method_output(self, values, X.shape[0], modality, "_project").astype(np.float64, copy=False)

    def _project(self, X: np.ndarray, modality: str) -> np.ndarray:  # pragma: no cover - abstract
        raise NotImplementedError

    # ------------------------------------------------------------------ persistence
    def _get_state(self) -> dict[str, np.ndarray]:  # pragma: no cover - abstract
        raise NotImplementedError

    def _set_state(self, state: dict[str, np.ndarray]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _state_spec(self) -> dict[str, tuple]:
        """The arrays a saved state must hold and their shapes, checked on load before anything is
        built from them. Each dimension is an int, ``None`` (any), or a letter: ``"I"`` / ``"T"``
        (image / text features of the header), ``"B"`` (``n_bits`` of the header), any other
        letter a size that must agree across the arrays that name it."""
        return {}

    def _header_params(self) -> dict:
        """The hyperparameters as a saved model's header holds them (made JSON by :meth:`save`):
        ``get_params(deep=False)``. A parameter that is itself a method (a wrapper's) is written as
        ``{"method": its method_key, "params": its header params}``, and :meth:`_params_from_header`
        builds it back."""
        return self.get_params(deep=False)

    @classmethod
    def _params_from_header(cls, params: dict, path) -> dict:
        """The keyword arguments of ``cls`` from a header's params (already read against the class's
        parameter names); a bad value raises :class:`dmh.errors.DmhError`. As they are by default."""
        return params

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
            "method": method_key(type(self)),
            "class": type(self).__name__,
            "class_path": f"{type(self).__module__}:{type(self).__qualname__}",
            "params": _jsonable(self._header_params()),
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
            # not user input: a programming error
            raise TypeError(f"{path} holds a {type(model).__name__}, not a {cls.__name__}")
        return model


def load_model(path) -> BaseHasher:
    """Load any saved model; the method is read from the file's header.

    The file is validated before anything is built from it: archive integrity, a header that is a
    JSON object with the required keys of the right types, a known method, parameters the method
    has, valid hyperparameters, every weight array present with the shape the header implies
    (features, ``n_bits``, hidden size), and finite weights. Any problem is a
    :class:`dmh.errors.ModelFileError` naming the file.

    The method is the header's ``method``: a registered name (:mod:`dmh.registry`), or for a class
    that was not registered its ``package.module:Class`` path, which is imported as ``--method``
    would import it (the file holds no code; it names a class that must be installed). Options a
    method once had and has been given up are dropped, and options added since the file was written
    take the value it was made with (:mod:`dmh._keys`); any other parameter the class does not have
    is an error naming it.
    """
    schema = {"method": str, "params": dict, "n_bits": int, "n_features": dict}
    meta, state = read_archive(path, "dmh-model", FORMAT_VERSION, "model", schema, ModelFileError)
    klass = header_method_class(meta["method"], path, meta.get("class_path"))
    try:
        n_bits = check_n_bits(meta["n_bits"])
    except ParameterError as exc:
        raise ModelFileError(path, f"has a damaged header: {exc}") from None
    n_features = meta["n_features"]
    if set(n_features) != {"image", "text"} or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in n_features.values()
    ):
        raise ModelFileError(
            path, f"has a damaged header: n_features must be positive 'image' and 'text' counts, got {n_features!r}"
        )
    extra = meta.get("extra", {})
    if not isinstance(extra, dict):
        raise ModelFileError(path, f"has a damaged header: 'extra' must be an object, got {extra!r}")
    model = klass(**header_params(klass, meta["method"], meta["params"], path))
    model.n_bits_ = n_bits
    model.n_features_ = {k: int(v) for k, v in n_features.items()}
    try:
        model._validate_params(n_bits)
        model._set_extra_meta(extra)
    except (DmhError, KeyError, TypeError, ValueError) as exc:  # header values read by the methods
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        raise ModelFileError(path, f"has invalid values in its header: {msg}") from None
    _check_state(model, state, path)
    model._set_state(state)
    if meta.get("featurizer"):
        from .featurizer_spec import FeaturizerSpec

        model.featurizer_ = FeaturizerSpec.from_dict(meta["featurizer"], f"{path} (featurizer)")
        model.featurizer_.warn_if_unavailable(str(path))
    return model


def header_method_class(name: str, path, class_path=None) -> type:
    """The class a header names as its method (see :func:`load_model`); a name that cannot be
    loaded here is a :class:`dmh.errors.ModelFileError` naming the file."""
    top = name.split(":", 1)[0].split(".", 1)[0] if ":" in name else None
    if top is not None and top in sys.stdlib_module_names:
        raise ModelFileError(path, f"names {name!r}, a module of Python's standard library, as its method")
    try:
        return get_method_class(name)
    except DmhError as exc:
        where = f" (class {class_path})" if isinstance(class_path, str) else ""
        hint = "; install or register it (dmh.register_method) to load this file" if ":" not in name else ""
        raise ModelFileError(path, f"names a method not available here{where}: {exc}{hint}") from None


def header_params(klass: type, method: str, saved: dict, path) -> dict:
    """The keyword arguments of ``klass`` from a header's ``params`` (saved as ``method``): options
    given up dropped, options added since filled in (:mod:`dmh._keys`), lists made tuples, then the
    class's :meth:`BaseHasher._params_from_header`; a parameter the class does not have, or a value
    that hook refuses, is a :class:`dmh.errors.ModelFileError` naming the file."""
    params, unknown = model_params(method, saved, klass().get_params(deep=False))
    if unknown:
        raise ModelFileError(path, f"has parameters that {klass.__name__} does not have: {unknown} (a file of "
                             "another version of the method, or an edited header)")
    params = {k: (tuple(v) if isinstance(v, list) else v) for k, v in params.items()}
    try:
        return klass._params_from_header(params, path)
    except ModelFileError:
        raise
    except DmhError as exc:
        raise ModelFileError(path, f"has invalid values in its header: {exc}") from None


def _check_state(model: BaseHasher, state: dict, path) -> None:
    """Weights against the header (see :meth:`BaseHasher._state_spec`), and finite."""
    spec = model._state_spec()
    missing = sorted(set(spec) - set(state))
    if missing:
        raise ModelFileError(path, f"is incomplete: it lacks the arrays {missing}")
    dims = {"I": model.n_features_["image"], "T": model.n_features_["text"], "B": model.n_bits_}
    names = {"I": "image features", "T": "text features", "B": "n_bits"}
    for key, shape in spec.items():
        arr = state[key]
        if arr.ndim != len(shape):
            raise ModelFileError(path, f"array {key!r} has shape {arr.shape}, expected {len(shape)} dimensions")
        for want, got in zip(shape, arr.shape, strict=True):
            if want is None:
                continue
            if isinstance(want, str):
                if want in dims and dims[want] != got:
                    what = (f"the header's {names[want]} = {dims[want]}" if want in names
                            else f"other arrays give {dims[want]}")
                    raise ModelFileError(
                        path, f"weights disagree with the header: array {key!r} has shape {arr.shape}, but {what}"
                    )
                dims.setdefault(want, got)
            elif want != got:
                raise ModelFileError(path, f"array {key!r} has shape {arr.shape}, expected {shape}")
    for key, arr in state.items():
        if key.rsplit(".", 1)[-1] != "objective" and arr.dtype.kind in "fc" and not np.isfinite(arr).all():
            raise ModelFileError(
                path, f"array {key!r} holds NaN or infinite weights (a diverged fit?); refusing to load it"
            )
