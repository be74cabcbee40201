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
(``faiss.IndexBinaryFlat``, which returns ties in an order of its own; this class asks it for more
candidates than ``k``, enough to hold every item at the ``k``-th distance, and re-sorts them by
``(distance, id)``). ``"auto"`` picks faiss when it can be imported.

Codes are given as ``{-1, +1}`` arrays ``(n, n_bits)`` (as returned by ``model.encode``) or already
packed as ``uint8`` ``(n, code_size)``; :func:`pack_codes` packs ``+1`` as a set bit, bit ``j`` of a
code in byte ``j // 8`` at position ``j % 8`` (faiss's layout).

Saved indexes are ``.npz`` archives of plain arrays plus a JSON header (no pickle), written
atomically; ``HammingIndex.load`` restores them exactly.
"""

from __future__ import annotations

import json
import numbers
import zipfile
from pathlib import Path

import numpy as np

from ._archive import META_KEY, json_bytes, read_archive
from ._atomic import atomic_path
from .hamming import check_pm1 as _check_pm1
from .hamming import hamming_words as _hamming_words
from .hamming import pack_codes, unpack_codes
from .hamming import to_words as _to_words

__all__ = [
    "HammingIndex",
    "pack_codes",
    "unpack_codes",
    "save_codes",
    "load_codes",
    "available_backends",
    "INDEX_FORMAT_VERSION",
]

INDEX_FORMAT_VERSION = 1
CODES_FORMAT_VERSION = 1
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
        raise ValueError(f"backend must be one of {_BACKENDS}, got {backend!r}")
    if backend == "auto":
        return "faiss" if _faiss() is not None else "numpy"
    if backend == "faiss" and _faiss() is None:
        raise ImportError(
            "backend='faiss' needs the faiss-cpu package (pip install faiss-cpu); "
            "use backend='numpy' instead"
        )
    return backend


def _check_int(value, name: str, low: int, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {value!r}")
    value = int(value)
    if value < low or (high is not None and value > high):
        bound = f"between {low} and {high}" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be {bound}, got {value}")
    return value


# ---------------------------------------------------------------------------------------- index
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
            raise ValueError(
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
            index = _faiss().IndexBinaryFlat(self.n_bits)
            if self.ntotal:
                index.add(np.ascontiguousarray(self._codes))
            self._faiss_index = index
        return self._faiss_index

    # ------------------------------------------------------------------ input
    def _packed(self, codes, name: str) -> np.ndarray:
        """Validate ``codes`` and return them packed, uint8 ``(n, code_size)``."""
        if codes is None:
            raise ValueError(f"{name} is missing (got None)")
        arr = np.asarray(codes)
        if arr.ndim == 1 and arr.size in (self.n_bits, self.code_size):
            arr = arr[None, :]
        if arr.ndim != 2:
            raise ValueError(
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
                raise ValueError(
                    f"packed uint8 {name} have {arr.shape[1]} bytes per code, the index expects "
                    f"code_size={self.code_size} (n_bits={self.n_bits}){hint}"
                )
            return np.ascontiguousarray(arr)
        if not (
            np.issubdtype(arr.dtype, np.signedinteger) or np.issubdtype(arr.dtype, np.floating)
        ):
            raise TypeError(
                f"{name} must be {{-1,+1}} codes (a signed integer or float array) or packed "
                "uint8, "
                f"got dtype {arr.dtype}"
            )
        if arr.shape[1] != self.n_bits:
            raise ValueError(
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
            new_ids = np.asarray(ids)
            if new_ids.ndim != 1 or new_ids.size != n:
                raise ValueError(
                    f"ids must have shape ({n},) to match the codes, got {new_ids.shape}"
                )
            if n and not np.issubdtype(new_ids.dtype, np.integer):
                raise TypeError(f"ids must be integers, got dtype {new_ids.dtype}")
            new_ids = new_ids.astype(np.int64)
            if n and new_ids.min() < 0:
                raise ValueError("ids must be non-negative (-1 marks padding in search results)")
            if np.unique(new_ids).size != n:
                raise ValueError("ids hold repeated values; every id must be unique")
            if self.ntotal and np.isin(new_ids, self._ids).any():
                dup = new_ids[np.isin(new_ids, self._ids)]
                raise ValueError(f"ids already in the index: {dup[:5].tolist()}")
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
            raise TypeError(f"ids must be integers, got dtype {ids.dtype}")
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
            raise ValueError("the index is empty: add() codes before searching")
        return queries

    def search(self, codes, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest codes of each query.

        Returns ``(distances, ids)``, int32 and int64 arrays ``(n_queries, k)``, ordered by
        ``(distance, id)``; both padded with ``-1`` where the index holds fewer than ``k`` codes.
        """
        k = _check_int(k, "k", 1)
        queries = self._check_search(codes)
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
        """faiss top-k, made exact under the (distance, id) order: fetch ``k1 > k`` candidates; a
        query whose ``k1``-th candidate is still at the ``k``-th distance may have more ties than
        were fetched, and gets every code at distance <= that distance from a range search."""
        index, rank, n = self._faiss(), self._id_rank(), self.ntotal
        n_q = queries.shape[0]
        out_d = np.empty((n_q, k), dtype=np.int32)
        out_p = np.empty((n_q, k), dtype=np.int64)
        k1 = n if k == n else min(n, 2 * k + 16)
        start, batch = 0, 64  # a small first batch learns how many candidates ties need
        while start < n_q:
            stop = min(start + batch, n_q)
            q = queries[start:stop]
            dist, pos = index.search(q, k1)
            dist = dist.astype(np.int64)
            kth = dist[:, k - 1]
            exact = (k1 == n) | (dist[:, -1] > kth)
            rows = np.arange(stop - start)
            # exact rows: every code at the k-th distance is among the k1 candidates
            key = dist * n + rank[pos]
            order = np.argsort(key[exact], axis=1, kind="stable")[:, :k]
            out_d[start:stop][exact] = np.take_along_axis(dist[exact], order, axis=1)
            out_p[start:stop][exact] = np.take_along_axis(pos[exact], order, axis=1)
            for t in np.unique(kth[~exact]):
                sel = rows[~exact & (kth == t)]
                lims, d, p = self._faiss_range(q[sel], int(t))
                for j, r in enumerate(sel):  # already ordered by (distance, id)
                    lo = lims[j]
                    out_d[start + r] = d[lo : lo + k]
                    out_p[start + r] = p[lo : lo + k]
                # later batches: fetch as many candidates as these queries needed
                k1 = max(k1, min(n, int(np.diff(lims).max() * 1.25) + 1))
            start, batch = stop, 1024
        return out_d, out_p

    def _faiss_range(self, queries, radius):
        index, rank = self._faiss(), self._id_rank()
        # faiss's binary range search keeps distances < radius (strict)
        lims, dist, pos = index.range_search(np.ascontiguousarray(queries), radius + 1)
        lims = lims.astype(np.int64)
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
        meta, arrays = read_archive(path, "dmh-hamming-index", INDEX_FORMAT_VERSION, "index")
        for key in ("codes", "ids"):
            if key not in arrays:
                raise ValueError(f"{path} is not a complete dmh index file: it lacks {key!r}")
        index = cls(
            int(meta["n_bits"]),
            backend=backend if backend is not None else meta.get("backend", "auto"),
        )
        codes, ids = arrays["codes"], arrays["ids"]
        if codes.dtype != np.uint8 or codes.shape != (ids.size, index.code_size):
            raise ValueError(
                f"{path}: stored codes have dtype {codes.dtype} and shape {codes.shape}, "
                f"expected uint8 ({ids.size}, {index.code_size})"
            )
        index.add(codes, ids)
        return index


def _csr(counts, dists, poss):
    counts = np.concatenate(counts) if counts else np.zeros(0, np.int64)
    lims = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=lims[1:])
    return lims, np.concatenate(dists), np.concatenate(poss).astype(np.int64)


# ------------------------------------------------------------------------------------- code files
def save_codes(path, codes, ids=None, *, modality: str | None = None) -> Path:
    """Write ``{-1,+1}`` codes (int8 ``codes``) and their ``ids`` (int64; default ``0..n-1``) to an
    ``.npz`` file, atomically."""
    arr = _check_pm1(codes, "codes").astype(np.int8)
    ids = (
        np.arange(arr.shape[0], dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
    )
    if ids.shape != (arr.shape[0],):
        raise ValueError(f"ids must have shape ({arr.shape[0]},), got {ids.shape}")
    meta = {
        "format": "dmh-codes",
        "format_version": CODES_FORMAT_VERSION,
        "n_bits": int(arr.shape[1]),
        "modality": modality,
    }
    path = Path(path)
    with atomic_path(path, suffix=".tmp") as tmp, open(tmp, "wb") as fh:
        np.savez(fh, codes=arr, ids=ids, **{META_KEY: json_bytes(meta)})
    return path


def load_codes(path) -> tuple[np.ndarray, np.ndarray]:
    """Read a code file: ``(codes, ids)``, int8 ``{-1,+1}`` ``(n, n_bits)`` and int64 ``(n,)``.

    Besides files written by :func:`save_codes`, any ``.npz`` with a ``codes`` array (``{-1,+1}``)
    and optionally ``ids`` is accepted.
    """
    path = Path(path)
    kind = _header_format(path)
    if kind is not None:  # a dmh archive: read and checked by the reader every dmh file goes through
        if kind != "dmh-codes":
            raise ValueError(f"{path} is a {kind} file, not a code file (from dmh encode)")
        _, arrays = read_archive(path, "dmh-codes", CODES_FORMAT_VERSION, "code")
    else:  # a plain .npz written by other tools
        if not path.exists():
            raise FileNotFoundError(f"code file not found: {path}")
        try:
            with np.load(path, allow_pickle=False) as archive:
                arrays = {k: archive[k] for k in archive.files}
        except Exception as exc:
            raise ValueError(
                f"{path} is not a code file: expected an .npz archive with a 'codes' array ({exc})"
            ) from exc
    if "codes" not in arrays:
        raise ValueError(f"{path} has no 'codes' array (it holds {sorted(arrays)})")
    codes, ids = arrays["codes"], arrays.get("ids")
    codes = _check_pm1(codes, f"codes in {path}").astype(np.int8)
    if ids is None:
        ids = np.arange(codes.shape[0], dtype=np.int64)
    ids = np.asarray(ids).reshape(-1)
    if ids.size != codes.shape[0]:
        raise ValueError(f"{path}: {codes.shape[0]} codes but {ids.size} ids")
    if ids.size and not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"{path}: ids must be integers, got dtype {ids.dtype}")
    return codes, ids.astype(np.int64)


def _header_format(path: Path) -> str | None:
    """The ``format`` named in the JSON header of an ``.npz`` archive; None when the file is not a zip
    archive or has no header (read from the zip directory, without loading the arrays)."""
    try:
        with zipfile.ZipFile(path) as zf:
            if f"{META_KEY}.npy" not in zf.namelist():
                return None
            with zf.open(f"{META_KEY}.npy") as fh:
                header = np.lib.format.read_array(fh, allow_pickle=False)
    except (OSError, zipfile.BadZipFile, ValueError):
        return None
    try:
        meta = json.loads(header.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
    return str(meta.get("format")) if isinstance(meta, dict) else None
