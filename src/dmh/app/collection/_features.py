"""Features of collection items with a fixed featurizer; image features in resumable chunks,
optionally on Ray."""

from __future__ import annotations

import contextlib
import json
import warnings
from pathlib import Path

import numpy as np

from ..._atomic import atomic_path

IMAGE_CHUNK = 512
RAY_IMAGE_CHUNK = 16_384  # photos per Ray job (each starts its actors): resumable in these steps


def image_features_chunked(items, spec, work: Path | None, batch_size: int, progress: bool, ray=None):
    """Image features of the items with a photo; chunks of IMAGE_CHUNK (RAY_IMAGE_CHUNK with
    ``ray``) saved under ``work`` (when given) so that an interrupted build resumes. Returns
    ``(features, rows, failures)``."""
    from tqdm.auto import tqdm

    from ...featurize import image_features

    rows = [i for i, it in enumerate(items) if it["image"]]
    encoder = None
    parts, ok_all, failures = [], [], []
    step = RAY_IMAGE_CHUNK if ray is not None else IMAGE_CHUNK
    session = contextlib.nullcontext()
    if ray is not None and rows:
        from ..distributed import ray_session

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
                from ..distributed import ray_image_features

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


def featurize_items(items, spec, *, work=None, batch_size=16, progress=True, ray=None, known_image=None,
                     timings=None):
    """Features of items (dicts with ``image`` / ``caption``) with a fixed featurizer ``spec``.
    Returns ``(image (n, d_i), text (n, d_t), image_mask, text_mask)``; an unreadable photo is
    recorded in its item's ``error`` and leaves its image row masked out. ``known_image``: photo
    path -> its feature row, computed before with the same image featurizer (reused, not computed
    again). ``timings`` (a dict) receives the seconds of the image and of the text features."""
    import time

    n = len(items)
    known = known_image or {}
    d_img = int(spec.image["n_features"]) if spec.image else 1
    image = np.zeros((n, d_img), np.float32)
    image_mask = np.zeros(n, bool)
    t0 = time.perf_counter()
    if spec.image is not None:
        todo = [i for i, it in enumerate(items) if it["image"] and it["image"] not in known]
        feats, ok, rows, failures = image_features_chunked([items[i] for i in todo], spec, work, batch_size,
                                                            progress, ray)
        rows = [todo[r] for r in rows]
        reused = [i for i, it in enumerate(items) if it["image"] and it["image"] in known]
        if rows or reused:
            d = feats.shape[1] if rows else np.asarray(known[items[reused[0]]["image"]]).shape[0]
            image = np.zeros((n, d), np.float32)
            image[rows] = feats
            image_mask[rows] = ok
            for i in reused:
                image[i] = known[items[i]["image"]]
                image_mask[i] = True
        reasons = dict(failures)
        for i in rows:
            if not image_mask[i]:
                items[i]["error"] = reasons.get(items[i]["image"], "unreadable")
        if failures:
            shown = "; ".join(f"{Path(p).name} ({r})" for p, r in failures[:5])
            warnings.warn(f"{len(failures)} unreadable photo(s) skipped: {shown}", UserWarning, stacklevel=2)
    t1 = time.perf_counter()
    text_mask = np.array([bool(it["caption"]) for it in items], bool)
    d_txt = int(spec.text["n_features"]) if spec.text else 1
    text = np.zeros((n, d_txt), np.float32)
    if spec.text is not None and text_mask.any():
        X = spec.text_features([items[i]["caption"] for i in np.flatnonzero(text_mask)])
        text = np.zeros((n, X.shape[1]), np.float32)
        text[text_mask] = X
    if timings is not None:
        timings.update(image_features=round(t1 - t0, 3), text_features=round(time.perf_counter() - t1, 3))
    return image, text, image_mask, text_mask
