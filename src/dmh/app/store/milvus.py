"""Binary codes kept in Milvus, searched by Hamming distance, with the interface of
:class:`dmh.index.HammingIndex` (``add``, ``search``, ``range_search``, ``remove_ids``, ``len``).

One Milvus collection holds the codes: an ``INT64`` primary key ``id`` and a ``BINARY_VECTOR``
field ``code`` of ``n_bits`` dimensions (the packed bytes of :func:`dmh.index.pack_codes`), indexed
with the ``HAMMING`` metric, either

* ``index="flat"``: ``BIN_FLAT``, exact (every code is compared), the only index milvus-lite has;
* ``index="ivf"``: ``BIN_IVF_FLAT`` with ``nlist`` clusters, ``nprobe`` of them searched per query:
  approximate (a near code in an unvisited cluster is missed), for a Milvus server.

``uri`` is a local file ending in ``.db`` (milvus-lite: an embedded Milvus, no server; started by
pymilvus when the store is opened) or a server address such as ``http://host:19530``.

**Ties.** Milvus returns codes at equal distance in an order of its own. This class makes the
results those of :class:`~dmh.index.HammingIndex` exactly (with the flat index): ordered by
``(distance, id)``, ties broken by the smaller id. A k-nearest search asks Milvus for
``min(n, 2k + 16)`` candidates and re-sorts them by ``(distance, id)``; when the last candidate is
still at the k-th distance (more ties than were fetched), the query is answered by a range search
at that distance, which returns every code within it. A range search returns at most
``MAX_TOPK = 16384`` hits per call (Milvus's limit on ``limit``); when a call comes back full, the
id range is split in halves (a filter on ``id``) until each part holds fewer hits than the limit,
so the hits are complete however many there are. With ``index="ivf"`` the same re-sort applies to
the candidates Milvus found.

Limits: ``k`` at most 16384 (Milvus's top-k limit). ``pymilvus`` and ``milvus-lite`` are optional
(``pip install 'dmh[milvus]'``); milvus-lite 3.x dropped binary vectors, so the extra pins the
2.5 line (see ``docs/scaling.md``).
"""

from __future__ import annotations

import importlib
import logging
import warnings
from pathlib import Path

import numpy as np

from ..._validation import check_int_range as _check_int
from ...errors import DataError, ParameterError, ParameterTypeError

__all__ = ["MAX_TOPK", "MILVUS_EXTRA", "MilvusCodeStore", "require_pymilvus"]

MILVUS_EXTRA = ("milvus", ("pymilvus>=2.5,<4", "milvus-lite==2.5.1", "setuptools<81"))
#: Milvus's largest ``limit`` (top-k) of one search
MAX_TOPK = 16384
_INDEXES = {"flat": "BIN_FLAT", "ivf": "BIN_IVF_FLAT"}
_INSERT_BATCH = 50_000
_QUERY_BATCH = 256
_ID_FILTER_BATCH = 4096
_ID_BOUND = 2**63 - 1


def require_pymilvus():
    """Import :mod:`pymilvus` or raise an ImportError naming the install that brings it."""
    from ...featurize import MissingExtraError

    try:
        with warnings.catch_warnings():  # milvus-lite 2.5 imports pkg_resources, which warns
            warnings.simplefilter("ignore", UserWarning)
            return importlib.import_module("pymilvus")
    except ImportError as exc:
        name, packages = MILVUS_EXTRA
        raise MissingExtraError(
            f"the Milvus code store needs the optional package(s) {', '.join(packages)} "
            f"(module 'pymilvus' is missing): pip install 'dmh[{name}]'"
        ) from exc


class MilvusCodeStore:
    """Binary codes in a Milvus collection (see the module docstring).

    Parameters
    ----------
    uri : str or path
        ``"codes.db"`` (any path ending in ``.db``): milvus-lite, a local file; its folder must
        exist. ``"http://host:19530"``: a Milvus server.
    collection : str
        Name of the Milvus collection holding the codes.
    n_bits : int, optional
        Bits per code (a positive multiple of 8). Needed to create the collection; read from it
        when it exists (and then checked if given).
    index : {"flat", "ivf"}
        Exact ``BIN_FLAT`` or approximate ``BIN_IVF_FLAT`` (servers only: milvus-lite has only
        ``BIN_FLAT``). Used when the collection is created.
    nlist, nprobe : int
        ``BIN_IVF_FLAT``'s number of clusters and clusters searched per query.
    token : str, optional
        Credentials for a server (``"user:password"`` or an API key).
    """

    def __init__(
        self,
        uri="codes.db",
        collection: str = "dmh_codes",
        *,
        n_bits: int | None = None,
        index: str = "flat",
        nlist: int = 1024,
        nprobe: int = 16,
        token: str | None = None,
    ):
        pymilvus = require_pymilvus()
        if index not in _INDEXES:
            raise ParameterError(f"index must be one of {sorted(_INDEXES)}, got {index!r}")
        self.uri = str(uri)
        self.collection = str(collection)
        self.nlist = _check_int(nlist, "nlist", 1)
        self.nprobe = _check_int(nprobe, "nprobe", 1)
        if self.uri.endswith(".db"):
            folder = Path(self.uri).resolve().parent
            if not folder.is_dir():
                raise FileNotFoundError(f"cannot open the Milvus file {self.uri}: folder {folder} does not exist")
            self.uri = str(Path(self.uri).resolve())
        self._pymilvus = pymilvus
        # pymilvus logs every failed call at ERROR level before raising; the exception says it all
        logging.getLogger("pymilvus").setLevel(logging.CRITICAL)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            try:
                self._client = pymilvus.MilvusClient(uri=self.uri, token=token or "")
            except pymilvus.exceptions.MilvusException as exc:
                raise ParameterError(f"cannot open Milvus at {self.uri}: {exc.message}") from None
        if self._client.has_collection(self.collection):
            held, index_type = self._describe()
            if n_bits is not None and int(n_bits) != held:
                raise ParameterError(
                    f"the Milvus collection {self.collection!r} at {self.uri} holds {held}-bit codes, "
                    f"not n_bits={n_bits}"
                )
            self.n_bits = held
            self.index = {v: k for k, v in _INDEXES.items()}.get(index_type, index)
        else:
            if n_bits is None:
                raise ParameterError(
                    f"the Milvus collection {self.collection!r} does not exist at {self.uri}: "
                    "give n_bits to create it"
                )
            n_bits = _check_int(n_bits, "n_bits", 8)
            if n_bits % 8:
                raise ParameterError(f"n_bits must be a multiple of 8 (codes are stored packed), got {n_bits}")
            self.n_bits = n_bits
            self.index = index
            self._create()
        self.code_size = self.n_bits // 8
        self._count = None
        from ...index import HammingIndex

        self._checker = HammingIndex(self.n_bits, backend="numpy")  # validates and packs input codes

    # ------------------------------------------------------------------ collection
    def _create(self) -> None:
        dt = self._pymilvus.DataType
        schema = self._client.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("id", dt.INT64, is_primary=True)
        schema.add_field("code", dt.BINARY_VECTOR, dim=self.n_bits)
        params = self._client.prepare_index_params()
        extra = {"nlist": self.nlist} if self.index == "ivf" else {}
        params.add_index(field_name="code", index_type=_INDEXES[self.index], metric_type="HAMMING", params=extra)
        try:
            self._client.create_collection(
                self.collection, schema=schema, index_params=params, consistency_level="Strong"
            )
        except self._pymilvus.exceptions.MilvusException as exc:
            raise ParameterError(
                f"cannot create the Milvus collection {self.collection!r} ({_INDEXES[self.index]}) at "
                f"{self.uri}: {exc.message}"
            ) from None

    def _describe(self) -> tuple[int, str]:
        info = self._client.describe_collection(self.collection)
        fields = {f["name"]: f for f in info["fields"]}
        code = fields.get("code")
        dt = self._pymilvus.DataType
        if code is None or code["type"] != dt.BINARY_VECTOR or "id" not in fields:
            raise ParameterError(
                f"the Milvus collection {self.collection!r} at {self.uri} is not a dmh code store "
                "(it needs an INT64 'id' and a BINARY_VECTOR 'code' field)"
            )
        try:
            index_type = self._client.describe_index(self.collection, "code").get("index_type", "BIN_FLAT")
        except self._pymilvus.exceptions.MilvusException:
            index_type = "BIN_FLAT"
        return int(code["params"]["dim"]), index_type

    def close(self) -> None:
        """Close the connection (the data stay in Milvus)."""
        self._client.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def drop(self) -> None:
        """Delete the collection and every code in it."""
        self._client.drop_collection(self.collection)
        self._count = None

    def describe(self) -> dict:
        """The settings needed to reopen this store (JSON-serialisable)."""
        return {
            "store": "milvus",
            "uri": self.uri,
            "collection": self.collection,
            "n_bits": self.n_bits,
            "index": self.index,
            "nlist": self.nlist,
            "nprobe": self.nprobe,
        }

    def __repr__(self) -> str:
        return (
            f"MilvusCodeStore(uri={self.uri!r}, collection={self.collection!r}, n_bits={self.n_bits}, "
            f"index={self.index!r})"
        )

    # ------------------------------------------------------------------ state
    @property
    def ntotal(self) -> int:
        """Number of codes in the store: counted by Milvus once, then kept up to date by this
        object's own ``add``/``remove_ids`` (a count is a scan: ~50 ms at 10^6 codes here). Codes
        that another process adds are seen after :meth:`refresh` (or on reopening), as a saved
        local index is."""
        if self._count is None:
            res = self._client.query(self.collection, filter="", output_fields=["count(*)"])
            self._count = int(res[0]["count(*)"])
        return self._count

    def refresh(self) -> int:
        """Count the codes again (after another process changed the collection); returns the count."""
        self._count = None
        return self.ntotal

    def __len__(self) -> int:
        return self.ntotal

    def _held(self, ids: np.ndarray) -> np.ndarray:
        """Which of ``ids`` are in the store."""
        found = []
        for start in range(0, ids.size, _ID_FILTER_BATCH):
            chunk = ids[start : start + _ID_FILTER_BATCH]
            rows = self._client.query(
                self.collection, filter=f"id in {chunk.tolist()}", output_fields=["id"], limit=chunk.size
            )
            found.extend(int(r["id"]) for r in rows)
        return np.asarray(found, dtype=np.int64)

    def _max_id(self) -> int:
        """The largest id held (-1 when empty): one pass over the ids."""
        it = self._client.query_iterator(self.collection, batch_size=MAX_TOPK, filter="", output_fields=["id"])
        best = -1
        try:
            while rows := it.next():
                best = max(best, max(int(r["id"]) for r in rows))
        finally:
            it.close()
        return best

    # ------------------------------------------------------------------ mutation
    def add(self, codes, ids=None) -> MilvusCodeStore:
        """Insert codes (``{-1,+1}`` ``(n, n_bits)`` or packed ``uint8``). ``ids``: unique
        non-negative integers not yet held (default: consecutive after the largest id held).
        Returns ``self``."""
        packed = self._checker._packed(codes, "codes")
        n = packed.shape[0]
        if ids is None:
            start = self._max_id() + 1
            new_ids = np.arange(start, start + n, dtype=np.int64)
        else:
            from ...index import check_new_ids

            new_ids = check_new_ids(ids, n)
            dup = self._held(new_ids)
            if dup.size:  # Milvus itself would keep both rows under one primary key
                raise DataError(f"ids already in the store: {np.sort(dup)[:5].tolist()}")
        for start in range(0, n, _INSERT_BATCH):
            stop = min(start + _INSERT_BATCH, n)
            rows = [
                {"id": int(i), "code": c.tobytes()}
                for i, c in zip(new_ids[start:stop].tolist(), packed[start:stop], strict=True)
            ]
            self._client.insert(self.collection, rows)
            if self._count is not None:
                self._count += stop - start
        return self

    def remove_ids(self, ids) -> int:
        """Delete the codes with these ids (ids not held are ignored); returns how many went."""
        ids = np.asarray(ids).reshape(-1)
        if ids.size and not np.issubdtype(ids.dtype, np.integer):
            raise ParameterTypeError(f"ids must be integers, got dtype {ids.dtype}")
        held = self._held(np.unique(ids.astype(np.int64)))
        for start in range(0, held.size, _ID_FILTER_BATCH):
            self._client.delete(self.collection, ids=held[start : start + _ID_FILTER_BATCH].tolist())
        if self._count is not None:
            self._count -= int(held.size)
        return int(held.size)

    def remove_ids_from(self, start: int) -> None:
        """Delete every code whose id is ``>= start``."""
        self._client.delete(self.collection, filter=f"id >= {int(start)}")
        self._count = None

    def reset(self) -> None:
        """Remove every code (the collection stays)."""
        self._client.delete(self.collection, filter="id >= 0")
        self._count = None

    # ------------------------------------------------------------------ search
    def _queries(self, codes) -> tuple[np.ndarray, int]:
        queries = self._checker._packed(codes, "query codes")
        n = self.ntotal
        if n == 0:
            raise DataError("the store is empty: add() codes before searching")
        return queries, n

    def _search(self, queries: np.ndarray, limit: int, radius: int | None = None, id_range=None):
        """One Milvus search: per query, (distances int64, ids int64) as Milvus ordered them."""
        params: dict = {}
        if self.index == "ivf":
            params["nprobe"] = self.nprobe
        if radius is not None:
            params["radius"] = radius + 1  # Milvus keeps distance < radius; ours is inclusive
        kwargs = {}
        if id_range is not None:
            kwargs["filter"] = f"id >= {id_range[0]} and id < {id_range[1]}"
        res = self._client.search(
            self.collection,
            data=[q.tobytes() for q in queries],
            anns_field="code",
            limit=limit,
            search_params={"metric_type": "HAMMING", "params": params},
            **kwargs,
        )
        out = []
        for hits in res:
            d = np.rint([h["distance"] for h in hits]).astype(np.int64)
            i = np.asarray([h["id"] for h in hits], dtype=np.int64)
            out.append((d, i))
        return out

    def _within(self, query: np.ndarray, radius: int, lo: int = 0, hi: int = _ID_BOUND):
        """Every code within ``radius`` of one query with ``lo <= id < hi``: complete however many
        (a full answer splits the id range in halves)."""
        [(d, i)] = self._search(query[None], MAX_TOPK, radius, (lo, hi) if (lo, hi) != (0, _ID_BOUND) else None)
        if d.size < MAX_TOPK:
            return d, i
        mid = lo + (hi - lo) // 2
        d0, i0 = self._within(query, radius, lo, mid)
        d1, i1 = self._within(query, radius, mid, hi)
        return np.concatenate([d0, d1]), np.concatenate([i0, i1])

    def search(self, codes, k: int) -> tuple[np.ndarray, np.ndarray]:
        """The ``k`` nearest codes of each query (``k <= 16384``), as :meth:`HammingIndex.search`:
        ``(distances, ids)``, int32 and int64 ``(n_queries, k)``, ordered by ``(distance, id)``,
        padded with ``-1`` where the store holds fewer than ``k`` codes."""
        k = _check_int(k, "k", 1, MAX_TOPK)
        queries, n = self._queries(codes)
        kk = min(k, n)
        k1 = min(n, 2 * kk + 16, MAX_TOPK)
        n_q = queries.shape[0]
        distances = np.full((n_q, k), -1, dtype=np.int32)
        ids = np.full((n_q, k), -1, dtype=np.int64)
        for start in range(0, n_q, _QUERY_BATCH):
            batch = queries[start : start + _QUERY_BATCH]
            for j, (d, i) in enumerate(self._search(batch, k1)):
                m = min(kk, d.size)  # an IVF search may find fewer than k
                if m and d.size == k1 and k1 < n and d.max() == np.sort(d)[m - 1]:
                    # the k-th distance reaches the last candidate: there may be more such ties
                    d, i = self._within(batch[j], int(np.sort(d)[m - 1]))
                order = np.lexsort((i, d))[:m]
                distances[start + j, :m] = d[order]
                ids[start + j, :m] = i[order]
        return distances, ids

    def range_search(self, codes, radius: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Every code within Hamming distance ``<= radius`` of each query, as
        :meth:`HammingIndex.range_search`: ``(lims, distances, ids)`` in CSR form, each query's hits
        ordered by ``(distance, id)``."""
        radius = _check_int(radius, "radius", 0, self.n_bits)
        queries, n = self._queries(codes)
        limit = min(n, MAX_TOPK)
        counts, dists, hits = [], [], []
        for start in range(0, queries.shape[0], _QUERY_BATCH):
            batch = queries[start : start + _QUERY_BATCH]
            for j, (d, i) in enumerate(self._search(batch, limit, radius)):
                if d.size == MAX_TOPK:
                    d, i = self._within(batch[j], radius)
                order = np.lexsort((i, d))
                counts.append(d.size)
                dists.append(d[order].astype(np.int32))
                hits.append(i[order])
        lims = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=lims[1:])
        return (
            lims,
            np.concatenate(dists) if dists else np.zeros(0, np.int32),
            np.concatenate(hits) if hits else np.zeros(0, np.int64),
        )
