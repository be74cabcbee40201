"""Searching a built collection: :class:`Collection` and its :class:`Hit` results."""

from __future__ import annotations

import io
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ...errors import CollectionError, CollectionFileError, FileFormatError, UnknownItemError
from ..rerank import OVERSAMPLE, cosine_to, rerank_order
from ._codes import open_stores
from ._files import TARGETS, Paths, check_complete, read_build_state, read_current
from ._thumbs import write_thumbnail

MAX_QUERY_PIXELS = 50_000_000


def _index_matches(index, codes, ids) -> bool:
    """True when ``index`` holds exactly ``codes`` under ``ids`` (the code file is the reference)."""
    if index.ntotal != ids.size or not np.array_equal(index.ids, ids):
        return False
    return bool(np.array_equal(index.codes, index._packed(codes, "codes")))


def _signature(path: Path):
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def manifest_signature(path) -> tuple | None:
    """What changes when the collection at ``path`` changes: its manifest is replaced (a new file)
    by every add and rebuild."""
    return _signature(Path(path) / "manifest.json")


@dataclass
class TextQuery:
    """A text query as the collection reads it (:meth:`Collection.read_text`)."""

    text: str
    known_words: list[str]
    unknown_words: list[str]
    vocabulary_size: int | None  # None: the text features read any text (a sentence model)

    @property
    def readable(self) -> bool:
        """False when a bag of words finds none of the query's words in its vocabulary."""
        return self.vocabulary_size is None or bool(self.known_words)

    def note(self) -> str | None:
        """One line for the user: why there is no ranking, or which words were left out."""
        if self.vocabulary_size is None:
            return None
        if not self.known_words and not self.unknown_words:
            return ("no ranking: the query has no word of two or more letters or digits and no CJK or Thai "
                    "character (emoji, punctuation and symbols are not read)")
        if not self.known_words:
            return (f"no ranking: none of the query's words is in the collection's vocabulary of "
                    f"{self.vocabulary_size:,} words from its captions (unknown: {', '.join(self.unknown_words)})")
        if self.unknown_words:
            return (f"not in the collection's vocabulary, so left out: {', '.join(self.unknown_words)} "
                    f"(searched for: {', '.join(self.known_words)})")
        return None


@dataclass
class Hit:
    """One search result: ``distance`` is the Hamming distance of its code; ``score``, when the
    search re-ranked, the cosine between the query's real values and the item's (the order)."""

    id: int
    name: str
    image: str | None
    caption: str | None
    distance: int
    score: float | None = None

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "image": self.image, "caption": self.caption,
                "distance": self.distance, "score": self.score}


class Collection:
    """A built collection opened for search (read-only; see :func:`build_collection`).

    ``search_text``, ``search_image`` and ``similar`` return :class:`Hit` lists, best first (by
    re-ranking score where the collection re-ranks, else nearest first, ties by smaller id), from
    the photos (``target="images"``) or the captions (``"texts"``).

    Re-ranking (:mod:`dmh.app.rerank`): a collection that keeps the real values behind its codes takes
    ``oversample * k`` candidates from the Hamming search and orders them by the cosine between
    the query's values and theirs. ``rerank=None`` follows the collection's build (``build.json``
    ``"rerank"``; on where the build recorded no decision), ``True``/``False`` turn it on or off; a
    collection without stored values (built by an older dmh) always searches by Hamming distance
    alone (:attr:`reranks` says which).
    """

    def __init__(self, path, *, backend: str = "auto", model=None, rerank: bool | None = None,
                 oversample: int = OVERSAMPLE):
        self.path = Path(path)
        if rerank not in (None, True, False):
            raise CollectionError(f"rerank must be None, True or False, got {rerank!r}")
        if isinstance(oversample, bool) or not isinstance(oversample, (int, np.integer)) or oversample < 1:
            raise CollectionError(f"oversample must be a positive integer, got {oversample!r}")
        self._rerank_asked, self.oversample = rerank, int(oversample)
        check_complete(self.path)
        for attempt in range(3):
            self.signature = manifest_signature(self.path)
            try:
                self._open(backend, model)
                break
            except (FileNotFoundError, FileFormatError):
                # the generation read was replaced twice while it was being opened: read the new one
                if attempt == 2 or manifest_signature(self.path) == self.signature:
                    raise

    def _open(self, backend, model):
        from ...base import load_model
        from ...index import HammingIndex, load_codes

        self.items, P, self.generation = read_current(self.path)
        decided = read_build_state(P.build).get("rerank", {})
        wanted = self._rerank_asked if self._rerank_asked is not None else bool(decided.get("on", True))
        self._by_id = {int(it["id"]): it for it in self.items}
        self.model_signature = _signature(P.model)
        if model is None:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # a missing extra is reported when a query needs it
                model = load_model(P.model)
        self.model = model
        if getattr(self.model, "featurizer_", None) is None:
            raise CollectionError(f"{P.model} does not record its featurizer; rebuild the collection")
        self._analyzer = None
        stores = open_stores(P)
        self.indexes, self._codes, self._values = {}, {}, {}
        for target, modality in (("images", "image"), ("texts", "text")):
            codes_path, index_path = getattr(P, f"{modality}_codes"), getattr(P, f"{modality}_index")
            codes, ids, values = load_codes(codes_path, with_values=True)
            if codes.shape[1] != self.n_bits:
                raise CollectionFileError(codes_path, f"holds {codes.shape[1]}-bit codes but the model gives "
                                          f"{self.n_bits} bits (damaged collection)")
            listed = np.isin(ids, np.fromiter(self._by_id, np.int64, len(self._by_id)))
            if values is not None:  # the rows of the values by id (searchsorted), for re-ranking
                order = np.argsort(ids, kind="stable")
                self._values[target] = ids[order], values[order]
            if stores is not None:  # codes kept in Milvus: the store answers, the local codes name the items
                codes, ids, index = codes[listed], ids[listed], stores[target]
                self.indexes[target] = index
                self._codes[target] = dict(zip(ids.tolist(), range(ids.size), strict=True)), codes
                continue
            index = HammingIndex.load(index_path, backend=backend)
            if index.n_bits != self.n_bits:
                raise CollectionFileError(index_path, f"is a {index.n_bits}-bit index but the model gives "
                                          f"{self.n_bits} bits (damaged collection)")
            if not listed.all() or not _index_matches(index, codes, ids):
                # a collection grown by an older dmh, interrupted before its manifest, holds codes of
                # unlisted items; or the index disagrees with the codes: search only what is listed
                codes, ids = codes[listed], ids[listed]
                index = HammingIndex(self.n_bits, backend=backend)
                if ids.size:
                    index.add(codes, ids)
            self.indexes[target] = index
            self._codes[target] = dict(zip(ids.tolist(), range(ids.size), strict=True)), codes
        self.thumbs = P.thumbs
        #: True when searches re-rank their Hamming candidates by the stored real values
        self.reranks = bool(wanted and len(self._values) == len(TARGETS))
        if not self.reranks:
            self._values = {}

    def reload(self) -> Collection:
        """The collection as it is now on disk (a new object; this one is left as it was). The
        model is shared when its file has not changed."""
        same = _signature(Paths(self.path).model) == self.model_signature
        return Collection(self.path, backend=self._backend_name(), model=self.model if same else None,
                          rerank=self._rerank_asked, oversample=self.oversample)

    def changed(self) -> bool:
        """True when the collection on disk is no longer the state this object holds (an add or a
        rebuild has switched its manifest since)."""
        return manifest_signature(self.path) != self.signature

    def _backend_name(self) -> str:
        index = self.indexes["images"]
        return getattr(index, "requested_backend", "auto")

    @property
    def n_bits(self) -> int:
        return int(self.model.n_bits_)

    def summary(self) -> dict:
        return {
            "items": len(self.items),
            "images": self.indexes["images"].ntotal,
            "texts": self.indexes["texts"].ntotal,
            "n_bits": self.n_bits,
            "method": self.model.method_name,
            "featurizer": {m: (getattr(self.model.featurizer_, m) or {}).get("model")
                           for m in ("image", "text")},
        }

    def item(self, item_id: int) -> dict:
        try:
            return self._by_id[int(item_id)]
        except (KeyError, ValueError, TypeError, OverflowError):
            raise UnknownItemError(f"no item with id {item_id!r} in {self.path}") from None

    def _check(self, k, target):
        if target not in TARGETS:
            raise CollectionError(f"target must be one of {TARGETS}, got {target!r}")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise CollectionError(f"k must be a positive integer, got {k!r}")
        if self.indexes[target].ntotal == 0:
            raise CollectionError(f"the collection holds no {target[:-1]}s to search")

    def _hits(self, codes, k, target, exclude=None, values=None) -> list[Hit]:
        """The ``k`` best items of ``target`` for one query: its ``codes`` (1, n_bits) and, to
        re-rank, its real ``values`` (n_bits,)."""
        index = self.indexes[target]
        rerank = values is not None and self.reranks
        want = min((self.oversample * k if rerank else k) + (exclude is not None), index.ntotal)
        while True:
            dist, ids = index.search(codes, want)
            out = []
            for d, i in zip(dist[0].tolist(), ids[0].tolist(), strict=True):
                it = self._by_id.get(i)
                if i < 0 or i == exclude or it is None:  # None: a code an add is writing (kept in Milvus)
                    continue
                out.append(Hit(i, it["name"], it["image"], it["caption"], int(d)))
            n_total = index.ntotal
            if len(out) >= k or want >= n_total:
                return self._reranked(out, values, target)[:k] if rerank else out[:k]
            want = min(2 * want, n_total)

    def _reranked(self, hits: list[Hit], values, target) -> list[Hit]:
        """``hits`` ordered by the cosine of their stored values with the query's ``values``
        (:func:`dmh.app.rerank.rerank_order`: then by distance, then id), each with its ``score``."""
        if not hits:
            return hits
        sorted_ids, stored = self._values[target]
        ids = np.fromiter((h.id for h in hits), np.int64, len(hits))
        rows = np.searchsorted(sorted_ids, ids)
        found = (rows < sorted_ids.size) & (sorted_ids[np.minimum(rows, sorted_ids.size - 1)] == ids)
        scores = np.full(len(hits), -np.inf, np.float32)  # an item without values (not expected) goes last
        scores[found] = cosine_to(values, stored[rows[found]])
        order = rerank_order(scores, [h.distance for h in hits], ids)
        out = []
        for j in order.tolist():
            h = hits[j]
            h.score = round(float(scores[j]), 6) if found[j] else None
            out.append(h)
        return out

    def _query_values(self, X, modality: str):
        """Codes (1, n_bits) and real values (n_bits,) of one featurized query."""
        from ...base import sign_codes

        values = self.model.project(X, modality=modality)
        return sign_codes(values), values[0]

    def encode_text(self, text: str) -> np.ndarray:
        return self._text_values(text)[0]

    def _text_values(self, text: str):
        if not isinstance(text, str) or not text.strip():
            raise CollectionError("the text query is empty")
        return self._query_values(self.model.featurizer_.text_features([text]), "text")

    def read_text(self, text: str) -> TextQuery:
        """How the collection's text featurizer reads a query: with a bag of words, its terms (as
        the captions were read: words, CJK character pairs, Thai words; see
        :class:`dmh._featurizers.analyzer.UnicodeAnalyzer`) split into those of the vocabulary and
        the others; a sentence model reads any text, so no word is unknown to it."""
        if not isinstance(text, str) or not text.strip():
            raise CollectionError("the text query is empty")
        spec = self.model.featurizer_.text
        if spec is None or spec.get("model") != "bow":
            return TextQuery(text, [], [], None)
        if self._analyzer is None:
            self._vocabulary = frozenset(spec["vocabulary"])
            self._analyzer = self.model.featurizer_.text_analyzer()
        words = list(dict.fromkeys(self._analyzer(text)))
        return TextQuery(text, [w for w in words if w in self._vocabulary],
                         [w for w in words if w not in self._vocabulary], len(self._vocabulary))

    def encode_image(self, image) -> np.ndarray:
        """Codes of one image: a path, a PIL image or the bytes of an image file."""
        return self._image_values(image)[0]

    def _image_values(self, image):
        if isinstance(image, (bytes, bytearray)):
            from PIL import Image

            try:
                im = Image.open(io.BytesIO(image))
                if im.size[0] * im.size[1] > MAX_QUERY_PIXELS:
                    raise CollectionError(
                        f"the image is too large ({im.size[0]} x {im.size[1]} pixels; at most "
                        f"{MAX_QUERY_PIXELS:,})"
                    )
                im.load()
            except CollectionError:
                raise
            except Exception as exc:
                why = "not an image format Pillow reads" if type(exc).__name__ == "UnidentifiedImageError" else exc
                raise CollectionError(f"the upload is not an image that can be read ({why})") from None
            image = im
        return self._query_values(self.model.featurizer_.image_features([image]), "image")

    def search_text(self, text: str, k: int = 10, target: str = "images") -> list[Hit]:
        """Items matching ``text``, nearest first. With a bag of words, a query none of whose words
        is in the vocabulary has no code to rank by: the answer is empty (:meth:`read_text` says why)."""
        self._check(k, target)
        if not self.read_text(text).readable:
            return []
        codes, values = self._text_values(text)
        return self._hits(codes, k, target, values=values)

    def search_image(self, image, k: int = 10, target: str = "images") -> list[Hit]:
        self._check(k, target)
        codes, values = self._image_values(image)
        return self._hits(codes, k, target, values=values)

    def search_features(self, features, modality: str, k: int = 10, target: str = "images") -> list[Hit]:
        """Items matching one query given by its features in ``modality`` ("image" or "text": one
        row of what this collection's featurizer makes of a photo or a caption), nearest first, as
        :meth:`search_image` and :meth:`search_text` answer once they have featurized their query."""
        self._check(k, target)
        if modality not in ("image", "text"):
            raise CollectionError(f"modality must be 'image' or 'text', got {modality!r}")
        X = np.asarray(features)
        if X.ndim == 1:
            X = X[None, :]
        if X.ndim != 2 or X.shape[0] != 1:
            raise CollectionError(f"features must be one query (one row), got shape {np.shape(features)}")
        codes, values = self._query_values(X, modality)
        return self._hits(codes, k, target, values=values)

    def similar(self, item_id: int, k: int = 10, target: str = "images") -> list[Hit]:
        """Items like item ``item_id`` (itself left out): its photo's code when it has one, else its
        caption's."""
        self._check(k, target)
        it = self.item(item_id)
        for source in ("images", "texts"):
            pos, codes = self._codes[source]
            if it["id"] in pos:
                values = None
                if self.reranks:
                    sorted_ids, stored = self._values[source]
                    row = int(np.searchsorted(sorted_ids, it["id"]))
                    values = stored[row].astype(np.float32)
                return self._hits(codes[pos[it["id"]]][None, :], k, target, exclude=it["id"], values=values)
        raise CollectionError(f"item {item_id} has neither an indexed photo nor an indexed caption")

    def warm(self) -> None:
        """Load the featurizers now (the sentence or image model), so the first query is not slow."""
        from PIL import Image

        spec = self.model.featurizer_
        if spec.text is not None and not spec.missing_extras():
            self.model.encode_raw(texts=["warm up"])
        if spec.image is not None and not spec.image.get("custom") and not spec.missing_extras():
            self.model.encode_raw(images=[Image.new("RGB", (32, 32))])

    def thumbnail(self, item_id: int) -> Path:
        """The item's thumbnail, made (and kept) on first use."""
        it = self.item(item_id)
        if not it["image"] or it.get("error"):
            raise UnknownItemError(f"item {item_id} has no photo")  # a 404 of the server
        dest = self.thumbs / f"{it['id']}.jpg"
        if not dest.is_file():
            if self.changed():  # a rebuild may be reusing this id for another photo: write nothing
                raise UnknownItemError(f"item {item_id}: the collection has changed; reload to see its thumbnail")
            try:
                self.thumbs.mkdir(exist_ok=True)
                write_thumbnail(it["image"], dest)
            except (OSError, SyntaxError, ValueError) as exc:  # Pillow's decoder errors; a read-only folder
                raise UnknownItemError(f"item {item_id}: no thumbnail can be made of {it['image']} "
                                       f"({type(exc).__name__}: {exc})") from None
        return dest
