"""Benchmark: DMH ``fit`` at paper scale on synthetic inputs of the paper's shapes.

10,000 training objects, 4096-d image features (non-negative, like CNN fc7 activations), 1386-d
binary text (MIRFLICKR tag vectors), 64 bits, DMH's default outer rounds (``--rounds``), all other
parameters at their defaults. Reports wall time per round and stage (CLE: neighbour search, Q, W, complement, Y-update
by conjugate gradients, objective; GBE: building S^Y, steps; DAM: each network's epochs, feature
refresh), and the peak resident memory of the process (and of the GPU when one is used).

    python benchmarks/bench_fit.py [--n 10000] [--bits 64] [--paired-ratio 1.0] [--device auto]
        [--threads N] [--dtype auto] [--param KEY=VALUE ...] [--out bench_fit.json]

The synthetic inputs are made, and by default (``--dtype auto``) kept, in float32
(``CrossModalData(dtype="float32")``): the same codes as their float64 copies, half the memory
(docs/scaling.md); ``--dtype float64`` keeps double-precision copies, as before.

``--data DATA`` fits the training split of a real dataset instead (a built-in name such as
``uci-digits`` or a data file; ``--n`` is then ignored), e.g. the stage times of one round of fig5's
largest lambda: ``--data uci-digits --bits 16 --rounds 1 --param lambda_=1000 --threads 1 --cpu-clock``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import numpy as np

#: per-round stage keys of ``DMH.history_["time"]``, in the order they run, with printed names
STAGES = (
    ("cle_scale", "CLE view scaling"), ("cle_ridge", "CLE ridge complement"),
    ("cle_gram", "CLE Gram matrices"), ("cle_neighbours", "CLE neighbour search"), ("cle_q", "CLE Q"),
    ("cle_w", "CLE W"),
    ("cle_complement", "CLE complement"), ("cle_y", "CLE Y-update (CG)"), ("cle_objective", "CLE objective"),
    ("gbe_setup", "GBE S^Y"), ("gbe_steps", "GBE steps"), ("dam_image", "DAM imgNet epochs"),
    ("dam_text", "DAM txtNet epochs"), ("refresh", "feature refresh"),
)


def synthetic(n: int, d_img: int = 4096, d_txt: int = 1386, n_topics: int = 24, seed: int = 0,
              dtype: str = "float32"):
    """Clustered data: each object mixes a few latent topics; images are ReLU'd random projections
    of the topic mixture plus noise, texts are binary tags drawn from topic-specific tag rates.
    The features are made in float32; ``dtype="float64"`` keeps them as double-precision copies
    (the same values, so the same codes; twice the memory)."""
    from dmh import CrossModalData

    rng = np.random.default_rng(seed)
    mix = rng.dirichlet(np.full(n_topics, 0.3), size=n).astype(np.float32)
    # the noise is drawn by blocks of rows (consecutive draws from the same generator: the same
    # values as one call), so that 10^5 objects do not need a float64 n x 4096 temporary
    img = mix @ rng.normal(size=(n_topics, d_img)).astype(np.float32)
    for s in range(0, n, 8192):
        block = img[s : s + 8192]
        block *= 3
        block += rng.normal(size=block.shape).astype(np.float32)
        np.maximum(block, 0, out=block)
    rates = rng.beta(0.2, 8.0, size=(n_topics, d_txt)).astype(np.float32)
    txt = np.empty((n, d_txt), dtype=np.float32)
    for s in range(0, n, 8192):
        txt[s : s + 8192] = rng.random((len(txt[s : s + 8192]), d_txt), dtype=np.float32) < mix[s : s + 8192] @ rates
    labels = (mix > 0.2).astype(np.uint8)
    labels[labels.sum(1) == 0, 0] = 1
    return CrossModalData(image=img, text=txt, labels=labels, name=f"synthetic-{n}", dtype=dtype)


def write_block(result: dict) -> None:
    """Write a benchmark result into its page's results:bench block (docs/speed.md)."""
    from _blocks import update_block

    per = result["per_submodel_seconds"]
    rounds = "; ".join(
        f"round {i + 1}: CLE {r.get('cle', 0):.0f} s, GBE {r.get('gbe', 0):.0f} s, DAM {r.get('dam', 0):.0f} s"
        for i, r in enumerate(result["per_round_seconds"])
    )
    given = " ".join(f"--param {k}={json.dumps(v)}" for k, v in (result.get("params") or {}).items())
    update_block("bench", (
        f"`fit` at paper scale (`python benchmarks/bench_fit.py --doc{' ' + given if given else ''}`): "
        f"{result['n_objects']} objects, "
        f"{result['image_dim']}-d image features, {result['text_dim']}-d binary text, {result['n_bits']} bits, "
        f"{result['n_rounds']} rounds, defaults otherwise, synthetic clustered inputs, "
        f"{result['torch_threads']} threads, device {result.get('device', 'cpu')}: **{result['fit_seconds']:.0f} s** "
        f"wall (CLE {per['cle']:.0f} s, GBE {per['gbe']:.0f} s, DAM {per['dam']:.0f} s; {rounds}), "
        f"peak resident memory **{result['peak_rss_gib']:.1f} GiB** "
        f"({result['rss_after_data_gib']:.1f} GiB of it after building the input data).\n"
    ))


def stage_table(stages: list[dict]) -> str:
    """Per-stage seconds, one column per round and a total column, as plain text."""
    cols = [f"round {i + 1}" for i in range(len(stages))] + ["total"]
    lines = [f"{'stage':<22}" + "".join(f"{c:>10}" for c in cols)]
    rows = list(STAGES) + [("cle", "CLE (all)"), ("gbe", "GBE (all)"), ("dam", "DAM (all, + refresh)")]
    for key, name in rows:
        vals = [s.get(key, 0.0) for s in stages]
        lines.append(f"{name:<22}" + "".join(f"{v:>10.1f}" for v in vals) + f"{sum(vals):>10.1f}")
    return "\n".join(lines)


def _value(text: str):
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _rss_gib() -> float:
    """Resident memory of this process now (Linux /proc; nan elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1024**3
    except (OSError, ValueError, IndexError):
        return float("nan")


def _heap_free_gib() -> float | None:
    """Memory the C heap holds free (glibc ``mallinfo2().fordblks``), in GiB; None elsewhere."""
    import ctypes

    class _MallInfo2(ctypes.Structure):
        _fields_ = [(name, ctypes.c_size_t) for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost")]

    try:
        mallinfo2 = ctypes.CDLL("libc.so.6").mallinfo2
    except (OSError, AttributeError):
        return None
    mallinfo2.restype = _MallInfo2
    return mallinfo2().fordblks / 1024**3


def log_stages(t_start: float, log: list | None = None):
    """Print each CLE, GBE and DAM call to stderr as it ends (wall seconds since ``t_start``), so a
    fit stopped by a time limit still says how far it got and what each stage took; ``log``, when
    given, gets one dict per call (stage, seconds, resident memory then and the peak so far).
    Returns a function that puts the package's functions back."""
    from dmh.methods import cle, dam, gbe

    originals = []

    def wrap(module, name, label):
        real = getattr(module, name)
        originals.append((module, name, real))

        def timed(*args, **kwargs):
            t0 = time.perf_counter()
            out = real(*args, **kwargs)
            now = time.perf_counter()
            rss = _rss_gib()  # first: the peak read after it is at least as high
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
            print(f"[{now - t_start:7.1f} s] {label} {now - t0:.1f} s, resident {rss:.2f} GiB "
                  f"(peak so far {peak:.2f})", file=sys.stderr, flush=True)
            if log is not None:
                heap_free = _heap_free_gib()
                log.append({"stage": label, "end_s": round(now - t_start, 1), "seconds": round(now - t0, 1),
                            "rss_gib": round(rss, 2), "peak_gib": round(peak, 2),
                            "heap_free_gib": None if heap_free is None else round(heap_free, 2)})
            return out

        setattr(module, name, timed)

    wrap(cle, "fit_cle", "CLE")
    wrap(gbe, "fit_gbe", "GBE")
    wrap(dam, "train_net", "DAM network")

    def restore():
        for module, name, real in originals:
            setattr(module, name, real)

    return restore


def trace_peaks(step_gib: float = 0.05, every_s: float = 0.02):
    """Sample this process's resident memory from a thread; each time it rises ``step_gib`` above
    the highest value seen, record it with the main thread's innermost calls (where the memory is
    being taken). Returns a function that stops the sampling and returns the records."""
    import threading
    import traceback

    main_id = threading.get_ident()
    records, stop = [], threading.Event()

    def sample():
        best = 0.0
        while not stop.is_set():
            rss = _rss_gib()
            if rss > best + step_gib:
                best = rss
                frame = sys._current_frames().get(main_id)
                calls = traceback.extract_stack(frame)[-5:] if frame is not None else []
                frame = None  # a frame held keeps its locals (the arrays being measured) alive
                records.append({"rss_gib": round(rss, 2), "calls": [
                    f"{Path(c.filename).name}:{c.lineno}:{c.name}" for c in reversed(calls)]})
            stop.wait(every_s)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()

    def finish():
        stop.set()
        thread.join()
        return records

    return finish


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=10_000, help="training objects (default 10,000)")
    ap.add_argument("--data", default=None,
                    help="fit this dataset's training split (built-in name or data file) instead of synthetic data")
    ap.add_argument("--bits", type=int, default=64)
    ap.add_argument("--paired-ratio", type=float, default=1.0)
    ap.add_argument("--rounds", type=int, default=None, help="outer rounds (default: DMH's)")
    ap.add_argument("--device", choices=("auto", "cpu", "cuda"), default="auto")
    ap.add_argument("--threads", type=int, default=None,
                    help="threads of the fit (DMH n_threads; default: the package's setting)")
    ap.add_argument("--param", action="append", default=[], metavar="KEY=VALUE",
                    help="a DMH parameter, e.g. --param gbe_solver=approx (value parsed as JSON when it can be)")
    ap.add_argument("--dtype", choices=("auto", "float64", "float32"), default="auto",
                    help="precision in which the input features are kept (CrossModalData dtype): auto = float32 "
                         "for the synthetic inputs (they are made in float32: the same codes as float64, half "
                         "the memory), the data's own float64 for --data")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cpu-clock", action="store_true",
                    help="time stages in CPU seconds of this process instead of wall seconds (for profiling "
                         "with --threads 1 on a machine busy with other work)")
    ap.add_argument("--trace-peak", action="store_true",
                    help="sample resident memory from a thread and record where (the innermost calls) each new "
                         "high was reached; the last records go into the JSON as peak_trace")
    ap.add_argument("--out", default=None, help="write the result as JSON here")
    ap.add_argument("--doc", action="store_true", help="write the result into docs/speed.md's results:bench block")
    ap.add_argument("--render", default=None, help="only write that block from a saved result JSON")
    args = ap.parse_args(argv)
    if args.render:
        write_block(json.loads(Path(args.render).read_text()))
        return 0
    params = {}
    for item in args.param:
        key, sep, value = item.partition("=")
        if not sep or not key:
            ap.error(f"--param {item!r}: expected KEY=VALUE")
        params[key] = _value(value)
    rounds = {} if args.rounds is None else {"n_rounds": args.rounds}

    import torch

    from dmh import DMH, get_threads, make_semi_paired
    from dmh.errors import DmhError
    from dmh.methods.dmh import resolve_device

    if not 0.0 < args.paired_ratio <= 1.0:
        ap.error(f"--paired-ratio must lie in (0, 1], got {args.paired_ratio:g}")
    if args.data is None and args.n < 2:
        ap.error(f"--n must be at least 2, got {args.n}")
    if not 1 <= args.bits <= 4096:
        ap.error(f"--bits must be between 1 and 4096, got {args.bits}")
    try:  # before the (long) work: a device that is not there, a bad --param or --out is one error line
        resolve_device(args.device)
        DMH(args.bits, random_state=args.seed, device=args.device, n_threads=args.threads, **rounds,
            **params).check_hyperparameters()
        if args.out:
            from dmh.report import check_writable

            check_writable(args.out)
    except (DmhError, TypeError) as exc:
        ap.error(str(exc))
    if args.cpu_clock:
        time.perf_counter = time.process_time  # every stage timer of dmh reads time.perf_counter
    t0 = time.perf_counter()
    if args.data:
        from _data import load_or_exit

        data = load_or_exit(ap, args.data).train()
        if args.dtype != "auto":
            data = data.astype(args.dtype)
    else:
        data = synthetic(args.n, dtype="float32" if args.dtype == "auto" else args.dtype)
    if args.paired_ratio < 1:
        data = make_semi_paired(data, args.paired_ratio, random_state=0)
    t_data = time.perf_counter() - t0
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    rss_log = []
    restore = log_stages(t0, rss_log)
    trace = trace_peaks() if args.trace_peak else None
    model = DMH(args.bits, random_state=args.seed, device=args.device, **rounds,
                n_threads=args.threads, verbose=sys.stderr.isatty(), **params)
    t0 = time.perf_counter()
    try:
        model.fit(data)
    except DmhError as exc:  # e.g. too few paired objects left by --paired-ratio
        ap.error(str(exc))
    finally:
        restore()
        peak_trace = trace()[-12:] if trace else None
    wall = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    stages = model.history_["time"]
    device = "cuda" if (args.device == "cuda" or (args.device == "auto" and torch.cuda.is_available())) else "cpu"
    result = {
        "data": args.data or "synthetic", "n_objects": data.n_objects, "n_paired": data.n_paired,
        "image_dim": data.image.shape[1], "data_dtype": data.dtype,
        "text_dim": data.text.shape[1], "n_bits": args.bits, "n_rounds": model.n_iter_, "params": params,
        "device": device, "gpu": torch.cuda.get_device_name() if device == "cuda" else None,
        "torch_threads": args.threads if args.threads is not None else get_threads(),
        "cpu_count": os.cpu_count(),
        "clock": "cpu" if args.cpu_clock else "wall", "fit_seconds": round(wall, 1),
        "per_round_seconds": [{k: round(v, 2) for k, v in s.items()} for s in stages],
        "per_submodel_seconds": {k: round(sum(s.get(k, 0.0) for s in stages), 1) for k in ("cle", "gbe", "dam")},
        "per_stage_seconds": {k: round(sum(s.get(k, 0.0) for s in stages), 2) for k, _ in STAGES},
        "peak_rss_gib": round(peak, 2), "rss_after_data_gib": round(rss_before, 2), "rss_log": rss_log,
        "peak_trace": peak_trace,
        "peak_gpu_gib": round(torch.cuda.max_memory_allocated() / 1024**3, 2) if device == "cuda" else None,
        "data_seconds": round(t_data, 1),
        "cle_iterations": [len(h) for h in model.history_["cle"]],
        "gbe_iterations": [h[-1][0] if h else 0 for h in model.history_["gbe"]],
        "dam_epochs": {m: [len(h) for h in model.history_[f"dam_{m}"]] for m in ("image", "text")},
        "dam_loss": {m: [[round(v, 4) for v in h] for h in model.history_[f"dam_{m}"]] for m in ("image", "text")},
        "dam_agreement": {m: [[round(v, 4) for v in h] for h in model.history_.get(f"dam_{m}_agreement", [])]
                          for m in ("image", "text")},
        "gbe_loss": [[[i, round(v, 6)] for i, v in h] for h in model.history_["gbe"]],
    }
    print(stage_table(stages))
    print(json.dumps(result, indent=1))
    if args.doc:
        write_block(result)
    if args.out:
        from dmh.report import atomic_write_text

        atomic_write_text(args.out, json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
