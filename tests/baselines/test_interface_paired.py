"""LSSH, STMH and FSH beyond the checks every method passes (tests/test_testing.py): objectives,
paired objects only, errors and persistence of the objective. Retrieval above chance on real data:
tests/test_above_chance.py."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.exceptions import ConvergenceWarning

import dmh

from .paired_toys import CLASSES, FAST, METHODS, N_BITS, _fit, _toy


# ---------------------------------------------------------------------- shared behaviour
@pytest.mark.parametrize("name", METHODS)
def test_objective_never_increases(fitted, name):
    obj = np.asarray(fitted[name].objective_)
    assert obj.size >= 2 and np.all(np.isfinite(obj))
    assert np.all(np.diff(obj) <= 1e-9 * np.abs(obj[:-1])), obj
    assert fitted[name].n_iter_ >= 1


@pytest.mark.parametrize("name", METHODS)
def test_trains_on_paired_objects_only(name):
    """Semi-paired data give the same model as their paired part alone (unpaired rows ignored)."""
    n = 110
    image_mask = np.ones(n, bool)
    text_mask = np.ones(n, bool)
    image_mask[90:100] = False
    text_mask[100:] = False
    semi = _toy(n=n, image_mask=image_mask, text_mask=text_mask)
    paired = semi.subset(np.flatnonzero(semi.paired_mask))
    assert CLASSES[name].uses_unpaired is False
    a, b = _fit(name, semi), _fit(name, paired)
    X = _toy(seed=3, n=20)
    for modality in ("image", "text"):
        M = getattr(X, modality)
        np.testing.assert_array_equal(a.encode(M, modality), b.encode(M, modality))


@pytest.mark.parametrize("name", METHODS)
def test_too_few_pairs_is_an_error(name):
    n = 40
    image_mask = np.ones(n, bool)
    text_mask = np.zeros(n, bool)
    text_mask[:5] = True  # 5 pairs: fewer than the 8 bits (and than FSH's 12 anchors)
    data = _toy(n=n, image_mask=image_mask, text_mask=text_mask)
    with pytest.raises(ValueError, match="paired objects only and needs at least"):
        CLASSES[name](N_BITS, **FAST[name]).fit(data)


@pytest.mark.parametrize("name", METHODS)
def test_save_load_round_trip(fitted, name, tmp_path):
    model = fitted[name]
    path = model.save(tmp_path / f"{name}.npz")
    loaded = dmh.load_model(path)
    assert type(loaded) is type(model)
    assert loaded.get_params() == model.get_params()
    data = _toy(seed=4, n=30)
    for modality in ("image", "text"):
        X = getattr(data, modality)
        np.testing.assert_array_equal(loaded.encode(X, modality), model.encode(X, modality))
        np.testing.assert_allclose(loaded.project(X, modality), model.project(X, modality))
    assert loaded.objective_ == pytest.approx(model.objective_)


@pytest.mark.parametrize("name", METHODS)
def test_max_iter_reached_warns(name):
    params = dict(FAST[name], max_iter=1, tol=0.0, random_state=0)
    with pytest.warns(ConvergenceWarning, match="did not converge"):
        model = CLASSES[name](N_BITS, **params).fit(_toy())
    assert model.n_iter_ == 1


@pytest.mark.parametrize("name", METHODS)
def test_bad_hyperparameter_is_a_clear_error(name):
    bad = {"lssh": {"mu": -1.0}, "stmh": {"lambda_": 1.5}, "fsh": {"n_neighbors": 50}}[name]
    with pytest.raises(ValueError, match=next(iter(bad))):
        CLASSES[name](N_BITS, **dict(FAST[name], **bad)).fit(_toy())
