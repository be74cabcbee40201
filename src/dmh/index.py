"""Exact Hamming search over binary codes, in the shape of faiss.

:class:`HammingIndex` stores codes packed 8 bits to a byte (``code_size = n_bits // 8`` bytes per
code; ``n_bits`` must be a multiple of 8) and answers

* ``search(codes, k) -> (distances, ids)``: the ``k`` nearest codes of each query, nearest first;
  rows are padded with ``-1`` (in both arrays) when the index holds fewer than ``k`` codes;
* ``range_search(codes, radius) -> (lims, distances, ids)``: every code within Hamming distance
  ``<= radius`` (inclusive), in CSR form: the hits of query ``i`` are
  ``distances[lims[i]:lims[i + 1]]`` / ``ids[lims[i]:lims[i + 1]]``.

Results are ordered by ``(distance, id)``: **ties in Hamming distance are broken by the smaller
id**, in both backends, so the ``numpy`` and ``faiss`` backends return identical arrays.

Backends: ``"numpy"`` (XOR and popcount over 64-bit words, chunked) and ``"faiss"``
(``faiss.IndexBinaryFlat``'s range search: the top-k is every code within a radius estimated per
query from a sample of the database, sorted by ``(distance, id)``; see :mod:`dmh._topk`; several
times faster than ``IndexBinaryFlat.search``, whose heap returns ties in an order of its own).
``"auto"`` picks faiss when it can be imported. faiss runs with dmh's thread setting
(:func:`dmh.set_threads`).

Codes are given as ``{-1, +1}`` arrays ``(n, n_bits)`` (as returned by ``model.encode``) or already
packed as ``uint8`` ``(n, code_size)``; :func:`pack_codes` packs ``+1`` as a set bit, bit ``j`` of a
code in byte ``j // 8`` at position ``j % 8`` (faiss's layout).

Saved indexes are ``.npz`` archives of plain arrays plus a JSON header (no pickle), written
atomically; ``HammingIndex.load`` restores them exactly.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from . import _topk
from ._archive import META_KEY, json_bytes, read_archive
from ._atomic import atomic_path
from ._threads import faiss_threads
from ._validation import check_int_range as _check_int
from .code_files import CODES_FORMAT_VERSION, load_codes, save_codes  # noqa: F401  (also dmh.index's)
from .errors import (
    DataError,
    DataTypeError,
    DmhError,
    IndexFileError,
    MissingDependencyError,
    ParameterError,
    ParameterTypeError,
    check_finite_memory,
)
from .hamming import check_pm1 as _check_pm1
from .hamming import hamming_words as _hamming_words
from .hamming import pack_codes, unpack_codes
from .hamming import to_words as _to_words

__all__ = [
    "HammingIndex",
    "check_new_ids",
    "pack_codes",
    "unpack_codes",
    "save_codes",
    "load_codes",
    "available_backends",
    "INDEX_FORMAT_VERSION",
]

INDEX_FORMAT_VERSION = 1
_BACKENDS = ("auto", "numpy", "faiss")
#: query-database pairs held in memory at once by the numpy backend
_PAIR_BUDGET = 1 << 22


def available_backends() -> list[str]:
    """The backends usable here: always ``"numpy"``, plus ``"faiss"`` when faiss imports."""
    return ["numpy", "faiss"] if _faiss() is not None else ["numpy"]


def _faiss():
    try:
        import faiss
    except ImportError:
        return None
    return faiss


def _check_backend(backend: str) -> str:
    if backend not in _BACKENDS:
        raise ParameterError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "faiss" if _faiss() is not None else "numpy"
    if backend == "faiss" and _faiss() is None:
        raise MissingDependencyError(
            "backend='faiss' needs the faiss-cpu package (pip install faiss-cpu); "
            "use backend='numpy' instead"
        )
    return backend


# ---------------------------------------------------------------------------------------- index
def check_new_ids(ids, n: int) -> np.ndarray:
    """``ids`` for ``n`` new codes as int64: one dimension of ``n`` unique non-negative integers
    (-1 marks padding in search results); anything else is a :class:`ParameterError`."""
    new_ids = np.asarray(ids)
    if new_ids.ndim != 1 or new_ids.size != n:
        raise ParameterError(f"ids must have shape ({n},) to match the codes, got {new_ids.shape}")
    if n and not np.issubdtype(new_ids.dtype, np.integer):
        raise ParameterTypeError(f"ids must be integers, got dtype {new_ids.dtype}")
    new_ids = new_ids.astype(np.int64)
    if n and new_ids.min() < 0:
        raise ParameterError("ids must be non-negative (-1 marks padding in search results)")
    if np.unique(new_ids).size != n:
        raise ParameterError("ids hold repeated values; every id must be unique")
    return new_ids


class HammingIndex:
    """Exact Hamming-distance index over binary codes (see the module docstring).

    Parameters
    ----------
    n_bits : int
        Bits per code, a positive multiple of 8 (``code_size = n_bits // 8`` bytes).
    backend : {"auto", "numpy", "faiss"}
        ``"auto"``: faiss when importable, else numpy. Both give identical results.
    """

    def __init__(self, n_bits: int, backend: str = "auto"):
        n_bits = _check_int(n_bits, "n_bits", 8)
        if n_bits % 8:
            raise ParameterError(
                "n_bits must be a multiple of 8 (codes are stored packed, 8 bits a byte), "
                f"got {n_bits}"
            )
        self.n_bits = n_bits
        self.code_size = n_bits // 8
        self.requested_backend = backend
        self.backend = _check_backend(backend)
        self._codes = np.zeros((0, self.code_size), dtype=np.uint8)
        self._ids = np.zeros(0, dtype=np.int64)
        self._faiss_index = None
        self._cache = {}

    # ------------------------------------------------------------------ state
    @property
    def ntotal(self) -> int:
        """Number of codes in the index."""
        return int(self._ids.size)

    def __len__(self) -> int:
        return self.ntotal

    def __repr__(self) -> str:
        return f"HammingIndex(n_bits={self.n_bits}, backend={self.backend!r}, ntotal={self.ntotal})"

    @property
    def ids(self) -> np.ndarray:
        """The ids of the stored codes, in insertion order (a copy)."""
        return self._ids.copy()

    @property
    def codes(self) -> np.ndarray:
        """The stored codes, packed ``uint8`` ``(ntotal, code_size)`` (a copy)."""
        return self._codes.copy()

    def _changed(self) -> None:
        self._cache = {}
        self._faiss_index = None

    def _words(self) -> np.ndarray:
        if "words" not in self._cache:
            self._cache["words"] = _to_words(self._codes)
        return self._cache["words"]

    def _id_rank(self) -> np.ndarray:
        """Rank of each stored position's id among all ids (the tie-break key)."""
        if "rank" not in self._cache:
            rank = np.empty(self.ntotal, dtype=np.int64)
            rank[np.argsort(self._ids, kind="stable")] = np.arange(self.ntotal)
            self._cache["rank"] = rank
        return self._cache["rank"]

    def _faiss(self):
        if self._faiss_index is None:
            # codes zero-padded to a size faiss has a fast kernel for: distances are unchanged
            size = _topk.padded_size(self.code_size)
            index = _faiss().IndexBinaryFlat(size * 8)
            if self.ntotal:
                index.add(_topk.pad_codes(self._codes, size))
            self._faiss_index = index
        return self._faiss_index

    # ------------------------------------------------------------------ input
    def _packed(self, codes, name: str) -> np.ndarray:
        """Validate ``codes`` and return them packed, uint8 ``(n, code_size)``."""
        if codes is None:
            raise DataError(f"{name} is missing (got None)")
        arr = np.asarray(codes)
        if arr.ndim == 1 and arr.size in (self.n_bits, self.code_size):
            arr = arr[None, :]
        if arr.ndim != 2:
            raise DataError(
                f"{name} must be 2-D: {{-1,+1}} codes (n, n_bits={self.n_bits}) or packed uint8 "
                f"(n, code_size={self.code_size}); got shape {arr.shape}"
            )
        if arr.dtype == np.uint8:
            if arr.shape[1] != self.code_size:
                hint = (
                    " (this looks like unpacked 0/1 bits: pass {-1,+1} codes or the output of"
                    " pack_codes())"
                    if arr.shape[1] == self.n_bits
                    else ""
                )
                raise DataError(
                    f"packed uint8 {name} have {arr.shape[1]} bytes per code, the index expects "
                    f"code_size={self.code_size} (n_bits={self.n_bits}){hint}"
                )
            return np.ascontiguousarray(arr)
        if not (
            np.issubdtype(arr.dtype, np.signedinteger) or np.issubdtype(arr.dtype, np.floating)
        ):
            raise DataTypeError(
                f"{name} must be {{-1,+1}} codes (a signed integer or float array) or packed "
                "uint8, "
                f"got dtype {arr.dtype}"
            )
        if arr.shape[1] != self.n_bits:
            raise DataError(
                f"{name} have {arr.shape[1]} bits, the index holds n_bits={self.n_bits}"
            )
        return pack_codes(_check_pm1(arr, name))

    # ------------------------------------------------------------------ mutation
    def add(self, codes, ids=None) -> HammingIndex:
        """Append codes. ``ids``: unique non-negative integers (default: consecutive, after the
        largest id held). Returns ``self``."""
        packed = self._packed(codes, "codes")
        n = packed.shape[0]
        if ids is None:
            start = int(self._ids.max()) + 1 if self.ntotal else 0
            new_ids = np.arange(start, start + n, dtype=np.int64)
        else:
            new_ids = check_new_ids(ids, n)
            if self.ntotal and np.isin(new_ids, self._ids).any():
                dup = new_ids[np.isin(new_ids, self._ids)]
                raise DataError(f"ids already in the index: {dup[:5].tolist()}")
        if n == 0:
            return self
        self._codes = np.concatenate([self._codes, packed])
        self._ids = np.concatenate([self._ids, new_ids])
        self._changed()
        return self

    def remove_ids(self, ids) -> int:
        """Remove the codes with these ids (ids not held are ignored); returns how many went."""
        ids = np.asarray(ids).reshape(-1)
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise DataTypeError(f"ids must be integers, got dtype {ids.dtype}")
        drop = np.isin(self._ids, ids.astype(np.int64))
        n = int(drop.sum())
        if n:
            self._codes = self._codes[~drop]
            self._ids = self._ids[~drop]
            self._changed()
        return n

    def reset(self) -> None:
        """Remove every code."""
        self.remove_ids(self._ids)

    # ------------------------------------------------------------------ search
    def _check_search(self, codes) -> np.ndarray:
        queries = self._packed(codes, "query codes")
        if self.ntotal == 0:
            raise DataError("the index is empty: add() codes before searching")
        return queries

    def search(self, codes, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest codes of each query.

        Returns ``(distances, ids)``, int32 and int64 arrays ``(n_queries, k)``, ordered by
        ``(distance, id)``; both padded with ``-1`` where the index holds fewer than ``k`` codes.
        """
        k = _check_int(k, "k", 1)
        queries = self._check_search(codes)
        check_finite_memory(12.0 * queries.shape[0] * k, f"the results of {queries.shape[0]} queries",
                            f"k={k}; the index holds {self.ntotal} codes")
        kk = min(k, self.ntotal)
        if self.backend == "faiss":
            dist, pos = self._faiss_knn(queries, kk)
        else:
            dist, pos = self._numpy_knn(queries, kk)
        n_q = queries.shape[0]
        distances = np.full((n_q, k), -1, dtype=np.int32)
        ids = np.full((n_q, k), -1, dtype=np.int64)
        distances[:, :kk] = dist
        ids[:, :kk] = self._ids[pos]
        return distances, ids

    def range_search(self, codes, radius: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every code within Hamming distance ``<= radius`` of each query (``0..n_bits``).

        Returns ``(lims, distances, ids)`` in CSR form (int64, int32, int64), each query's hits
        ordered by ``(distance, id)``.
        """
        radius = _check_int(radius, "radius", 0, self.n_bits)
        queries = self._check_search(codes)
        if self.backend == "faiss":
            lims, dist, pos = self._faiss_range(queries, radius)
        else:
            lims, dist, pos = self._numpy_range(queries, radius)
        return lims, dist.astype(np.int32), self._ids[pos]

    # numpy backend -----------------------------------------------------
    def _chunks(self, n_q: int):
        step = max(1, _PAIR_BUDGET // max(1, self.ntotal))
        for start in range(0, n_q, step):
            yield start, min(start + step, n_q)

    def _numpy_knn(self, queries, k):
        words, rank = self._words(), self._id_rank()
        qw = _to_words(queries)
        n_q, n = queries.shape[0], self.ntotal
        out_d = np.empty((n_q, k), dtype=np.int32)
        out_p = np.empty((n_q, k), dtype=np.int64)
        for start, stop in self._chunks(n_q):
            dist = _hamming_words(qw[start:stop], words, self.n_bits)
            if k == n:
                thr = np.full(stop - start, self.n_bits)
            else:
                # smallest distance t with at least k codes at distance <= t
                counts = np.stack([np.bincount(row, minlength=self.n_bits + 1) for row in dist])
                thr = np.argmax(np.cumsum(counts, axis=1) >= k, axis=1)
            rows, cols = np.nonzero(dist <= thr[:, None].astype(dist.dtype))
            d = dist[rows, cols].astype(np.int64)
            order = np.lexsort((rank[cols], d, rows))
            rows, cols, d = rows[order], cols[order], d[order]
            first = np.searchsorted(rows, np.arange(stop - start))
            take = (first[:, None] + np.arange(k)).ravel()
            out_d[start:stop] = d[take].reshape(-1, k)
            out_p[start:stop] = cols[take].reshape(-1, k)
        return out_d, out_p

    def _numpy_range(self, queries, radius):
        words, rank = self._words(), self._id_rank()
        qw = _to_words(queries)
        counts, dists, poss = [], [], []
        for start, stop in self._chunks(queries.shape[0]):
            dist = _hamming_words(qw[start:stop], words, self.n_bits)
            rows, cols = np.nonzero(dist <= radius)
            d = dist[rows, cols].astype(np.int32)
            order = np.lexsort((rank[cols], d, rows))
            counts.append(np.bincount(rows, minlength=stop - start))
            dists.append(d[order])
            poss.append(cols[order])
        return _csr(counts, dists, poss)

    # faiss backend -----------------------------------------------------
    def _faiss_knn(self, queries, k):
        """Exact top-k under the (distance, id) order from range searches at a radius estimated
        per query from a sample of the database (see :mod:`dmh._topk`)."""
        index, rank, n = self._faiss(), self._id_rank(), self.ntotal
        sample = self._sample_words()
        padded = _topk.pad_codes(queries, index.code_size)
        qw = _to_words(queries)
        n_q = queries.shape[0]
        out_d = np.empty((n_q, k), dtype=np.int32)
        out_p = np.empty((n_q, k), dtype=np.int64)
        step = max(1, _PAIR_BUDGET // sample.shape[0])
        with faiss_threads():
            for start in range(0, n_q, step):
                stop = min(start + step, n_q)
                sample_dist = _hamming_words(qw[start:stop], sample, self.n_bits)

                def retry(rows, tried, sample_dist=sample_dist):
                    return _topk.estimate_radius(sample_dist[rows], n, k, self.n_bits, factor=4.0)

                out_d[start:stop], out_p[start:stop] = _topk.topk_from_ranges(
                    self._faiss_range_raw, padded[start:stop],
                    _topk.estimate_radius(sample_dist, n, k, self.n_bits), k, n, self.n_bits, rank, retry)
        return out_d, out_p

    def _sample_words(self) -> np.ndarray:
        if "sample" not in self._cache:
            self._cache["sample"] = self._words()[_topk.sample_positions(self.ntotal)]
        return self._cache["sample"]

    def _faiss_range_raw(self, padded, radius):
        """faiss range search of already padded queries; hits unordered within a query."""
        # faiss's binary range search keeps distances < radius (strict)
        lims, dist, pos = self._faiss().range_search(padded, radius + 1)
        return lims.astype(np.int64), dist, pos

    def _faiss_range(self, queries, radius):
        rank = self._id_rank()
        with faiss_threads():
            lims, dist, pos = self._faiss_range_raw(_topk.pad_codes(queries, self._faiss().code_size), radius)
        dist = dist.astype(np.int64)
        rows = np.repeat(np.arange(queries.shape[0]), np.diff(lims))
        order = np.lexsort((rank[pos], dist, rows))
        return lims, dist[order].astype(np.int32), pos[order].astype(np.int64)

    # ------------------------------------------------------------------ persistence
    def save(self, path) -> Path:
        """Write the index to ``path`` (an ``.npz`` archive; no pickle), atomically."""
        path = Path(path)
        meta = {
            "format": "dmh-hamming-index",
            "format_version": INDEX_FORMAT_VERSION,
            "n_bits": self.n_bits,
            "code_size": self.code_size,
            "ntotal": self.ntotal,
            "backend": self.requested_backend,
            "bit_order": "little",
        }
        with atomic_path(path, suffix=".tmp") as tmp, open(tmp, "wb") as fh:
            np.savez(fh, codes=self._codes, ids=self._ids, **{META_KEY: json_bytes(meta)})
        return path

    @classmethod
    def load(cls, path, backend: str | None = None) -> HammingIndex:
        """Load an index written by :meth:`save`. ``backend``: override the saved choice."""
        schema = {"n_bits": int, "code_size": int, "ntotal": int}
        meta, arrays = read_archive(path, "dmh-hamming-index", INDEX_FORMAT_VERSION, "index", schema, IndexFileError)
        for key in ("codes", "ids"):
            if key not in arrays:
                raise IndexFileError(path, f"is not a complete dmh index file: it lacks {key!r}")
        n_bits = meta["n_bits"]
        if not 1 <= n_bits <= 4096 or n_bits % 8:
            raise IndexFileError(path, f"has a damaged header: n_bits={n_bits} is not a multiple of 8 in [8, 4096]")
        saved_backend = meta.get("backend", "auto")
        if saved_backend not in _BACKENDS:
            raise IndexFileError(path, f"has a damaged header: unknown backend {saved_backend!r}")
        index = cls(n_bits, backend=backend if backend is not None else saved_backend)
        codes, ids = arrays["codes"], arrays["ids"]
        if codes.dtype != np.uint8 or codes.shape != (ids.size, index.code_size) or ids.ndim != 1:
            raise IndexFileError(
                path,
                f"stored codes have dtype {codes.dtype} and shape {codes.shape}, ids shape {ids.shape}; "
                f"expected uint8 ({ids.size}, {index.code_size}) for {n_bits}-bit codes",
            )
        if meta["ntotal"] != ids.size or meta["code_size"] != index.code_size:
            raise IndexFileError(
                path, f"header (ntotal {meta['ntotal']}, code_size {meta['code_size']}) disagrees with its "
                f"arrays ({ids.size} codes of {index.code_size} bytes)"
            )
        if not np.issubdtype(ids.dtype, np.integer):
            raise IndexFileError(path, f"ids must be integers, got dtype {ids.dtype}")
        try:
            index.add(codes, ids)
        except DmhError as exc:
            raise IndexFileError(path, str(exc)) from None
        return index


def _csr(counts, dists, poss):
    counts = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    lims = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=lims[1:])
    return lims, np.concatenate(dists), np.concatenate(poss).astype(np.int64)
