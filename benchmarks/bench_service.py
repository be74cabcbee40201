"""Latency of ``dmh serve`` on a 10,000-item collection: a text query in, 20 thumbnails out.

    python benchmarks/bench_service.py [--n-items 10000] [--queries 200] [--workdir /tmp/dmh-bench-service]
                                       [--out bench_service.json] [--readme]
    python benchmarks/bench_service.py --collection mycollection/ [--image-queries 30]

What is built: ``--n-items`` synthetic photos (coloured shapes drawn with Pillow, 96 px JPEGs,
``dmh.datasets.shapes``) with a caption each for 3 in 4 of them (the shapes' words plus two of 400
made-up words, so the bag of words has a few hundred columns), through the real pipeline:
``build_collection`` with ``pixels-16`` image features (the photos are synthetic, so the image
features are too; EfficientNet-Lite0 would only change how long the build takes, not the query
path measured here), a DMH fit (64 bits; reduced: 1 round, hidden layer 1024, on 3,000 items)
and both indexes. The collection is kept in ``--workdir`` and reused by later runs.

What is timed: the server runs as its own process (``dmh serve``, uvicorn); this process sends
``GET /api/search?q=...&k=20`` (different sentences), reads the JSON, then fetches the 20
thumbnail URLs it names over 6 keep-alive connections at once (as a browser does). Reported:
median and 95th percentile of the API answer alone and of answer + all 20 thumbnails, after 10
warm-up queries. The machine's other load counts too: the figures are an upper bound.

``--collection`` times an existing collection instead (e.g. one built with EfficientNet-Lite0
features); ``--image-queries N`` also times N image queries: ``POST /api/search/image`` with the
bytes of N of the collection's own photos, answer + 20 thumbnails.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import platform
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
WORDS = [f"{a}{b}" for a in ("ka", "lo", "mi", "nu", "po", "ra", "si", "tu", "ve", "zo")
         for b in ("bel", "cor", "dan", "fim", "gol", "hur", "jex", "kip", "lum", "mor", "nax", "pel",
                   "quo", "rin", "sol", "tam", "urv", "vex", "wol", "yin", "zap", "bre", "cla", "dro",
                   "fle", "gri", "hox", "jul", "kro", "lix", "mab", "nop", "orp", "pux", "qua", "rel",
                   "sup", "tix", "ulo", "vam")]


def make_collection(workdir: Path, n_items: int, seed: int = 0) -> Path:
    from dmh.collection import build_collection, is_collection
    from dmh.datasets.shapes import COLOURS, PLACES, SHAPES, draw_shape

    col = workdir / f"col-{n_items}"
    if is_collection(col) and json.loads((col / "build.json").read_text())["done"][-1] == "thumbs":
        return col
    photos = workdir / f"photos-{n_items}"
    photos.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    colours = list(COLOURS)
    rows = []
    t0 = time.perf_counter()
    for i in range(n_items):
        shape, colour, place = SHAPES[i % 4], colours[(i // 4) % 6], PLACES[(i // 24) % 3]
        name = f"p{i:05d}.jpg"
        if not (photos / name).is_file():
            draw_shape(shape, colour, place, size=96, rng=rng).save(photos / name, quality=90)
        if i % 4 != 3:
            extra = " ".join(rng.choice(WORDS, 2))
            rows.append(f"{name},a {colour} {shape} {place} {extra}")
    (workdir / "captions.csv").write_text("image,caption\n" + "\n".join(rows) + "\n")
    print(f"drew {n_items} photos in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    t0 = time.perf_counter()
    build_collection(photos, workdir / "captions.csv", col, method="dmh", n_bits=64,
                     params={"n_rounds": 1, "hidden_size": 1024, "d": 128, "dam_epochs": 5},
                     image_model="pixels-16", fit_max=3000, log=lambda m: print(m, file=sys.stderr))
    print(f"built the collection in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return col


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class _Conn(threading.local):
    def get(self, host, port, path) -> bytes:
        if getattr(self, "conn", None) is None:
            self.conn = http.client.HTTPConnection(host, port, timeout=30)
        self.conn.request("GET", path)
        r = self.conn.getresponse()
        body = r.read()
        if r.status != 200:
            raise RuntimeError(f"{path}: HTTP {r.status} {body[:200]!r}")
        return body


def measure(col: Path, n_queries: int, k: int = 20, warmup: int = 10, seed: int = 1, image_queries: int = 0) -> dict:
    port = _free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    server = subprocess.Popen([sys.executable, "-m", "dmh.cli", "serve", str(col), "--port", str(port)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        local, pool = _Conn(), concurrent.futures.ThreadPoolExecutor(6)
        t0 = time.monotonic()
        while True:
            try:
                local.get("127.0.0.1", port, "/api/info")
                break
            except (OSError, RuntimeError):
                local.conn = None
                if server.poll() is not None or time.monotonic() - t0 > 120:
                    raise RuntimeError("the server did not start: " + server.stderr.read().decode()[-2000:]) from None
                time.sleep(0.2)
        rng = np.random.default_rng(seed)
        from dmh.datasets.shapes import COLOURS, SHAPES

        queries = [f"{rng.choice(list(COLOURS))} {rng.choice(SHAPES)} {' '.join(rng.choice(WORDS, 2))}"
                   for _ in range(n_queries + warmup)]
        api, total, server_ms = [], [], []
        for i, q in enumerate(queries):
            t_start = time.perf_counter()
            body = json.loads(local.get("127.0.0.1", port, "/api/search?" + urllib.parse.urlencode({"q": q, "k": k})))
            t_api = time.perf_counter()
            thumbs = [r["thumbnail"] for r in body["results"] if r["thumbnail"]]
            sizes = list(pool.map(lambda u: len(local.get("127.0.0.1", port, u)), thumbs))
            t_end = time.perf_counter()
            assert len(body["results"]) == k and len(thumbs) == k and all(sizes)
            if i >= warmup:
                api.append((t_api - t_start) * 1000)
                total.append((t_end - t_start) * 1000)
                server_ms.append(body["took_ms"])
        info = json.loads(local.get("127.0.0.1", port, "/api/info"))
        image_total = []
        if image_queries:
            manifest = json.loads((col / "manifest.json").read_text())["items"]
            photos = [it["image"] for it in manifest if it["image"] and not it.get("error")]
            picks = rng.choice(len(photos), min(len(photos), image_queries + 3), replace=False)
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
            for j, p in enumerate(picks):
                data = Path(photos[p]).read_bytes()
                t_start = time.perf_counter()
                conn.request("POST", f"/api/search/image?k={k}", body=data, headers={"Content-Type": "image/jpeg"})
                r = conn.getresponse()
                body = json.loads(r.read())
                assert r.status == 200, body
                thumbs = [x["thumbnail"] for x in body["results"] if x["thumbnail"]]
                list(pool.map(lambda u: len(local.get("127.0.0.1", port, u)), thumbs))
                if j >= 3:
                    image_total.append((time.perf_counter() - t_start) * 1000)
        pool.shutdown()
    finally:
        server.terminate()
        server.wait(timeout=30)

    def stats(xs):
        return {"median_ms": round(float(np.median(xs)), 1), "p95_ms": round(float(np.percentile(xs, 95)), 1),
                "max_ms": round(float(np.max(xs)), 1)}

    out = {
        "collection": info["collection"], "k": k, "queries": n_queries, "warmup": warmup,
        "api": stats(api), "api_plus_thumbnails": stats(total), "server_took": stats(server_ms),
        "cores": os.cpu_count(), "machine": platform.platform(), "python": platform.python_version(),
    }
    if image_total:
        out["image_queries"] = len(image_total)
        out["image_plus_thumbnails"] = stats(image_total)
    return out


def markdown(r: dict) -> str:
    c = r["collection"]
    return "\n".join([
        f"`python benchmarks/bench_service.py` — {c['items']:,} items ({c['images']:,} photos, {c['texts']:,} "
        f"captions, {c['n_bits']}-bit {c['method'].upper()} codes), {r['queries']} text queries, k = {r['k']}, "
        f"{r['cores']} cores:",
        "",
        "| measured | median | p95 |",
        "|---|---|---|",
        f"| JSON answer (HTTP request to parsed JSON with {r['k']} thumbnail URLs) | {r['api']['median_ms']} ms "
        f"| {r['api']['p95_ms']} ms |",
        f"| answer + all {r['k']} thumbnails fetched | {r['api_plus_thumbnails']['median_ms']} ms "
        f"| {r['api_plus_thumbnails']['p95_ms']} ms |",
        f"| of which encoding + search in the server | {r['server_took']['median_ms']} ms "
        f"| {r['server_took']['p95_ms']} ms |",
    ] + ([f"| image query ({r['image_queries']} uploads) + all {r['k']} thumbnails "
          f"| {r['image_plus_thumbnails']['median_ms']} ms | {r['image_plus_thumbnails']['p95_ms']} ms |"]
         if "image_plus_thumbnails" in r else []))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-items", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--workdir", type=Path, default=Path("/tmp/dmh-bench-service"))
    ap.add_argument("--out", type=Path)
    ap.add_argument("--readme", action="store_true", help="write the table into README.md (results:service)")
    ap.add_argument("--collection", type=Path, help="time this existing collection instead of building one")
    ap.add_argument("--image-queries", type=int, default=0, help="also time this many image uploads")
    args = ap.parse_args(argv)
    if args.collection is None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    col = args.collection or make_collection(args.workdir, args.n_items)
    result = measure(col, args.queries, image_queries=args.image_queries)
    print(json.dumps(result, indent=1))
    table = markdown(result)
    print(table)
    if args.out:
        from dmh._atomic import atomic_write_text

        atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
    if args.readme:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from _readme import update_readme

        update_readme("service", table)


if __name__ == "__main__":
    main()
