"""Boundary validation: every public entry point checks its inputs once, here, with errors that
name the offending array, its shape and what was expected."""

from __future__ import annotations

import math
import numbers

import numpy as np

from .errors import DataError, DataTypeError, ParameterError, ParameterTypeError

MODALITIES = ("image", "text")


def check_modality(modality: str) -> str:
    if modality not in MODALITIES:
        raise ParameterError(f"modality must be one of {MODALITIES}, got {modality!r}")
    return modality


#: the precisions in which :class:`dmh.data.CrossModalData` keeps its features
FEATURE_DTYPES = ("float64", "float32")


def check_feature_dtype(dtype, name: str = "dtype") -> np.dtype:
    """``dtype`` (a name or numpy dtype) as one of :data:`FEATURE_DTYPES`, else a one-line error."""
    try:
        value = np.dtype(dtype) if not isinstance(dtype, bool) and dtype is not None else None
    except TypeError:
        value = None
    if value is None or value.name not in FEATURE_DTYPES:
        raise ParameterError(f"{name} must be one of {FEATURE_DTYPES}, got {dtype!r}")
    return value


def check_features(
    X,
    name: str,
    *,
    n_rows: int | None = None,
    n_cols: int | None = None,
    rows_to_check: np.ndarray | None = None,
    dtype=np.float64,
    allow_empty: bool = False,
) -> np.ndarray:
    """Return ``X`` as a 2-D float array after checking shape, dtype and finiteness.

    ``rows_to_check`` (a boolean mask) restricts the finiteness check to observed rows, so that a
    modality's missing rows may hold anything (they are ignored, never read).
    """
    if X is None:
        raise DataError(f"{name} is missing (got None)")
    if hasattr(X, "toarray"):  # scipy.sparse
        X = X.toarray()
    arr = np.asarray(X)
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise DataTypeError(f"{name} must be a numeric array, got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        raise DataTypeError(f"{name} must be real-valued, got dtype {arr.dtype}")
    if arr.ndim != 2:
        raise DataError(
            f"{name} must be a 2-D array (n_objects x n_features), got shape {arr.shape}"
        )
    if n_rows is not None and arr.shape[0] != n_rows:
        raise DataError(f"{name} has {arr.shape[0]} rows, expected {n_rows}")
    if n_cols is not None and arr.shape[1] != n_cols:
        raise DataError(
            f"{name} has {arr.shape[1]} features (columns), expected {n_cols} "
            "(the dimension the model was fitted with)"
        )
    if not allow_empty and (arr.shape[0] == 0 or arr.shape[1] == 0):
        raise DataError(f"{name} is empty (shape {arr.shape})")
    arr = arr.astype(dtype, copy=False)
    bad = _non_finite_rows(arr, rows_to_check)
    if bad.size:
        raise DataError(
            f"{name} contains NaN or infinite values in {bad.size} row(s) (first: {bad[:5].tolist()}); "
            "mark a missing modality with image_mask/text_mask instead of NaN"
        )
    return arr


def _non_finite_rows(arr: np.ndarray, rows_to_check: np.ndarray | None, step: int = 8192) -> np.ndarray:
    """Rows of the 2-D ``arr`` (among ``rows_to_check``, a boolean mask; all when None) holding NaN
    or infinity, checked by blocks of rows: no copy of ``arr``, no n x d boolean temporary."""
    bad = []
    for s in range(0, arr.shape[0], step):
        block = arr[s : s + step]
        rows = np.arange(s, s + block.shape[0])
        if rows_to_check is not None:
            keep = rows_to_check[s : s + step]
            block, rows = block[keep], rows[keep]
        if block.size and not np.isfinite(block).all():
            bad.append(rows[~np.isfinite(block).all(axis=1)])
    return np.concatenate(bad) if bad else np.empty(0, np.int64)


def check_mask(mask, name: str, n: int) -> np.ndarray:
    arr = np.asarray(mask)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.shape != (n,):
        raise DataError(f"{name} must have shape ({n},), got {arr.shape}")
    if arr.dtype != np.bool_:
        if np.issubdtype(arr.dtype, np.number) and np.isin(arr, (0, 1)).all():
            arr = arr.astype(bool)
        else:
            raise DataTypeError(f"{name} must be boolean (or 0/1), got dtype {arr.dtype}")
    return arr


def check_index(idx, name: str, n: int) -> np.ndarray:
    arr = np.asarray(idx)
    if arr.ndim == 2 and 1 in arr.shape:
        arr = arr.reshape(-1)
    if arr.ndim != 1:
        raise DataError(f"{name} must be a 1-D array of 0-based row indices, got shape {arr.shape}")
    if arr.size == 0:
        raise DataError(f"{name} is empty")
    if not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating) and np.all(arr == np.round(arr)):
            arr = arr.astype(np.int64)
        else:
            raise DataTypeError(f"{name} must hold integer indices, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.min() < 0 or arr.max() >= n:
        raise DataError(
            f"{name} holds indices outside [0, {n - 1}] (min {arr.min()}, max {arr.max()}); "
            "indices are 0-based"
        )
    if np.unique(arr).size != arr.size:
        raise DataError(f"{name} holds repeated indices")
    return arr


def check_labels(labels, n: int, name: str = "labels") -> np.ndarray:
    """Labels are either class ids (n,) or a multi-hot matrix (n, L)."""
    arr = np.asarray(labels)
    if arr.ndim == 2 and arr.shape[1] == 1:
        arr = arr.reshape(-1)
    if arr.ndim not in (1, 2) or arr.shape[0] != n:
        raise DataError(
            f"{name} must be class ids of shape ({n},) or a multi-hot matrix of shape ({n}, L), "
            f"got {arr.shape}"
        )
    if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_):
        raise DataTypeError(f"{name} must be numeric, got dtype {arr.dtype}")
    if np.issubdtype(arr.dtype, np.floating):
        if not np.isfinite(arr).all():
            raise DataError(f"{name} contains NaN or infinite values")
        if not np.all(arr == np.round(arr)):
            raise DataError(f"{name} must hold integer class ids or 0/1 multi-hot entries")
    if arr.ndim == 2:
        if not np.isin(arr, (0, 1)).all():
            raise DataError(f"multi-hot {name} must hold only 0 and 1")
        return arr.astype(np.uint8)
    return arr.astype(np.int64)


def check_n_bits(n_bits) -> int:
    if isinstance(n_bits, bool) or not isinstance(n_bits, numbers.Integral):
        raise ParameterTypeError(f"n_bits must be an integer, got {n_bits!r}")
    if n_bits < 1 or n_bits > 4096:
        raise ParameterError(f"n_bits must be between 1 and 4096, got {n_bits}")
    return int(n_bits)


def check_codes(codes, name: str = "codes", n_bits: int | None = None) -> np.ndarray:
    arr = np.asarray(codes)
    if arr.ndim != 2:
        raise DataError(f"{name} must be 2-D (n x n_bits), got shape {arr.shape}")
    if n_bits is not None and arr.shape[1] != n_bits:
        raise DataError(f"{name} have {arr.shape[1]} bits, expected {n_bits}")
    if not np.isin(arr, (-1, 1)).all():
        raise DataError(f"{name} must hold only -1 and +1")
    return arr.astype(np.int8)


def check_paired_ratio(value, name: str = "paired_ratio", *, allow_zero: bool = False) -> float:
    """A paired ratio as a float in (0, 1] (or [0, 1] with ``allow_zero``); NaN, inf, booleans,
    strings and values outside the interval are refused. One check for ``fit``, ``evaluate`` and
    :func:`dmh.make_semi_paired`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ParameterTypeError(f"{name} must be a number in {'[0' if allow_zero else '(0'}, 1], got {value!r}")
    ratio = float(value)
    low_ok = ratio >= 0.0 if allow_zero else ratio > 0.0
    if not (np.isfinite(ratio) and low_ok and ratio <= 1.0):
        raise ParameterError(f"{name} must lie in {'[0' if allow_zero else '(0'}, 1], got {value!r}")
    return ratio


def check_unique(values, name: str) -> list:
    """``values`` (a list of seeds, bit lengths, ratios or method names) after refusing repeats:
    a repeated seed would be counted twice in a mean and a standard deviation."""
    values = list(values)
    seen, repeated = set(), []
    for v in values:
        if v in seen and v not in repeated:
            repeated.append(v)
        seen.add(v)
    if repeated:
        raise ParameterError(f"{name} repeats {', '.join(map(str, repeated))}; give each value once")
    return values


# ------------------------------------------------------------------ hyperparameters
# Each method declares the values its hyperparameters may take once, as a dict from name to a list
# of constraints (``BaseHasher._parameter_constraints``, the shape of scikit-learn's declarations);
# :func:`validate_params` checks them all in ``fit``, with one wording: a ParameterError (a
# ValueError) naming the method, the parameter, what is allowed and the value given, in one line.
class Constraint:
    """One kind of value a hyperparameter may take: :meth:`accepts` and its description (``str``)."""

    def accepts(self, value) -> bool:  # pragma: no cover - abstract
        raise NotImplementedError

    def check(self, value, name: str, owner: str | None = None):
        """``value`` if this constraint accepts it, else the :func:`validate_params` error."""
        if not self.accepts(value):
            raise ParameterError(_message(owner, name, [self], value))
        return value


class Interval(Constraint):
    """Numbers of ``kind`` (:class:`numbers.Integral` or :class:`numbers.Real`) from ``low`` to
    ``high`` (``None``: unbounded), ``closed`` at ``"both"`` ends, the ``"left"``, the ``"right"``
    or ``"neither"``. Booleans are refused; a Real must be finite."""

    def __init__(self, kind, low=None, high=None, *, closed: str = "both"):
        if kind not in (numbers.Integral, numbers.Real) or closed not in ("both", "left", "right", "neither"):
            raise ValueError(f"bad Interval({kind!r}, closed={closed!r})")  # pragma: no cover - not user input
        self.kind, self.low, self.high, self.closed = kind, low, high, closed

    def accepts(self, value) -> bool:
        if isinstance(value, bool | np.bool_) or not isinstance(value, self.kind):
            return False
        if self.kind is numbers.Real and not _finite(value):
            return False
        low_in, high_in = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.low is not None and (value < self.low if low_in else value <= self.low):
            return False
        return self.high is None or (value <= self.high if high_in else value < self.high)

    def __str__(self) -> str:
        low_in, high_in = self.closed in ("both", "left"), self.closed in ("both", "right")
        if self.kind is numbers.Integral:
            if self.high is None and self.low is not None:
                return f"an integer {'>=' if low_in else '>'} {self.low}"
            what = "an integer"
        else:
            what = "a finite number"
        lo = f"{'[' if low_in else '('}{self.low}" if self.low is not None else "(-inf"
        hi = f"{self.high}{']' if high_in else ')'}" if self.high is not None else "inf)"
        return f"{what} in {lo}, {hi}"


def _finite(value) -> bool:
    try:
        return math.isfinite(value)
    except (OverflowError, TypeError, ValueError):  # an int too large for a float, an odd Real
        return False


class Options(Constraint):
    """One of the strings ``values``."""

    def __init__(self, *values: str):
        self.values = tuple(values)

    def accepts(self, value) -> bool:
        return isinstance(value, str) and value in self.values

    def __str__(self) -> str:
        return repr(self.values[0]) if len(self.values) == 1 else f"one of {self.values}"


class Boolean(Constraint):
    """``True`` or ``False`` (numpy's booleans too)."""

    def accepts(self, value) -> bool:
        return isinstance(value, bool | np.bool_)

    def __str__(self) -> str:
        return "True or False"


class IntSequence(Constraint):
    """A list or tuple of integers >= ``minimum`` (empty allowed), e.g. the widths of hidden layers."""

    def __init__(self, minimum: int = 1):
        self.item = Interval(numbers.Integral, minimum, None)

    def accepts(self, value) -> bool:
        return isinstance(value, list | tuple) and all(self.item.accepts(v) for v in value)

    def __str__(self) -> str:
        return f"a sequence of integers >= {self.item.low}"


class InstanceOf(Constraint):
    """An instance of ``kind``, described as ``description``."""

    def __init__(self, kind: type, description: str):
        self.kind, self.description = kind, description

    def accepts(self, value) -> bool:
        return isinstance(value, self.kind)

    def __str__(self) -> str:
        return self.description


class _NoneConstraint(Constraint):
    def accepts(self, value) -> bool:
        return value is None

    def __str__(self) -> str:
        return "None"


#: the intervals most hyperparameters take
POSITIVE = Interval(numbers.Real, 0, None, closed="right")
NON_NEGATIVE = Interval(numbers.Real, 0, None)
UNIT_INTERVAL = Interval(numbers.Real, 0, 1)
POSITIVE_INT = Interval(numbers.Integral, 1, None)
NON_NEGATIVE_INT = Interval(numbers.Integral, 0, None)

#: what every method's ``random_state`` may be (:func:`check_random_state` turns it into a generator)
RANDOM_STATE = [None, NON_NEGATIVE_INT, InstanceOf(np.random.Generator, "a numpy Generator"),
                InstanceOf(np.random.RandomState, "a numpy RandomState")]


def _constraint(c) -> Constraint:
    return _NoneConstraint() if c is None else c


def _message(owner: str | None, name: str, allowed, value) -> str:
    described = [str(_constraint(c)) for c in allowed]
    what = described[0] if len(described) == 1 else f"{', '.join(described[:-1])} or {described[-1]}"
    shown = " ".join(repr(value).split())  # one line, whatever the value's repr
    if len(shown) > 80:
        shown = shown[:77] + "..."
    return f"{owner}: {name} must be {what}, got {shown}" if owner else f"{name} must be {what}, got {shown}"


def validate_params(params: dict, constraints: dict, owner: str) -> None:
    """Check each of ``params`` that ``constraints`` names (name -> list of :class:`Constraint`,
    ``None`` for the value ``None``) against its list: a value no constraint of its list accepts
    raises :class:`ParameterError` ("<owner>: <name> must be <what is allowed>, got <value>").
    A parameter not named is not checked (a subclass that declares nothing checks nothing)."""
    for name, value in params.items():
        allowed = constraints.get(name)
        if allowed is not None and not any(_constraint(c).accepts(value) for c in allowed):
            raise ParameterError(_message(owner, name, allowed, value))


def check_int(value, name: str, *, minimum: int = 1, owner: str | None = None) -> int:
    """``value`` as an int >= ``minimum`` (bools refused)."""
    return int(Interval(numbers.Integral, minimum, None).check(value, name, owner))


def check_int_range(value, name: str, low: int, high: int | None = None) -> int:
    """``value`` as an int from ``low`` to ``high`` (None: unbounded); a non-integer (bools
    included) is a :class:`ParameterTypeError`, one out of range a :class:`ParameterError`."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ParameterTypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ParameterError(f"{name} must be {bound}, got {value}")
    return value


def check_random_state(random_state) -> np.random.Generator:
    """A numpy Generator from ``None``, an int, a Generator or a legacy RandomState (the one way every
    method turns ``random_state`` into a generator inside ``fit``)."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or (isinstance(random_state, numbers.Integral) and not isinstance(random_state, bool)):
        return np.random.default_rng(check_seed(random_state) if random_state is not None else None)
    if isinstance(random_state, np.random.RandomState):
        return np.random.default_rng(random_state.randint(np.iinfo(np.int32).max))
    raise ParameterError(
        f"random_state must be None, an integer, a numpy Generator or RandomState, got {random_state!r}"
    )


def check_seed(seed, name: str = "random_state") -> int:
    """A seed: a non-negative integer (numpy's generators refuse negative ones)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise ParameterError(f"{name} must be a non-negative integer seed, got {seed!r}")
    return int(seed)
