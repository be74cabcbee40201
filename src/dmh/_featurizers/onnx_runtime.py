"""EfficientNet-Lite0 on ONNX Runtime: the network exported once from the installed PyTorch
weights into a cache, and batches run on it in chunks, one chunk per thread.

The export (``torch.onnx``, which needs the ``onnx`` package) happens on first use and is checked
against the PyTorch network on a fixed input before it is kept. The cached file is named by a hash
of the weights file and of the versions of the packages that wrote it, so a changed weights file or
exporter writes a new one; later runs load it without importing PyTorch. Nothing is downloaded.

Batches run as chunks of :data:`CHUNK` photos, one thread each, in parallel: on small CPUs this
keeps every thread busy without the barriers of one convolution split over threads.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..errors import DmhError, OutputError
from .extras import ONNX_EXTRA, _require

#: photos per ONNX Runtime call, one call per thread: one photo per call took the fewest CPU
#: milliseconds per photo (about 7 on this project's machine, against 8-9 for 2, 4 or 8)
CHUNK = 1
OPSET = 17
#: bump when the exported graph changes (input/output names, the pooling), to write a new file
EXPORT_FORMAT = 1
#: the exported network must agree with PyTorch on the check input at least this well (cosine)
CHECK_COSINE = 0.99999


class OnnxExportError(DmhError):
    """The network could not be exported to ONNX, or the export disagrees with PyTorch."""


def cache_folder(cache_dir=None) -> Path:
    """The folder of exported networks: ``cache_dir``, else ``$DMH_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/dmh``, else ``~/.cache/dmh``."""
    if cache_dir is not None:
        return Path(cache_dir)
    if os.environ.get("DMH_CACHE_DIR"):
        return Path(os.environ["DMH_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "dmh"


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def model_file(weights: Path, cache_dir=None) -> Path:
    """Where the ONNX export of ``weights`` is cached: named by the SHA-256 of the weights and
    the versions of the model code, torch and onnx."""
    digest = hashlib.sha256()
    with open(weights, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    key = {
        "weights": digest.hexdigest(),
        "packages": {d: _version(d) for d in ("efficientnet-lite-pytorch", "torch", "onnx")},
        "opset": OPSET,
        "format": EXPORT_FORMAT,
    }
    name = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_folder(cache_dir) / f"efficientnet-lite0-{name}.onnx"


def _check_input() -> np.ndarray:
    """Two fixed, photo-like inputs (smooth colour gradients with a little texture)."""
    yy, xx = np.mgrid[0:224, 0:224].astype(np.float32) / 223.0
    a = np.stack([xx, yy, 1 - xx * yy]) * 2 - 1
    b = np.stack([np.sin(9 * xx) * np.cos(7 * yy), yy - xx, np.cos(13 * xx * yy)])
    return np.stack([a, b]).astype(np.float32)


def export(weights: Path, ort) -> bytes:
    """The ONNX bytes of EfficientNet-Lite0's features (input ``pixels`` (b, 3, 224, 224),
    output ``features`` (b, 1280)), checked against PyTorch on :func:`_check_input`."""
    _require("onnx", ONNX_EXTRA, "exporting EfficientNet-Lite0 to ONNX")
    import torch

    from .._threads import thread_limit
    from .efficientnet import torch_model

    class _Features(torch.nn.Module):
        def __init__(self, net):
            super().__init__()
            self.net = net

        def forward(self, x):
            return self.net.extract_features(x).mean(dim=(2, 3))

    net = _Features(torch_model(weights)).eval()
    x = _check_input()
    buffer = io.BytesIO()
    with thread_limit(torch=True), torch.inference_mode():
        expected = net(torch.from_numpy(x)).numpy()
    with thread_limit(torch=True), warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")  # the exporter's notes on tracing and constant folding
        try:
            torch.onnx.export(
                net,
                (torch.from_numpy(x),),
                buffer,
                dynamo=False,
                opset_version=OPSET,
                input_names=["pixels"],
                output_names=["features"],
                dynamic_axes={"pixels": {0: "batch"}, "features": {0: "batch"}},
            )
        except (RuntimeError, torch.onnx.OnnxExporterError) as exc:
            raise OnnxExportError(f"exporting EfficientNet-Lite0 to ONNX failed: {exc}") from exc
    data = buffer.getvalue()
    got = _session(ort, data).run(None, {"pixels": x})[0]
    cos = (got * expected).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(expected, axis=1))
    if not np.all(cos >= CHECK_COSINE):
        raise OnnxExportError(
            f"the ONNX export of EfficientNet-Lite0 disagrees with PyTorch (cosine {cos.min():.6f})"
        )
    return data


def _session(ort, model):
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1  # parallel over chunks instead (run_chunked)
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.log_severity_level = 3
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _load_errors(ort) -> tuple[type[BaseException], ...]:
    state = ort.capi.onnxruntime_pybind11_state
    return tuple(
        getattr(state, name)
        for name in ("Fail", "InvalidProtobuf", "InvalidGraph", "NoSuchFile", "InvalidArgument")
        if hasattr(state, name)
    )


def onnx_session(weights: Path, cache_dir=None):
    """An ONNX Runtime session of EfficientNet-Lite0 from the cached export of ``weights``,
    exporting it first when it is not cached (or the cached file does not load). Where the cache
    cannot be written the export is used from memory, with a warning."""
    ort = _require("onnxruntime", ONNX_EXTRA, "image features on ONNX Runtime")
    path = model_file(weights, cache_dir)
    if path.is_file():
        try:
            return _session(ort, str(path))
        except _load_errors(ort):
            pass  # a damaged file (written outside dmh): export again over it
    data = export(weights, ort)
    from .._atomic import atomic_path

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_path(path) as tmp:
            tmp.write_bytes(data)
    except (OSError, OutputError) as exc:
        warnings.warn(
            f"cannot keep the ONNX export of EfficientNet-Lite0 in {path.parent} ({exc}); "
            "it is exported again by every process (set DMH_CACHE_DIR to a writable folder)",
            UserWarning,
            stacklevel=3,
        )
    return _session(ort, data)


def run_chunked(session, x: np.ndarray, n_threads: int) -> np.ndarray:
    """``session`` on the rows of ``x`` in chunks of :data:`CHUNK`, on up to ``n_threads``
    threads at once (ONNX Runtime releases the GIL and its sessions may be run concurrently)."""

    def run(chunk):
        return session.run(None, {"pixels": chunk})[0]

    chunks = [x[i : i + CHUNK] for i in range(0, len(x), CHUNK)]
    if n_threads <= 1 or len(chunks) == 1:
        outs = [run(c) for c in chunks]
    else:
        with ThreadPoolExecutor(min(n_threads, len(chunks)), thread_name_prefix="dmh-onnx") as pool:
            outs = list(pool.map(run, chunks))
    return np.concatenate(outs).astype(np.float32, copy=False)
