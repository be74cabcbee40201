"""Checks every deep peer must pass, on a small seeded problem (kept to a few seconds per method)."""

from __future__ import annotations

import numpy as np
import pytest

from dmh import CrossModalData, load_model
from dmh.registry import make_method


def toy(n=64, seed=0, positive=True):
    """Two noisy views of 4 clusters, fully paired; non-negative features like CNN activations."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(4), n // 4)
    ci = rng.normal(size=(4, 12)) * 3
    ct = rng.normal(size=(4, 9)) * 3
    image = ci[y] + rng.normal(size=(n, 12))
    text = ct[y] + rng.normal(size=(n, 9))
    if positive:
        image, text = np.abs(image), np.abs(text)
    return CrossModalData(image=image, text=text, labels=y)


def fit(name, data, n_bits=8, seed=0, **params):
    return make_method(name, n_bits=n_bits, random_state=seed, **params).fit(data)


def check_codes(name, params, data=None):
    data = toy() if data is None else data
    model = fit(name, data, **params)
    for m in ("image", "text"):
        codes = model.encode(data.view(m), modality=m)
        assert codes.shape == (data.n_objects, 8)
        assert codes.dtype == np.int8
        assert set(np.unique(codes)) <= {-1, 1}
        assert len(np.unique(codes, axis=0)) > 1  # not collapsed to one code
    return model


def check_same_seed(name, params, data=None):
    data = toy() if data is None else data
    a = fit(name, data, seed=3, **params)
    b = fit(name, data, seed=3, **params)
    c = fit(name, data, seed=4, **params)
    for m in ("image", "text"):
        X = data.view(m)
        np.testing.assert_array_equal(a.encode(X, modality=m), b.encode(X, modality=m))
        np.testing.assert_array_equal(a.project(X, modality=m), b.project(X, modality=m))
    assert not np.array_equal(a.project(data.image, modality="image"), c.project(data.image, modality="image"))


def check_save_load(name, params, tmp_path, data=None):
    data = toy() if data is None else data
    model = fit(name, data, **params)
    path = model.save(tmp_path / f"{name}.npz")
    with np.load(path, allow_pickle=False) as z:  # no pickled objects in the file
        assert len(z.files) > 0
    loaded = load_model(path)
    assert type(loaded) is type(model)
    for m in ("image", "text"):
        X = data.view(m)
        np.testing.assert_array_equal(loaded.encode(X, modality=m), model.encode(X, modality=m))
        np.testing.assert_allclose(loaded.project(X, modality=m), model.project(X, modality=m), rtol=1e-6)
    return model, loaded


def check_bad_input(name, params):
    data = toy()
    no_text = CrossModalData(image=data.image, text=data.text, text_mask=np.zeros(data.n_objects, bool))
    with pytest.raises(ValueError, match="needs both modalities.*no text"):
        fit(name, no_text, **params)
    one_pair = CrossModalData(image=data.image[:3], text=data.text[:3],
                              image_mask=np.array([True, True, False]), text_mask=np.array([True, False, True]))
    with pytest.raises(ValueError, match="at least 2 paired objects"):
        fit(name, one_pair, **params)
    with pytest.raises(TypeError, match="CrossModalData"):
        make_method(name, n_bits=8).fit(data.image)
    with pytest.raises(ValueError, match="device"):
        fit(name, data, device="tpu", **params)
    model = fit(name, data, **params)
    with pytest.raises(ValueError):
        model.encode(data.image[:, :5], modality="image")
