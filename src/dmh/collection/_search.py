"""Searching a built collection: :class:`Collection` and its :class:`Hit` results."""

from __future__ import annotations

import io
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import CollectionError, CollectionFileError, UnknownItemError
from ._codes import _open_stores
from ._files import TARGETS, _check_complete, _Paths, _read_manifest
from ._thumbs import _thumbnail

MAX_QUERY_PIXELS = 50_000_000


def _index_matches(index, codes, ids) -> bool:
    """True when ``index`` holds exactly ``codes`` under ``ids`` (the code file is the reference)."""
    if index.ntotal != ids.size or not np.array_equal(index.ids, ids):
        return False
    return bool(np.array_equal(index.codes, index._packed(codes, "codes")))


@dataclass
class Hit:
    """One search result."""

    id: int
    name: str
    image: str | None
    caption: str | None
    distance: int

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "image": self.image, "caption": self.caption,
                "distance": self.distance}


class Collection:
    """A built collection opened for search (read-only; see :func:`build_collection`).

    ``search_text``, ``search_image`` and ``similar`` return :class:`Hit` lists, nearest first
    (ties by smaller id), from the photos (``target="images"``) or the captions (``"texts"``).
    """

    def __init__(self, path, *, backend: str = "auto"):
        from ..base import load_model
        from ..index import HammingIndex, load_codes

        self.path = Path(path)
        _check_complete(self.path)
        P = _Paths(self.path)
        self.items = _read_manifest(P.manifest)
        self._by_id = {int(it["id"]): it for it in self.items}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a missing extra is reported when a query needs it
            self.model = load_model(P.model)
        if getattr(self.model, "featurizer_", None) is None:
            raise CollectionError(f"{P.model} does not record its featurizer; rebuild the collection")
        stores = _open_stores(P)
        self.indexes, self._codes = {}, {}
        for target, modality in (("images", "image"), ("texts", "text")):
            codes_path, index_path = getattr(P, f"{modality}_codes"), getattr(P, f"{modality}_index")
            codes, ids = load_codes(codes_path)
            if codes.shape[1] != self.n_bits:
                raise CollectionFileError(codes_path, f"holds {codes.shape[1]}-bit codes but the model gives "
                                          f"{self.n_bits} bits (damaged collection)")
            listed = np.isin(ids, np.fromiter(self._by_id, np.int64, len(self._by_id)))
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
                # an add interrupted before its manifest (written last) left codes of unlisted items,
                # or the index disagrees with the codes: search only what the manifest lists
                codes, ids = codes[listed], ids[listed]
                index = HammingIndex(self.n_bits, backend=backend)
                if ids.size:
                    index.add(codes, ids)
            self.indexes[target] = index
            self._codes[target] = dict(zip(ids.tolist(), range(ids.size), strict=True)), codes
        self.thumbs = P.thumbs

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

    def _hits(self, codes, k, target, exclude=None) -> list[Hit]:
        index = self.indexes[target]
        dist, ids = index.search(codes, min(k + (exclude is not None), index.ntotal))
        out = []
        for d, i in zip(dist[0].tolist(), ids[0].tolist(), strict=True):
            if i < 0 or i == exclude:
                continue
            it = self._by_id[i]
            out.append(Hit(i, it["name"], it["image"], it["caption"], int(d)))
        return out[:k]

    def encode_text(self, text: str) -> np.ndarray:
        if not isinstance(text, str) or not text.strip():
            raise CollectionError("the text query is empty")
        return self.model.encode_raw(texts=[text])

    def encode_image(self, image) -> np.ndarray:
        """Codes of one image: a path, a PIL image or the bytes of an image file."""
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
        return self.model.encode_raw(images=[image])

    def search_text(self, text: str, k: int = 10, target: str = "images") -> list[Hit]:
        self._check(k, target)
        return self._hits(self.encode_text(text), k, target)

    def search_image(self, image, k: int = 10, target: str = "images") -> list[Hit]:
        self._check(k, target)
        return self._hits(self.encode_image(image), k, target)

    def similar(self, item_id: int, k: int = 10, target: str = "images") -> list[Hit]:
        """Items like item ``item_id`` (itself left out): its photo's code when it has one, else its
        caption's."""
        self._check(k, target)
        it = self.item(item_id)
        for source in ("images", "texts"):
            pos, codes = self._codes[source]
            if it["id"] in pos:
                return self._hits(codes[pos[it["id"]]][None, :], k, target, exclude=it["id"])
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
            try:
                self.thumbs.mkdir(exist_ok=True)
                _thumbnail(it["image"], dest)
            except (OSError, SyntaxError, ValueError) as exc:  # Pillow's decoder errors; a read-only folder
                raise UnknownItemError(f"item {item_id}: no thumbnail can be made of {it['image']} "
                                       f"({type(exc).__name__}: {exc})") from None
        return dest
