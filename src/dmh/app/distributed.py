"""The heavy maps on Ray Data: image decoding + CNN features, and the hash networks, as
``map_batches`` stages whose actors hold the models; codes written as sharded Parquet.

Stages (each a pool of ``concurrency`` actors, ``num_cpus`` / ``num_gpus`` each, fed batches of
``batch_size`` rows):

* :class:`ImageFeatureStage`: ``(id, path)`` rows -> ``(id, path, features, ok, error)``: decodes
  each file with :func:`dmh.featurize.preprocess_image` and runs the image encoder (default
  EfficientNet-Lite0) on the batch. An unreadable file gives ``ok=False`` and its ``error``,
  never a failed job.
* :class:`HashStage`: ``(id, features[, ok, error, path])`` rows -> ``(id, code, error[, path])``:
  ``model.encode`` of one modality, the codes packed 8 bits a byte (:func:`dmh.index.pack_codes`;
  Parquet ``fixed_size_binary[n_bits / 8]``, null where the row had no features).

:func:`encode_to_shards` runs them and writes ``out/*.parquet`` plus ``out/_dmh_codes.json`` (bits,
modality, model, counts); :func:`read_code_shards` reads such a folder back (pyarrow only, no Ray)
for ``dmh index`` / ``dmh search``. The results are those of the single-process path:
:func:`dmh.featurize.image_features` and ``model.encode`` on the same inputs (the tests check it).

``address=None`` starts a local Ray runtime on this machine (``num_cpus`` of it: all by default);
``address="auto"`` or ``"ray://head:10001"`` joins an existing cluster. On a cluster the image paths
(and the features of :func:`feature_dataset`, shipped through Ray's object store) must be readable
by the workers: a shared file system; the model file is read here and sent to the actors.

Ray is an optional extra: ``pip install 'dmh[ray]'``; without it :func:`require_ray` raises an
ImportError naming that install. Importing this module does not import Ray.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from .._atomic import atomic_write_text
from ..errors import DataError, OutputError, ParameterError, ParameterTypeError

__all__ = [
    "RAY_EXTRA",
    "CODES_META",
    "HashStage",
    "ImageFeatureStage",
    "RayOptions",
    "encode_to_shards",
    "feature_dataset",
    "image_dataset",
    "ray_image_features",
    "ray_session",
    "read_code_shards",
    "require_ray",
]

RAY_EXTRA = ("ray", ("ray[data]>=2.40",))
CODES_META = "_dmh_codes.json"
_BLOCK_ROWS = 65_536  # rows per block handed to Ray


def require_ray():
    """Import :mod:`ray` and :mod:`ray.data`, or raise an ImportError naming the install."""
    from ..featurize import MissingExtraError

    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError as exc:
        name, packages = RAY_EXTRA
        raise MissingExtraError(
            f"running on Ray needs the optional package(s) {', '.join(packages)} (module 'ray' is missing): "
            f"pip install 'dmh[{name}]'"
        ) from exc
    return ray


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise ImportError(
            "reading or writing code shards needs pyarrow: pip install 'dmh[ray]' (or: pip install pyarrow)"
        ) from exc
    return pa, pq


@dataclass
class RayOptions:
    """Where and how the Ray stages run.

    Parameters
    ----------
    address : str, optional
        None: a local Ray runtime on this machine. Otherwise an existing cluster (``"auto"``,
        ``"ray://head:10001"``, ``"head:6379"``).
    batch_size : int
        Rows per batch handed to an actor.
    num_cpus, num_gpus : float
        Resources reserved for each actor. (The bundled models run on the CPU in this version:
        ``num_gpus`` reserves GPUs for the actors but does not move the models onto them.)
    concurrency : int
        Actors per stage.
    local_cpus : int, optional
        CPUs of a local runtime (default: all of this machine's); ignored with an ``address``.
    """

    address: str | None = None
    batch_size: int = 64
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    concurrency: int = 1
    local_cpus: int | None = None

    def __post_init__(self):
        for name in ("batch_size", "concurrency"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ParameterError(f"{name} must be a positive integer, got {value!r}")
        for name in ("num_cpus", "num_gpus"):
            if getattr(self, name) < 0:
                raise ParameterError(f"{name} must be >= 0, got {getattr(self, name)!r}")
        if self.local_cpus is not None and self.local_cpus < 1:
            raise ParameterError(f"local_cpus must be a positive integer, got {self.local_cpus!r}")

    def map_kwargs(self) -> dict:
        ray = require_ray()
        return {
            "batch_size": self.batch_size,
            "batch_format": "numpy",
            "compute": ray.data.ActorPoolStrategy(size=self.concurrency),
            "num_cpus": self.num_cpus,
            "num_gpus": self.num_gpus or None,
        }


@contextlib.contextmanager
def ray_session(options: RayOptions | None = None, *, quiet: bool = True):
    """A Ray runtime for the stages: reuses one already started in this process (and leaves it
    running), otherwise starts or joins one (``options.address``) and shuts it down on exit."""
    ray = require_ray()
    options = options or RayOptions()
    started = False
    if not ray.is_initialized():
        kwargs = {"include_dashboard": False, "log_to_driver": not quiet}
        if options.address is None:
            kwargs["num_cpus"] = options.local_cpus
        try:
            ray.init(address=options.address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = f"the Ray cluster at {options.address!r}" if options.address else "a local Ray runtime"
            raise ParameterError(f"cannot start or join {where}: {exc}") from None
        started = True
    ctx = ray.data.DataContext.get_current()
    previous = ctx.enable_progress_bars
    ctx.enable_progress_bars = not quiet
    try:
        yield ray
    finally:
        ctx.enable_progress_bars = previous
        if started:
            ray.shutdown()


# ------------------------------------------------------------------------------------------ stages
class ImageFeatureStage:
    """Ray actor: image files -> features. ``encoder_factory()`` builds the encoder once per actor
    (default :class:`dmh.featurize.EfficientNetLite0Encoder`)."""

    def __init__(self, encoder_factory=None):
        from ..featurize import EfficientNetLite0Encoder

        self.encoder = (encoder_factory or EfficientNetLite0Encoder)()

    def __call__(self, batch: dict) -> dict:
        from ..featurize import _load_image

        paths = [str(p) for p in batch["path"]]
        arrays, rows, errors = [], [], [None] * len(paths)
        for i, path in enumerate(paths):
            try:
                arrays.append(_load_image(Path(path)))
                rows.append(i)
            except Exception as exc:  # any decoder error: reported in the row, never fatal
                errors[i] = f"{type(exc).__name__}: {exc}"
        feats = np.asarray(self.encoder(np.stack(arrays)), dtype=np.float32) if rows else None
        width = feats.shape[1] if feats is not None else int(getattr(self.encoder, "n_features", 1))
        out = np.zeros((len(paths), width), dtype=np.float32)
        ok = np.zeros(len(paths), dtype=bool)
        if rows:
            out[rows] = feats
            ok[rows] = True
        return {
            "id": np.asarray(batch["id"], dtype=np.int64),
            "path": np.asarray(paths, dtype=object),
            "features": out,
            "ok": ok,
            "error": np.asarray([e or "" for e in errors], dtype=object),
        }


class HashStage:
    """Ray actor: features -> packed codes of one ``modality`` with a fitted model (the bytes of
    its ``.npz`` file, so that the workers need not see the driver's files)."""

    def __init__(self, model_bytes: bytes, modality: str):
        from ..base import load_model

        fd, tmp = tempfile.mkstemp(suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(model_bytes)
            self.model = load_model(tmp)
        finally:
            os.unlink(tmp)
        self.modality = modality

    def __call__(self, batch: dict):
        pa, _ = _pyarrow()
        from ..base import encode_checked
        from ..index import pack_codes

        ids = np.asarray(batch["id"], dtype=np.int64)
        feats = np.asarray(batch["features"])
        ok = np.asarray(batch["ok"], dtype=bool) if "ok" in batch else np.ones(ids.size, bool)
        errors = [str(e) if e else None for e in batch["error"]] if "error" in batch else [None] * ids.size
        code_size = -(-self.model.n_bits_ // 8)
        codes = [None] * ids.size
        if ok.any():
            packed = pack_codes(encode_checked(self.model, feats[ok], self.modality))
            for row, c in zip(np.flatnonzero(ok), packed, strict=True):
                codes[row] = c.tobytes()
        columns = {
            "id": pa.array(ids, type=pa.int64()),
            "code": pa.array(codes, type=pa.binary(code_size)),
            "error": pa.array(errors, type=pa.string()),
        }
        if "path" in batch:
            columns["path"] = pa.array([str(p) for p in batch["path"]], type=pa.string())
        return pa.table(columns)


# ------------------------------------------------------------------------------------------ inputs
def _ids(ids, n: int) -> np.ndarray:
    ids = np.arange(n, dtype=np.int64) if ids is None else np.asarray(ids)
    if ids.shape != (n,):
        raise ParameterError(f"ids must have shape ({n},), got {ids.shape}")
    if n and not np.issubdtype(ids.dtype, np.integer):
        raise ParameterTypeError(f"ids must be integers, got dtype {ids.dtype}")
    if np.unique(ids).size != n:
        raise ParameterError("ids hold repeated values; every id must be unique")
    return ids.astype(np.int64)


def _image_paths(paths) -> list[str]:
    """A list of paths, or a folder: its image files sorted by name."""
    if isinstance(paths, (str, os.PathLike)) and Path(paths).is_dir():
        from ..featurize import find_images

        files, _ = find_images(paths)
        paths = [files[k] for k in sorted(files)]
    return [str(Path(p)) for p in paths]


def _block_rows(n: int, options: RayOptions, cap: int) -> int:
    """Rows per input block: at most ``cap``, and small enough that every actor gets ~4 blocks
    (one block goes to one actor), but not below a batch."""
    return max(1, min(cap, max(options.batch_size, -(-n // (4 * options.concurrency)))))


def image_dataset(paths, ids=None, *, block_rows: int = 1024):
    """A Ray Dataset of ``(id, path)`` rows (ids default to ``0..n-1``, the order of ``paths``,
    which may be a folder: its image files sorted by name)."""
    ray = require_ray()
    pa, _ = _pyarrow()
    paths = _image_paths(paths)
    if not paths:
        raise ParameterError("no image files to featurize")
    missing = [p for p in paths if not Path(p).is_file()]
    if missing:
        raise FileNotFoundError(f"{len(missing)} image file(s) not found, e.g. {missing[0]}")
    ids = _ids(ids, len(paths))
    blocks = [
        pa.table({"id": ids[s : s + block_rows], "path": pa.array(paths[s : s + block_rows], pa.string())})
        for s in range(0, len(paths), block_rows)
    ]
    return ray.data.from_arrow(blocks)


def feature_dataset(features, ids=None, *, block_rows: int = _BLOCK_ROWS):
    """A Ray Dataset of ``(id, features)`` rows from an in-memory array ``(n, d)``."""
    ray = require_ray()
    pa, _ = _pyarrow()
    from ray.data.extensions import ArrowTensorArray

    features = np.asarray(features, dtype=np.float32)
    if features.ndim != 2 or features.shape[0] == 0:
        raise DataError(f"features must be a non-empty 2-D array, got shape {features.shape}")
    ids = _ids(ids, features.shape[0])
    blocks = [
        pa.table(
            {"id": ids[s : s + block_rows], "features": ArrowTensorArray.from_numpy(features[s : s + block_rows])}
        )
        for s in range(0, features.shape[0], block_rows)
    ]
    return ray.data.from_arrow(blocks)


# ------------------------------------------------------------------------------------------ runs
def ray_image_features(paths, *, encoder_factory=None, options: RayOptions | None = None):
    """:func:`dmh.featurize.image_features` on Ray: ``(features, ok, failures)`` in the order of
    ``paths``, the same arrays (up to float rounding of a different batching)."""
    options = options or RayOptions(batch_size=16)
    paths = _image_paths(paths)
    with ray_session(options):
        ds = image_dataset(paths, block_rows=_block_rows(len(paths), options, 1024)).map_batches(
            ImageFeatureStage, fn_constructor_args=(encoder_factory,), **options.map_kwargs()
        )
        parts = list(ds.iter_batches(batch_size=None, batch_format="numpy"))
    ids = np.concatenate([p["id"] for p in parts])
    order = np.argsort(ids)
    feats = np.concatenate([p["features"] for p in parts])[order]
    ok = np.concatenate([p["ok"] for p in parts])[order]
    errors = np.concatenate([p["error"] for p in parts])[order]
    paths = np.concatenate([p["path"] for p in parts])[order]
    failures = [(Path(p), str(e)) for p, e, good in zip(paths, errors, ok, strict=True) if not good]
    return feats, ok, failures


def encode_to_shards(
    model_path,
    out,
    *,
    modality: str,
    features=None,
    ids=None,
    paths=None,
    encoder_factory=None,
    options: RayOptions | None = None,
    rows_per_shard: int = 65_536,
) -> dict:
    """Encode on Ray and write the codes as Parquet shards in the folder ``out`` (created; must be
    empty): from ``features`` (an array, rows named by ``ids``) or from image files ``paths`` (a
    list or a folder; image features then hash codes, two stages). The input is cut into blocks of
    at most ``rows_per_shard`` rows (1,024 images), fewer where that gives each actor about four
    blocks; each block is written as one Parquet file (Ray may split one further). Returns the
    metadata written to ``out/_dmh_codes.json``."""
    from ..base import load_model

    if (features is None) == (paths is None):
        raise ParameterError("give either features or image paths to encode")
    if modality not in ("image", "text"):
        raise ParameterError(f"modality must be 'image' or 'text', got {modality!r}")
    if paths is not None and modality != "image":
        raise ParameterError("image paths can only be encoded with modality='image'")
    model_path = Path(model_path)
    model = load_model(model_path)  # checks the file here, one clear error instead of one per actor
    if features is not None:
        width = np.asarray(features).shape[-1]
        expected = model.n_features_.get(modality)
        if expected is not None and width != expected:
            raise ParameterError(f"the features have {width} columns, the model's {modality} side takes {expected}")
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise OutputError(out, "exists and is not an empty folder: give a new folder for the code shards")
    options = options or RayOptions()
    t0 = time.perf_counter()
    with ray_session(options):
        if features is not None:
            n = np.asarray(features).shape[0]
            ds = feature_dataset(features, ids, block_rows=_block_rows(n, options, rows_per_shard))
        else:
            paths = _image_paths(paths)
            ds = image_dataset(paths, ids, block_rows=_block_rows(len(paths), options, min(rows_per_shard, 1024)))
        if paths is not None:
            ds = ds.map_batches(ImageFeatureStage, fn_constructor_args=(encoder_factory,), **options.map_kwargs())
        ds = ds.map_batches(HashStage, fn_constructor_args=(model_path.read_bytes(), modality), **options.map_kwargs())
        out.mkdir(parents=True, exist_ok=True)
        ds.write_parquet(str(out))
    seconds = time.perf_counter() - t0
    _, pq = _pyarrow()
    table = pq.read_table(out, columns=["code"])
    n_codes = table.num_rows - table.column("code").null_count
    meta = {
        "format": "dmh-code-shards",
        "format_version": 1,
        "n_bits": int(model.n_bits_),
        "modality": modality,
        "model": {"path": str(model_path), "method": model.method_name},
        "n_rows": int(table.num_rows),
        "n_codes": int(n_codes),
        "seconds": round(seconds, 3),
        "ray": {k: v for k, v in asdict(options).items() if k != "address"} | {"address": options.address},
        "bit_order": "little",
    }
    atomic_write_text(out / CODES_META, json.dumps(meta, indent=1) + "\n")
    return meta


def is_code_shards(path) -> bool:
    """True when ``path`` is a folder written by :func:`encode_to_shards`."""
    return Path(path).is_dir() and (Path(path) / CODES_META).is_file()


def read_code_shards(folder) -> tuple[np.ndarray, np.ndarray, dict, list[tuple[int, str]]]:
    """Read a folder of code shards: ``(packed codes uint8 (n, n_bits / 8), ids int64 (n,), meta,
    failures)``, sorted by id; rows without a code (an unreadable image) are left out and listed in
    ``failures`` as ``(id, reason)``."""
    folder = Path(folder)
    if not is_code_shards(folder):
        raise FileNotFoundError(f"{folder} is not a folder of code shards (it has no {CODES_META})")
    meta = json.loads((folder / CODES_META).read_text(encoding="utf-8"))
    if meta.get("format") != "dmh-code-shards":
        raise DataError(f"{folder / CODES_META} is not a dmh code-shards header")
    _, pq = _pyarrow()
    table = pq.read_table(folder, columns=["id", "code", "error"])
    ids = table.column("id").to_numpy().astype(np.int64)
    code = table.column("code").combine_chunks()
    valid = ~np.asarray(code.is_null().to_numpy(zero_copy_only=False), dtype=bool)
    size = code.type.byte_width
    if size * 8 < int(meta["n_bits"]):
        raise DataError(f"{folder}: codes of {size} bytes cannot hold {meta['n_bits']} bits")
    buf = np.frombuffer(code.buffers()[1], dtype=np.uint8, count=(code.offset + len(code)) * size)
    packed = buf[code.offset * size :].reshape(len(code), size)
    errors = table.column("error").to_pylist()
    failures = sorted((int(i), str(e)) for i, e, v in zip(ids, errors, valid, strict=True) if not v)
    ids, packed = ids[valid], packed[valid]
    order = np.argsort(ids, kind="stable")
    return np.ascontiguousarray(packed[order]), ids[order], meta, failures
