"""The interface every method shares: sign, saving and loading any method through the registry."""

import json
import warnings

import numpy as np
import pytest

from dmh import BaseHasher, CrossModalData, load_model, sign_codes
from dmh.baselines.cvh import CVH
from dmh.baselines.imh import IMH
from dmh.errors import DegenerateCodesWarning, ModelFileError
from dmh.registry import METHODS, get_method_class, make_method, method_names


def test_sign_of_zero_is_minus_one():
    np.testing.assert_array_equal(sign_codes([[0.0, 2.0, -1.0]]), [[-1, 1, -1]])
    assert sign_codes([[1.0]]).dtype == np.int8


def test_registry_names_every_method_and_rejects_others():
    assert method_names() == list(METHODS)
    assert get_method_class("CVH") is CVH
    assert make_method("cvh", n_bits=8).n_bits == 8
    with pytest.raises(KeyError, match="unknown method"):
        get_method_class("nope")


def test_any_saved_model_loads_back_through_the_registry(toy_data, tmp_path):
    model = CVH(8).fit(toy_data.train())
    path = model.save(tmp_path / "m.npz")
    loaded = load_model(path)
    assert type(loaded) is CVH and BaseHasher.load(path).n_bits_ == 8
    np.testing.assert_array_equal(loaded.encode(toy_data.image, "image"), model.encode(toy_data.image, "image"))
    with pytest.raises(TypeError, match="not a IMH"):
        IMH.load(path)


def test_fit_refuses_what_is_not_cross_modal_data():
    with pytest.raises(TypeError, match="CrossModalData"):
        CVH(8).fit(np.ones((4, 2)))


# ---------------------------------------------------------------- bad input (issue 9)

#: careless values for any hyperparameter: wrong types, out of range, non-finite, empty
_CARELESS = ["abc", [1], None, -3, 0, 2.5, float("nan"), float("inf"), True, {}, "", -0.5, 1e30]


@pytest.mark.parametrize("method", method_names())
def test_hyperparameter_checks_fail_only_with_parameter_errors(method):
    """Every method's check of every hyperparameter, given careless values, either accepts the
    value or raises ParameterError: a TypeError from the check itself (DMH's perplexity="abc",
    preset=[1]) was a traceback at the command line."""
    from dmh.errors import ParameterError

    klass = get_method_class(method)
    refusing_none = []
    for name in klass().get_params(deep=False):
        if name in ("n_bits", "random_state"):
            continue
        refused = []
        for value in _CARELESS:
            try:
                klass(**{name: value}).check_hyperparameters(16)
            except ParameterError as exc:
                assert name in str(exc), (name, value, str(exc))  # the one line names the parameter
                refused.append(value)
        if not refused:
            refusing_none.append(name)
        else:  # a number, a choice or a flag: the text "abc" is none of them
            assert "abc" in refused, (name, refused)
    # each parameter is checked: none takes all of 'abc', [1], {}, nan, -3...
    assert not refusing_none, f"{method}: no careless value refused for {refusing_none}"


@pytest.mark.parametrize("method", method_names())
def test_every_hyperparameter_is_declared_once(method):
    """Each method states the allowed values of all its parameters (``n_bits`` is checked by
    ``check_n_bits``), so that ``fit`` checks every one of them in one place."""
    klass = get_method_class(method)
    assert set(klass._parameter_constraints) == set(klass().get_params(deep=False)) - {"n_bits"}
    assert not hasattr(klass, "_check_params")


def test_a_refused_hyperparameter_gets_one_line_naming_it():
    """One wording: the method, the parameter, what is allowed, the value given."""
    from dmh.errors import ParameterError

    cases = [
        ("cmfh", {"mu": 0}, "CMFH: mu must be a finite number in (0, inf), got 0"),
        ("fsh", {"ridge": "x"}, "FSH: ridge must be 'auto' or a finite number in (0, inf), got 'x'"),
        ("ucch", {"image_hidden": (8, 0)}, "UCCH: image_hidden must be a sequence of integers >= 1, got (8, 0)"),
        ("lssh", {"pca_dim": 2.5}, "LSSH: pca_dim must be None or an integer >= 1, got 2.5"),
        ("fsh", {"n_neighbors": 9, "n_anchors": 4}, "FSH: n_neighbors must be at most n_anchors (4), got 9"),
    ]
    for method, params, message in cases:
        with pytest.raises(ParameterError) as err:
            get_method_class(method)(16, **params).check_hyperparameters()
        assert str(err.value) == message
    with pytest.raises(ParameterError) as err:  # a value whose repr spans lines stays on one
        get_method_class("cvh")(16, reg=np.ones((40, 40))).check_hyperparameters()
    assert "\n" not in str(err.value) and str(err.value).startswith("CVH: reg must be 'auto' or a finite number")


def test_fit_checks_hyperparameters_before_the_data():
    from dmh.errors import ParameterError
    from dmh.methods.dmh import DMH

    with pytest.raises(ParameterError, match="perplexity"):
        DMH(8, perplexity="abc").fit(np.ones((4, 2)))  # not the data's TypeError
    with pytest.raises(ParameterError, match="n_active"):
        get_method_class("stmh")(4, n_active=8).check_hyperparameters()
    get_method_class("stmh")(4, n_active=8).check_hyperparameters(16)  # at 16 bits it is allowed


def _rand_data(n=30, seed=0, **kw):
    rng = np.random.default_rng(seed)
    return CrossModalData(image=rng.normal(size=(n, 5)), text=rng.normal(size=(n, 4)),
                          labels=rng.integers(0, 3, n), **kw)


def _saved(tmp_path, method="cvh", **params):
    from dmh.methods import get_method_class

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = get_method_class(method)(n_bits=4, random_state=0, **params).fit(_rand_data())
    return model, model.save(tmp_path / f"{method}.npz")


def _rewrite(path, out, meta_change=None, array_change=None):
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    meta = json.loads(arrays["__meta__"].tobytes())
    if meta_change:
        meta = meta_change(meta)
    if array_change:
        array_change(arrays)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(out, **arrays)
    return out


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda m: {**m, "n_bits": 8}, "weights disagree with the header.*n_bits = 8"),
        (lambda m: {**m, "n_features": {"image": 9, "text": 4}}, "image features = 9"),
        (lambda m: [m], "expected a JSON object"),
        (lambda m: {**m, "n_bits": "4"}, "'n_bits' is '4', expected int"),
        (lambda m: {k: v for k, v in m.items() if k != "params"}, "lacks 'params'"),
        (lambda m: {**m, "method": "nope"}, "unknown method"),
        (lambda m: {**m, "n_bits": 0}, "n_bits must be between 1 and 4096"),
    ],
)
def test_model_header_checked_against_weights(tmp_path, change, message):
    _, path = _saved(tmp_path)
    bad = _rewrite(path, tmp_path / "bad.npz", meta_change=change)
    with pytest.raises(ModelFileError, match=message) as err:
        load_model(bad)
    assert str(bad) in str(err.value)


def test_dmh_hidden_size_mismatch_and_nan_weights(tmp_path):
    params = {"n_rounds": 1, "hidden_size": 8, "d": 6, "dam_epochs": 1, "cle_max_iter": 2, "gbe_max_iter": 3}
    _, path = _saved(tmp_path, "dmh", **params)

    def hidden(meta):
        meta["params"]["hidden_size"] = 16
        return meta

    with pytest.raises(ModelFileError, match="image_net.body.0.weight"):
        load_model(_rewrite(path, tmp_path / "h.npz", meta_change=hidden))

    def nan(arrays):
        arrays["text_net.head.weight"] = np.full_like(arrays["text_net.head.weight"], np.nan)

    with pytest.raises(ModelFileError, match="NaN or infinite weights"):
        load_model(_rewrite(path, tmp_path / "n.npz", array_change=nan))

    def gamma(meta):
        meta["params"]["gamma"] = "nan"
        return meta

    with pytest.raises(ModelFileError, match="gamma must be a finite number"):
        load_model(_rewrite(path, tmp_path / "g.npz", meta_change=gamma))


def test_model_missing_arrays(tmp_path):
    _, path = _saved(tmp_path)
    bad = _rewrite(path, tmp_path / "bad.npz", array_change=lambda a: a.pop("text_projection"))
    with pytest.raises(ModelFileError, match="lacks the arrays.*text_projection"):
        load_model(bad)


class _Constant(BaseHasher):
    method_name = "constant-test"

    def __init__(self, n_bits=4, random_state=None):
        self.n_bits = n_bits
        self.random_state = random_state

    def _fit(self, data):
        pass

    def _project(self, X, modality):
        return np.ones((X.shape[0], self.n_bits_))


def test_fit_warns_on_constant_bits():
    with pytest.warns(DegenerateCodesWarning, match="every training object gets the same code"):
        _Constant().fit(_rand_data())


def test_intervals_keep_their_ends_and_refuse_what_is_not_a_number():
    """The constraints' ends, open or closed, and what no number constraint accepts."""
    import numbers

    from dmh._validation import Boolean, Interval, IntSequence, Options

    closed = {"both": (True, True), "left": (True, False), "right": (False, True), "neither": (False, False)}
    for how, (low_in, high_in) in closed.items():
        unit = Interval(numbers.Real, 0, 1, closed=how)
        assert [unit.accepts(v) for v in (0, 0.5, 1)] == [low_in, True, high_in]
        assert str(unit) == f"a finite number in {'[' if low_in else '('}0, 1{']' if high_in else ')'}"
    real = Interval(numbers.Real, 0, None)
    assert not any(real.accepts(v) for v in (float("nan"), float("inf"), 10**400, True, "1", None, [1], -1e-300))
    assert real.accepts(np.float32(2.5)) and real.accepts(3)
    count = Interval(numbers.Integral, 1, None)
    assert count.accepts(np.int64(4)) and not any(count.accepts(v) for v in (0, 2.0, True, np.bool_(True)))
    assert str(count) == "an integer >= 1"
    assert Options("a", "b").accepts("a") and not Options("a", "b").accepts(np.array(["a", "b"]))
    assert Boolean().accepts(np.bool_(False)) and not Boolean().accepts(1)
    assert IntSequence(1).accepts(()) and IntSequence(1).accepts([4, 2]) and not IntSequence(1).accepts("12")


def test_a_hasher_with_the_old_hand_written_check_still_runs_it_with_a_deprecation_warning():
    """A subclass written for ``_check_params`` (outside dmh) keeps its check, warned to declare
    ``_parameter_constraints``; one that declares nothing has nothing checked."""
    from dmh.base import BaseHasher
    from dmh.errors import ParameterError

    class Old(BaseHasher):
        def __init__(self, n_bits=8, alpha=1.0):
            self.n_bits, self.alpha = n_bits, alpha

        def _check_params(self):
            if not self.alpha < self.n_bits_:
                raise ParameterError(f"alpha must be below n_bits, got {self.alpha}")

    with pytest.warns(DeprecationWarning, match="_parameter_constraints"):
        Old(alpha=2.0).check_hyperparameters()
    with pytest.warns(DeprecationWarning), pytest.raises(ParameterError, match="alpha must be below n_bits"):
        Old(alpha=9.0).check_hyperparameters()
