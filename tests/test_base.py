"""The interface every method shares: sign, saving and loading any method through the registry."""

import numpy as np
import pytest

from dmh import BaseHasher, load_model, sign_codes
from dmh.baselines.cvh import CVH
from dmh.baselines.imh import IMH
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
