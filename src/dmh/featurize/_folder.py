"""Featurizing a folder of images and a file of texts into semi-paired data, its report, and
writing both."""

from __future__ import annotations

import json
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from .._atomic import atomic_write_text
from .._featurizers.analyzer import UnicodeAnalyzer
from .._featurizers.extras import TEXT_FEATURES, UnreadableImageWarning
from .._featurizers.images import EfficientNetLite0Encoder, _encoder_name, image_features
from .._featurizers.texts import bow_features, sentence_model_features
from ..data import CrossModalData
from ..errors import DataError, DataFileError, ParameterError
from ..featurizer_spec import FEATURIZER_KEY, FeaturizerSpec
from ._inputs import find_images, read_texts


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
    analyzer: dict | None = None  # the bag of words' analyzer settings (UnicodeAnalyzer.settings())
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
    text_features : {"bow", "minilm", "use-multilingual"}
        Binary bag of words (``vocabulary_size`` terms, any script:
        :class:`dmh._featurizers.analyzer.UnicodeAnalyzer`), MiniLM sentence embeddings (English),
        or the multilingual Universal Sentence Encoder's (16 languages).
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
                analyzer = UnicodeAnalyzer.for_texts(observed)
                X, report.vocabulary = bow_features(observed, vocabulary_size=vocabulary_size, analyzer=analyzer)
                report.analyzer = analyzer.settings()
            except DataError as exc:
                raise DataFileError(texts, str(exc)) from None
            report.empty_bow = [
                ids[i] for i, row in zip(np.flatnonzero(text_mask), X, strict=True) if not row.any()
            ]
        else:
            X = sentence_model_features(text_features, observed, progress=progress)
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
    from ..io import save_data

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
