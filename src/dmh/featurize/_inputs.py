"""The inputs of featurizing: a CSV/TSV file of texts and a folder of images named by id."""

from __future__ import annotations

import csv
from pathlib import Path

from .._featurizers.extras import _pil
from ..errors import DataError, DataFileError, ParameterError


def _delimiter(path: Path, sample: str) -> str:
    suffix = path.suffix.lower()
    if suffix in (".tsv", ".tab"):
        return "\t"
    if suffix == ".csv":
        return ","
    try:
        return csv.Sniffer().sniff(sample, delimiters=",\t;|").delimiter
    except csv.Error:
        return ","


def read_texts(
    path,
    *,
    id_column: str = "id",
    text_column: str = "text",
    labels_column: str | None = None,
    label_separator: str = ";",
) -> dict[str, tuple[str, list[str] | None]]:
    """Read a CSV/TSV file (header row; ``.tsv``/``.tab`` tab-separated, ``.csv`` comma-separated,
    other names sniffed) into ``{id: (text, label names or None)}`` in file order.

    An empty text cell means the object has no text. Labels are names separated by
    ``label_separator`` (e.g. ``"sky;sea"``). Raises ``ValueError`` on a missing column, an empty
    or repeated id.
    """
    path = Path(path)
    if labels_column is not None and not label_separator:
        raise ParameterError("label_separator must not be empty")
    try:
        return _read_texts(path, id_column, text_column, labels_column, label_separator)
    except UnicodeDecodeError as exc:
        raise DataFileError(path, f"is not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    except csv.Error as exc:
        raise DataFileError(path, f"is not a readable CSV/TSV file ({exc})") from None


def _read_texts(path, id_column, text_column, labels_column, label_separator):
    with open(path, encoding="utf-8-sig", newline="") as fh:
        sample = fh.read(8192)
        fh.seek(0)
        reader = csv.DictReader(fh, delimiter=_delimiter(path, sample))
        columns = reader.fieldnames or []
        wanted = [id_column, text_column] + ([labels_column] if labels_column else [])
        missing = [c for c in wanted if c not in columns]
        if missing:
            raise DataFileError(path, f"lacks the column(s) {missing}; its header has {columns}")
        out: dict[str, tuple[str, list[str] | None]] = {}
        for line, row in enumerate(reader, start=2):
            oid = (row.get(id_column) or "").strip()
            if not oid:
                raise DataFileError(path, f"line {line}: empty {id_column!r}")
            if oid in out:
                raise DataFileError(path, f"line {line}: id {oid!r} appears twice")
            labels = None
            if labels_column:
                cell = row.get(labels_column) or ""
                labels = [s.strip() for s in cell.split(label_separator) if s.strip()]
            out[oid] = ((row.get(text_column) or "").strip(), labels)
    return out


def _readable_extensions() -> set[str]:
    Image = _pil()
    Image.init()
    return {ext for ext, fmt in Image.registered_extensions().items() if fmt in Image.OPEN}


def find_images(folder, ids=()) -> tuple[dict[str, Path], list[Path]]:
    """Image files of a folder (not recursive) by id (the file name without its extension).

    A file is taken when its id is in ``ids`` or its extension is one Pillow reads; other files are
    returned as ignored. Raises ``ValueError`` when two files share an id.
    """
    folder = Path(folder)
    if not folder.is_dir():
        raise NotADirectoryError(f"image folder not found: {folder}")
    ids = set(ids)
    extensions = _readable_extensions()
    found: dict[str, list[Path]] = {}
    ignored = []
    for path in sorted(folder.iterdir()):
        if path.name.startswith(".") or not path.is_file():
            continue
        if path.stem in ids or path.suffix.lower() in extensions:
            found.setdefault(path.stem, []).append(path)
        else:
            ignored.append(path)
    clashes = {k: v for k, v in found.items() if len(v) > 1}
    if clashes:
        shown = "; ".join(
            f"{k}: {', '.join(p.name for p in v)}" for k, v in list(clashes.items())[:5]
        )
        raise DataError(
            f"{len(clashes)} id(s) have several image files in {folder} ({shown}); keep one per id"
        )
    return {k: v[0] for k, v in found.items()}, ignored
