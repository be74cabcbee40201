"""The files of a collection folder: their names, the manifest, the build record, the features
file and the generations of the data files (read and written here only).

A build writes its data files (features, codes, indexes) at the top of the folder and a manifest of
format 1 (generation 0). Each ``add`` writes a complete new set into ``gen-NNNNNN/`` beside the
current one, then replaces ``manifest.json`` (one ``os.replace``: the switch), whose format 2 names
that folder under ``"data"``. So a reader that reads the manifest once sees one consistent state,
and a writer killed at any moment leaves the previous state whole. Writers hold the collection's
lock (``.dmh-lock``); each removes what killed writers left and the generations before the
previous one (a reader that opened the previous one a moment ago still finds its files).

Item ids are never reused: a new item gets the manifest's ``next_id``, which is the largest listed
id + 1 unless the item holding the largest id was removed. Only then does the manifest record
``"next_id"``, as format 3 (a dmh that reads format 2 at most would give that id again, so it is
refused in one line instead). What a remove or a caption change still has to do once its
generation is current (delete the removed items' thumbnails, bring a Milvus store in line) is
listed in that generation's ``pending.json`` until done: a writer killed after its switch leaves
it to the next writer.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..._atomic import atomic_write_text
from ...errors import CollectionError, CollectionFileError

COLLECTION_FORMAT_VERSION = 3  # the newest manifest format read; a build writes 1 (no "data" folder)
STAGES = ("scan", "features", "fit", "codes", "thumbs")
TARGETS = ("images", "texts")
LOCK_NAME = ".dmh-lock"
#: the data files of one generation (top level for generation 0, else its gen-NNNNNN folder)
DATA_FILES = {"features": "features.npz", "image_codes": "image_codes.npz", "text_codes": "text_codes.npz",
              "image_index": "images.dmhidx", "text_index": "texts.dmhidx"}
_TOP_FILES = {"build": "build.json", "manifest": "manifest.json", "model": "model.npz", "thumbs": "thumbs",
              "work": "work", "store": "store.json", "lock": LOCK_NAME}
#: in a generation's folder: what its writer still does after the switch (:mod:`._remove`)
PENDING_NAME = "pending.json"
_GEN_RE = re.compile(r"^gen-(\d{6})$")
_ADD_WORK_RE = re.compile(r"^\.add-[0-9a-f]{16}$")


def is_collection(path) -> bool:
    """True when ``path`` is a folder holding a collection's ``manifest.json``."""
    p = Path(path)
    return p.is_dir() and (p / "manifest.json").is_file()


def read_json(path: Path, what: str) -> dict:
    """A JSON object from a collection's own file; a damaged one is a :class:`CollectionFileError`."""
    try:
        obj = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CollectionFileError(path, f"{what} not found") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CollectionFileError(path, f"is not a readable {what} ({exc})") from None
    except RecursionError:
        raise CollectionFileError(path, f"is not a readable {what} (nested too deeply)") from None
    if not isinstance(obj, dict):
        raise CollectionFileError(path, f"is not a {what} (a JSON {type(obj).__name__}, not an object)")
    return obj


def read_build_state(path: Path) -> dict:
    state = read_json(path, "collection build record")
    if (state.get("format") != "dmh-collection-build" or not isinstance(state.get("settings"), dict)
            or not isinstance(state.get("done"), list) or not all(s in STAGES for s in state["done"])):
        raise CollectionFileError(path, "is not a dmh collection build record (damaged); rebuild with --restart")
    return state


def write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1, ensure_ascii=False) + "\n")


@dataclass
class Paths:
    """The files of a collection: ``root`` for the shared ones (build record, manifest, model,
    thumbnails), ``data`` (default ``root``) for those of one generation (features, codes, indexes)."""

    root: Path
    data: Path | None = None

    def __getattr__(self, name):  # build.json, manifest.json, ...
        if name in DATA_FILES:
            return (self.data if self.data is not None else self.root) / DATA_FILES[name]
        if name in _TOP_FILES:
            return self.root / _TOP_FILES[name]
        raise AttributeError(name)


def generation_folder(generation: int) -> str:
    return f"gen-{generation:06d}"


def write_manifest(path: Path, items: list[dict], generation: int = 0, next_id: int | None = None) -> None:
    """The manifest: format 1 for generation 0 (data files at the top: what older dmh reads), format
    2 naming the data folder otherwise, format 3 when it must also record ``next_id`` (the largest
    id given was removed). Written atomically: for an add or a remove, this is the switch."""
    if generation == 0:
        write_json(path, {"format": "dmh-collection", "format_version": 1, "items": items})
    elif next_id is not None and next_id > _listed_next_id(items):
        write_json(path, {"format": "dmh-collection", "format_version": 3, "generation": generation,
                           "data": generation_folder(generation), "next_id": int(next_id), "items": items})
    else:
        write_json(path, {"format": "dmh-collection", "format_version": 2, "generation": generation,
                           "data": generation_folder(generation), "items": items})


def _listed_next_id(items: list[dict]) -> int:
    return max((it["id"] for it in items), default=-1) + 1


def read_manifest(path: Path) -> list[dict]:
    return _read_manifest_state(path)[0]


def read_current(root: Path) -> tuple[list[dict], Paths, int]:
    """The collection's current state: ``(items, paths with its data folder, generation)``."""
    return _read_current_state(root)[:3]


def _read_current_state(root: Path) -> tuple[list[dict], Paths, int, int]:
    """``(items, paths, generation, next_id)``: :func:`read_current` and the id a new item gets."""
    items, generation, next_id = _read_manifest_record(root / _TOP_FILES["manifest"])
    P = Paths(root)
    if generation:
        P = Paths(root, root / generation_folder(generation))
        if not P.data.is_dir():
            raise CollectionFileError(P.manifest, f"names the data folder {P.data.name}, which is missing "
                                      "(damaged collection)")
    return items, P, generation, next_id


def _read_manifest_state(path: Path) -> tuple[list[dict], int]:
    return _read_manifest_record(path)[:2]


def _read_manifest_record(path: Path) -> tuple[list[dict], int, int]:
    """``(items, generation, next_id)`` of a manifest, validated."""
    m = read_json(path, "collection manifest")
    if m.get("format") != "dmh-collection":
        raise CollectionFileError(path, "is not a dmh collection manifest")
    version = m.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CollectionFileError(path, f"has no valid format_version (got {version!r})")
    if version > COLLECTION_FORMAT_VERSION:
        raise CollectionFileError(path, f"was written by a newer dmh (collection format {version})")
    generation = 0
    if version >= 2:
        generation = m.get("generation")
        if (not isinstance(generation, int) or isinstance(generation, bool) or generation < 1
                or m.get("data") != generation_folder(generation)):
            raise CollectionFileError(path, "has no valid data generation (damaged manifest)")
    items = m.get("items")
    if not isinstance(items, list):
        raise CollectionFileError(path, "has no list of items (damaged manifest)")
    seen = set()
    for n, it in enumerate(items):
        ok = (isinstance(it, dict) and isinstance(it.get("id"), int) and not isinstance(it.get("id"), bool)
              and it["id"] >= 0 and isinstance(it.get("name"), str)
              and all(isinstance(it.get(k), (str, type(None))) for k in ("image", "caption", "error")))
        if not ok:
            raise CollectionFileError(path, f"item {n} is damaged (expected id, name, image, caption)")
        if it["id"] in seen:
            raise CollectionFileError(path, f"item id {it['id']} appears twice (damaged manifest)")
        seen.add(it["id"])
    next_id = _listed_next_id(items)
    if version >= 3:
        recorded = m.get("next_id")
        if not isinstance(recorded, int) or isinstance(recorded, bool) or recorded < next_id:
            raise CollectionFileError(path, f"has no valid next_id (got {recorded!r}; the largest item id is "
                                      f"{next_id - 1}) (damaged manifest)")
        next_id = recorded
    return items, generation, next_id


def fsync_folder(folder: Path) -> None:
    """The entries of ``folder`` (files renamed into it) on disk before the switch names it."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def clean_leftovers(root: Path, generation: int, keep_work: str | None = None) -> None:
    """Under the collection's lock: remove the generations a killed add left (above ``generation``)
    and those before the previous one; the data files at the top (generation 0) once they are that
    old; and the work folders of other adds (``keep_work`` is this one's)."""
    for entry in os.scandir(root):
        m = _GEN_RE.match(entry.name)
        if m and entry.is_dir(follow_symlinks=False):
            n = int(m[1])
            if n > generation or n < generation - 1:
                shutil.rmtree(entry.path, ignore_errors=True)
        elif _ADD_WORK_RE.match(entry.name) and entry.name != keep_work and entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path, ignore_errors=True)
    if generation >= 2:
        for name in DATA_FILES.values():
            (root / name).unlink(missing_ok=True)


def save_features(path, spec, ids, image, text, image_mask, text_mask) -> None:
    from ...data import CrossModalData
    from ...featurizer_spec import FEATURIZER_KEY
    from ...io import save_data

    keep = image_mask | text_mask
    ids = np.asarray(ids, np.int64)[keep]
    data = CrossModalData(image=image[keep], text=text[keep], image_mask=image_mask[keep],
                          text_mask=text_mask[keep])
    save_data(data, path, extra={FEATURIZER_KEY: spec.to_json_array(), "__ids__": ids})


def load_features(path):
    from ...featurizer_spec import read_featurizer_spec
    from ...io import load_data

    data = load_data(path)
    with np.load(path, allow_pickle=False) as f:
        ids = f["__ids__"].astype(np.int64)
    return data, read_featurizer_spec(path), ids


def check_complete(path: Path) -> None:
    P = Paths(path)
    if not path.is_dir():
        raise CollectionError(f"collection folder not found: {path}")
    if not P.manifest.is_file():
        raise CollectionError(f"{path} is not a dmh collection (no manifest.json); build one with dmh build")
    if not P.build.is_file():
        raise CollectionFileError(P.build, "is missing: the collection's build record is lost; rebuild it "
                                  "with dmh build --restart")
    state = read_build_state(P.build)
    unfinished = [s for s in STAGES[:-1] if s not in state["done"]]
    if unfinished:
        raise CollectionError(
            f"{path} is not finished (stages left: {', '.join(unfinished)}); rerun the same dmh build to resume"
        )
