"""Image features: EfficientNet-Lite0 and its preprocessing (Pillow and numpy).

The network runs on ONNX Runtime when it is installed (the ``onnx`` extra; the network is exported
once from the installed PyTorch weights into a cache, :mod:`dmh._featurizers.onnx_runtime`), else
on PyTorch, which is said once per process. Both give the same features up to float32 rounding.

Photos are read by a pool of threads that runs ahead of the network, so decoding overlaps with
inference; a JPEG much larger than the network's input is decoded at a reduced scale (libjpeg's
DCT scaling), never below twice the 256 pixels of the shorter side that the resize then makes.
"""

from __future__ import annotations

import collections
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from .._threads import resolve_threads
from ..errors import DataError, ParameterError
from .efficientnet import torch_model, weights_file
from .extras import MissingExtraError, _pil

IMAGE_SIZE = 224
RESIZE_TO = 256  # shorter side before the centre crop: crop fraction 224/256 = 0.875
PIXEL_MEAN, PIXEL_STD = 127.0, 128.0  # EfficientNet-Lite's preprocessing (pixels in 0..255)
#: a large JPEG is decoded at a reduced scale, both sides kept at least this (2 x RESIZE_TO)
DECODE_AT_LEAST = 2 * RESIZE_TO
RUNTIMES = ("auto", "onnxruntime", "torch")


class ImageRuntimeWarning(UserWarning):
    """Image features run on PyTorch because ONNX Runtime cannot be used here (said once)."""


def preprocess_image(image) -> np.ndarray:
    """A PIL image -> float32 array (3, 224, 224): RGB, shorter side resized to 256 (bicubic),
    centre crop 224, pixels scaled to [-1, 1] as ``(x - 127) / 128``. The image is not changed."""
    return _preprocess(image, own=False)


def _preprocess(image, own: bool) -> np.ndarray:
    """:func:`preprocess_image`; ``own``: the image may be changed in place (a file just read)."""
    Image = _pil()
    from PIL import ImageOps

    if own:
        ImageOps.exif_transpose(image, in_place=True)
    else:
        image = ImageOps.exif_transpose(image)
    if image.mode != "RGB":
        image = (
            image.convert("RGBA").convert("RGB")
            if "transparency" in image.info
            else image.convert("RGB")
        )
    w, h = image.size
    scale = RESIZE_TO / min(w, h)
    nw, nh = max(IMAGE_SIZE, round(w * scale)), max(IMAGE_SIZE, round(h * scale))
    left, top = (nw - IMAGE_SIZE) // 2, (nh - IMAGE_SIZE) // 2
    # the centre crop of the image resized to (nw, nh), computed for the crop's pixels only
    sx, sy = w / nw, h / nh
    box = (left * sx, top * sy, (left + IMAGE_SIZE) * sx, (top + IMAGE_SIZE) * sy)
    image = image.resize((IMAGE_SIZE, IMAGE_SIZE), Image.Resampling.BICUBIC, box=box)
    out = np.empty((3, IMAGE_SIZE, IMAGE_SIZE), dtype=np.float32)
    np.subtract(np.asarray(image).transpose(2, 0, 1), PIXEL_MEAN, out=out, dtype=np.float32)
    out /= PIXEL_STD
    return out


def load_image(path) -> np.ndarray:
    """An image file -> the (3, 224, 224) array of :func:`preprocess_image`. A JPEG whose both
    sides are at least 1024 pixels is decoded at 1/2, 1/4 or 1/8 of its size (libjpeg's DCT
    scaling) while both sides stay at least :data:`DECODE_AT_LEAST` = 512, twice the 256 of the
    resize that follows: several times faster for camera photos, and the features stay within
    float tolerance of a full decode (a reduction to nearer 256 moved them further:
    docs/featurize.md)."""
    Image = _pil()
    with Image.open(path) as im:
        im.draft(im.mode, (DECODE_AT_LEAST, DECODE_AT_LEAST))  # a no-op for formats other than JPEG
        im.load()
        return _preprocess(im, own=True)


_load_image = load_image  # the name dmh.app.distributed imports


# ---------------------------------------------------------------------------------------- encoder
_FALLBACK_SAID = False


def _say_fallback(reason: str) -> None:
    global _FALLBACK_SAID
    if not _FALLBACK_SAID:
        _FALLBACK_SAID = True
        warnings.warn(
            f"image features run on PyTorch, several times slower than on ONNX Runtime: {reason}",
            ImageRuntimeWarning,
            stacklevel=4,
        )


class EfficientNetLite0Encoder:
    """EfficientNet-Lite0 with its bundled ImageNet weights (no download), as an image encoder:
    called on a float32 batch (b, 3, 224, 224) from :func:`preprocess_image`, it returns the
    (b, 1280) globally average-pooled output of the last convolution.

    Parameters
    ----------
    runtime : {"auto", "onnxruntime", "torch"}
        ``"auto"``: ONNX Runtime when the ``onnx`` extra is installed and the export works, else
        PyTorch (said once per process, as an :class:`ImageRuntimeWarning`). ``"onnxruntime"``
        raises instead of falling back. The runtime in use is in ``runtime_``.
    n_threads : int, optional
        Threads of one call on ONNX Runtime (batches split into chunks of a few photos, one per
        thread); default: the dmh thread setting (:func:`dmh.set_threads`). PyTorch uses its own
        thread setting.
    cache_dir : path, optional
        Where the exported ONNX network is kept (default: ``$DMH_CACHE_DIR``, else
        ``$XDG_CACHE_HOME/dmh``, else ``~/.cache/dmh``).
    """

    name = "efficientnet-lite0"
    n_features = 1280

    def __init__(self, runtime: str = "auto", *, n_threads=None, cache_dir=None):
        if runtime not in RUNTIMES:
            raise ParameterError(f"runtime must be one of {RUNTIMES}, got {runtime!r}")
        self.runtime = runtime
        self.n_threads = n_threads
        self.cache_dir = cache_dir
        weights = weights_file()
        self.session_ = None
        self.model = None
        if runtime != "torch":
            from .onnx_runtime import OnnxExportError, onnx_session

            try:
                self.session_ = onnx_session(weights, cache_dir=cache_dir)
            except (MissingExtraError, OnnxExportError) as exc:
                if runtime == "onnxruntime":
                    raise
                _say_fallback(str(exc))
        if self.session_ is None:
            import torch

            self.model = torch_model(weights).to(memory_format=torch.channels_last)
        self.runtime_ = "onnxruntime" if self.session_ is not None else "torch"

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        x = np.ascontiguousarray(batch, dtype=np.float32)
        if x.ndim != 4 or x.shape[1:] != (3, IMAGE_SIZE, IMAGE_SIZE):
            raise DataError(
                f"the image batch must have shape (b, 3, {IMAGE_SIZE}, {IMAGE_SIZE}), got {x.shape}"
            )
        if self.session_ is not None:
            from .onnx_runtime import run_chunked

            return run_chunked(self.session_, x, resolve_threads(self.n_threads))
        import torch

        with torch.inference_mode():
            t = torch.from_numpy(x).contiguous(memory_format=torch.channels_last)
            return self.model.extract_features(t).mean(dim=(2, 3)).numpy().astype(np.float32)


def _encoder_name(encoder) -> str:
    return (
        getattr(encoder, "name", None)
        or getattr(encoder, "__name__", None)
        or type(encoder).__name__
    )


# ---------------------------------------------------------------------------------------- features
def _read(path: Path):
    try:
        return load_image(path), None
    except Exception as exc:  # any decoder error: report and skip, never fatal
        return None, f"{type(exc).__name__}: {exc}"


def _read_ahead(paths: list[Path], batch_size: int, n_threads: int):
    """Yield ``(rows, arrays, failures)`` per batch of ``paths``; with ``n_threads`` > 1 a pool of
    that many threads reads up to two batches ahead (Pillow and numpy release the GIL while
    decoding and resizing), so the encoder's work on one batch overlaps the reading of the next."""
    n = len(paths)
    if n_threads <= 1:
        results = map(_read, paths)
        pool = None
    else:
        pool = ThreadPoolExecutor(n_threads, thread_name_prefix="dmh-images")
        pending: collections.deque = collections.deque()
        ahead = 2 * batch_size

        def _results():
            submitted = 0
            while submitted < n or pending:
                while submitted < n and len(pending) < ahead:
                    pending.append(pool.submit(_read, paths[submitted]))
                    submitted += 1
                yield pending.popleft().result()

        results = _results()
    try:
        for start in range(0, n, batch_size):
            rows, arrays, failures = [], [], []
            for i in range(start, min(start + batch_size, n)):
                arr, reason = next(results)
                if arr is None:
                    failures.append((paths[i], reason))
                else:
                    rows.append(i)
                    arrays.append(arr)
            yield rows, arrays, failures
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def image_features(
    paths, *, encoder=None, batch_size: int = 16, progress: bool = True, n_threads=None
):
    """Features of image files: ``encoder`` (default :class:`EfficientNetLite0Encoder`) applied to
    batches of :func:`load_image` arrays; files are read by ``n_threads`` threads (default: the
    dmh thread setting) ahead of the encoder.

    Returns ``(features, ok, failures)``: ``features`` (n, d) float32 with zero rows where the file
    could not be read, ``ok`` a bool mask of readable files, ``failures`` a list of
    ``(path, reason)``. An unreadable file is never fatal.
    """
    from tqdm.auto import tqdm

    paths = [Path(p) for p in paths]
    encoder = EfficientNetLite0Encoder(n_threads=n_threads) if encoder is None else encoder
    out = None
    ok = np.zeros(len(paths), dtype=bool)
    failures: list[tuple[Path, str]] = []
    with tqdm(total=len(paths), unit="img", desc="image features", disable=None if progress else True) as bar:
        for rows, arrays, fails in _read_ahead(paths, batch_size, resolve_threads(n_threads)):
            failures += fails
            if rows:
                feats = np.asarray(encoder(np.stack(arrays)), dtype=np.float32)
                if out is None:
                    out = np.zeros((len(paths), feats.shape[1]), dtype=np.float32)
                out[rows] = feats
                ok[rows] = True
            bar.update(len(rows) + len(fails))
    if out is None:  # nothing readable
        out = np.zeros((len(paths), getattr(encoder, "n_features", 1)), dtype=np.float32)
    return out, ok, failures


def image_array_features(
    images, *, encoder=None, batch_size: int = 16, progress: bool = True
) -> np.ndarray:
    """Features (default: EfficientNet-Lite0, 1280-d) of raw images held in an array, e.g. the
    ``IAll`` / ``images`` arrays of the MIRFLICKR files: uint8 (n, 3, H, W) or (n, H, W, 3)."""
    from tqdm.auto import tqdm

    Image = _pil()
    images = np.asarray(images)
    if images.ndim != 4 or 3 not in (images.shape[1], images.shape[3]) or images.shape[0] == 0:
        raise DataError(
            f"images must have shape (n, 3, H, W) or (n, H, W, 3) with n >= 1, got {images.shape}"
        )
    channels_first = images.shape[1] == 3 and images.shape[3] != 3
    encoder = EfficientNetLite0Encoder() if encoder is None else encoder
    out = None
    for start in tqdm(range(0, images.shape[0], batch_size), unit="batch", disable=None if progress else True):
        chunk = images[start : start + batch_size]
        if channels_first:
            chunk = chunk.transpose(0, 2, 3, 1)
        arrays = [
            _preprocess(Image.fromarray(np.ascontiguousarray(a).astype(np.uint8)), own=True)
            for a in chunk
        ]
        feats = np.asarray(encoder(np.stack(arrays)), dtype=np.float32)
        if out is None:
            out = np.zeros((images.shape[0], feats.shape[1]), dtype=np.float32)
        out[start : start + len(arrays)] = feats
    return out
