"""A searchable collection: a folder of photos and a file of captions, only some of which belong
together, turned into everything needed to search it by words or by picture.

``build_collection(photos, captions, out)`` writes into the folder ``out``:

=====================  ==========================================================================
file                   content
=====================  ==========================================================================
``build.json``         the build settings and the stages finished (a rerun skips those)
``manifest.json``      the items: ``id`` (0, 1, ...), ``name``, ``image`` (absolute path or null),
                       ``caption`` (or null), and ``error`` for a photo that could not be read; once
                       items were added, also ``generation`` N and ``data``: the folder
                       ``gen-NNNNNN`` that holds the five data files below (else they are here)
``features.npz``       the features (:func:`dmh.io.save_data` layout; ``__ids__`` maps rows to item
                       ids; ``__featurizer__`` holds the featurizer settings)
``model.npz``          the fitted hashing model, with its featurizer (so raw queries can be encoded)
``image_codes.npz``    codes of the items' photos / captions (:func:`dmh.index.save_codes`, ids =
``text_codes.npz``     item ids), with the real values behind them (``values``: unit rows in
                       float16, :mod:`dmh.app.rerank`) that searches re-rank their Hamming candidates by
``images.dmhidx``      Hamming indexes of those codes (:class:`dmh.index.HammingIndex`), or with
``texts.dmhidx``       ``store="milvus[:URI]"`` ``store.json``: the codes are searched in two Milvus
                       collections (:class:`dmh.app.store.milvus.MilvusCodeStore`; default URI the
                       milvus-lite file ``codes.db`` in the folder)
``thumbs/ID.jpg``      thumbnails (longest side 256 px), made once
``.dmh-lock``          the writers' lock (an OS file lock; while held it names its holder)
=====================  ==========================================================================

**Captions file** (CSV, header row; ``.tsv``/``.tab`` tab-separated): columns ``image`` and
``caption``. ``image`` names a file of the photos folder (``beach.jpg``, or its stem ``beach``);
an empty ``image`` makes a caption without a photo; an empty ``caption`` (or a photo the file does
not list) makes a photo without a caption. So any mix of paired, photo-only and caption-only items
is allowed (semi-paired data, the premise of DMH). A photo may appear on one row only.

Stages: ``scan`` (manifest) -> ``features`` (image features saved every 512 photos, so an
interrupted run resumes mid-way) -> ``fit`` -> ``codes`` (codes and indexes) -> ``thumbs``.
``add_to_collection`` featurizes, encodes and indexes only new items, with the stored featurizer
and model (the model is not refitted; the bag-of-words vocabulary stays that of the build). It
writes the new state's data files into a new ``gen-NNNNNN`` folder and switches to it by replacing
the manifest atomically: a reader sees the old state or the new one, and an add killed at any
moment leaves the old one (its rerun resumes the image features). One writer at a time: a build
or an add holds the collection's lock; another waits (``wait`` seconds) or is refused, naming it.
:meth:`Collection.changed` / :meth:`Collection.reload` let a long-lived reader (``dmh serve``)
follow the switches. ``remove_from_collection`` (by item id or photo path) and ``set_captions``
write and switch the same way, under the same lock (:mod:`dmh.app.collection._remove`: what a removal
keeps and deletes); ids are never reused.

``ray=RayOptions(...)`` (:mod:`dmh.app.distributed`) runs the image features and the hash codes of
``build_collection`` / ``add_to_collection`` as Ray Data stages (a local runtime or a cluster);
the results are those of the single-process path.

:func:`collection_features` reads a built collection's stored features back as
:class:`dmh.CrossModalData` (to fit or compare methods on them); ``auto`` holds out
:data:`AUTO_HOLDOUT` of the pairs to choose its method.
"""

from __future__ import annotations

from ...errors import CollectionError
from ._add import add_to_collection
from ._auto import HOLDOUT as AUTO_HOLDOUT
from ._build import build_collection
from ._features import image_features_chunked  # noqa: F401  (used by the tests)
from ._files import COLLECTION_FORMAT_VERSION, STAGES, TARGETS, is_collection, load_features  # noqa: F401
from ._inputs import read_captions
from ._remove import remove_from_collection, set_captions
from ._search import Collection, Hit, TextQuery, manifest_signature

__all__ = [
    "AUTO_HOLDOUT",
    "COLLECTION_FORMAT_VERSION",
    "Collection",
    "CollectionError",
    "Hit",
    "TextQuery",
    "add_to_collection",
    "build_collection",
    "collection_features",
    "is_collection",
    "manifest_signature",
    "read_captions",
    "remove_from_collection",
    "set_captions",
]


def collection_features(collection):
    """The stored features of a built collection's current items: ``(data, ids)``, a
    :class:`dmh.CrossModalData` (an item without a photo or a caption is unobserved in that
    modality) and the item id of each row. Raises :class:`CollectionError` when ``collection`` is
    not a collection folder."""
    from pathlib import Path

    from ._files import read_current

    if not is_collection(collection):
        raise CollectionError(f"{collection} is not a collection (no manifest.json)")
    _, paths, _ = read_current(Path(collection))
    data, _, ids = load_features(paths.features)
    return data, ids
