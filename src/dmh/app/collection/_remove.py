"""Removing items from a built collection and replacing their captions.

Both write the collection as an add does (:func:`dmh.app.collection.add_to_collection`): under the
writers' lock, a complete new generation of data files (features, codes, indexes) is written into
``gen-NNNNNN/`` and switched to by replacing ``manifest.json`` atomically, so a reader sees the old
state or the new one, and a writer killed at any moment before the switch leaves the old one.

What "removed" means:

* the item leaves the manifest, its rows leave the features file and its codes the code files and
  indexes of the new generation; its id is never given again (a later add continues after the
  largest id ever given), and asking for it answers "no item" (404 from ``dmh serve``);
* the whole item goes, photo and caption: an item is the unit a search returns. Dropping only the
  caption of a photo is a caption change (:func:`set_captions` with ``None``);
* the photo file itself is not touched (it is the user's): a later add of a folder that still holds
  it adds it again, as a new item with a new id (move or delete the file to keep it out);
* what a reader of the previous state may still use stays until the next writer (add, remove,
  caption): the previous generation's folder, which holds the removed rows (as after an add), and
  the removed items' thumbnails (a server still answering from that state a moment after the switch
  serves them, instead of failing). No reader of the new state lists the removed items, so none
  shows them;
* the model is not refitted, and a bag of words keeps the vocabulary of the build: the codes of the
  other items do not change.

A replaced caption is featurized with the stored featurizer and encoded with the stored model, as
an added caption is; a bag of words reads only the words of its vocabulary (a caption that has none
of them gets a warning: nothing can find the item by it).

With a Milvus store (``store.json``) the codes are searched in Milvus collections shared by every
generation. Readers keep only the items their manifest lists, so a removed item's code is left in
Milvus until the switch and deleted right after it; a replaced caption's code is replaced there
right after the switch too (for that moment, a text search of the new state may still rank the
item by its old caption).

What remains to do after the switch (those Milvus codes; the thumbnails) is listed in the new
generation's ``pending.json`` before the switch. The writer updates Milvus right after its switch;
the next writer, before anything else, does whatever is still listed and deletes the record. So a
writer killed after its switch leaves nothing undone for good.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from ..._atomic import check_writable
from ...errors import CollectionError, CollectionFileError, UnknownItemError
from . import _build
from ._files import (
    PENDING_NAME,
    Paths,
    _read_current_state,
    check_complete,
    clean_leftovers,
    fsync_folder,
    generation_folder,
    load_features,
    save_features,
    write_json,
    write_manifest,
)
from ._pending import _finish_pending, _is_id

__all__ = ["remove_from_collection", "set_captions"]


def remove_from_collection(path, *, ids=(), images=(), wait: float = _build.LOCK_WAIT, log=print) -> list[int]:
    """Remove items from a built collection, named by ``ids`` (item ids) and/or ``images`` (photo
    paths, as given to the build or add; the file need not exist any more). Returns the ids removed.

    All or nothing: every id and path is checked first, and an unknown id, an id already removed or
    a path that is no item's photo is refused (one :class:`UnknownItemError` naming them all)
    before anything is written. Then as :func:`~dmh.app.collection.add_to_collection`: the new state
    is written beside the current one and switched to atomically; one writer at a time (another
    waits up to ``wait`` seconds for the collection's lock). See the module docstring for what a
    removal keeps and deletes."""
    path = Path(path)
    ids, images = _as_list(ids, "ids"), _as_list(images, "images")
    if not ids and not images:
        raise CollectionError("give the items to remove: ids and/or photo paths")
    refs = [("id", i) for i in ids] + [("photo", p) for p in images]

    def plan(items, P, next_id):
        gone = set(_resolve(path, items, next_id, refs))
        if not any(_searchable(it) for it in items if it["id"] not in gone):
            raise CollectionError(f"{path}: removing {_id_list(gone)} would leave no item to search; to start "
                                  "again, build into a new folder (or dmh build --restart)")
        return gone

    _precheck(path, plan)
    with _build._writer_lock(path, wait, log):
        items, P, generation, next_id = _read_locked(path)
        gone = plan(items, P, next_id)
        return _rewrite(path, items, P, generation, next_id, remove=gone, captions={}, log=log)


def set_captions(path, captions, *, wait: float = _build.LOCK_WAIT, log=print) -> list[int]:
    """Replace the captions of items of a built collection: ``captions`` maps an item (its id, or
    its photo's path) to its new caption, or to ``None`` to drop the caption (the item keeps its
    photo). A photo without a caption gets one. Returns the ids whose caption changed.

    The new captions are featurized with the stored featurizer and encoded with the stored model
    (not refitted; a bag of words keeps its vocabulary). All or nothing and one writer at a time,
    as :func:`remove_from_collection`."""
    path = Path(path)
    if not hasattr(captions, "items"):
        raise CollectionError(f"captions must map items (ids or photo paths) to captions, got "
                              f"{type(captions).__name__}")
    refs, texts = [], []
    for item, caption in captions.items():
        if caption is not None:
            if not isinstance(caption, str):
                raise CollectionError(f"the caption of {item!r} must be text or None, got {type(caption).__name__}")
            caption = " ".join(caption.split())
            if not caption:
                raise CollectionError(f"the new caption of {item!r} is empty; give None to drop the caption")
        refs.append(("id", int(item)) if _is_id(item) else ("photo", _as_path(item, "captions")))
        texts.append(caption)
    if not refs:
        raise CollectionError("give at least one item and its new caption")

    def plan(items, P, next_id):
        return _check_captions(path, items, P, _resolve(path, items, next_id, refs), texts)

    _precheck(path, plan)
    with _build._writer_lock(path, wait, log):
        items, P, generation, next_id = _read_locked(path)
        new = plan(items, P, next_id)
        return _rewrite(path, items, P, generation, next_id, remove=set(), captions=new, log=log)


# ------------------------------------------------------------------------------------ checks
def _as_path(value, what: str) -> str:
    if not isinstance(value, (str, os.PathLike)) or not str(value).strip():
        raise CollectionError(f"{what}: a photo is named by its path, got {value!r}")
    return os.fspath(value)


def _as_list(values, what: str) -> list:
    if isinstance(values, (str, os.PathLike)) or _is_id(values):
        values = [values]
    out = list(values)
    for v in out:
        if what == "ids" and not _is_id(v):
            raise CollectionError(f"ids: item ids are integers, got {v!r}")
        if what == "images":
            _as_path(v, "images")
    return [int(v) for v in out] if what == "ids" else [os.fspath(v) for v in out]


def _searchable(item) -> bool:
    return bool((item["image"] and not item.get("error")) or item["caption"])


def _precheck(path: Path, plan) -> None:
    """Before taking the lock: a complete, writable collection, and a change it accepts (``plan``
    runs again under the lock, on the state there, which is the one that counts): a bad item is
    refused at once, not after waiting for another writer."""
    check_complete(path)
    check_writable(Paths(path).manifest, "COLLECTION")
    items, P, _, next_id = _read_current_state(path)
    plan(items, P, next_id)


def _read_locked(path: Path):
    """Under the lock: the current state, once what the previous writer left to do after its switch
    is done."""
    check_complete(path)
    items, P, generation, next_id = _read_current_state(path)
    _finish_pending(P)
    return items, P, generation, next_id


def _photo_key(photo: str) -> str:
    """A photo path as a collection records it (absolute, symbolic links resolved; the file may be
    gone)."""
    try:
        return str(Path(os.path.expanduser(photo)).resolve())
    except (OSError, ValueError, RuntimeError):  # a NUL byte, a loop of links: no photo of the collection
        return photo


def _resolve(path: Path, items, next_id: int, refs) -> list[int]:
    """The item ids that ``refs`` (``("id", n)`` / ``("photo", path)``) name, in order; every one
    that names no item is reported in one :class:`UnknownItemError`."""
    by_id = {it["id"]: it for it in items}
    by_photo = {}
    for it in items:
        if it["image"]:
            by_photo.setdefault(it["image"], it["id"])
    out, problems = [], []
    for kind, ref in refs:
        if kind == "id":
            if ref in by_id:
                out.append(ref)
            elif 0 <= ref < next_id:
                problems.append(f"item {ref} was already removed")
            else:
                problems.append(f"no item {ref}")
        else:
            found = by_photo.get(ref)
            if found is None:
                found = by_photo.get(_photo_key(ref))
            if found is None:
                problems.append(f"no item has the photo {ref}")
            else:
                out.append(found)
    if problems:
        raise UnknownItemError(f"{path}: {'; '.join(problems)}; nothing was changed")
    return out


def _check_captions(path: Path, items, P: Paths, ids: list[int], texts: list) -> dict[int, str | None]:
    """``{id: new caption or None}`` of the items whose caption changes; refused when an item is
    named twice with two captions, would be left with neither photo nor caption, or the collection
    has no text featurizer."""
    by_id = {it["id"]: it for it in items}
    new: dict[int, str | None] = {}
    for i, text in zip(ids, texts, strict=True):
        if i in new and new[i] != text:
            raise CollectionError(f"{path}: item {i} is given two different captions")
        new[i] = text
    for i, text in new.items():
        it = by_id[i]
        if text is None and (not it["image"] or it.get("error")):
            why = "no photo" if not it["image"] else "no readable photo"
            raise CollectionError(f"{path}: item {i} has {why}, so without its caption nothing would be "
                                  "left of it; remove it with dmh remove instead")
    changed = {i: t for i, t in new.items() if by_id[i]["caption"] != t}
    if any(t is not None for t in changed.values()):
        from ...featurizer_spec import read_featurizer_spec

        spec = read_featurizer_spec(P.features)
        if spec is not None and spec.text is None:
            raise CollectionError(f"{path} was built without captions, so it cannot index new captions")
    return changed


# ------------------------------------------------------------------------------ the rewrite
def _checkpoint(step: str) -> None:
    _build._checkpoint(step)  # one hook for every writer (the tests kill a writer there)


def _rewrite(path: Path, items, P: Paths, generation: int, next_id: int, *, remove: set, captions: dict,
             log) -> list[int]:
    """Under the lock: write the generation without the items ``remove`` and with the captions
    ``captions`` (``{id: text or None}``), and switch to it."""
    from ...index import HammingIndex, load_codes, save_codes
    from ..rerank import compact_values

    changed = sorted(remove | set(captions))
    if not changed:
        log(f"nothing to change: the items already have those captions ({path})")
        return []
    by_id = {it["id"]: it for it in items}
    kept = [dict(it, caption=captions[it["id"]]) if it["id"] in captions else it
            for it in items if it["id"] not in remove]
    clean_leftovers(path, generation)  # what killed writers left
    _checkpoint("validated")
    text_ids = np.array(sorted(i for i, t in captions.items() if t is not None), np.int64)
    text_X, text_codes, text_values, spec = None, None, None, None
    if captions:
        text_X, text_codes, text_values, spec = _encode_captions(P, [captions[i] for i in text_ids.tolist()])
    Pn = Paths(path, path / generation_folder(generation + 1))
    Pn.data.mkdir()
    listed = np.array([it["id"] for it in kept], np.int64)

    # features: the kept rows, the new captions' rows replaced (or added, for an item that had none)
    data, fspec, fids = load_features(P.features)
    keep = np.isin(fids, listed)
    fids = fids[keep]
    image, image_mask = data.image[keep].astype(np.float32), data.image_mask[keep].copy()
    text, text_mask = data.text[keep].astype(np.float32), data.text_mask[keep].copy()
    del data
    if captions:
        row = {int(i): r for r, i in enumerate(fids.tolist())}
        extra = [i for i in captions if i not in row]
        if extra:  # an item that had no features row (its photo unreadable) gets one for its caption
            fids = np.concatenate([fids, np.array(extra, np.int64)])
            image = np.concatenate([image, np.zeros((len(extra), image.shape[1]), np.float32)])
            image_mask = np.concatenate([image_mask, np.zeros(len(extra), bool)])
            text = np.concatenate([text, np.zeros((len(extra), text.shape[1]), np.float32)])
            text_mask = np.concatenate([text_mask, np.zeros(len(extra), bool)])
            row.update({i: len(row) + n for n, i in enumerate(extra)})
        if text_ids.size and text.shape[1] != text_X.shape[1]:
            raise CollectionFileError(P.features, f"holds {text.shape[1]} text features per caption but the "
                                      f"model's featurizer gives {text_X.shape[1]} (damaged collection)")
        for i, t in captions.items():
            r = row[i]
            text_mask[r] = t is not None
            text[r] = 0.0
        for j, i in enumerate(text_ids.tolist()):
            text[row[i]] = text_X[j]
        order = np.argsort(fids, kind="stable")
        fids, image, image_mask, text, text_mask = (a[order] for a in (fids, image, image_mask, text, text_mask))
    if fspec is None:  # pragma: no cover - a features file that does not record its featurizer
        from ...base import load_model

        fspec = spec or load_model(P.model).featurizer_
    save_features(Pn.features, fspec, fids, image, text, image_mask, text_mask)
    del image, text
    _checkpoint("features-saved")

    # codes and indexes (the local code files name the items of a generation, in Milvus too)
    milvus = P.store.is_file()
    for modality in ("image", "text"):
        # the real values behind the codes (re-ranking) are kept where the collection has them
        codes, cids, values = load_codes(getattr(P, f"{modality}_codes"), with_values=True)
        keep = np.isin(cids, listed)
        if modality == "text":
            keep &= ~np.isin(cids, list(captions))
        codes, cids = codes[keep], cids[keep]
        values = None if values is None else values[keep]
        if modality == "text" and text_ids.size:
            codes, cids = np.concatenate([codes, text_codes]), np.concatenate([cids, text_ids])
            if values is not None:
                values = np.concatenate([values, compact_values(text_values)])
            order = np.argsort(cids, kind="stable")
            codes, cids = codes[order], cids[order]
            values = None if values is None else values[order]
        save_codes(getattr(Pn, f"{modality}_codes"), codes, cids, modality=modality, values=values)
        if not milvus:
            index = HammingIndex(codes.shape[1])
            if cids.size:
                index.add(codes, cids)
            index.save(getattr(Pn, f"{modality}_index"))
    pending = {"thumbs": sorted(i for i in remove if by_id[i]["image"]), "store": changed if milvus else []}
    if pending["thumbs"] or pending["store"]:
        write_json(Pn.data / PENDING_NAME, pending)
    _checkpoint("codes")
    fsync_folder(Pn.data)
    write_manifest(P.manifest, kept, generation + 1, next_id)  # the switch
    _checkpoint("switched")
    _finish_pending(Pn, thumbs=False)
    clean_leftovers(path, generation + 1)
    if remove:
        log(f"removed {len(remove)} item(s) from {path}: {_id_list(remove)}")
    if captions:
        n_new = sum(1 for t in captions.values() if t is not None)
        dropped = len(captions) - n_new
        log(f"{n_new} caption(s) replaced" + (f", {dropped} dropped" if dropped else "")
            + f" in {path}: {_id_list(captions)}")
    return changed


def _id_list(ids, shown: int = 20) -> str:
    ids = sorted(ids)
    text = ", ".join(map(str, ids[:shown]))
    return text + (f" and {len(ids) - shown} more" if len(ids) > shown else "")


def _encode_captions(P: Paths, texts: list[str]):
    """Text features, codes and the real values behind the codes of new captions, with the stored
    featurizer and model."""
    import warnings

    from ...base import load_model

    model = load_model(P.model)
    spec = model.featurizer_
    missing = spec.missing_extras() if spec.text is not None else []
    if missing:
        from ...featurize import MissingExtraError

        raise MissingExtraError(missing[0])
    if not texts:
        return np.zeros((0, 1), np.float32), np.zeros((0, model.n_bits_), np.int8), np.zeros((0, model.n_bits_)), spec
    X = np.asarray(spec.text_features(texts), np.float32)
    blank = [t for t, x in zip(texts, X, strict=True) if not x.any()]
    if blank and spec.text.get("model") == "bow":
        shown = "; ".join(repr(t if len(t) <= 60 else t[:57] + "...") for t in blank[:3])
        warnings.warn(f"{len(blank)} new caption(s) have none of the words of the collection's vocabulary, so no "
                      f"text search can find their items by them: {shown}", UserWarning, stacklevel=3)
    from ...base import sign_codes

    values = model.project(X, modality="text")
    return X, sign_codes(values), values, spec
