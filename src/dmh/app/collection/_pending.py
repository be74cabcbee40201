"""What a writer of a collection still has to do once its generation is current, recorded in
that generation's ``pending.json`` before its switch (:mod:`dmh.app.collection._remove`): done by the
writer right after the switch where it can be, else by the next writer before anything else."""

from __future__ import annotations

import numbers

import numpy as np

from ...errors import CollectionFileError
from ._codes import open_stores
from ._files import PENDING_NAME, Paths, read_json, write_json


def _is_id(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _finish_pending(P: Paths, *, thumbs: bool = True) -> None:
    """Do what the writer of the current generation listed in its ``pending.json`` (the module
    docstring): in a Milvus store, replace the codes of the items it changed by those of the
    generation's code files; with ``thumbs`` (the next writer), delete the removed items'
    thumbnails. Idempotent; the record goes once all is done."""
    if P.data is None:
        return
    record = P.data / PENDING_NAME
    if not record.is_file():
        return
    todo = read_json(record, "record of pending changes")
    thumb_ids, store_ids = todo.get("thumbs"), todo.get("store")
    if not all(isinstance(v, list) and all(_is_id(i) for i in v) for v in (thumb_ids, store_ids)):
        raise CollectionFileError(record, "is not a record of pending changes (damaged)")
    stores = open_stores(P) if store_ids else None
    if stores is not None:
        from ...index import load_codes

        ids = np.asarray(store_ids, np.int64)
        for modality, target in (("image", "images"), ("text", "texts")):
            store = stores[target]
            try:
                store.remove_ids(ids)
                codes, cids = load_codes(getattr(P, f"{modality}_codes"))
                held = np.isin(cids, ids)
                if held.any():
                    store.add(codes[held], cids[held])
            finally:
                store.close()
    if thumb_ids and not thumbs:  # left for the next writer, which retires the state that lists them
        if store_ids:
            write_json(record, {"thumbs": thumb_ids, "store": []})
        return
    for i in thumb_ids:
        (P.thumbs / f"{i}.jpg").unlink(missing_ok=True)
    record.unlink()
