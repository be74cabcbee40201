"""Building a collection stage by stage; the writers' lock and checkpoint hook that building, adding
(:mod:`._add`) and removing (:mod:`._remove`) share."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import numpy as np

from ..._atomic import check_writable, exclusive_lock
from ...errors import CollectionError, OutputError
from ._codes import write_codes, write_store_record
from ._features import featurize_items
from ._files import (
    DATA_FILES,
    LOCK_NAME,
    STAGES,
    Paths,
    check_complete,
    clean_leftovers,
    load_features,
    read_build_state,
    read_current,
    read_manifest,
    save_features,
    write_json,
    write_manifest,
)
from ._inputs import scan_inputs
from ._thumbs import make_thumbnails

BUILD_FORMAT_VERSION = 1
#: seconds a build or add waits for another one on the same collection before giving up
LOCK_WAIT = 600.0


def _checkpoint(step: str) -> None:
    """Called as an add reaches each of its steps (``scanned``, ``features``, ``features-saved``,
    ``codes``, ``thumbs``, ``switched``), and a remove or caption change its own (``validated``,
    ``features-saved``, ``codes``, ``switched``); does nothing. The tests replace it to kill the
    process there and check that the collection survives."""


def _settings(photos, captions, *, method, n_bits, params, image_model, text_features, vocabulary_size,
              fit_max, seed, candidates=None) -> dict:
    from ...featurizer_spec import IMAGE_MODELS
    from ...registry import get_method_class

    if photos is None and captions is None:
        raise CollectionError("give a photos folder, a captions file, or both")
    if image_model not in IMAGE_MODELS:
        raise CollectionError(f"image_model must be one of {IMAGE_MODELS}, got {image_model!r}")
    from ..._featurizers.extras import TEXT_FEATURES

    if text_features not in TEXT_FEATURES:
        raise CollectionError(f"text_features must be one of {', '.join(TEXT_FEATURES)}, got {text_features!r}")
    auto = method == "auto"
    if not auto:
        if candidates is not None:
            raise CollectionError("candidates apply to method='auto' only")
        try:
            get_method_class(method)
        except KeyError as exc:
            raise CollectionError(f"{exc.args[0]}, or auto") from None
    if n_bits < 8 or n_bits % 8 or n_bits > 4096:
        raise CollectionError(f"n_bits must be a positive multiple of 8 (codes are indexed packed) up to 4096, "
                              f"got {n_bits}")
    if fit_max < 2:
        raise CollectionError(f"fit_max must be at least 2, got {fit_max}")
    from ..._validation import check_seed

    check_seed(seed, "seed")  # before any work, like the parameter values below
    extra = {}
    if auto:  # the candidates and their parameters ({candidate: {key: value}}), checked as their fits will
        from ._auto import DEFAULT_CANDIDATES, check_candidates

        names, params = check_candidates(DEFAULT_CANDIDATES if candidates is None else candidates, params, n_bits)
        extra["candidates"] = names  # recorded only for auto: a build of one method keeps its recorded settings
    else:
        from ._auto import check_build_params

        check_build_params(method, params, n_bits)
    return {
        "photos": str(Path(photos).resolve()) if photos is not None else None,
        "captions": str(Path(captions).resolve()) if captions is not None else None,
        "method": method, "n_bits": int(n_bits), "params": dict(params), "image_model": image_model,
        "text_features": text_features, "vocabulary_size": int(vocabulary_size), "fit_max": int(fit_max),
        "seed": int(seed), **extra,
    }


def build_collection(
    photos,
    captions,
    out,
    *,
    method: str = "auto",
    n_bits: int = 64,
    params: dict | None = None,
    candidates=None,
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
    wait: float = LOCK_WAIT,
    features_from=None,
) -> Path:
    """Build (or resume building) a collection in the folder ``out``; see the module docstring.

    ``store``: ``"local"`` (index files) or ``"milvus[:URI]"`` (codes searched in Milvus; default
    URI ``out/codes.db``, milvus-lite). ``ray``: a :class:`dmh.app.distributed.RayOptions` to run the
    image features and the codes on Ray (same results).

    ``method``/``n_bits``/``params``: the hashing model (fitted on at most ``fit_max`` items, drawn
    with ``seed``). ``method="auto"`` (the default: on the shared fashion photos it chose the method
    that retrieves best, docs/collection.md) compares ``candidates`` (default
    :data:`dmh.app.collection._auto.DEFAULT_CANDIDATES`) on held-out pairs of the collection (no
    labels), records every score and the choice in ``build.json`` under ``"auto"``, and builds with
    the best, fitted on every item; its ``params`` are ``{candidate: {key: value}}``.
    ``features_from``: a built collection whose image features (same ``image_model``) are reused
    for the photos it holds, instead of being computed again. ``image_model``:
    ``"efficientnet-lite0"`` or ``"pixels-16"``; ``text_features``: ``"bow"`` (``vocabulary_size``
    terms of any script), ``"minilm"`` (English) or ``"use-multilingual"`` (16 languages). A rerun
    with the same settings skips the finished stages; other settings need ``restart=True`` (or
    another folder).

    One build or add at a time per collection: another one waits up to ``wait`` seconds for the
    collection's lock, then is refused (an :class:`OutputError` naming the holder).
    """
    settings = _settings(photos, captions, method=method, n_bits=n_bits, params=params or {},
                         image_model=image_model, text_features=text_features,
                         vocabulary_size=vocabulary_size, fit_max=fit_max, seed=seed, candidates=candidates)
    if features_from is not None:
        check_complete(Path(features_from))
    from ..store import parse_store

    try:
        if parse_store(store).kind != "local":
            settings["store"] = store  # recorded only when not the default: a build recorded without it resumes
    except ValueError as exc:
        raise CollectionError(str(exc)) from None
    out = Path(out)
    P = Paths(out)
    _check_output_folder(out)
    scanned = None
    if out.is_dir() and P.build.is_file() and not restart:
        _check_same_settings(out, P, settings)  # refused at once, not after waiting for the lock
    else:
        _check_empty(out, P)
        # a new build (or --restart): the inputs are read before the folder is made or emptied, so
        # that a missing photos folder or a bad captions file leaves nothing behind
        scanned = _scan_items(photos, captions)
    out.mkdir(parents=True, exist_ok=True)
    with _writer_lock(out, wait, log):
        return _build_locked(out, P, settings, scanned, photos, captions, restart=restart, batch_size=batch_size,
                             progress=progress, log=log, store=store, ray=ray, features_from=features_from)


def _writer_lock(root: Path, wait: float, log):
    """The collection's writer lock (one ``build``/``add`` at a time), waiting up to ``wait`` s."""
    return exclusive_lock(root, "collection", wait=wait, lock_file=Paths(root).lock, log=log,
                          hint="try again when it has finished, or wait for it with --wait SECONDS")


def _check_same_settings(out: Path, P: Paths, settings: dict) -> dict:
    state = read_build_state(P.build)
    if state.get("settings") != settings:
        old = state.get("settings") or {}
        diff = sorted(k for k in set(old) | set(settings) if old.get(k) != settings.get(k))
        raise CollectionError(
            f"{out} holds a collection built with other settings (differing: {', '.join(diff)}); "
            "use another folder, or --restart to rebuild it"
        )
    return state


def _check_empty(out: Path, P: Paths) -> None:
    if out.is_dir() and not P.build.is_file() and any(e.name != LOCK_NAME for e in out.iterdir()):
        raise CollectionError(f"{out} is not empty and holds no collection; give a new or empty folder")


def _build_locked(out, P, settings, scanned, photos, captions, *, restart, batch_size, progress, log, store, ray,
                  features_from):
    """The stages of :func:`build_collection`, under the collection's lock (the state is read
    again here: another build may have changed it while this one waited)."""
    method, n_bits, params = settings["method"], settings["n_bits"], settings["params"]
    image_model, text_features = settings["image_model"], settings["text_features"]
    vocabulary_size, fit_max, seed = settings["vocabulary_size"], settings["fit_max"], settings["seed"]
    if P.build.is_file() and not restart:
        state = _check_same_settings(out, P, settings)
    else:
        _check_empty(out, P)
        if scanned is None:  # pragma: no cover - only when another process emptied the folder meanwhile
            scanned = _scan_items(photos, captions)
        if restart and P.build.is_file():
            for name in ("manifest", "model", "store", "build", *DATA_FILES):
                getattr(P, name).unlink(missing_ok=True)
            for name in ("thumbs", "work"):
                shutil.rmtree(getattr(P, name), ignore_errors=True)
            clean_leftovers(out, 0)  # every add's generation and work folder
        state = {"format": "dmh-collection-build", "format_version": BUILD_FORMAT_VERSION,
                 "settings": settings, "done": []}
        write_json(P.build, state)

    started = [time.perf_counter()]

    def finish(stage, **detail):  # the stage done, with its seconds (those of the run that did it)
        state["done"].append(stage)
        state.setdefault("seconds", {})[stage] = round(time.perf_counter() - started[0], 3)
        if detail:
            state["seconds"].update(detail)
        write_json(P.build, state)
        started[0] = time.perf_counter()

    done = set(state["done"])
    if "scan" not in done and scanned is None:  # resuming a build interrupted before its scan
        scanned = _scan_items(photos, captions)
    if done:
        log(f"resuming {out}: finished stages {', '.join(s for s in STAGES if s in done)} are skipped")
    started[0] = time.perf_counter()

    # scan -------------------------------------------------------------------------------------
    if "scan" not in done:
        items = scanned
        write_manifest(P.manifest, items)
        finish("scan")
        n_img = sum(1 for it in items if it["image"])
        n_cap = sum(1 for it in items if it["caption"])
        n_pair = sum(1 for it in items if it["image"] and it["caption"])
        log(f"scan: {len(items)} items ({n_img} photos, {n_cap} captions, {n_pair} pairs)")
    items = read_manifest(P.manifest)

    # features ---------------------------------------------------------------------------------
    if "features" not in done:
        from ...featurizer_spec import FeaturizerSpec

        spec = FeaturizerSpec(
            image=FeaturizerSpec.image_settings(image_model) if any(it["image"] for it in items) else None,
        )
        captions_ = [it["caption"] for it in items if it["caption"]]
        if captions_:
            if text_features == "bow":
                from ..._featurizers.analyzer import UnicodeAnalyzer
                from ...featurize import bow_features

                analyzer = UnicodeAnalyzer.for_texts(captions_)
                try:
                    _, vocab = bow_features(captions_, vocabulary_size=vocabulary_size, analyzer=analyzer)
                except ValueError as exc:
                    raise CollectionError(f"{captions}: {exc}") from None
                spec.text = FeaturizerSpec.bow_settings(vocab, analyzer.settings())
            else:
                spec.text = FeaturizerSpec.sentence_settings(text_features)
        missing = spec.missing_extras()
        if missing:
            from ...featurize import MissingExtraError

            raise MissingExtraError(missing[0])
        known = _reusable_image_features(features_from, spec, items, log) if features_from is not None else {}
        work = P.work
        if known:  # the photos left to featurize: their resumable chunks are kept apart from a full run's
            import hashlib

            left = "\n".join(it["image"] for it in items if it["image"] and it["image"] not in known)
            work = P.work / f"partial-{hashlib.sha1(left.encode('utf-8')).hexdigest()[:16]}"
        work.mkdir(parents=True, exist_ok=True)
        timings = {}
        image, text, image_mask, text_mask = featurize_items(items, spec, work=work, batch_size=batch_size,
                                                              progress=progress, ray=ray, known_image=known,
                                                              timings=timings)
        write_manifest(P.manifest, items)  # unreadable photos noted
        save_features(P.features, spec, [it["id"] for it in items], image, text, image_mask, text_mask)
        finish("features", **timings)
        shutil.rmtree(P.work, ignore_errors=True)
        log(f"features: {int(image_mask.sum())} photos, {int(text_mask.sum())} captions")

    # fit --------------------------------------------------------------------------------------
    if "fit" not in done:
        from ...registry import get_method_class

        data, spec, ids = load_features(P.features)
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
        chosen, chosen_params = method, params or {}
        if method == "auto":
            from ._auto import choose_method

            record = state.setdefault("auto", {})
            chosen = choose_method(data, candidates=settings["candidates"], params=params or {}, n_bits=n_bits,
                                   seed=seed, record=record, save=lambda: write_json(P.build, state),
                                   progress=progress, log=log)
            chosen_params = (params or {}).get(chosen, {})
        klass = get_method_class(chosen)
        extra = {}
        if progress and "verbose" in klass().get_params(deep=False) and "verbose" not in chosen_params:
            extra["verbose"] = True  # DMH's progress bars and stage timings
        model = klass(n_bits=n_bits, random_state=seed, **chosen_params, **extra)
        log(f"fit: {type(model).__name__} ({n_bits} bits) on {data.n_objects} items ({data.n_paired} pairs)")
        t0 = time.perf_counter()
        model.fit(data)
        fit_seconds = round(time.perf_counter() - t0, 3)
        model.featurizer_ = spec
        model.save(P.model)
        from ._auto import rerank_decision

        state["rerank"] = rerank_decision(state.get("auto") if method == "auto" else None)
        if method == "auto":
            finish("fit", fit_chosen=fit_seconds)
        else:
            finish("fit")

    # codes and indexes ------------------------------------------------------------------------
    if "codes" not in done:
        from ...base import load_model

        data, _, ids = load_features(P.features)
        model = load_model(P.model)
        if store != "local":
            write_store_record(P, out, store)
        write_codes(P, model, data.image, data.text, data.image_mask, data.text_mask, ids, old=None, ray=ray)
        finish("codes")
        log(f"codes: {int(data.image_mask.sum())} photos and {int(data.text_mask.sum())} captions indexed")

    # thumbnails -------------------------------------------------------------------------------
    if "thumbs" not in done:
        make_thumbnails(P.thumbs, items, progress=progress)
        finish("thumbs")
    log(f"collection ready: {out} ({len(items)} items)")
    return out


def _reusable_image_features(source, spec, items, log) -> dict:
    """Photo path -> image feature row of the built collection ``source``, for the photos of
    ``items`` it holds; refused when it was built with other image features."""

    source = Path(source)
    if spec.image is None:
        return {}
    src_items, Ps, _ = read_current(source)
    data, src_spec, ids = load_features(Ps.features)
    if src_spec is None or src_spec.image != spec.image:
        theirs = (src_spec.image or {}).get("model") if src_spec is not None else None
        raise CollectionError(f"features_from {source}: it was built with other image features ({theirs}; "
                              f"this build uses {spec.image.get('model')})")
    row = {int(i): r for r, i in enumerate(ids.tolist())}
    wanted = {it["image"] for it in items if it["image"]}
    known = {}
    for it in src_items:
        r = row.get(int(it["id"]))
        if it["image"] in wanted and r is not None and data.image_mask[r] and not it.get("error"):
            known[it["image"]] = np.asarray(data.image[r], np.float32)
    log(f"features: reusing the image features of {len(known)} of {len(wanted)} photos from {source}")
    return known


def _scan_items(photos, captions) -> list[dict]:
    """The items of a new collection (ids 0..n-1), refused when too few to learn from."""
    items, _ = scan_inputs(photos, captions)
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
    return items


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
