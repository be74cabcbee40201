"""A searchable collection: a folder of photos and a file of captions, only some of which belong
together, turned into everything needed to search it by words or by picture.

``build_collection(photos, captions, out)`` writes into the folder ``out``:

=====================  ==========================================================================
file                   content
=====================  ==========================================================================
``build.json``         the build settings and the stages finished (a rerun skips those)
``manifest.json``      the items: ``id`` (0, 1, ...), ``name``, ``image`` (absolute path or null),
                       ``caption`` (or null), and ``error`` for a photo that could not be read
``features.npz``       the features (:func:`dmh.io.save_data` layout; ``__ids__`` maps rows to item
                       ids; ``__featurizer__`` holds the featurizer settings)
``model.npz``          the fitted hashing model, with its featurizer (so raw queries can be encoded)
``image_codes.npz``    codes of the items' photos / captions (:func:`dmh.index.save_codes`, ids =
``text_codes.npz``     item ids)
``images.dmhidx``      Hamming indexes of those codes (:class:`dmh.index.HammingIndex`), or with
``texts.dmhidx``       ``store="milvus[:URI]"`` ``store.json``: the codes are searched in two Milvus
                       collections (:class:`dmh.store.milvus.MilvusCodeStore`; default URI the
                       milvus-lite file ``codes.db`` in the folder)
``thumbs/ID.jpg``      thumbnails (longest side 256 px), made once
=====================  ==========================================================================

**Captions file** (CSV, header row; ``.tsv``/``.tab`` tab-separated): columns ``image`` and
``caption``. ``image`` names a file of the photos folder (``beach.jpg``, or its stem ``beach``);
an empty ``image`` makes a caption without a photo; an empty ``caption`` (or a photo the file does
not list) makes a photo without a caption. So any mix of paired, photo-only and caption-only items
is allowed (semi-paired data, the premise of DMH). A photo may appear on one row only.

Stages: ``scan`` (manifest) -> ``features`` (image features saved every 512 photos, so an
interrupted run resumes mid-way) -> ``fit`` -> ``codes`` (codes and indexes) -> ``thumbs``.
``add_to_collection`` featurizes, encodes and indexes only new items, with the stored featurizer
and model (the model is not refitted; the bag-of-words vocabulary stays that of the build).

``ray=RayOptions(...)`` (:mod:`dmh.distributed`) runs the image features and the hash codes of
``build_collection`` / ``add_to_collection`` as Ray Data stages (a local runtime or a cluster);
the results are those of the single-process path.
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import io
import json
import shutil
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._atomic import atomic_path, atomic_write_text, check_writable
from .errors import CollectionError, CollectionFileError, OutputError, UnknownItemError

__all__ = [
    "COLLECTION_FORMAT_VERSION",
    "Collection",
    "CollectionError",
    "Hit",
    "add_to_collection",
    "build_collection",
    "is_collection",
    "read_captions",
]

COLLECTION_FORMAT_VERSION = 1
STAGES = ("scan", "features", "fit", "codes", "thumbs")
TARGETS = ("images", "texts")
THUMB_SIZE = 256
IMAGE_CHUNK = 512
RAY_IMAGE_CHUNK = 16_384  # photos per Ray job (each starts its actors): resumable in these steps
MAX_QUERY_PIXELS = 50_000_000


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


# ----------------------------------------------------------------------------------------- inputs
def read_captions(path) -> list[tuple[str | None, str | None, int]]:
    """Rows of a captions file as ``(image name or None, caption or None, line number)``.

    See the module docstring for the format. Raises :class:`CollectionError` (one line naming
    the file and line) on a missing column, a row with neither image nor caption, or a photo
    named twice.
    """
    path = Path(path)
    if not path.is_file():
        raise CollectionError(f"captions file not found: {path}")
    try:
        raw = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise CollectionError(f"{path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    if "\x00" in raw:
        line = raw[: raw.index("\x00")].count("\n") + 1
        raise CollectionError(f"{path}, line {line}: holds a NUL byte (is it a text file?)")
    delimiter = "\t" if path.suffix.lower() in (".tsv", ".tab") else ","
    reader = csv.DictReader(io.StringIO(raw, newline=""), delimiter=delimiter)
    columns = [c.strip() for c in (reader.fieldnames or [])]
    missing = [c for c in ("image", "caption") if c not in columns]
    if missing:
        raise CollectionError(
            f"{path} lacks the column(s) {missing}: the header must name 'image' and 'caption' "
            f"(found {columns})"
        )
    reader.fieldnames = columns
    rows, seen = [], {}
    try:
        for row in reader:
            line = reader.line_num
            image = (row.get("image") or "").strip() or None
            caption = " ".join((row.get("caption") or "").split()) or None
            if image is None and caption is None:
                raise CollectionError(f"{path}, line {line}: both 'image' and 'caption' are empty")
            if image is not None:
                if image in seen:
                    raise CollectionError(
                        f"{path}, line {line}: image {image!r} was already given on line {seen[image]} "
                        "(one row per photo)"
                    )
                seen[image] = line
            rows.append((image, caption, line))
    except csv.Error as exc:
        if "field larger than field limit" in str(exc):
            raise CollectionError(f"{path}, line {reader.line_num + 1}: a field is longer than "
                                  f"{csv.field_size_limit():,} characters (is it a captions file?)") from None
        raise CollectionError(f"{path}, line {reader.line_num}: {exc}") from None
    return rows


def _find_photos(folder) -> dict[str, Path]:
    from .featurize import find_images

    folder = Path(folder)
    if not folder.is_dir():
        raise CollectionError(f"photos folder not found: {folder}")
    try:
        files, _ = find_images(folder)
    except ValueError as exc:
        raise CollectionError(str(exc)) from None
    return {k: p.resolve() for k, p in files.items()}


def _scan(photos, captions, known_images=frozenset()) -> tuple[list[dict], int]:
    """New items from a photos folder and/or captions file (photos in ``known_images`` -- resolved
    path strings -- are skipped); returns ``(items without ids, number skipped)``."""
    files = _find_photos(photos) if photos is not None else {}
    by_name = {p.name: p for p in files.values()}
    rows = read_captions(captions) if captions is not None else []
    items, used, skipped = [], set(), 0
    for image, caption, line in rows:
        path = None
        if image is not None:
            path = by_name.get(image) or files.get(image)
            if path is None:
                where = f"the photos folder {photos}" if photos is not None else "any photos folder (none given)"
                raise CollectionError(f"{captions}, line {line}: image {image!r} is not in {where}")
            used.add(path)
            if str(path) in known_images:
                skipped += 1
                continue
        items.append({"name": path.stem if path else f"caption-{line}", "image": str(path) if path else None,
                      "caption": caption})
    for stem in sorted(files):
        path = files[stem]
        if path in used:
            continue
        if str(path) in known_images:
            skipped += 1
            continue
        items.append({"name": stem, "image": str(path), "caption": None})
    return items, skipped


# ----------------------------------------------------------------------------------------- featurize
def _image_features_chunked(items, spec, work: Path | None, batch_size: int, progress: bool, ray=None):
    """Image features of the items with a photo; chunks of IMAGE_CHUNK (RAY_IMAGE_CHUNK with
    ``ray``) saved under ``work`` (when given) so that an interrupted build resumes. Returns
    ``(features, rows, failures)``."""
    from tqdm.auto import tqdm

    from .featurize import image_features

    rows = [i for i, it in enumerate(items) if it["image"]]
    encoder = None
    parts, ok_all, failures = [], [], []
    step = RAY_IMAGE_CHUNK if ray is not None else IMAGE_CHUNK
    session = contextlib.nullcontext()
    if ray is not None and rows:
        from .distributed import ray_session

        session = ray_session(ray)
    with session, tqdm(total=len(rows), unit="img", desc="image features", disable=not progress) as bar:
        for start in range(0, len(rows), step):
            chunk = rows[start : start + step]
            part = work / f"images-{start:08d}.npz" if work is not None else None
            if part is not None and part.is_file():
                with np.load(part, allow_pickle=False) as f:
                    feats, ok = f["features"], f["ok"]
                    fails = json.loads(f["failures"].tobytes().decode("utf-8"))
            elif ray is not None:
                from .distributed import ray_image_features

                feats, ok, fails = ray_image_features(
                    [items[i]["image"] for i in chunk], encoder_factory=spec.image_encoder, options=ray
                )
            else:
                encoder = encoder or spec.image_encoder()
                feats, ok, fails = image_features(
                    [items[i]["image"] for i in chunk], encoder=encoder, batch_size=batch_size, progress=False
                )
                fails = [[str(p), r] for p, r in fails]
                if part is not None:
                    with atomic_path(part) as tmp, open(tmp, "wb") as fh:
                        np.savez(fh, features=feats, ok=ok,
                                 failures=np.frombuffer(json.dumps(fails).encode(), dtype=np.uint8))
            parts.append(feats)
            ok_all.append(ok)
            failures += fails
            bar.update(len(chunk))
    if not rows:
        return np.zeros((0, 1), np.float32), np.zeros(0, bool), rows, []
    return np.concatenate(parts), np.concatenate(ok_all), rows, failures


def _featurize_items(items, spec, *, work=None, batch_size=16, progress=True, ray=None):
    """Features of items (dicts with ``image`` / ``caption``) with a fixed featurizer ``spec``.
    Returns ``(image (n, d_i), text (n, d_t), image_mask, text_mask)``; an unreadable photo is
    recorded in its item's ``error`` and leaves its image row masked out."""
    n = len(items)
    d_img = int(spec.image["n_features"]) if spec.image else 1
    image = np.zeros((n, d_img), np.float32)
    image_mask = np.zeros(n, bool)
    if spec.image is not None:
        feats, ok, rows, failures = _image_features_chunked(items, spec, work, batch_size, progress, ray)
        if rows:
            image = np.zeros((n, feats.shape[1]), np.float32)
            image[rows] = feats
            image_mask[rows] = ok
        reasons = dict(failures)
        for i in rows:
            if not image_mask[i]:
                items[i]["error"] = reasons.get(items[i]["image"], "unreadable")
        if failures:
            shown = "; ".join(f"{Path(p).name} ({r})" for p, r in failures[:5])
            warnings.warn(f"{len(failures)} unreadable photo(s) skipped: {shown}", UserWarning, stacklevel=2)
    text_mask = np.array([bool(it["caption"]) for it in items], bool)
    d_txt = int(spec.text["n_features"]) if spec.text else 1
    text = np.zeros((n, d_txt), np.float32)
    if spec.text is not None and text_mask.any():
        X = spec.text_features([items[i]["caption"] for i in np.flatnonzero(text_mask)])
        text = np.zeros((n, X.shape[1]), np.float32)
        text[text_mask] = X
    return image, text, image_mask, text_mask


# ----------------------------------------------------------------------------------------- build
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


def _settings(photos, captions, *, method, n_bits, params, image_model, text_features, vocabulary_size,
              fit_max, seed) -> dict:
    from .featurizer_spec import IMAGE_MODELS
    from .registry import get_method_class

    if photos is None and captions is None:
        raise CollectionError("give a photos folder, a captions file, or both")
    if image_model not in IMAGE_MODELS:
        raise CollectionError(f"--image-model must be one of {IMAGE_MODELS}, got {image_model!r}")
    if text_features not in ("bow", "minilm"):
        raise CollectionError(f"--text-features must be bow or minilm, got {text_features!r}")
    try:
        klass = get_method_class(method)
    except KeyError as exc:
        raise CollectionError(str(exc.args[0])) from None
    valid = set(klass().get_params(deep=False))
    unknown = sorted(set(params) - valid)
    if unknown:
        raise CollectionError(f"unknown parameter(s) {unknown} for method {method!r}")
    if n_bits < 8 or n_bits % 8:
        raise CollectionError(f"--bits must be a positive multiple of 8 (codes are indexed packed), got {n_bits}")
    if fit_max < 2:
        raise CollectionError(f"--fit-max must be at least 2, got {fit_max}")
    return {
        "photos": str(Path(photos).resolve()) if photos is not None else None,
        "captions": str(Path(captions).resolve()) if captions is not None else None,
        "method": method, "n_bits": int(n_bits), "params": dict(params), "image_model": image_model,
        "text_features": text_features, "vocabulary_size": int(vocabulary_size), "fit_max": int(fit_max),
        "seed": int(seed),
    }


def build_collection(
    photos,
    captions,
    out,
    *,
    method: str = "dmh",
    n_bits: int = 64,
    params: dict | None = None,
    image_model: str = "efficientnet-lite0",
    text_features: str = "bow",
    vocabulary_size: int = 2000,
    fit_max: int = 10_000,
    seed: int = 0,
    batch_size: int = 16,
    restart: bool = False,
    progress: bool = True,
    log=print,
    store: str = "local",
    ray=None,
) -> Path:
    """Build (or resume building) a collection in the folder ``out``; see the module docstring.

    ``store``: ``"local"`` (index files) or ``"milvus[:URI]"`` (codes searched in Milvus; default
    URI ``out/codes.db``, milvus-lite). ``ray``: a :class:`dmh.distributed.RayOptions` to run the
    image features and the codes on Ray (same results).

    ``method``/``n_bits``/``params``: the hashing model (fitted on at most ``fit_max`` items, drawn
    with ``seed``). ``image_model``: ``"efficientnet-lite0"`` or ``"pixels-16"``;
    ``text_features``: ``"bow"`` (``vocabulary_size`` words) or ``"minilm"``. A rerun with the same
    settings skips the finished stages; other settings need ``restart=True`` (or another folder).
    """
    settings = _settings(photos, captions, method=method, n_bits=n_bits, params=params or {},
                         image_model=image_model, text_features=text_features,
                         vocabulary_size=vocabulary_size, fit_max=fit_max, seed=seed)
    from .store import parse_store

    try:
        if parse_store(store).kind != "local":
            settings["store"] = store  # recorded only when not the default: older builds resume as before
    except ValueError as exc:
        raise CollectionError(str(exc)) from None
    out = Path(out)
    P = _Paths(out)
    _check_output_folder(out)
    if out.is_dir() and P.build.is_file() and not restart:
        state = _read_build_state(P.build)
        if state.get("settings") != settings:
            old = state.get("settings") or {}
            diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
            raise CollectionError(
                f"{out} holds a collection built with other settings (differing: {', '.join(diff)}); "
                "use another folder, or --restart to rebuild it"
            )
    elif out.is_dir() and any(out.iterdir()) and not P.build.is_file():
        raise CollectionError(f"{out} is not empty and holds no collection; give a new or empty folder")
    else:
        if restart and out.is_dir() and P.build.is_file():
            for name in ("manifest", "features", "model", "image_codes", "text_codes", "image_index",
                         "text_index", "store", "build"):
                getattr(P, name).unlink(missing_ok=True)
            for name in ("thumbs", "work"):
                shutil.rmtree(getattr(P, name), ignore_errors=True)
        out.mkdir(parents=True, exist_ok=True)
        state = {"format": "dmh-collection-build", "format_version": COLLECTION_FORMAT_VERSION,
                 "settings": settings, "done": []}
        _write_json(P.build, state)

    def finish(stage):
        state["done"].append(stage)
        _write_json(P.build, state)

    done = set(state["done"])
    if done:
        log(f"resuming {out}: finished stages {', '.join(s for s in STAGES if s in done)} are skipped")

    # scan -------------------------------------------------------------------------------------
    if "scan" not in done:
        items, _ = _scan(photos, captions)
        if not items:
            raise CollectionError("found no items: the photos folder has no images and the captions file no rows")
        n_pair = sum(1 for it in items if it["image"] and it["caption"])
        if n_pair < 2:
            raise CollectionError(
                "a collection needs photos and captions with at least 2 captioned photos to learn from; "
                f"found {sum(1 for it in items if it['image'])} photos, "
                f"{sum(1 for it in items if it['caption'])} captions, {n_pair} pairs"
            )
        for i, it in enumerate(items):
            it["id"] = i
        _write_manifest(P.manifest, items)
        finish("scan")
        n_img = sum(1 for it in items if it["image"])
        n_cap = sum(1 for it in items if it["caption"])
        n_pair = sum(1 for it in items if it["image"] and it["caption"])
        log(f"scan: {len(items)} items ({n_img} photos, {n_cap} captions, {n_pair} pairs)")
    items = _read_manifest(P.manifest)

    # features ---------------------------------------------------------------------------------
    if "features" not in done:
        from .featurizer_spec import FeaturizerSpec

        spec = FeaturizerSpec(
            image=FeaturizerSpec.image_settings(image_model) if any(it["image"] for it in items) else None,
        )
        captions_ = [it["caption"] for it in items if it["caption"]]
        if captions_:
            if text_features == "bow":
                from .featurize import bow_features

                try:
                    _, vocab = bow_features(captions_, vocabulary_size=vocabulary_size)
                except ValueError as exc:
                    raise CollectionError(f"{captions}: {exc}") from None
                spec.text = FeaturizerSpec.bow_settings(vocab)
            else:
                spec.text = FeaturizerSpec.minilm_settings()
        missing = spec.missing_extras()
        if missing:
            from .featurize import MissingExtraError

            raise MissingExtraError(missing[0])
        P.work.mkdir(exist_ok=True)
        image, text, image_mask, text_mask = _featurize_items(items, spec, work=P.work, batch_size=batch_size,
                                                              progress=progress, ray=ray)
        _write_manifest(P.manifest, items)  # unreadable photos noted
        _save_features(P.features, spec, [it["id"] for it in items], image, text, image_mask, text_mask)
        finish("features")
        shutil.rmtree(P.work, ignore_errors=True)
        log(f"features: {int(image_mask.sum())} photos, {int(text_mask.sum())} captions")

    # fit --------------------------------------------------------------------------------------
    if "fit" not in done:
        from .registry import get_method_class

        data, spec, ids = _load_features(P.features)
        n_pair = int((data.image_mask & data.text_mask).sum())
        if not data.image_mask.any() or not data.text_mask.any() or n_pair < 2:
            raise CollectionError(
                f"a collection needs photos and captions with at least 2 captioned photos to learn from; "
                f"found {int(data.image_mask.sum())} photos, {int(data.text_mask.sum())} captions, {n_pair} pairs"
                + (f" once {n_bad} unreadable photo(s) were skipped" if (n_bad := sum(1 for it in items
                                                                                      if it.get("error"))) else "")
            )
        if data.n_objects > fit_max:
            rng = np.random.default_rng(seed)
            data = data.subset(np.sort(rng.choice(data.n_objects, fit_max, replace=False)))
        klass = get_method_class(method)
        extra = {}
        if progress and "verbose" in klass().get_params(deep=False) and "verbose" not in (params or {}):
            extra["verbose"] = True  # DMH's progress bars and stage timings
        model = klass(n_bits=n_bits, random_state=seed, **(params or {}), **extra)
        log(f"fit: {type(model).__name__} ({n_bits} bits) on {data.n_objects} items ({data.n_paired} pairs)")
        model.fit(data)
        model.featurizer_ = spec
        model.save(P.model)
        finish("fit")

    # codes and indexes ------------------------------------------------------------------------
    if "codes" not in done:
        from .base import load_model

        data, _, ids = _load_features(P.features)
        model = load_model(P.model)
        if store != "local":
            _write_store_record(P, out, store)
        _write_codes(P, model, data.image, data.text, data.image_mask, data.text_mask, ids, old=None, ray=ray)
        finish("codes")
        log(f"codes: {int(data.image_mask.sum())} photos and {int(data.text_mask.sum())} captions indexed")

    # thumbnails -------------------------------------------------------------------------------
    if "thumbs" not in done:
        _make_thumbnails(P.thumbs, items, progress=progress)
        finish("thumbs")
    log(f"collection ready: {out} ({len(items)} items)")
    return out


def _check_output_folder(out: Path) -> None:
    """Before any work: ``out`` (a folder to create or fill) can be written."""
    if out.exists() and not out.is_dir():
        raise OutputError(out, "is a file, not a collection folder (-o)")
    parent = out
    while not parent.exists():  # the first existing folder above must accept new entries
        parent = parent.parent
    if not parent.is_dir():
        raise OutputError(out, f"{parent} is a file, not a folder (-o)")
    try:
        check_writable(parent / ".dmh-collection-probe", "-o")
    except OutputError as exc:
        raise OutputError(out, exc.problem) from None


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
    from .data import CrossModalData
    from .featurizer_spec import FEATURIZER_KEY
    from .io import save_data

    keep = image_mask | text_mask
    ids = np.asarray(ids, np.int64)[keep]
    data = CrossModalData(image=image[keep], text=text[keep], image_mask=image_mask[keep],
                          text_mask=text_mask[keep])
    save_data(data, path, extra={FEATURIZER_KEY: spec.to_json_array(), "__ids__": ids})


def _load_features(path):
    from .featurizer_spec import read_featurizer_spec
    from .io import load_data

    data = load_data(path)
    with np.load(path, allow_pickle=False) as f:
        ids = f["__ids__"].astype(np.int64)
    return data, read_featurizer_spec(path), ids


def _write_store_record(P: _Paths, out: Path, store: str) -> None:
    """``store.json``: where the codes are searched (Milvus URI and collection names)."""
    from .store import DEFAULT_MILVUS_FILE, parse_store

    spec = parse_store(store)
    uri = spec.uri or DEFAULT_MILVUS_FILE  # relative: inside the collection folder, moves with it
    tag = hashlib.sha1(str(out.resolve()).encode("utf-8")).hexdigest()[:10]
    _write_json(P.store, {"store": "milvus", "uri": uri,
                          "collections": {t: f"dmh_{tag}_{t}" for t in TARGETS}})


def _open_stores(P: _Paths, n_bits: int | None = None) -> dict | None:
    """The Milvus stores of a collection (None: it keeps local index files)."""
    if not P.store.is_file():
        return None
    from .store.milvus import MilvusCodeStore

    record = _read_json(P.store, "collection store record")
    uri = record["uri"]
    if "://" not in uri and not Path(uri).is_absolute():
        uri = str(P.root / uri)
    return {t: MilvusCodeStore(uri, record["collections"][t], n_bits=n_bits) for t in TARGETS}


def _encode(P: _Paths, model, X, modality: str, ids, ray):
    """Codes of feature rows: ``model.encode`` here, or on Ray (through code shards under work/)."""
    if ray is None or X.shape[0] == 0:
        return model.encode(X, modality=modality) if X.shape[0] else np.zeros((0, model.n_bits_), np.int8)
    from .distributed import encode_to_shards, read_code_shards
    from .index import unpack_codes

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
    return codes


def _write_codes(P: _Paths, model, image, text, image_mask, text_mask, ids, old, ray=None) -> None:
    """Codes of the masked rows, appended to ``old`` (``{modality: (codes, ids)}``) when given,
    saved with their indexes (rebuilt from all codes: cheap, and never half-updated). A collection
    kept in Milvus gets its collections recreated on a build, and on an add the new codes (after
    removing any that an interrupted add left there)."""
    from .index import HammingIndex, save_codes

    stores = _open_stores(P, n_bits=model.n_bits_)
    for modality, X, mask in (("image", image, image_mask), ("text", text, text_mask)):
        new_codes = _encode(P, model, X[mask], modality, ids[mask], ray)
        codes, cids = new_codes, ids[mask]
        if old is not None:
            codes = np.concatenate([old[modality][0], codes])
            cids = np.concatenate([old[modality][1], cids])
        save_codes(getattr(P, f"{modality}_codes"), codes, cids, modality=modality)
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


def _thumbnail(src: str, dest: Path) -> None:
    from PIL import Image, ImageOps

    with Image.open(src) as im:
        im = ImageOps.exif_transpose(im)
        im = im.convert("RGB")
        im.thumbnail((THUMB_SIZE, THUMB_SIZE), Image.Resampling.LANCZOS)
        with atomic_path(dest) as tmp:
            im.save(tmp, format="JPEG", quality=85)


def _make_thumbnails(folder: Path, items, progress: bool) -> None:
    from tqdm.auto import tqdm

    folder.mkdir(exist_ok=True)
    todo = [it for it in items if it["image"] and not it.get("error") and not (folder / f"{it['id']}.jpg").is_file()]
    for it in tqdm(todo, unit="img", desc="thumbnails", disable=not progress):
        try:
            _thumbnail(it["image"], folder / f"{it['id']}.jpg")
        except Exception as exc:  # a photo that vanished or broke since: no thumbnail, not fatal
            warnings.warn(f"no thumbnail for {it['image']}: {type(exc).__name__}: {exc}", UserWarning, stacklevel=2)


# ----------------------------------------------------------------------------------------- add
def add_to_collection(path, photos=None, captions=None, *, batch_size: int = 16, progress: bool = True,
                      log=print, ray=None) -> int:
    """Add new photos and/or captions to a built collection: only they are featurized (with the
    stored featurizer), encoded (with the stored model) and indexed. Photos already in the
    collection are skipped. ``ray``: a :class:`dmh.distributed.RayOptions` to featurize and
    encode on Ray. Returns the number of items added."""
    path = Path(path)
    P = _Paths(path)
    _check_complete(path)
    if photos is None and captions is None:
        raise CollectionError("give a photos folder, a captions file, or both")
    check_writable(P.manifest, "COLLECTION")  # before any work: a read-only collection is refused now
    from .base import load_model
    from .index import load_codes

    items = _read_manifest(P.manifest)
    known = {it["image"] for it in items if it["image"]}
    new, skipped = _scan(photos, captions, known)
    if skipped:
        log(f"{skipped} photo(s) already in the collection skipped")
    if not new:
        log("nothing new to add")
        return 0
    start = max((it["id"] for it in items), default=-1) + 1
    for i, it in enumerate(new):
        it["id"] = start + i
    model = load_model(P.model)
    spec = model.featurizer_
    missing = spec.missing_extras()
    if missing:
        from .featurize import MissingExtraError

        raise MissingExtraError(missing[0])
    if spec.text is None and any(it["caption"] for it in new):
        raise CollectionError(f"{path} was built without captions, so it cannot index new captions")
    if spec.image is None and any(it["image"] for it in new):
        raise CollectionError(f"{path} was built without photos, so it cannot index new photos")
    image, text, image_mask, text_mask = _featurize_items(new, spec, batch_size=batch_size, progress=progress,
                                                          ray=ray)
    ids = np.array([it["id"] for it in new], np.int64)
    # Files are rewritten in full, the manifest last: until it is written the collection is the
    # old one, and whatever an interrupted add left in the other files is cut back to its items.
    listed = np.array([it["id"] for it in items], np.int64)
    old = {}
    for m in ("image", "text"):
        codes, cids = load_codes(getattr(P, f"{m}_codes"))
        keep_old = np.isin(cids, listed)
        old[m] = (codes[keep_old], cids[keep_old])
    data, _, old_ids = _load_features(P.features)
    keep_old = np.isin(old_ids, listed)
    _save_features(
        P.features, spec, np.concatenate([old_ids[keep_old], ids]),
        np.concatenate([data.image[keep_old].astype(np.float32), image]),
        np.concatenate([data.text[keep_old].astype(np.float32), text]),
        np.concatenate([data.image_mask[keep_old], image_mask]),
        np.concatenate([data.text_mask[keep_old], text_mask]),
    )
    _write_codes(P, model, image, text, image_mask, text_mask, ids, old, ray=ray)
    for it in new:  # a thumbnail under a new id is one an interrupted add left: of another photo
        (P.thumbs / f"{it['id']}.jpg").unlink(missing_ok=True)
    _make_thumbnails(P.thumbs, new, progress=progress)
    _write_manifest(P.manifest, items + new)
    keep = image_mask | text_mask
    log(f"added {int(keep.sum())} item(s) ({int(image_mask.sum())} photos, {int(text_mask.sum())} captions) to {path}")
    return len(new)


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


# ----------------------------------------------------------------------------------------- search
def _index_matches(index, codes, ids) -> bool:
    """True when ``index`` holds exactly ``codes`` under ``ids`` (the code file is the reference)."""
    if index.ntotal != ids.size or not np.array_equal(index.ids, ids):
        return False
    return bool(np.array_equal(index.codes, index._packed(codes, "codes")))


@dataclass
class Hit:
    """One search result."""

    id: int
    name: str
    image: str | None
    caption: str | None
    distance: int

    def to_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "image": self.image, "caption": self.caption,
                "distance": self.distance}


class Collection:
    """A built collection opened for search (read-only; see :func:`build_collection`).

    ``search_text``, ``search_image`` and ``similar`` return :class:`Hit` lists, nearest first
    (ties by smaller id), from the photos (``target="images"``) or the captions (``"texts"``).
    """

    def __init__(self, path, *, backend: str = "auto"):
        from .base import load_model
        from .index import HammingIndex, load_codes

        self.path = Path(path)
        _check_complete(self.path)
        P = _Paths(self.path)
        self.items = _read_manifest(P.manifest)
        self._by_id = {int(it["id"]): it for it in self.items}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a missing extra is reported when a query needs it
            self.model = load_model(P.model)
        if getattr(self.model, "featurizer_", None) is None:
            raise CollectionError(f"{P.model} does not record its featurizer; rebuild the collection")
        stores = _open_stores(P)
        self.indexes, self._codes = {}, {}
        for target, modality in (("images", "image"), ("texts", "text")):
            codes_path, index_path = getattr(P, f"{modality}_codes"), getattr(P, f"{modality}_index")
            codes, ids = load_codes(codes_path)
            if codes.shape[1] != self.n_bits:
                raise CollectionFileError(codes_path, f"holds {codes.shape[1]}-bit codes but the model gives "
                                          f"{self.n_bits} bits (damaged collection)")
            listed = np.isin(ids, np.fromiter(self._by_id, np.int64, len(self._by_id)))
            if stores is not None:  # codes kept in Milvus: the store answers, the local codes name the items
                codes, ids, index = codes[listed], ids[listed], stores[target]
                self.indexes[target] = index
                self._codes[target] = dict(zip(ids.tolist(), range(ids.size), strict=True)), codes
                continue
            index = HammingIndex.load(index_path, backend=backend)
            if index.n_bits != self.n_bits:
                raise CollectionFileError(index_path, f"is a {index.n_bits}-bit index but the model gives "
                                          f"{self.n_bits} bits (damaged collection)")
            if not listed.all() or not _index_matches(index, codes, ids):
                # an add interrupted before its manifest (written last) left codes of unlisted items,
                # or the index disagrees with the codes: search only what the manifest lists
                codes, ids = codes[listed], ids[listed]
                index = HammingIndex(self.n_bits, backend=backend)
                if ids.size:
                    index.add(codes, ids)
            self.indexes[target] = index
            self._codes[target] = dict(zip(ids.tolist(), range(ids.size), strict=True)), codes
        self.thumbs = P.thumbs

    @property
    def n_bits(self) -> int:
        return int(self.model.n_bits_)

    def summary(self) -> dict:
        return {
            "items": len(self.items),
            "images": self.indexes["images"].ntotal,
            "texts": self.indexes["texts"].ntotal,
            "n_bits": self.n_bits,
            "method": self.model.method_name,
            "featurizer": {m: (getattr(self.model.featurizer_, m) or {}).get("model")
                           for m in ("image", "text")},
        }

    def item(self, item_id: int) -> dict:
        try:
            return self._by_id[int(item_id)]
        except (KeyError, ValueError, TypeError, OverflowError):
            raise UnknownItemError(f"no item with id {item_id!r} in {self.path}") from None

    def _check(self, k, target):
        if target not in TARGETS:
            raise CollectionError(f"target must be one of {TARGETS}, got {target!r}")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise CollectionError(f"k must be a positive integer, got {k!r}")
        if self.indexes[target].ntotal == 0:
            raise CollectionError(f"the collection holds no {target[:-1]}s to search")

    def _hits(self, codes, k, target, exclude=None) -> list[Hit]:
        index = self.indexes[target]
        dist, ids = index.search(codes, min(k + (exclude is not None), index.ntotal))
        out = []
        for d, i in zip(dist[0].tolist(), ids[0].tolist(), strict=True):
            if i < 0 or i == exclude:
                continue
            it = self._by_id[i]
            out.append(Hit(i, it["name"], it["image"], it["caption"], int(d)))
        return out[:k]

    def encode_text(self, text: str) -> np.ndarray:
        if not isinstance(text, str) or not text.strip():
            raise CollectionError("the text query is empty")
        return self.model.encode_raw(texts=[text])

    def encode_image(self, image) -> np.ndarray:
        """Codes of one image: a path, a PIL image or the bytes of an image file."""
        if isinstance(image, (bytes, bytearray)):
            from PIL import Image

            try:
                im = Image.open(io.BytesIO(image))
                if im.size[0] * im.size[1] > MAX_QUERY_PIXELS:
                    raise CollectionError(
                        f"the image is too large ({im.size[0]} x {im.size[1]} pixels; at most "
                        f"{MAX_QUERY_PIXELS:,})"
                    )
                im.load()
            except CollectionError:
                raise
            except Exception as exc:
                why = "not an image format Pillow reads" if type(exc).__name__ == "UnidentifiedImageError" else exc
                raise CollectionError(f"the upload is not an image that can be read ({why})") from None
            image = im
        return self.model.encode_raw(images=[image])

    def search_text(self, text: str, k: int = 10, target: str = "images") -> list[Hit]:
        self._check(k, target)
        return self._hits(self.encode_text(text), k, target)

    def search_image(self, image, k: int = 10, target: str = "images") -> list[Hit]:
        self._check(k, target)
        return self._hits(self.encode_image(image), k, target)

    def similar(self, item_id: int, k: int = 10, target: str = "images") -> list[Hit]:
        """Items like item ``item_id`` (itself left out): its photo's code when it has one, else its
        caption's."""
        self._check(k, target)
        it = self.item(item_id)
        for source in ("images", "texts"):
            pos, codes = self._codes[source]
            if it["id"] in pos:
                return self._hits(codes[pos[it["id"]]][None, :], k, target, exclude=it["id"])
        raise CollectionError(f"item {item_id} has neither an indexed photo nor an indexed caption")

    def warm(self) -> None:
        """Load the featurizers now (the sentence or image model), so the first query is not slow."""
        from PIL import Image

        spec = self.model.featurizer_
        if spec.text is not None and not spec.missing_extras():
            self.model.encode_raw(texts=["warm up"])
        if spec.image is not None and not spec.image.get("custom") and not spec.missing_extras():
            self.model.encode_raw(images=[Image.new("RGB", (32, 32))])

    def thumbnail(self, item_id: int) -> Path:
        """The item's thumbnail, made (and kept) on first use."""
        it = self.item(item_id)
        if not it["image"] or it.get("error"):
            raise UnknownItemError(f"item {item_id} has no photo")  # a 404 of the server
        dest = self.thumbs / f"{it['id']}.jpg"
        if not dest.is_file():
            try:
                self.thumbs.mkdir(exist_ok=True)
                _thumbnail(it["image"], dest)
            except (OSError, SyntaxError, ValueError) as exc:  # Pillow's decoder errors; a read-only folder
                raise UnknownItemError(f"item {item_id}: no thumbnail can be made of {it['image']} "
                                       f"({type(exc).__name__}: {exc})") from None
        return dest
