"""Synthetic photos with captions: coloured shapes drawn with Pillow, for tests, demos and
benchmarks of collections (``dmh build``). Nothing is downloaded.

``make_shapes(folder, n)`` writes ``n`` images (``shape-0000.png``, ...) of one filled shape (circle,
square, triangle or cross: ``SHAPES``) in one colour on a light background with a
little noise, and ``folder/captions.csv`` (``image,caption``) naming them, e.g.
``a red circle on the left``. With ``caption_ratio < 1`` only some photos get a caption and
``extra_captions`` captions without a photo are added (semi-paired).
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np

from ..errors import ParameterError

__all__ = ["COLOURS", "SHAPES", "draw_shape", "make_shapes"]

COLOURS = {
    "red": (220, 30, 30),
    "green": (30, 170, 60),
    "blue": (40, 70, 220),
    "yellow": (235, 200, 20),
    "purple": (140, 40, 170),
    "orange": (245, 130, 20),
}
SHAPES = ("circle", "square", "triangle", "cross")
PLACES = ("left", "centre", "right")


def _a(word: str) -> str:
    return "an" if word[0] in "aeiou" else "a"


def draw_shape(shape: str, colour: str, place: str = "centre", size: int = 128, rng=None):
    """One PIL image of a ``colour`` ``shape`` at ``place`` (left/centre/right)."""
    from PIL import Image, ImageDraw

    rng = np.random.default_rng(rng)
    bg = tuple(int(v) for v in rng.integers(225, 256, size=3))
    im = Image.new("RGB", (size, size), bg)
    d = ImageDraw.Draw(im)
    r = size * (0.22 + 0.06 * rng.random())
    cx = {"left": 0.3, "centre": 0.5, "right": 0.7}[place] * size + rng.normal(0, size * 0.02)
    cy = size * 0.5 + rng.normal(0, size * 0.04)
    fill = tuple(int(np.clip(c + rng.normal(0, 12), 0, 255)) for c in COLOURS[colour])
    if shape == "circle":
        d.ellipse([cx - r, cy - r, cx + r, cy + r], fill=fill)
    elif shape == "square":
        d.rectangle([cx - r, cy - r, cx + r, cy + r], fill=fill)
    elif shape == "triangle":
        d.polygon([(cx, cy - r), (cx - r, cy + r), (cx + r, cy + r)], fill=fill)
    elif shape == "cross":
        w = r / 3
        d.rectangle([cx - r, cy - w, cx + r, cy + w], fill=fill)
        d.rectangle([cx - w, cy - r, cx + w, cy + r], fill=fill)
    else:
        raise ParameterError(f"shape must be one of {SHAPES}, got {shape!r}")
    arr = np.asarray(im, dtype=np.int16) + rng.integers(-6, 7, size=(size, size, 3))
    return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8))


def make_shapes(folder, n: int = 48, *, caption_ratio: float = 1.0, extra_captions: int = 0,
                size: int = 128, seed: int = 0, image_format: str = "png") -> tuple[Path, Path]:
    """Write ``n`` shape images and ``captions.csv`` into ``folder``; returns ``(folder, csv)``.

    Image ``i`` has shape ``SHAPES[i % 4]``, colour ``list(COLOURS)[(i // 4) % 6]`` and place
    ``PLACES[(i // 24) % 3]``, so every combination appears once in 72 images.
    """
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    colours = list(COLOURS)
    rows = []
    for i in range(n):
        shape, colour, place = SHAPES[i % 4], colours[(i // 4) % 6], PLACES[(i // 24) % 3]
        name = f"shape-{i:04d}.{image_format}"
        draw_shape(shape, colour, place, size=size, rng=rng).save(folder / name)
        where = f"on the {place}" if place != "centre" else "in the centre"
        caption = f"{_a(colour)} {colour} {shape} {where}"
        rows.append((name, caption if rng.random() < caption_ratio else ""))
    for j in range(extra_captions):
        shape, colour = SHAPES[j % 4], colours[(j // 4) % 6]
        rows.append(("", f"{_a(colour)} {colour} {shape} drawn on paper"))
    captions = folder / "captions.csv"
    with open(captions, "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(["image", "caption"])
        w.writerows(rows)
    return folder, captions
