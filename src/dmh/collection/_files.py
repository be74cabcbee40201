"""The files of a collection folder: their names, the manifest, the build record and the
features file (read and written here only)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._atomic import atomic_write_text
from ..errors import CollectionError, CollectionFileError

COLLECTION_FORMAT_VERSION = 1
STAGES = ("scan", "features", "fit", "codes", "thumbs")
TARGETS = ("images", "texts")


def is_collection(path) -> bool:
    """True when ``path`` is a folder holding a collection's ``manifest.json``."""
    p = Path(path)
    return p.is_dir() and (p / "manifest.json").is_file()


def _read_json(path: Path, what: str) -> dict:
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


def _read_build_state(path: Path) -> dict:
    state = _read_json(path, "collection build record")
    if (state.get("format") != "dmh-collection-build" or not isinstance(state.get("settings"), dict)
            or not isinstance(state.get("done"), list) or not all(s in STAGES for s in state["done"])):
        raise CollectionFileError(path, "is not a dmh collection build record (damaged); rebuild with --restart")
    return state


def _write_json(path: Path, obj) -> None:
    atomic_write_text(path, json.dumps(obj, indent=1, ensure_ascii=False) + "\n")


@dataclass
class _Paths:
    root: Path

    def __getattr__(self, name):  # build.json, manifest.json, ...
        files = {
            "build": "build.json", "manifest": "manifest.json", "features": "features.npz",
            "model": "model.npz", "image_codes": "image_codes.npz", "text_codes": "text_codes.npz",
            "image_index": "images.dmhidx", "text_index": "texts.dmhidx", "thumbs": "thumbs", "work": "work",
            "store": "store.json",
        }
        if name not in files:
            raise AttributeError(name)
        return self.root / files[name]


def _write_manifest(path: Path, items: list[dict]) -> None:
    _write_json(path, {"format": "dmh-collection", "format_version": COLLECTION_FORMAT_VERSION, "items": items})


def _read_manifest(path: Path) -> list[dict]:
    m = _read_json(path, "collection manifest")
    if m.get("format") != "dmh-collection":
        raise CollectionFileError(path, "is not a dmh collection manifest")
    version = m.get("format_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise CollectionFileError(path, f"has no valid format_version (got {version!r})")
    if version > COLLECTION_FORMAT_VERSION:
        raise CollectionFileError(path, f"was written by a newer dmh (collection format {version})")
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
    return items


def _save_features(path, spec, ids, image, text, image_mask, text_mask) -> None:
    from ..data import CrossModalData
    from ..featurizer_spec import FEATURIZER_KEY
    from ..io import save_data

    keep = image_mask | text_mask
    ids = np.asarray(ids, np.int64)[keep]
    data = CrossModalData(image=image[keep], text=text[keep], image_mask=image_mask[keep],
                          text_mask=text_mask[keep])
    save_data(data, path, extra={FEATURIZER_KEY: spec.to_json_array(), "__ids__": ids})


def _load_features(path):
    from ..featurizer_spec import read_featurizer_spec
    from ..io import load_data

    data = load_data(path)
    with np.load(path, allow_pickle=False) as f:
        ids = f["__ids__"].astype(np.int64)
    return data, read_featurizer_spec(path), ids


def _check_complete(path: Path) -> None:
    P = _Paths(path)
    if not path.is_dir():
        raise CollectionError(f"collection folder not found: {path}")
    if not P.manifest.is_file():
        raise CollectionError(f"{path} is not a dmh collection (no manifest.json); build one with dmh build")
    if not P.build.is_file():
        raise CollectionFileError(P.build, "is missing: the collection's build record is lost; rebuild it "
                                  "with dmh build --restart")
    state = _read_build_state(P.build)
    unfinished = [s for s in STAGES[:-1] if s not in state["done"]]
    if unfinished:
        raise CollectionError(
            f"{path} is not finished (stages left: {', '.join(unfinished)}); rerun the same dmh build to resume"
        )
