"""dmh.testing.check_hasher: every registered method passes it, and it fails the methods that break
the contract (each check can fail)."""

from __future__ import annotations

import numpy as np
import pytest

from dmh import BaseHasher
from dmh.registry import method_names
from dmh.testing import CHECKS, check_hasher, parametrize_with_checks


@pytest.mark.parametrize("name", method_names())
def test_every_registered_method_passes_check_hasher(name):
    check_hasher(name)


class _Mean(BaseHasher):
    """A valid minimal hasher: the sign of each feature minus its mean, first n_bits features."""

    def __init__(self, n_bits=8, *, scale=1.0, random_state=None):
        self.n_bits = n_bits
        self.scale = scale
        self.random_state = random_state

    def _check_params(self):
        from dmh.errors import ParameterError

        if not isinstance(self.scale, float) or self.scale <= 0:
            raise ParameterError(f"scale must be a positive float, got {self.scale!r}")

    def _fit(self, data):
        self.means_ = {m: data.view(m).mean(0) for m in ("image", "text")}  # the observed rows

    def _project(self, X, modality):
        return (X - self.means_[modality])[:, : self.n_bits_] * self.scale

    def _get_state(self):
        return {f"{m}_mean": v for m, v in self.means_.items()}

    def _set_state(self, state):
        self.means_ = {m: state[f"{m}_mean"] for m in ("image", "text")}


class _Noisy(_Mean):
    def _project(self, X, modality):  # a different draw at every call
        return super()._project(X, modality) + np.random.default_rng().normal(size=(len(X), self.n_bits_))


class _Changes(_Mean):
    def __init__(self, n_bits=8, *, scale=1.0, random_state=None):
        super().__init__(n_bits, scale=float(scale) * 2, random_state=random_state)


class _Forgets(_Mean):
    def _set_state(self, state):
        self.means_ = {m: np.zeros_like(state[f"{m}_mean"]) for m in ("image", "text")}


class _Float32Fails(_Mean):
    def _fit(self, data):
        if data.image.dtype == np.float32:
            raise TypeError("float64 only")
        super()._fit(data)


def test_a_minimal_valid_hasher_passes():
    check_hasher(_Mean(), bad_params=[{"scale": -1.0}, {"scale": "a"}])


class _AcceptsAnything(_Mean):
    def _check_params(self):
        pass


@pytest.mark.parametrize(
    ("hasher", "check", "bad_params", "message"),
    [
        (_Noisy(), "same_seed_same_codes", (), "two fits with random_state=0 give different image codes"),
        (_Changes(), "init_stores_params", (), "__init__ changed 'scale'"),
        (_Forgets(), "save_load", (), "the loaded model's image codes differ"),
        (_Float32Fails(), "float32_input", (), "TypeError: float64 only"),
        (_AcceptsAnything(), "bad_parameters", [{"scale": 2.0}], r"\{'scale': 2.0\}: fit raised DataTypeError"),
    ],
)
def test_each_check_fails_a_hasher_that_breaks_it(hasher, check, bad_params, message):
    with pytest.raises(AssertionError, match=rf"^check_hasher\({type(hasher).__name__}\): {check}: {message}"):
        check_hasher(hasher, checks=[check], bad_params=bad_params)


def test_unknown_check_names_are_refused():
    from dmh.errors import ParameterError

    with pytest.raises(ParameterError, match="unknown check"):
        check_hasher(_Mean(), checks=["nope"])
    assert list(CHECKS)[0] == "init_stores_params"


@parametrize_with_checks([_Mean(), "cca-itq"])
def test_parametrize_with_checks_makes_one_test_per_method_and_check(estimator, check):
    check(estimator)


def test_parametrize_with_checks_pairs_each_estimator_with_each_check_and_its_check_can_fail():
    mark = parametrize_with_checks([_Mean(), _Noisy()], checks=["save_load", "same_seed_same_codes"]).mark
    assert mark.args[0] == ("estimator", "check")
    assert mark.kwargs["ids"] == ["_Mean-save_load", "_Mean-same_seed_same_codes",
                                  "_Noisy-save_load", "_Noisy-same_seed_same_codes"]
    (mean, save), _, (noisy, _), (noisy2, seed) = mark.args[1]
    assert isinstance(mean, _Mean) and noisy is noisy2
    save(mean)
    with pytest.raises(AssertionError, match=r"^check_hasher\(_Noisy\): same_seed_same_codes: "):
        seed(noisy)


def test_parametrize_with_checks_refuses_unknown_checks_and_a_single_estimator():
    from dmh.errors import ParameterError

    with pytest.raises(ParameterError, match="unknown check"):
        parametrize_with_checks([_Mean()], checks=["nope"])
    with pytest.raises(ParameterError, match="estimators must be a list"):
        parametrize_with_checks(_Mean())
