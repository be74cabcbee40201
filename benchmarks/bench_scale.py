"""Scaling out: featurize on Ray, encode + index 10^6 rows, query the local index vs milvus-lite.

    python benchmarks/bench_scale.py [--part featurize,encode,query] [--images 256] [--rows 1000000]
                                     [--codes 1000000] [--repeats 2] [--out bench_scale.json]

Three measurements, each a ratio of two contenders timed in the same run (alternating A/B,
``--repeats`` times each, the median reported):

* **featurize**: image files -> EfficientNet-Lite0 features (decode, resize, CNN), images/s.
  A: one process, :func:`dmh.featurize.image_features` (batches of 16, torch on 1 thread).
  B: a local Ray runtime with 2 CPUs, :func:`dmh.app.distributed.ray_image_features` (2 actors of 1
  CPU, batches of 16). B's runtime is started once before the timed runs; its start-up and the
  actors' (model load) are reported apart. ``--images`` synthetic 128 px shape photos.
* **encode**: ``--rows`` synthetic 128-d feature rows -> 64-bit DMH codes -> a Hamming index.
  The model: DMH fitted on 2,000 rows of the same distribution (reduced: 1 round, hidden layer 1024,
  2 DAM epochs; the hash networks' cost per row is what matters here). A: ``model.encode`` +
  ``HammingIndex.add`` in one process. B: :func:`dmh.app.distributed.encode_to_shards` on local Ray
  (2 actors, batches of 8192, shards of 65,536 rows) + :func:`read_code_shards` +
  ``HammingIndex.add``. Rows/s, end to end.
* **query**: ``--codes`` random 64-bit codes (ids 0..n-1) in ``HammingIndex`` (faiss backend) and
  in milvus-lite (``MilvusCodeStore``, BIN_FLAT); 200 queries (codes of the database with 8 random
  bits flipped), k = 10, one query per call; median and 95th percentile latency, plus the insert
  time into milvus-lite. Both answer identically (checked).

The machine is shared (2 cores, other jobs running): absolute figures are upper bounds, the ratios
within a run are what to read. Threads: OMP/MKL/OpenBLAS pinned to 1 for every contender.
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

for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import numpy as np  # noqa: E402


def _median(xs):
    return float(statistics.median(xs))


def bench_featurize(n_images: int, repeats: int, work: Path) -> dict:
    from dmh.app.distributed import RayOptions, ray_image_features, ray_session
    from dmh.datasets.shapes import make_shapes
    from dmh.featurize import EfficientNetLite0Encoder, image_features

    folder, _ = make_shapes(work / "photos", n_images, size=128)
    paths = sorted(p for p in folder.iterdir() if p.suffix == ".png")
    encoder = EfficientNetLite0Encoder()
    options = RayOptions(batch_size=16, concurrency=2, num_cpus=1, local_cpus=2)
    t0 = time.perf_counter()
    single, ray_times = [], []
    with ray_session(options):
        startup = time.perf_counter() - t0
        for _ in range(repeats):
            t = time.perf_counter()
            a, ok_a, _ = image_features(paths, encoder=encoder, batch_size=16, progress=False)
            single.append(time.perf_counter() - t)
            t = time.perf_counter()
            b, ok_b, _ = ray_image_features(paths, options=options)
            ray_times.append(time.perf_counter() - t)
    same = bool(np.array_equal(ok_a, ok_b) and np.allclose(a, b, rtol=1e-4, atol=1e-5))
    return {
        "images": len(paths),
        "image_px": 128,
        "single_s": single,
        "ray_s": ray_times,
        "single_images_per_s": len(paths) / _median(single),
        "ray_images_per_s": len(paths) / _median(ray_times),
        "ray_over_single": _median(single) / _median(ray_times),
        "ray_runtime_startup_s": startup,
        "ray_note": "each Ray run includes starting its 2 actors (loading EfficientNet-Lite0 in each)",
        "features_equal": same,
    }


def _fit_model(path: Path, dim: int, rng):
    import dmh
    from dmh.data import CrossModalData

    n = 2000
    y = rng.integers(0, 10, n)
    centres_i, centres_t = rng.normal(size=(10, dim)) * 2, rng.normal(size=(10, 64)) * 2
    data = CrossModalData(image=centres_i[y] + rng.normal(size=(n, dim)), text=centres_t[y] + rng.normal(size=(n, 64)))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = dmh.DMH(n_bits=64, hidden_size=1024, n_rounds=1, dam_epochs=2, random_state=0).fit(data)
    model.save(path)
    return model, centres_i


def bench_encode(n_rows: int, repeats: int, work: Path) -> dict:
    import shutil

    from dmh.app.distributed import RayOptions, encode_to_shards, ray_session, read_code_shards
    from dmh.index import HammingIndex, pack_codes

    rng = np.random.default_rng(0)
    dim = 128
    t = time.perf_counter()
    model, centres = _fit_model(work / "model.npz", dim, rng)
    fit_s = time.perf_counter() - t
    X = np.empty((n_rows, dim), dtype=np.float32)
    for s in range(0, n_rows, 100_000):
        m = min(100_000, n_rows - s)
        X[s : s + m] = centres[rng.integers(0, 10, m)] + rng.normal(size=(m, dim))
    ids = np.arange(n_rows, dtype=np.int64)
    options = RayOptions(batch_size=8192, concurrency=2, num_cpus=1, local_cpus=2)
    single, ray_times = [], []
    with ray_session(options):
        for r in range(repeats):
            t = time.perf_counter()
            packed = pack_codes(model.encode(X, modality="image"))
            index_a = HammingIndex(64).add(packed, ids)
            single.append(time.perf_counter() - t)
            out = work / f"shards{r}"
            t = time.perf_counter()
            encode_to_shards(work / "model.npz", out, modality="image", features=X, ids=ids, options=options)
            codes_b, ids_b, _, _ = read_code_shards(out)
            index_b = HammingIndex(64).add(codes_b, ids_b)
            ray_times.append(time.perf_counter() - t)
            same = bool(np.array_equal(codes_b, packed) and np.array_equal(ids_b, ids))
            shards = len(list(out.glob("*.parquet")))
            shard_bytes = sum(p.stat().st_size for p in out.glob("*.parquet"))
            shutil.rmtree(out)
            del index_a, index_b
    return {
        "rows": n_rows,
        "features": dim,
        "n_bits": 64,
        "model": "DMH, hidden 1024, fitted on 2,000 rows (reduced)",
        "fit_s": fit_s,
        "single_s": single,
        "ray_s": ray_times,
        "single_rows_per_s": n_rows / _median(single),
        "ray_rows_per_s": n_rows / _median(ray_times),
        "ray_over_single": _median(single) / _median(ray_times),
        "shards": shards,
        "shard_bytes": shard_bytes,
        "codes_equal": same,
    }


def bench_query(n_codes: int, work: Path, n_queries: int = 200, k: int = 10) -> dict:
    from dmh.app.store.milvus import MilvusCodeStore
    from dmh.index import HammingIndex

    rng = np.random.default_rng(1)
    codes = rng.integers(0, 256, (n_codes, 8), dtype=np.uint8)
    base = codes[rng.integers(0, n_codes, n_queries)]
    bits = np.unpackbits(base, axis=1, bitorder="little")
    for row in bits:
        row[rng.choice(64, 8, replace=False)] ^= 1
    queries = np.packbits(bits, axis=1, bitorder="little")
    t = time.perf_counter()
    local = HammingIndex(64, backend="faiss").add(codes)
    local_build = time.perf_counter() - t
    t = time.perf_counter()
    store = MilvusCodeStore(work / "codes.db", "bench", n_bits=64)
    store.add(codes, np.arange(n_codes))
    milvus_insert = time.perf_counter() - t
    t = time.perf_counter()
    assert len(store) == n_codes
    count_s = time.perf_counter() - t
    # warm up, then alternate: one query per call
    local.search(queries[:5], k)
    store.search(queries[:5], k)
    lat_local, lat_milvus, same = [], [], True
    for q in queries:
        t = time.perf_counter()
        a = local.search(q[None], k)
        lat_local.append(time.perf_counter() - t)
        t = time.perf_counter()
        b = store.search(q[None], k)
        lat_milvus.append(time.perf_counter() - t)
        same &= bool(np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1]))
    store.close()
    db_bytes = sum(p.stat().st_size for p in (work / "codes.db").rglob("*") if p.is_file()) if (
        work / "codes.db").is_dir() else (work / "codes.db").stat().st_size

    def ms(xs, q):
        return float(np.quantile(np.asarray(xs) * 1e3, q))

    return {
        "codes": n_codes,
        "n_bits": 64,
        "queries": n_queries,
        "k": k,
        "local_backend": "faiss",
        "local_build_s": local_build,
        "milvus_insert_s": milvus_insert,
        "milvus_count_s": count_s,
        "milvus_file_bytes": db_bytes,
        "local_ms_median": ms(lat_local, 0.5),
        "local_ms_p95": ms(lat_local, 0.95),
        "milvus_ms_median": ms(lat_milvus, 0.5),
        "milvus_ms_p95": ms(lat_milvus, 0.95),
        "milvus_over_local": ms(lat_milvus, 0.5) / ms(lat_local, 0.5),
        "answers_equal": same,
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", default="featurize,encode,query")
    ap.add_argument("--images", type=int, default=256)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--codes", type=int, default=1_000_000)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=None, help="Write the results here (JSON).")
    args = ap.parse_args(argv)
    parts = [p.strip() for p in args.part.split(",") if p.strip()]
    import ray

    results = {
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": sys.version.split()[0],
                    "ray": ray.__version__, "load_average_at_start": os.getloadavg()},
        "command": "python benchmarks/bench_scale.py " + " ".join(argv if argv is not None else sys.argv[1:]),
    }
    with tempfile.TemporaryDirectory(prefix="dmh-bench-scale-") as tmp:
        work = Path(tmp)
        for part in parts:
            t = time.perf_counter()
            sub = work / part
            sub.mkdir()
            if part == "featurize":
                results[part] = bench_featurize(args.images, args.repeats, sub)
            elif part == "encode":
                results[part] = bench_encode(args.rows, args.repeats, sub)
            elif part == "query":
                results[part] = bench_query(args.codes, sub)
            else:
                ap.error(f"unknown part {part!r}")
            results[part]["wall_s"] = time.perf_counter() - t
            print(json.dumps({part: results[part]}, indent=1), flush=True)
    results["machine"]["load_average_at_end"] = os.getloadavg()
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
