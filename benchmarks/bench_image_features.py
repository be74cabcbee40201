"""Image features: photos/s of each path against EfficientNet-Lite0's multiply-adds, and how far its
features (and a fitted model's codes) move from the reference path.

    python benchmarks/bench_image_features.py [--sizes 2048x1536,1024x768,640x480,thumbs] [--photos 64]
        [--rounds 3] [--contenders reference,torch,onnxruntime] [--network] [--codes] [--fashion DIR]
        [--out bench_image_features.json]

Contenders (each on the same photos, timed in turn, A B C A B C ..., ``--rounds`` times; the median
photos/s is reported with the 1-minute load average seen beside each timed run):

* ``reference``: every file decoded at full size, the whole photo resized (shorter side 256,
  bicubic) then centre-cropped to 224, PyTorch on batches of 16 in NCHW layout, reading and the
  network one after the other;
* ``torch``: :func:`dmh.featurize.image_features` with ``EfficientNetLite0Encoder(runtime="torch")``
  (the path taken where ONNX Runtime is not installed): JPEGs of 1024 px and more a side decoded at
  a reduced scale (both sides kept at least 512), the
  crop resized alone, files read by threads ahead of the network, channels-last batches;
* ``onnxruntime``: the same reading, the network on ONNX Runtime (the default where installed).

Photos: ``WxH`` sizes are JPEGs (quality 90) cut at random from the two photographs that
scikit-learn ships (``china.jpg``, ``flower.jpg``, 640 x 427), resized to the size, every third one
turned to portrait; ``thumbs`` are the first ``--photos`` fashion thumbnails (160 px JPEGs) of
``--fashion`` (skipped with a note where that folder is absent).

Reported besides: EfficientNet-Lite0's multiply-adds per photo (counted from the network's
convolutions with forward hooks), the achieved GMAC/s per thread of each contender, the CPU
seconds the process got per second (``cpu``: 2.0 = both cores of a 2-core machine), and the cosine
of each contender's features with the reference's, per photo (min, mean).

``--network``: the CPU milliseconds per photo of the network alone (no reading) on one thread:
ONNX Runtime one photo per call, PyTorch channels-last, PyTorch NCHW (CPU time, so it depends
little on the machine's load).

``--codes`` (needs ``--fashion``): features of all 2,600 fashion thumbnails by the reference and by
the ``onnxruntime`` path; DMH (64 bits, seed 0) fitted on the reference features of the training
rows (with the bag-of-words titles of ``fashion_effl0.npz``); the image codes of every row encoded
from either feature set; the fraction of bits that agree.

The machine may be shared: the load average is printed beside each figure, and the ratios
within one run are what to compare across machines.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _data import results_file  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CONTENDERS = ("reference", "torch", "onnxruntime")


# ------------------------------------------------------------------------------------ reference path
def reference_preprocess(image) -> np.ndarray:
    """The reference preprocessing: the whole photo resized, then the centre crop."""
    from PIL import Image, ImageOps

    from dmh.featurize import IMAGE_SIZE, PIXEL_MEAN, PIXEL_STD, RESIZE_TO

    image = ImageOps.exif_transpose(image)
    if image.mode != "RGB":
        image = image.convert("RGBA").convert("RGB") if "transparency" in image.info else image.convert("RGB")
    w, h = image.size
    scale = RESIZE_TO / min(w, h)
    nw, nh = max(IMAGE_SIZE, round(w * scale)), max(IMAGE_SIZE, round(h * scale))
    image = image.resize((nw, nh), Image.Resampling.BICUBIC)
    left, top = (nw - IMAGE_SIZE) // 2, (nh - IMAGE_SIZE) // 2
    image = image.crop((left, top, left + IMAGE_SIZE, top + IMAGE_SIZE))
    arr = (np.asarray(image, dtype=np.float32) - PIXEL_MEAN) / PIXEL_STD
    return np.ascontiguousarray(arr.transpose(2, 0, 1))


class ReferenceEncoder:
    """PyTorch EfficientNet-Lite0 in NCHW layout."""

    name = "efficientnet-lite0"

    def __init__(self):
        import torch

        from dmh.featurize import EfficientNetLite0Encoder

        # the network dmh's PyTorch runtime holds (bundled weights, eval mode), back in NCHW layout
        self.model = EfficientNetLite0Encoder(runtime="torch").model.to(memory_format=torch.contiguous_format)

    def __call__(self, batch):
        import torch

        with torch.inference_mode():
            return self.model.extract_features(torch.from_numpy(batch)).mean(dim=(2, 3)).numpy()


def reference_features(paths, encoder, batch_size=16) -> np.ndarray:
    from PIL import Image

    out = []
    for start in range(0, len(paths), batch_size):
        arrays = []
        for p in paths[start : start + batch_size]:
            with Image.open(p) as im:
                im.load()
                arrays.append(reference_preprocess(im))
        out.append(encoder(np.stack(arrays)))
    return np.concatenate(out).astype(np.float32)


# ------------------------------------------------------------------------------------------ helpers
def multiply_adds() -> int:
    """Multiply-adds of one 224 x 224 photo through EfficientNet-Lite0's features (every
    convolution: output elements x input channels per group x kernel area)."""
    import torch

    model = ReferenceEncoder().model
    total = 0

    def hook(module, inputs, output):
        nonlocal total
        kh, kw = module.kernel_size
        total += output.numel() * (module.in_channels // module.groups) * kh * kw

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, torch.nn.Conv2d)]
    with torch.inference_mode():
        model.extract_features(torch.zeros(1, 3, 224, 224))
    for h in handles:
        h.remove()
    return total


def make_photos(folder: Path, width: int, height: int, n: int, seed: int = 0) -> list[Path]:
    from PIL import Image
    from sklearn.datasets import load_sample_images

    sources = [Image.fromarray(a) for a in load_sample_images().images]
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        src = sources[i % len(sources)]
        w, h = src.size
        s = rng.uniform(0.6, 1.0)
        cw, ch = int(w * s), int(h * s)
        x, y = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
        im = src.crop((x, y, x + cw, y + ch)).resize((width, height), Image.Resampling.LANCZOS)
        if i % 3 == 2:
            im = im.transpose(Image.Transpose.ROTATE_90)
        path = folder / f"{i:04d}.jpg"
        im.save(path, quality=90)
        paths.append(path)
    return paths


def cosines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))


def load1() -> float:
    return round(os.getloadavg()[0], 2)


def machine() -> dict:
    cpu = ""
    try:
        cpu = next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    from dmh import get_threads

    return {"cpu": cpu or platform.processor(), "cores": os.cpu_count(), "threads": get_threads(),
            "python": platform.python_version()}


# ------------------------------------------------------------------------------------------ parts
def bench_speed(sets: dict, contenders, rounds: int, macs: int) -> list[dict]:
    from dmh import get_threads
    from dmh.featurize import EfficientNetLite0Encoder, image_features

    encoders = {}
    if "reference" in contenders:
        encoders["reference"] = ReferenceEncoder()
    if "torch" in contenders:
        encoders["torch"] = EfficientNetLite0Encoder(runtime="torch")
    if "onnxruntime" in contenders:
        encoders["onnxruntime"] = EfficientNetLite0Encoder(runtime="onnxruntime")

    def run(name, paths):
        if name == "reference":
            return reference_features(paths, encoders[name])
        return image_features(paths, encoder=encoders[name], progress=False)[0]

    threads = get_threads()
    rows = []
    for label, paths in sets.items():
        feats = {name: run(name, paths) for name in contenders}  # warm-up, and the features compared
        times = {name: [] for name in contenders}
        cpu = {name: [] for name in contenders}
        loads = {name: [] for name in contenders}
        for _ in range(rounds):
            for name in contenders:
                t0, c0 = time.perf_counter(), time.process_time()
                run(name, paths)
                times[name].append(time.perf_counter() - t0)
                cpu[name].append(time.process_time() - c0)
                loads[name].append(load1())
        base = len(paths) / statistics.median(times["reference"]) if "reference" in contenders else None
        for name in contenders:
            rate = len(paths) / statistics.median(times[name])
            row = {"photos": label, "n": len(paths), "contender": name, "photos_per_s": round(rate, 1),
                   "runs_photos_per_s": [round(len(paths) / t, 1) for t in times[name]],
                   "load_1min": loads[name], "threads": threads,
                   # CPU seconds of this process (all its threads) per second: 2.0 = both cores ours
                   "cpu_per_wall": round(sum(cpu[name]) / sum(times[name]), 2),
                   "photos_per_cpu_s": round(len(paths) * rounds / sum(cpu[name]), 1),
                   "gmac_per_s_per_thread": round(rate * macs / 1e9 / threads, 2)}
            if base:
                row["vs_reference"] = round(rate / base, 2)
            if "reference" in contenders and name != "reference":
                c = cosines(feats[name], feats["reference"])
                row["cosine_min"], row["cosine_mean"] = float(c.min()), float(c.mean())
            rows.append(row)
            print(f"{label:>9} {name:>11}: {rate:6.1f} photos/s"
                  + (f"  x{row['vs_reference']:.2f}" if base else "")
                  + f"  {row['gmac_per_s_per_thread']:5.2f} GMAC/s per thread"
                  + (f"  cosine min {row['cosine_min']:.6f}" if "cosine_min" in row else "")
                  + f"  cpu {row['cpu_per_wall']:.2f}  load {loads[name]}", flush=True)
    return rows


def bench_network(rounds: int, macs: int) -> list[dict]:
    """CPU milliseconds per photo of the network alone, on one thread (no reading): ONNX Runtime
    one photo per call, PyTorch channels-last and NCHW on a batch of 8; alternating, median."""
    import torch

    from dmh import thread_limit
    from dmh.featurize import EfficientNetLite0Encoder

    x = np.random.default_rng(0).uniform(-1, 1, (8, 3, 224, 224)).astype(np.float32)
    ort_enc = EfficientNetLite0Encoder(runtime="onnxruntime", n_threads=1)
    cl = EfficientNetLite0Encoder(runtime="torch")
    nchw = ReferenceEncoder()
    runs = {"onnxruntime": lambda: ort_enc(x), "torch channels-last": lambda: cl(x), "torch NCHW": lambda: nchw(x)}
    ms = {k: [] for k in runs}
    with thread_limit(1, torch=True):
        assert torch.get_num_threads() == 1
        for f in runs.values():
            f()
        for _ in range(rounds):
            for k, f in runs.items():
                c0 = time.process_time()
                f()
                ms[k].append(1000 * (time.process_time() - c0) / len(x))
    rows = []
    for k, v in ms.items():
        m = statistics.median(v)
        rows.append({"network": k, "cpu_ms_per_photo": round(m, 2), "gmac_per_cpu_s": round(macs / 1e6 / m, 1),
                     "runs_cpu_ms": [round(a, 2) for a in v], "load_1min": load1()})
        print(f"network alone, 1 thread, {k:>19}: {m:5.1f} CPU-ms per photo, {macs / 1e6 / m:5.1f} GMAC per CPU-s",
              flush=True)
    return rows


def bench_codes(fashion: Path) -> dict:
    import dmh
    from dmh.featurize import EfficientNetLite0Encoder, image_features

    data = dmh.load_dataset(str(fashion / "fashion_effl0.npz"))
    paths = [fashion / "thumbs" / f"{i:05d}.jpg" for i in range(data.n_objects)]
    t0 = time.perf_counter()
    ref = reference_features(paths, ReferenceEncoder())
    t_ref = time.perf_counter() - t0
    t0 = time.perf_counter()
    new, ok, _ = image_features(paths, encoder=EfficientNetLite0Encoder(runtime="onnxruntime"), progress=False)
    t_new = time.perf_counter() - t0
    assert ok.all()
    c = cosines(new, ref)
    ref_data = dmh.CrossModalData(image=ref, text=data.text, labels=data.labels, train_idx=data.train_idx,
                                  query_idx=data.query_idx, database_idx=data.database_idx, name="fashion")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = dmh.DMH(64, random_state=0).fit(ref_data.train())
    a = model.encode(ref, modality="image")
    b = model.encode(new, modality="image")
    agree = float((a == b).mean())
    out = {"n": len(paths), "bits": 64, "bit_agreement": agree, "rows_identical": float((a == b).all(1).mean()),
           "cosine_min": float(c.min()), "cosine_mean": float(c.mean()),
           "seconds_reference": round(t_ref, 1), "seconds_onnxruntime": round(t_new, 1), "load_1min": load1()}
    print(f"fashion codes: {agree:.4%} of bits agree ({out['rows_identical']:.2%} of rows identical); "
          f"feature cosine min {c.min():.6f}; reference {t_ref:.0f} s, onnxruntime {t_new:.0f} s", flush=True)
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2048x1536,1024x768,640x480,thumbs")
    parser.add_argument("--photos", type=int, default=64, help="photos per size (default 64)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--contenders", default=",".join(CONTENDERS))
    parser.add_argument("--codes", action="store_true", help="the fashion set's codes, reference vs onnxruntime")
    parser.add_argument("--network", action="store_true",
                        help="also CPU-ms per photo of the network alone on one thread, per runtime")
    parser.add_argument("--fashion", default=str(REPO.parent / "shared" / "data" / "fashion"))
    parser.add_argument("--out", default=None, help="append a record to this JSON list")
    args = parser.parse_args(argv)
    contenders = [c.strip() for c in args.contenders.split(",") if c.strip()]
    bad = [c for c in contenders if c not in CONTENDERS]
    if bad or not contenders:
        parser.error(f"--contenders: each must be one of {', '.join(CONTENDERS)}, got {args.contenders!r}")
    if args.photos < 1 or args.rounds < 1:
        parser.error("--photos and --rounds must be at least 1")
    records = results_file(parser, args.out) if args.out else None
    fashion = Path(args.fashion)
    have_fashion = (fashion / "thumbs").is_dir()
    if args.codes and not have_fashion:
        parser.error(f"--codes needs the fashion photos: {fashion / 'thumbs'} does not exist (--fashion)")

    macs = multiply_adds()
    info = machine()
    print(f"{info['cpu']}, {info['cores']} CPUs, dmh threads {info['threads']}; EfficientNet-Lite0: "
          f"{macs / 1e9:.3f} G multiply-adds per 224 x 224 photo", flush=True)
    record = {"date": time.strftime("%Y-%m-%d"), "machine": info, "gmac_per_photo": round(macs / 1e9, 4),
              "command": "python benchmarks/bench_image_features.py " + " ".join(argv or sys.argv[1:])}
    with tempfile.TemporaryDirectory() as tmp:
        sets = {}
        for size in [s.strip() for s in args.sizes.split(",") if s.strip()]:
            if size == "thumbs":
                if not have_fashion:
                    print(f"thumbs skipped: {fashion / 'thumbs'} does not exist (--fashion)")
                    continue
                sets["thumbs"] = sorted((fashion / "thumbs").glob("*.jpg"))[: args.photos]
            else:
                try:
                    w, h = (int(v) for v in size.lower().split("x"))
                except ValueError:
                    parser.error(f"--sizes: expected WxH or thumbs, got {size!r}")
                sets[size] = make_photos(Path(tmp) / size, w, h, args.photos)
        record["speed"] = bench_speed(sets, contenders, args.rounds, macs)
    if args.network:
        record["network"] = bench_network(max(args.rounds, 3), macs)
    if args.codes:
        record["codes"] = bench_codes(fashion)
    if records is not None:
        from dmh.report import atomic_write_text

        atomic_write_text(args.out, json.dumps(records + [record], indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
