"""The single-precision data path (``CrossModalData(dtype="float32")``): kept in float32 when asked,
float64 by default, read from files (every method fitting on it: dmh.testing's float32_input check)."""

from __future__ import annotations

import numpy as np
import pytest

from dmh import CrossModalData, make_semi_paired
from dmh.errors import ParameterError


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
