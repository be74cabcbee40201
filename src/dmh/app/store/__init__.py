"""Where a collection keeps its codes: the local :class:`dmh.index.HammingIndex` (default) or a
Milvus collection (:class:`dmh.app.store.milvus.MilvusCodeStore`, optional ``dmh[milvus]``).

A store is named on the command line as ``local`` or ``milvus[:URI]``: ``milvus`` alone is an
embedded milvus-lite file (``DEFAULT_MILVUS_FILE`` in the output folder), ``milvus:path/codes.db``
another file, ``milvus:http://host:19530`` a Milvus server. Importing this package imports neither
pymilvus nor anything heavy.
"""

from __future__ import annotations

from dataclasses import dataclass

from ...errors import ParameterError

__all__ = ["DEFAULT_MILVUS_FILE", "StoreSpec", "MilvusCodeStore", "parse_store"]

DEFAULT_MILVUS_FILE = "codes.db"


@dataclass(frozen=True)
class StoreSpec:
    """A parsed ``--store`` value: ``kind`` ``"local"`` or ``"milvus"``, and the Milvus ``uri``
    (None: the default file)."""

    kind: str
    uri: str | None = None


def parse_store(value: str | None) -> StoreSpec:
    """``"local"`` / ``"milvus"`` / ``"milvus:URI"`` -> :class:`StoreSpec` (ValueError otherwise)."""
    if value is None or value == "local":
        return StoreSpec("local")
    kind, _, uri = str(value).partition(":")
    if kind != "milvus":
        raise ParameterError(f"store must be 'local', 'milvus' or 'milvus:URI', got {value!r}")
    if _ and not uri:
        raise ParameterError(f"store {value!r}: give the Milvus URI after 'milvus:' (a .db file or http://host:port)")
    if uri and not (uri.endswith(".db") or "://" in uri):
        raise ParameterError(
            f"store {value!r}: the Milvus URI must be a milvus-lite file ending in .db or a server "
            "address such as http://localhost:19530"
        )
    return StoreSpec("milvus", uri or None)


def __getattr__(name):  # lazy: pymilvus only when the store is used
    if name == "MilvusCodeStore":
        from .milvus import MilvusCodeStore

        return MilvusCodeStore
    raise AttributeError(f"module 'dmh.app.store' has no attribute {name!r}")
