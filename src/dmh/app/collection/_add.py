"""Adding new photos and captions to a built collection: only they are featurized, encoded and
indexed, into a new generation switched to by one atomic replace of the manifest."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np

from ..._atomic import check_writable
from ...errors import CollectionError
from . import _build
from ._codes import write_codes
from ._features import featurize_items
from ._files import (
    Paths,
    _read_current_state,
    check_complete,
    clean_leftovers,
    fsync_folder,
    generation_folder,
    load_features,
    save_features,
    write_manifest,
)
from ._inputs import scan_inputs
from ._pending import _finish_pending
from ._thumbs import make_thumbnails


def add_to_collection(path, photos=None, captions=None, *, batch_size: int = 16, progress: bool = True,
                      log=print, ray=None, wait: float = _build.LOCK_WAIT) -> int:
    """Add new photos and/or captions to a built collection: only they are featurized (with the
    stored featurizer), encoded (with the stored model) and indexed. Photos already in the
    collection are skipped. ``ray``: a :class:`dmh.app.distributed.RayOptions` to featurize and
    encode on Ray. Returns the number of items added.

    All or nothing: the new state is written beside the current one and switched to by one atomic
    replace of the manifest (see :mod:`dmh.app.collection._files`); killed before that, the collection
    is the old one, and a rerun of the same add reuses the image features already computed. One
    build or add at a time: another waits up to ``wait`` seconds for the collection's lock."""
    path = Path(path)
    P0 = Paths(path)
    check_complete(path)
    if photos is None and captions is None:
        raise CollectionError("give a photos folder, a captions file, or both")
    check_writable(P0.manifest, "COLLECTION")  # before any work: a read-only collection is refused now
    with _build._writer_lock(path, wait, log):
        return _add_locked(path, photos, captions, batch_size=batch_size, progress=progress, log=log, ray=ray)


def _add_locked(path: Path, photos, captions, *, batch_size, progress, log, ray) -> int:
    import hashlib
    import json

    from ...base import load_model
    from ...index import load_codes
    from ..rerank import compact_values

    check_complete(path)
    items, P, generation, next_id = _read_current_state(path)
    _finish_pending(P)  # what the previous remove or caption change left to do after its switch
    known = {it["image"] for it in items if it["image"]}
    new, skipped = scan_inputs(photos, captions, known)
    if skipped:
        log(f"{skipped} photo(s) already in the collection skipped")
    if not new:
        clean_leftovers(path, generation)
        log("nothing new to add")
        return 0
    start = next_id  # ids are never reused: not those of removed items either
    for i, it in enumerate(new):
        it["id"] = start + i
    model = load_model(P.model)
    spec = model.featurizer_
    missing = spec.missing_extras()
    if missing:
        from ...featurize import MissingExtraError

        raise MissingExtraError(missing[0])
    if spec.text is None and any(it["caption"] for it in new):
        raise CollectionError(f"{path} was built without captions, so it cannot index new captions")
    if spec.image is None and any(it["image"] for it in new):
        raise CollectionError(f"{path} was built without photos, so it cannot index new photos")
    # the image features of this add are kept in a work folder named by what it adds, so that a
    # rerun of an interrupted add resumes them; whatever other adds left is removed
    key = hashlib.sha1(json.dumps([generation, [[it["id"], it["image"], it["caption"]] for it in new]])
                       .encode("utf-8")).hexdigest()[:16]
    work = path / f".add-{key}"
    clean_leftovers(path, generation, keep_work=work.name)
    work.mkdir(exist_ok=True)
    _build._checkpoint("scanned")
    image, text, image_mask, text_mask = featurize_items(new, spec, work=work, batch_size=batch_size,
                                                          progress=progress, ray=ray)
    _build._checkpoint("features")
    ids = np.array([it["id"] for it in new], np.int64)
    # the new generation: every data file written in full into its own folder
    Pn = Paths(path, path / generation_folder(generation + 1))
    Pn.data.mkdir()
    listed = np.array([it["id"] for it in items], np.int64)
    old = {}
    for m in ("image", "text"):
        codes, cids, values = load_codes(getattr(P, f"{m}_codes"), with_values=True)
        keep_old = np.isin(cids, listed)  # a collection an older dmh grew may hold codes of unlisted items
        old[m] = (codes[keep_old], cids[keep_old], None if values is None else values[keep_old])
    data, _, old_ids = load_features(P.features)
    row_of = {int(i): r for r, i in enumerate(old_ids.tolist())}
    for m in ("image", "text"):  # a collection built before values were kept gets them now, once
        codes, cids, values = old[m]
        if values is None and all(int(i) in row_of for i in cids.tolist()):
            rows = np.array([row_of[int(i)] for i in cids.tolist()], np.int64)
            values = (model.project(getattr(data, m)[rows], modality=m) if rows.size
                      else np.zeros((0, model.n_bits_)))
            old[m] = (codes, cids, compact_values(values))
    keep_old = np.isin(old_ids, listed)
    save_features(
        Pn.features, spec, np.concatenate([old_ids[keep_old], ids]),
        np.concatenate([data.image[keep_old].astype(np.float32), image]),
        np.concatenate([data.text[keep_old].astype(np.float32), text]),
        np.concatenate([data.image_mask[keep_old], image_mask]),
        np.concatenate([data.text_mask[keep_old], text_mask]),
    )
    del data
    _build._checkpoint("features-saved")
    write_codes(Pn, model, image, text, image_mask, text_mask, ids, old, ray=ray)
    _build._checkpoint("codes")
    for it in new:  # a thumbnail under a new id is one an interrupted add left: of another photo
        (P.thumbs / f"{it['id']}.jpg").unlink(missing_ok=True)
    make_thumbnails(P.thumbs, new, progress=progress)
    _build._checkpoint("thumbs")
    fsync_folder(Pn.data)
    write_manifest(P.manifest, items + new, generation + 1, start + len(new))  # the switch
    _build._checkpoint("switched")
    shutil.rmtree(work, ignore_errors=True)
    clean_leftovers(path, generation + 1)
    keep = image_mask | text_mask
    log(f"added {int(keep.sum())} item(s) ({int(image_mask.sum())} photos, {int(text_mask.sum())} captions) to {path}")
    return len(new)
