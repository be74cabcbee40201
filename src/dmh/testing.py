"""The checks every hashing method must pass, for dmh's own methods and for those of its users.

``check_hasher(MyHasher(n_bits=8, n_iter=3))`` fits the method a few times on small synthetic data
and checks the contract of :class:`dmh.BaseHasher` that the harness (``dmh evaluate``, ``dmh
reproduce``, ``dmh tune``, ``dmh build``) relies on; a failed check raises :class:`AssertionError`
naming the method, the check and what went wrong. The checks, in :data:`CHECKS` order:

=========================  ========================================================================
check                      what must hold
=========================  ========================================================================
``init_stores_params``     ``__init__`` stores every argument unchanged; ``clone`` gives an equal,
                           unfitted estimator (scikit-learn's contract)
``bad_parameters``         ``n_bits`` of 0, -8 or ``"8"`` is a :class:`dmh.errors.ParameterError`
                           raised by ``fit`` before it reads the data; so is every value of
                           ``bad_params`` (the method's own invalid values, when given)
``encode_shape_dtype``     ``fit`` returns the estimator, leaves its parameters as they were, and
                           learns ``n_bits_`` and ``n_features_``; ``encode`` gives int8 codes in
                           {-1, +1} of shape (n, n_bits), ``project`` finite floats of that shape,
                           for each modality; an unfitted estimator refuses to encode
``same_seed_same_codes``   two fits with the same ``random_state`` give the same codes
``save_load``              ``save`` then :func:`dmh.load_model` gives the same class, parameters,
                           codes and projections
``missing_modalities``     semi-paired data (image-only and text-only objects beside pairs) fit;
                           data without any text, or features of the wrong width, are a
                           :class:`dmh.errors.DataError`
``float32_input``          float32 data fit, and float32 features encode
=========================  ========================================================================

The data are small (64 objects, 12-d "images", 9-d "texts", four clusters), so a method should be
given settings that fit them in a second or so: :data:`FAST_PARAMS` holds those of dmh's own methods;
for your own method, configure the instance you pass. In a pytest suite, one test per method and
check (scikit-learn's ``parametrize_with_checks`` idiom)::

    from dmh.testing import parametrize_with_checks

    @parametrize_with_checks([MyHasher(n_bits=8)])
    def test_dmh(estimator, check):
        check(estimator)
"""

from __future__ import annotations

import functools
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .base import BaseHasher, load_model
from .data import CrossModalData, make_semi_paired
from .errors import DataError, ParameterError
from .registry import get_method_class, method_key

__all__ = ["CHECKS", "FAST_PARAMS", "check_hasher", "parametrize_with_checks", "toy_data"]

#: settings under which each of dmh's methods fits :func:`toy_data` in about a second
FAST_PARAMS: dict[str, dict] = {
    "dmh": dict(d=8, hidden_size=32, n_rounds=1, dam_epochs=2, cle_max_iter=5, gbe_max_iter=30),
    "lssh": dict(n_atoms=24, max_iter=6, lasso_max_iter=20),
    "stmh": dict(max_iter=15),
    "fsh": dict(n_anchors=12, n_neighbors=4, max_iter=30),
    "spdh": dict(n_anchors=30, n_nearest=3, max_iter=8),
    "djsrh": dict(epochs=3, image_hidden=(16,), text_hidden=(16,), batch_size=16),
    "dgcpn": dict(epochs=3, image_hidden=(16,), text_hidden=(16,), batch_size=16),
    "jdsh": dict(epochs=3, image_hidden=(16,), text_hidden=(16,), batch_size=16, n_fit_batches=5),
    "ucch": dict(epochs=2, image_hidden=(16,), text_hidden=(16,), batch_size=32, n_negatives=16),
    "sadch": dict(outer_iter=1, inner_epochs=2, image_hidden=(16,), text_hidden=(16,), batch_size=32,
                  n_neighbours=4),
}

#: the bit length the checks fit at
N_BITS = 8


def toy_data(n: int = 64, seed: int = 0, dtype: str = "float64") -> CrossModalData:
    """Fully paired data of four clusters: non-negative 12-d "image" features, binary 9-d "text" tags."""
    rng = np.random.default_rng(seed)
    y = np.arange(n) % 4
    image = np.abs(rng.normal(size=(4, 12))[y] * 3 + rng.normal(size=(n, 12)))
    text = (rng.random((n, 9)) < 0.2 + 0.5 * (rng.random((4, 9)) < 0.3)[y]).astype(float)
    return CrossModalData(image=image, text=text, labels=y, dtype=dtype, name="toy")


# ------------------------------------------------------------------------------------- checks
class _Context:
    """The method under test: a fresh unfitted copy on demand, and one fitted model shared by the
    checks that only read it."""

    def __init__(self, hasher: BaseHasher):
        self.hasher = hasher
        self.klass = type(hasher)
        self.params = hasher.get_params(deep=False)
        self._fitted = None

    def new(self, **params) -> BaseHasher:
        return self.klass(**{**self.params, **params})

    def fit(self, data: CrossModalData | None = None, **params) -> BaseHasher:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # convergence and degenerate-code warnings of tiny fits
            return self.new(**params).fit(toy_data() if data is None else data)

    @property
    def fitted(self) -> BaseHasher:
        if self._fitted is None:
            self._fitted = self.fit()
        return self._fitted

    @fitted.setter
    def fitted(self, model: BaseHasher) -> None:
        self._fitted = model


def _check_init_stores_params(ctx: _Context) -> None:
    from sklearn.base import clone

    again = ctx.new()
    given = again.get_params(deep=False)
    for name, value in ctx.params.items():
        assert given[name] is value or _same(given[name], value), \
            f"__init__ changed {name!r}: given {value!r}, stored {given[name]!r}"
    copy = clone(ctx.hasher)
    assert type(copy) is ctx.klass and _same(copy.get_params(deep=False), ctx.params), "clone changed the parameters"
    assert not hasattr(copy, "n_bits_"), "a clone is fitted (it has n_bits_)"


def _check_bad_parameters(ctx: _Context, bad_params: Sequence[dict] = ()) -> None:
    for params in [{"n_bits": 0}, {"n_bits": -8}, {"n_bits": "8"}, *bad_params]:
        model = ctx.new(**params)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(np.ones(3))  # not data: a bad parameter must be found first
        except ParameterError as exc:
            assert "\n" not in str(exc), f"the error for {params} is more than one line: {exc}"
            continue
        except Exception as exc:  # noqa: BLE001 - any other exception fails the check, named
            raise AssertionError(f"{params}: fit raised {type(exc).__name__} ({exc}), expected "
                                 "dmh.errors.ParameterError before reading the data") from None
        raise AssertionError(f"{params}: fit accepted the value")


def _check_encode_shape_dtype(ctx: _Context) -> None:
    from sklearn.exceptions import NotFittedError

    data = toy_data(n=20, seed=1)
    model = ctx.new()
    try:
        model.encode(data.image, "image")
    except NotFittedError:
        pass
    else:
        raise AssertionError("an unfitted estimator encoded without NotFittedError")
    before = model.get_params(deep=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        returned = model.fit(toy_data())
    assert returned is model, "fit did not return the estimator"
    assert _same(model.get_params(deep=False), before), "fit changed the estimator's parameters"
    assert model.n_bits_ == model.n_bits and model.n_features_ == {"image": 12, "text": 9}, \
        f"n_bits_ / n_features_ are {model.n_bits_} / {model.n_features_}"
    ctx.fitted = model  # the later checks read it
    for modality in ("image", "text"):
        X = data.view(modality)
        codes = model.encode(X, modality)
        assert codes.dtype == np.int8 and codes.shape == (20, model.n_bits), \
            f"{modality} codes: dtype {codes.dtype}, shape {codes.shape}; expected int8, (20, {model.n_bits})"
        assert np.isin(codes, (-1, 1)).all(), f"{modality} codes hold values other than -1 and +1"
        values = model.project(X, modality)
        assert values.shape == codes.shape and np.isfinite(values).all(), f"{modality} projections: not finite"


def _check_same_seed_same_codes(ctx: _Context) -> None:
    data = toy_data(n=20, seed=2)
    a = ctx.fitted if ctx.params.get("random_state") == 0 else ctx.fit(random_state=0)
    b = ctx.fit(random_state=0)
    for modality in ("image", "text"):
        X = data.view(modality)
        assert np.array_equal(a.encode(X, modality), b.encode(X, modality)), \
            f"two fits with random_state=0 give different {modality} codes"


def _check_save_load(ctx: _Context) -> None:
    model = ctx.fitted
    data = toy_data(n=20, seed=3)
    with tempfile.TemporaryDirectory() as tmp:
        path = model.save(Path(tmp) / "model.npz")
        loaded = load_model(path)
    assert type(loaded) is ctx.klass, f"load_model gave a {type(loaded).__name__}"
    assert _same(loaded.get_params(deep=False), model.get_params(deep=False)), "the loaded parameters differ"
    for modality in ("image", "text"):
        X = data.view(modality)
        assert np.array_equal(loaded.encode(X, modality), model.encode(X, modality)), \
            f"the loaded model's {modality} codes differ"
        assert np.allclose(loaded.project(X, modality), model.project(X, modality)), \
            f"the loaded model's {modality} projections differ"


def _check_missing_modalities(ctx: _Context) -> None:
    semi = make_semi_paired(toy_data(n=96), 0.75, random_state=0)
    assert semi.n_image_only and semi.n_text_only
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = ctx.new().fit(semi)
    assert model.encode(semi.image[:5], "image").shape == (5, model.n_bits)
    full = toy_data()
    no_text = CrossModalData(image=full.image, text=full.text, text_mask=np.zeros(full.n_objects, bool))
    _expect(DataError, lambda: ctx.new().fit(no_text), "fit on data without any text")
    _expect(DataError, lambda: model.encode(np.ones((3, 5)), "image"), "encode of 5 image features (fitted on 12)")


def _check_float32_input(ctx: _Context) -> None:
    model = ctx.fit(toy_data(dtype="float32"))
    X = toy_data(n=20, seed=4, dtype="float32")
    for modality in ("image", "text"):
        codes = model.encode(X.view(modality), modality)
        assert codes.shape == (20, model.n_bits) and np.isin(codes, (-1, 1)).all(), f"float32 {modality} codes"


#: every check, by name, in the order :func:`check_hasher` runs them
CHECKS: dict[str, Callable] = {
    "init_stores_params": _check_init_stores_params,
    "bad_parameters": _check_bad_parameters,
    "encode_shape_dtype": _check_encode_shape_dtype,
    "same_seed_same_codes": _check_same_seed_same_codes,
    "save_load": _check_save_load,
    "missing_modalities": _check_missing_modalities,
    "float32_input": _check_float32_input,
}


def check_hasher(hasher, *, checks: Sequence[str] | None = None, bad_params: Sequence[dict] = ()) -> None:
    """Run the checks of :data:`CHECKS` (all, or those named in ``checks``) on ``hasher``.

    ``hasher``: an unfitted instance configured to fit small data quickly (its parameters are used
    for every fit, ``n_bits`` included; 8 bits suit the checks' data), or a method name,
    ``package.module:Class`` or class, which is made with ``n_bits=8`` and, for dmh's own methods,
    :data:`FAST_PARAMS`. ``bad_params``: parameter dicts that ``fit`` must refuse with a
    :class:`dmh.errors.ParameterError` (the method's own invalid values). The first failed check
    raises :class:`AssertionError` naming the method and the check.
    """
    if not isinstance(hasher, BaseHasher):
        hasher = _default_instance(hasher)
    names = list(CHECKS) if checks is None else list(checks)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ParameterError(f"checks names unknown check(s) {unknown}; the checks are {list(CHECKS)}")
    ctx = _Context(hasher)
    for name in names:
        try:
            if name == "bad_parameters":
                CHECKS[name](ctx, bad_params)
            else:
                CHECKS[name](ctx)
        except AssertionError as exc:
            raise AssertionError(f"check_hasher({type(hasher).__name__}): {name}: {exc}") from None
        except Exception as exc:  # noqa: BLE001 - an error of the method, named with the check it broke
            raise AssertionError(f"check_hasher({type(hasher).__name__}): {name}: "
                                 f"{type(exc).__name__}: {exc}") from exc


def parametrize_with_checks(estimators: Sequence, *, checks: Sequence[str] | None = None,
                            bad_params: Sequence[dict] = ()):
    """A ``pytest.mark.parametrize`` decorator over every (estimator, check) pair.

    ``estimators``: unfitted instances, or anything :func:`check_hasher` takes (a method name,
    ``package.module:Class`` or class); ``checks``: names of :data:`CHECKS` (all when omitted);
    ``bad_params``: as for :func:`check_hasher`, for every estimator. The
    decorated test takes ``estimator`` and ``check`` and calls ``check(estimator)``, which runs that
    one check and raises :class:`AssertionError` naming the method and the check when it fails. Each
    pair is its own test, with an id such as ``MyHasher-save_load``.
    """
    import pytest  # only the test suites that use this need pytest

    names = list(CHECKS) if checks is None else list(checks)
    unknown = [n for n in names if n not in CHECKS]
    if unknown:
        raise ParameterError(f"checks names unknown check(s) {unknown}; the checks are {list(CHECKS)}")
    if isinstance(estimators, (str, BaseHasher)) or not isinstance(estimators, Sequence):
        raise ParameterError("estimators must be a list of hashers (or method names), "
                             f"got {type(estimators).__name__}")
    instances = [e if isinstance(e, BaseHasher) else _default_instance(e) for e in estimators]
    pairs, ids = [], []
    for est in instances:
        for name in names:
            pairs.append((est, functools.partial(check_hasher, checks=[name], bad_params=bad_params)))
            ids.append(f"{type(est).__name__}-{name}")
    return pytest.mark.parametrize(("estimator", "check"), pairs, ids=ids)


def _default_instance(method) -> BaseHasher:
    """A method name, ``package.module:Class`` or class, made as :func:`check_hasher` makes it."""
    klass = get_method_class(method)
    return klass(n_bits=N_BITS, random_state=0, **FAST_PARAMS.get(method_key(klass), {}))


def _expect(error: type, call: Callable, what: str) -> None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            call()
    except error:
        return
    except Exception as exc:  # noqa: BLE001 - named in the failure
        raise AssertionError(f"{what} raised {type(exc).__name__} ({exc}), expected {error.__name__}") from None
    raise AssertionError(f"{what} was accepted, expected {error.__name__}")


def _same(a, b) -> bool:
    """Parameter values equal (a list and a tuple of the same items too; two methods, e.g. the one a
    wrapper holds, when of one class with equal parameters)."""
    if isinstance(a, BaseHasher) and isinstance(b, BaseHasher):
        return type(a) is type(b) and _same(a.get_params(deep=False), b.get_params(deep=False))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    try:
        return bool(a == b) or (a != a and b != b)  # NaN == NaN here
    except (TypeError, ValueError):
        return a is b
