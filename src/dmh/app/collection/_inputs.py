"""The inputs of a collection: a photos folder and a captions file (format in
:mod:`dmh.app.collection`), turned into items."""

from __future__ import annotations

import csv
import io
from pathlib import Path

from ...errors import CollectionError


def read_captions(path) -> list[tuple[str | None, str | None, int]]:
    """Rows of a captions file as ``(image name or None, caption or None, line number)``.

    See the module docstring for the format. Raises :class:`CollectionError` (one line naming
    the file and line) on a missing column, a row with neither image nor caption, or a photo
    named twice.
    """
    path = Path(path)
    if not path.is_file():
        raise CollectionError(f"captions file not found: {path}")
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CollectionError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if "\x00" in raw:
        line = raw[: raw.index("\x00")].count("\n") + 1
        raise CollectionError(f"{path}, line {line}: holds a NUL byte (is it a text file?)")
    delimiter = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    reader = csv.DictReader(io.StringIO(raw, newline=""), delimiter=delimiter)
    columns = [c.strip() for c in (reader.fieldnames or [])]
    missing = [c for c in ("image", "caption") if c not in columns]
    if missing:
        raise CollectionError(
            f"{path} lacks the column(s) {missing}: the header must name 'image' and 'caption' "
            f"(found {columns})"
        )
    reader.fieldnames = columns
    rows, seen = [], {}
    try:
        for row in reader:
            line = reader.line_num
            image = (row.get("image") or "").strip() or None
            caption = " ".join((row.get("caption") or "").split()) or None
            if image is None and caption is None:
                raise CollectionError(f"{path}, line {line}: both 'image' and 'caption' are empty")
            if image is not None:
                if image in seen:
                    raise CollectionError(
                        f"{path}, line {line}: image {image!r} was already given on line {seen[image]} "
                        "(one row per photo)"
                    )
                seen[image] = line
            rows.append((image, caption, line))
    except csv.Error as exc:
        if "field larger than field limit" in str(exc):
            raise CollectionError(f"{path}, line {reader.line_num + 1}: a field is longer than "
                                  f"{csv.field_size_limit():,} characters (is it a captions file?)") from None
        raise CollectionError(f"{path}, line {reader.line_num}: {exc}") from None
    return rows


def _find_photos(folder) -> dict[str, Path]:
    from ...featurize import find_images

    folder = Path(folder)
    if not folder.is_dir():
        raise CollectionError(f"photos folder not found: {folder}")
    try:
        files, _ = find_images(folder)
    except ValueError as exc:
        raise CollectionError(str(exc)) from None
    return {k: p.resolve() for k, p in files.items()}


def scan_inputs(photos, captions, known_images=frozenset()) -> tuple[list[dict], int]:
    """New items from a photos folder and/or captions file (photos in ``known_images`` -- resolved
    path strings -- are skipped); returns ``(items without ids, number skipped)``."""
    files = _find_photos(photos) if photos is not None else {}
    by_name = {p.name: p for p in files.values()}
    rows = read_captions(captions) if captions is not None else []
    items, used, skipped = [], set(), 0
    for image, caption, line in rows:
        path = None
        if image is not None:
            path = by_name.get(image) or files.get(image)
            if path is None:
                where = f"the photos folder {photos}" if photos is not None else "any photos folder (none given)"
                raise CollectionError(f"{captions}, line {line}: image {image!r} is not in {where}")
            used.add(path)
            if str(path) in known_images:
                skipped += 1
                continue
        items.append({"name": path.stem if path else f"caption-{line}", "image": str(path) if path else None,
                      "caption": caption})
    for stem in sorted(files):
        path = files[stem]
        if path in used:
            continue
        if str(path) in known_images:
            skipped += 1
            continue
        items.append({"name": stem, "image": str(path), "caption": None})
    return items, skipped
