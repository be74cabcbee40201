"""Hash codes of a collection and where they are searched: index files, or Milvus collections
(``store.json``)."""

from __future__ import annotations

import contextlib
import hashlib
import shutil
from pathlib import Path

import numpy as np

from ._files import TARGETS, Paths, read_json, write_json


def write_store_record(P: Paths, out: Path, store: str) -> None:
    """``store.json``: where the codes are searched (Milvus URI and collection names)."""
    from ..store import DEFAULT_MILVUS_FILE, parse_store

    spec = parse_store(store)
    uri = spec.uri or DEFAULT_MILVUS_FILE  # relative: inside the collection folder, moves with it
    tag = hashlib.sha1(str(out.resolve()).encode("utf-8")).hexdigest()[:10]
    write_json(P.store, {"store": "milvus", "uri": uri,
                          "collections": {t: f"dmh_{tag}_{t}" for t in TARGETS}})


def open_stores(P: Paths, n_bits: int | None = None) -> dict | None:
    """The Milvus stores of a collection (None: it keeps local index files)."""
    if not P.store.is_file():
        return None
    from ..store.milvus import MilvusCodeStore

    record = read_json(P.store, "collection store record")
    uri = record["uri"]
    if "://" not in uri and not Path(uri).is_absolute():
        uri = str(P.root / uri)
    return {t: MilvusCodeStore(uri, record["collections"][t], n_bits=n_bits) for t in TARGETS}


def _encode(P: Paths, model, X, modality: str, ids, ray):
    """Codes of feature rows and the real values whose signs they are (``model.project``): here,
    or the codes on Ray (through code shards under work/) and the values here."""
    from ...base import check_method_output, sign_codes

    if X.shape[0] == 0:
        return np.zeros((0, model.n_bits_), np.int8), np.zeros((0, model.n_bits_))
    values = check_method_output(model, model.project(X, modality=modality), X.shape[0], modality, "project")
    if ray is None:
        return sign_codes(values), values
    from ...index import unpack_codes
    from ..distributed import encode_to_shards, read_code_shards

    shards = P.work / f"codes-{modality}"
    shutil.rmtree(shards, ignore_errors=True)
    P.work.mkdir(exist_ok=True)
    encode_to_shards(P.model, shards, modality=modality, features=X, ids=ids, options=ray)
    packed, got, _, _ = read_code_shards(shards)
    shutil.rmtree(shards, ignore_errors=True)
    with contextlib.suppress(OSError):
        P.work.rmdir()  # only when empty: a resumable features stage keeps its chunks there
    order = np.argsort(ids, kind="stable")
    if not np.array_equal(got, ids[order]):  # pragma: no cover - a lost row would be a Ray bug
        raise RuntimeError("the Ray encoding returned other ids than it was given")
    codes = np.empty((ids.size, model.n_bits_), np.int8)
    codes[order] = unpack_codes(packed, model.n_bits_)
    return codes, values


def write_codes(P: Paths, model, image, text, image_mask, text_mask, ids, old, ray=None) -> None:
    """Codes of the masked rows, appended to ``old`` (``{modality: (codes, ids)}``) when given,
    saved with their indexes (rebuilt from all codes: cheap, and never half-updated) and with the
    real values behind them (kept beside the codes, for re-ranking; ``old`` may hold ``None`` values:
    a collection built before they were kept, whose code files then stay without them). A collection
    kept in Milvus gets its collections recreated on a build, and on an add the new codes (after
    removing any that an interrupted add left there)."""
    from ...index import HammingIndex, save_codes
    from ..rerank import compact_values

    stores = open_stores(P, n_bits=model.n_bits_)
    for modality, X, mask in (("image", image, image_mask), ("text", text, text_mask)):
        new_codes, values = _encode(P, model, X[mask], modality, ids[mask], ray)
        codes, cids = new_codes, ids[mask]
        if old is not None:
            codes = np.concatenate([old[modality][0], codes])
            cids = np.concatenate([old[modality][1], cids])
            old_values = old[modality][2]  # float16 rows of unit length, as stored: kept as they are
            values = None if old_values is None else np.concatenate([old_values, compact_values(values)])
        save_codes(getattr(P, f"{modality}_codes"), codes, cids, modality=modality, values=values)
        if stores is not None:
            target = f"{modality}s"
            store = stores[target]
            if old is None:
                store.drop()
                store.close()
                store = stores[target] = type(store)(store.uri, store.collection, n_bits=model.n_bits_)
            elif ids.size:
                store.remove_ids_from(int(ids.min()))  # leftovers of an interrupted add
            if new_codes.shape[0]:
                store.add(new_codes, ids[mask])
            store.close()
            continue
        index = HammingIndex(model.n_bits_)
        if codes.shape[0]:
            index.add(codes, cids)
        index.save(getattr(P, f"{modality}_index"))
