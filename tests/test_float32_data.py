"""The single-precision data path (``CrossModalData(dtype="float32")``): kept in float32 when asked,
float64 by default, and every method fits, encodes and evaluates on it."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from dmh import CrossModalData, make_semi_paired
from dmh.errors import ParameterError
from dmh.evaluation import evaluate_model
from dmh.registry import make_method, method_names


def _toy(n=64, seed=0, dtype=np.float32):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(4), n // 4)
    image = np.abs(rng.normal(size=(4, 12))[y] * 3 + rng.normal(size=(n, 12))).astype(dtype)
    text = (rng.random((n, 9)) < 0.2 + 0.5 * (rng.random((4, 9)) < 0.3)[y]).astype(dtype)  # binary tags
    idx = rng.permutation(n)
    return image, text, y, np.sort(idx[: n // 4]), np.sort(idx[n // 4 :])


def test_float32_kept_when_asked_float64_by_default():
    image, text, y, q, db = _toy()
    default = CrossModalData(image=image, text=text, labels=y)
    assert default.dtype == "float64" and default.image.dtype == default.text.dtype == np.float64
    single = CrossModalData(image=image, text=text, labels=y, dtype="float32", query_idx=q, database_idx=db,
                            train_idx=db)
    assert single.dtype == "float32" and single.image.dtype == single.text.dtype == np.float32
    assert np.shares_memory(single.image, image)  # float32 inputs are not copied
    assert CrossModalData(image=image.astype(np.float64), text=text, dtype=np.float32).image.dtype == np.float32
    for part in (single.train(), single.query(), single.subset([0, 3]), make_semi_paired(single, 0.5, 0)):
        assert part.dtype == "float32" and part.image.dtype == part.text.dtype == np.float32
    back = single.astype("float64")
    assert back.dtype == "float64" and np.array_equal(back.image, image) and single.astype("float32") is single
    masked = CrossModalData(image=image, text=text, dtype="float32", text_mask=np.arange(64) % 3 > 0)
    assert masked.text.dtype == np.float32 and not masked.text[::3].any()  # missing rows zeroed, not upcast


@pytest.mark.parametrize("bad", ["float16", "double precision", 32, None, True, np.int64])
def test_bad_dtype_is_one_line_naming_it(bad):
    image, text, *_ = _toy()
    with pytest.raises(ParameterError, match=r"^dtype must be one of \('float64', 'float32'\), got ") as err:
        CrossModalData(image=image, text=text, dtype=bad)
    assert "\n" not in str(err.value)
    with pytest.raises(ParameterError, match="^dtype must be one of"):
        CrossModalData(image=image, text=text).astype(bad)


def test_non_finite_rows_are_found_by_blocks(monkeypatch):
    from dmh import _validation

    image, text, *_ = _toy()
    image[[5, 40]] = np.nan
    image[7, 0] = np.inf
    real = _validation._non_finite_rows
    monkeypatch.setattr(_validation, "_non_finite_rows", lambda a, r, step=8192: real(a, r, step=16))
    message = r"image contains NaN or infinite values in 3 row\(s\) \(first: \[5, 7, 40\]\)"
    with pytest.raises(ValueError, match=message):
        CrossModalData(image=image, text=text, dtype="float32")
    mask = np.ones(64, bool)
    mask[[5, 7, 40]] = False  # those rows are missing images: never read, so not an error
    assert CrossModalData(image=image, text=text, image_mask=mask, dtype="float32").image[5].sum() == 0


# small settings: a few seconds for all of them together
FAST = {
    "dmh": dict(d=8, hidden_size=32, n_rounds=2, dam_epochs=3, cle_max_iter=5, gbe_max_iter=30),
    "lssh": dict(n_atoms=24, max_iter=6, lasso_max_iter=20), "stmh": dict(max_iter=15),
    "fsh": dict(n_anchors=12, n_neighbors=4, max_iter=30), "spdh": dict(n_anchors=30, n_nearest=3, max_iter=8),
    "djsrh": dict(epochs=4, image_hidden=(16,), text_hidden=(16,), batch_size=16),
    "dgcpn": dict(epochs=4, image_hidden=(16,), text_hidden=(16,), batch_size=16),
    "jdsh": dict(epochs=4, image_hidden=(16,), text_hidden=(16,), batch_size=16, n_fit_batches=5),
    "ucch": dict(epochs=4, image_hidden=(16,), text_hidden=(16,), batch_size=16, n_negatives=32),
    "sadch": dict(outer_iter=2, inner_epochs=2, image_hidden=(16,), text_hidden=(16,), batch_size=16, n_neighbours=4),
}


@pytest.mark.parametrize("name", method_names())
def test_every_method_fits_encodes_and_evaluates_float32_data(name):
    image, text, y, q, db = _toy()
    data = CrossModalData(image=image, text=text, labels=y, train_idx=db, query_idx=q, database_idx=db,
                          dtype="float32")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and degenerate-code warnings of tiny fits
        model = make_method(name, n_bits=8, random_state=0, **FAST.get(name, {})).fit(data.train())
    for m in ("image", "text"):
        codes = model.encode(getattr(data, m), m)
        assert codes.shape == (64, 8) and codes.dtype == np.int8 and np.isin(codes, (-1, 1)).all()
    scores = evaluate_model(model, data.query(), data.database())
    assert all(np.isfinite(s["map"]) for s in scores.values())


def test_loaders_keep_float32_when_asked(tmp_path):
    from dmh import load_dataset
    from dmh.io import save_data

    builtin = load_dataset("uci-digits")
    assert builtin.dtype == "float64" and builtin.image.dtype == np.float64  # the default path, unchanged
    single = load_dataset("uci-digits", dtype="float32")
    assert single.image.dtype == single.text.dtype == np.float32
    assert np.array_equal(single.image, builtin.image.astype(np.float32))
    assert np.array_equal(single.query_idx, builtin.query_idx)
    image, text, y, *_ = _toy()
    path = save_data(CrossModalData(image=image, text=text, labels=y), tmp_path / "toy.npz")
    assert load_dataset(path).image.dtype == np.float64
    loaded = load_dataset(path, dtype="float32")
    assert loaded.image.dtype == np.float32 and np.array_equal(loaded.image, image)
    with pytest.raises(ParameterError, match="^dtype must be one of"):
        load_dataset("uci-digits", dtype="half")
