"""Thumbnails of a collection's photos (``thumbs/ID.jpg``)."""

from __future__ import annotations

import warnings
from pathlib import Path

from ..._atomic import atomic_path

THUMB_SIZE = 256


def write_thumbnail(src: str, dest: Path) -> None:
    from PIL import Image, ImageOps

    with Image.open(src) as im:
        im = ImageOps.exif_transpose(im)
        im = im.convert("RGB")
        im.thumbnail((THUMB_SIZE, THUMB_SIZE), Image.Resampling.LANCZOS)
        with atomic_path(dest) as tmp:
            im.save(tmp, format="JPEG", quality=85)


def make_thumbnails(folder: Path, items, progress: bool) -> None:
    from tqdm.auto import tqdm

    folder.mkdir(exist_ok=True)
    todo = [it for it in items if it["image"] and not it.get("error") and not (folder / f"{it['id']}.jpg").is_file()]
    for it in tqdm(todo, unit="img", desc="thumbnails", disable=not progress):
        try:
            write_thumbnail(it["image"], folder / f"{it['id']}.jpg")
        except Exception as exc:  # a photo that vanished or broke since: no thumbnail, not fatal
            warnings.warn(f"no thumbnail for {it['image']}: {type(exc).__name__}: {exc}", UserWarning, stacklevel=2)
