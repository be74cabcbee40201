"""Latency of ``dmh serve`` on a 10,000-item collection: a text query in, 20 thumbnails out; and the
service under load and under hostile clients (``--load``).

    python benchmarks/bench_service.py [--n-items 10000] [--queries 200] [--workdir /tmp/dmh-bench-service]
                                       [--out bench_service.json] [--doc]
    python benchmarks/bench_service.py --collection mycollection/ [--image-queries 30]
    python benchmarks/bench_service.py --load 60 [--load-rounds 1] [--text-clients 8] [--upload-clients 1]
                                       [--hostile-seconds 10] [--idle-connections 1000] [--server-nofile 1024]

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

``--load SECONDS`` (loopback only; every phase bounded in time and in requests) runs the server as
its own process and, for SECONDS, ``--text-clients`` threads sending text queries (each waits for
its answer, then sends the next; k = 20) and ``--upload-clients`` threads uploading photos (1024 x
768 JPEGs of drawn shapes with noise, about 135 KB) to ``POST /api/search/image``. Reported: errors
(any answer but 200, or no answer), median / p99 / max latency per kind, requests per second, and
the server's resident memory (VmRSS) before, after, and at its peak (VmHWM); ``--load-rounds N``
repeats the load N times and records the memory after each. Then hostile clients,
``--hostile-seconds`` each, while one probe client keeps sending queries (every fifth a photo, the
others text): slow uploads (20 connections trickling a declared 500 KB body 100 bytes every 0.5
s), oversized bodies (a declared 200 MB, and 30 MB streamed without a length), malformed requests
(protocol garbage, bad lengths, broken multipart forms, a truncated JPEG, a 64-megapixel PNG of 8
KB, bad parameters), and ``--idle-connections`` connections that never send a request (half of
them send half a request line). Reported per phase: what the hostile requests got, the probe's
answers (all must be 200) and latency, the server's open files; at the end, whether the server
still runs and how many tracebacks its log holds. The server runs with ``--upload-timeout`` two
thirds of ``--hostile-seconds``, so that the slow uploads meet it within their phase;
``--server-nofile`` starts it under that limit of open files (1024 is the usual default of a Linux
login) so that the idle connections meet it.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import platform
import select
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
    from dmh.app.collection import build_collection, is_collection
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


def start_server(col: Path, nofile: int | None = None, options=()) -> tuple[subprocess.Popen, int]:
    """``dmh serve COL [options]`` on a free loopback port, once it answers; ``nofile``: its
    open-file limit."""
    port = _free_port()
    env = dict(os.environ, PYTHONUNBUFFERED="1")

    def limit():  # in the child, before it runs dmh
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    import tempfile

    log = tempfile.NamedTemporaryFile("w+b", prefix="dmh-serve-", suffix=".log", delete=False)  # noqa: SIM115
    # the server's log goes to a file: a pipe nobody reads would stop the server once full
    server = subprocess.Popen([sys.executable, "-m", "dmh.cli", "serve", str(col), "--port", str(port), *options],
                              env=env, stdout=subprocess.DEVNULL, stderr=log, preexec_fn=limit if nofile else None)
    server.log_path = Path(log.name)
    log.close()
    local = _Conn()
    t0 = time.monotonic()
    while True:
        try:
            local.get("127.0.0.1", port, "/api/info")
            local.conn.close()
            return server, port
        except (OSError, RuntimeError):
            local.conn = None
            if server.poll() is not None or time.monotonic() - t0 > 120:
                server.kill()
                raise RuntimeError("the server did not start: " + server_log(server)[-2000:]) from None
            time.sleep(0.2)


def server_log(server) -> str:
    return server.log_path.read_text(errors="replace")


def measure(col: Path, n_queries: int, k: int = 20, warmup: int = 10, seed: int = 1, image_queries: int = 0) -> dict:
    server, port = start_server(col)
    try:
        local, pool = _Conn(), concurrent.futures.ThreadPoolExecutor(6)
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
        server.log_path.unlink(missing_ok=True)

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


# ------------------------------------------------------------------------------------ under load
def proc_status(pid: int) -> dict:
    """The server process's resident memory now and at its peak (MiB) and its open files."""
    out = {}
    with open(f"/proc/{pid}/status") as fh:
        for line in fh:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                out[key] = round(int(value.split()[0]) / 1024, 1)
    out["open_files"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def _stats(xs) -> dict:
    if not xs:
        return {"n": 0}
    return {"n": len(xs), "median_ms": round(float(np.median(xs)), 1), "p99_ms": round(float(np.percentile(xs, 99)), 1),
            "max_ms": round(float(np.max(xs)), 1)}


def text_queries(rng, n: int) -> list[str]:
    from dmh.datasets.shapes import COLOURS, SHAPES

    return [f"{rng.choice(list(COLOURS))} {rng.choice(SHAPES)} {' '.join(rng.choice(WORDS, 2))}" for _ in range(n)]


def upload_photos(n: int = 8, seed: int = 2) -> list[bytes]:
    """Photos of a typical upload size: 1024 x 768 JPEGs of drawn shapes."""
    import io

    from PIL import Image

    from dmh.datasets.shapes import COLOURS, PLACES, SHAPES, draw_shape

    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        im = draw_shape(SHAPES[i % 4], list(COLOURS)[i % 6], PLACES[i % 3], size=1024, rng=rng).convert("RGB")
        noise = rng.integers(-12, 13, (768, 1024, 3))
        arr = np.clip(np.asarray(im.resize((1024, 768)), np.int16) + noise, 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(arr).save(buf, format="JPEG", quality=85)
        out.append(buf.getvalue())
    return out


class Client:
    """One keep-alive HTTP connection that records each request's latency and failures."""

    def __init__(self, port: int, timeout: float = 30.0):
        self.port, self.timeout, self.conn = port, timeout, None
        self.latency, self.errors = [], []

    def request(self, method: str, path: str, body: bytes | None = None, headers=None) -> bytes | None:
        t0 = time.perf_counter()
        try:
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=self.timeout)
            self.conn.request(method, path, body=body, headers=headers or {})
            r = self.conn.getresponse()
            data = r.read()
        except (OSError, http.client.HTTPException) as exc:
            self.errors.append(f"{method} {path[:60]}: {type(exc).__name__}: {exc}")
            self.conn = None
            return None
        if r.status != 200:
            self.errors.append(f"{method} {path[:60]}: HTTP {r.status} {data[:120]!r}")
            return None
        self.latency.append((time.perf_counter() - t0) * 1000)
        return data


def load(port: int, seconds: float, text_clients: int = 8, upload_clients: int = 1, photos=(), k: int = 20,
         max_requests: int = 100_000, seed: int = 3) -> dict:
    """``text_clients`` + ``upload_clients`` closed-loop clients for ``seconds`` (at most
    ``max_requests`` each)."""
    rng = np.random.default_rng(seed)
    queries = text_queries(rng, 500)
    deadline = time.monotonic() + seconds
    texts = [Client(port) for _ in range(text_clients)]
    uploads = [Client(port, timeout=60) for _ in range(upload_clients)]

    def run_text(c: Client, offset: int):
        for i in range(max_requests):
            if time.monotonic() >= deadline:
                break
            q = queries[(offset + i) % len(queries)]
            body = c.request("GET", "/api/search?" + urllib.parse.urlencode({"q": q, "k": k}))
            if body is not None and len(json.loads(body)["results"]) != k:
                c.errors.append(f"{q}: fewer than {k} results")

    def run_upload(c: Client, offset: int):
        for i in range(max_requests):
            if time.monotonic() >= deadline:
                break
            c.request("POST", f"/api/search/image?k={k}", body=photos[(offset + i) % len(photos)],
                      headers={"Content-Type": "image/jpeg"})

    threads = [threading.Thread(target=run_text, args=(c, 37 * j)) for j, c in enumerate(texts)]
    threads += [threading.Thread(target=run_upload, args=(c, j)) for j, c in enumerate(uploads)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=seconds + 120)
    wall = time.monotonic() - t0
    text_ms = [x for c in texts for x in c.latency]
    upload_ms = [x for c in uploads for x in c.latency]
    errors = [e for c in texts + uploads for e in c.errors]
    return {"seconds": round(wall, 1), "text_clients": text_clients, "upload_clients": upload_clients, "k": k,
            "text": {**_stats(text_ms), "per_s": round(len(text_ms) / wall, 1)},
            "upload": {**_stats(upload_ms), "per_s": round(len(upload_ms) / wall, 2),
                       "bytes_median": int(np.median([len(p) for p in photos])) if photos else 0},
            "errors": len(errors), "error_examples": errors[:5]}


def _raw(port: int, data: bytes, timeout: float = 10.0, read: bool = True) -> str:
    """Send raw bytes on a new connection; the status line of the answer ("closed" / "timeout")."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(data)
            if not read:
                return "sent"
            got = s.recv(200)
    except TimeoutError:
        return "timeout"
    except OSError as exc:
        return f"closed ({type(exc).__name__})"
    if not got:
        return "closed"
    line = got.split(b"\r\n", 1)[0].decode("latin-1")
    return " ".join(line.split()[1:2]) or line[:40]


def _count(xs) -> dict:
    out = {}
    for x in xs:
        out[x] = out.get(x, 0) + 1
    return out


def _png_bomb() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("1", (8000, 8000)).save(buf, format="PNG")
    return buf.getvalue()


def _multipart(body: bytes, boundary: str = "xyz") -> bytes:
    return (f"--{boundary}\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a.jpg\"\r\n"
            f"Content-Type: image/jpeg\r\n\r\n").encode() + body + f"\r\n--{boundary}--\r\n".encode()


def malformed_requests(photo: bytes) -> list[tuple[str, bytes]]:
    """(name, raw HTTP request) of requests a careless or hostile client sends."""
    def post(path, body, ctype="image/jpeg", extra=""):
        return (f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: {ctype}\r\nContent-Length: {len(body)}\r\n"
                f"{extra}Connection: close\r\n\r\n").encode() + body

    def get(path, extra=""):
        return f"GET {path} HTTP/1.1\r\nHost: x\r\n{extra}Connection: close\r\n\r\n".encode()

    bomb = _png_bomb()
    return [
        ("garbage request line", b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03garbage\r\n\r\n"),
        ("no HTTP version", b"GET /api/info\r\n\r\n"),
        ("bad Content-Length", b"POST /api/search/image HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n"),
        ("negative Content-Length", b"POST /api/search/image HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n"),
        ("two Content-Lengths", b"POST /api/search/image HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n"
                                b"Content-Length: 7\r\n\r\nhello"),
        ("100 KB header", get("/api/info", "X-Big: " + "a" * 100_000 + "\r\n")),
        ("non-UTF-8 query", get("/api/search?q=%ff%fe%fd")),
        ("k=-1", get("/api/search?q=red&k=-1")),
        ("k=10^12", get("/api/search?q=red&k=1000000000000")),
        ("unknown target", get("/api/search?q=red&target=%00")),
        ("item id 10^30", get("/api/similar/" + "9" * 30)),
        ("text body as an image", post("/api/search/image", b"hello, not an image")),
        ("truncated JPEG", post("/api/search/image", photo[: len(photo) // 3])),
        ("64-megapixel PNG (8 KB)", post("/api/search/image", bomb, "image/png")),
        ("multipart, no boundary", post("/api/search/image", _multipart(photo), "multipart/form-data")),
        ("multipart, wrong boundary", post("/api/search/image", _multipart(photo, "abc"),
                                           "multipart/form-data; boundary=xyz")),
        ("multipart, cut short", post("/api/search/image", _multipart(photo)[:500],
                                      "multipart/form-data; boundary=xyz")),
        ("multipart, 2000 fields", post("/api/search/image", b"".join(
            f"--xyz\r\nContent-Disposition: form-data; name=\"f{i}\"\r\n\r\nx\r\n".encode() for i in range(2000))
            + b"--xyz--\r\n", "multipart/form-data; boundary=xyz")),
        ("path traversal", get("/static/../../../../etc/passwd")),
        ("thumbnail of no item", get("/thumbs/99999999.jpg")),
    ]


def hostile(port: int, seconds: float = 10.0, idle_connections: int = 1000, photo: bytes = b"",
            server_pid: int | None = None, slow_connections: int = 20, stream_bytes: int = 30_000_000) -> dict:
    """The hostile phases, each with a probe client sending text queries throughout (answered once
    before the attack starts). The slow uploads and the idle connections are held until the server
    has answered or closed every one of them, or for ``seconds`` at most."""
    out = {}

    def phase(name, attack):
        probe, stop, answered = Client(port, timeout=30), threading.Event(), threading.Event()
        queries = text_queries(np.random.default_rng(9), 50)

        def run_probe():
            i = 0
            while not stop.is_set():
                if i % 5 == 4 and photo:  # every fifth, a photo
                    probe.request("POST", "/api/search/image?k=20", body=photo, headers={"Content-Type": "image/jpeg"})
                else:
                    probe.request("GET", "/api/search?" + urllib.parse.urlencode({"q": queries[i % 50], "k": 20}))
                answered.set()
                i += 1
                time.sleep(0.05)

        t = threading.Thread(target=run_probe)
        t.start()
        answered.wait(timeout=60)  # the probe is under way (answered once) before the attack starts
        t0 = time.monotonic()
        print(f"hostile: {name}...", file=sys.stderr, flush=True)
        result = attack()
        stop.set()
        t.join(timeout=60)
        out[name] = {"hostile": result, "probe": {**_stats(probe.latency), "errors": len(probe.errors),
                                                  "error_examples": probe.errors[:3]},
                     "seconds": round(time.monotonic() - t0, 1)}
        if server_pid:
            out[name]["server"] = proc_status(server_pid)

    def slow_uploads():
        socks, statuses = [], []
        for _ in range(slow_connections):
            s = socket.create_connection(("127.0.0.1", port), timeout=seconds + 30)
            s.sendall(b"POST /api/search/image HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n"
                      b"Content-Length: 500000\r\n\r\n")
            socks.append(s)
        t_end = time.monotonic() + seconds
        closed, answered = set(), set()  # answered: the server has sent something (its 408) or closed
        while time.monotonic() < t_end and len(closed | answered) < len(socks):
            waiting = [s for i, s in enumerate(socks) if i not in closed | answered]
            readable, _, _ = select.select(waiting, [], [], 0)
            answered |= {socks.index(s) for s in readable}
            for i, s in enumerate(socks):
                if i in closed or i in answered:
                    continue
                try:
                    s.sendall(b"\xff" * 100)
                except OSError:
                    closed.add(i)
            time.sleep(0.5)
        for i, s in enumerate(socks):
            try:
                s.settimeout(0.5)
                got = s.recv(200)
                statuses.append(got.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)[1] if got else "closed")
            except (TimeoutError, OSError, IndexError):
                statuses.append("still reading" if i not in closed else "closed")
            s.close()
        return {"connections": len(socks), "answers": _count(statuses)}

    def oversized():
        statuses = []
        for _ in range(10):
            statuses.append(_raw(port, b"POST /api/search/image HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n"
                                       b"Content-Length: 200000000\r\n\r\n" + b"\0" * 65536))
        for _ in range(3):  # chunked, no length: the server must stop reading at its limit
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=30) as s:
                    s.sendall(b"POST /api/search/image HTTP/1.1\r\nHost: x\r\nContent-Type: image/jpeg\r\n"
                              b"Transfer-Encoding: chunked\r\n\r\n")
                    chunk = b"10000\r\n" + b"\0" * 65536 + b"\r\n"
                    sent = 0
                    try:
                        while sent < stream_bytes:
                            s.sendall(chunk)
                            sent += 65536
                    except OSError:
                        pass
                    got = s.recv(200)
                    statuses.append(got.split(b"\r\n", 1)[0].decode("latin-1").split(" ", 2)[1] if got else "closed")
            except OSError as exc:
                statuses.append(f"closed ({type(exc).__name__})")
        return {"answers": _count(statuses)}

    def malformed():
        return {name: _raw(port, data) for name, data in malformed_requests(photo)}

    def idle():
        socks, refused = [], 0
        for i in range(idle_connections):
            try:
                s = socket.create_connection(("127.0.0.1", port), timeout=5)
                if i % 2:
                    s.sendall(b"GET /api/search?q=red HT")
                socks.append(s)
            except OSError:
                refused += 1
        t_end = time.monotonic() + seconds
        # a new client while they are held
        fresh = Client(port, timeout=10)
        fresh.request("GET", "/api/info")
        if server_pid:
            time.sleep(min(seconds, 2))
        fds = proc_status(server_pid)["open_files"] if server_pid else None
        alive = 0
        for s in socks:  # each held until the server closes it, or `seconds` after they were opened
            try:
                s.settimeout(max(0.01, t_end - time.monotonic()))
                alive += s.recv(1) != b""  # b"": the server closed it
            except TimeoutError:
                alive += 1
            except OSError:
                pass
            s.close()
        return {"opened": len(socks), "refused": refused, "server_open_files_after_2_s": fds,
                f"still_open_after_{seconds:g}_s": alive, "new_client_answered": not fresh.errors,
                "new_client_error": fresh.errors[:1]}

    phase("slow uploads", slow_uploads)
    phase("oversized bodies", oversized)
    phase("malformed requests", malformed)
    phase("idle connections", idle)
    return out


def run_load(col: Path, seconds: float, text_clients: int, upload_clients: int, hostile_seconds: float,
             idle_connections: int, nofile: int | None, rounds: int = 1) -> dict:
    photos = upload_photos()
    # uploads that trickle are cut off within the slow-upload phase
    upload_timeout = max(1.0, hostile_seconds * 2 / 3) if hostile_seconds else 60.0
    server, port = start_server(col, nofile=nofile, options=["--upload-timeout", f"{upload_timeout:g}"])
    try:
        warm = Client(port)
        for q in text_queries(np.random.default_rng(0), 20):
            warm.request("GET", "/api/search?" + urllib.parse.urlencode({"q": q, "k": 20}))
        warm.request("POST", "/api/search/image?k=20", body=photos[0], headers={"Content-Type": "image/jpeg"})
        info = json.loads(warm.request("GET", "/api/info"))
        before = proc_status(server.pid)
        print(f"load: {text_clients} text clients, {upload_clients} uploaders, {seconds:g} s...", file=sys.stderr,
              flush=True)
        result = load(port, seconds, text_clients, upload_clients, photos)
        after = proc_status(server.pid)
        more = []  # further rounds: does the memory keep growing?
        for i in range(1, rounds):
            print(f"load: round {i + 1} of {rounds}...", file=sys.stderr, flush=True)
            more.append({"load": load(port, seconds, text_clients, upload_clients, photos, seed=3 + i),
                         "server_after": proc_status(server.pid)})
        attacks = hostile(port, hostile_seconds, idle_connections, photos[0], server.pid) if hostile_seconds else {}
        end = proc_status(server.pid)
        alive = server.poll() is None
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
        log = server_log(server)
        server.log_path.unlink()
    tracebacks = log.count("Traceback (most recent call last)")
    return {"collection": info["collection"], "server_log_tracebacks": tracebacks,
            "server_log_tail": log[-3000:] if tracebacks else "", "limits": info["limits"], "load": result,
            "more_rounds": more,
            "server_before": before, "server_after_load": after, "hostile": attacks, "server_end": end,
            "server_alive_at_end": alive, "server_nofile": nofile, "cores": os.cpu_count(),
            "loadavg_1min_at_end": os.getloadavg()[0], "machine": platform.platform(),
            "python": platform.python_version(), "date": time.strftime("%Y-%m-%d")}


def load_markdown(r: dict) -> str:
    c, ld = r["collection"], r["load"]
    lines = [
        f"{c['items']:,} items ({c['images']:,} photos, {c['texts']:,} captions, {c['n_bits']}-bit "
        f"{c['method'].upper()} codes); {ld['text_clients']} text clients and {ld['upload_clients']} photo "
        f"uploader for {ld['seconds']:.0f} s, k = {ld['k']}; {r['cores']} cores:",
        "",
        "| requests | answered | per s | median | p99 | max |",
        "|---|---|---|---|---|---|",
        f"| text queries | {ld['text']['n']:,} | {ld['text']['per_s']} | {ld['text'].get('median_ms')} ms "
        f"| {ld['text'].get('p99_ms')} ms | {ld['text'].get('max_ms')} ms |",
        f"| photo uploads ({ld['upload']['bytes_median'] // 1024} KB JPEG) | {ld['upload']['n']:,} | "
        f"{ld['upload']['per_s']} | {ld['upload'].get('median_ms')} ms | {ld['upload'].get('p99_ms')} ms "
        f"| {ld['upload'].get('max_ms')} ms |",
        "",
        f"Errors: {ld['errors']}. Server resident memory: {r['server_before']['VmRSS']} MiB before, "
        f"{r['server_after_load']['VmRSS']} MiB after (peak {r['server_after_load']['VmHWM']} MiB).",
    ]
    for i, rnd in enumerate(r.get("more_rounds", []), start=2):
        t, u = rnd["load"]["text"], rnd["load"]["upload"]
        lines.append(f"Round {i}: {t['n']:,} text queries (median {t.get('median_ms')} ms, p99 {t.get('p99_ms')} ms), "
                     f"{u['n']:,} uploads (median {u.get('median_ms')} ms, p99 {u.get('p99_ms')} ms), errors "
                     f"{rnd['load']['errors']}; resident memory after it {rnd['server_after']['VmRSS']} MiB.")
    if r["hostile"]:
        lines += ["", "| hostile clients | what they got | probe answers (errors) | probe median / max |",
                  "|---|---|---|---|"]
        for name, ph in r["hostile"].items():
            got = ph["hostile"]
            if name == "malformed requests":
                got = _count(got.values())
            text = ", ".join(f"{k}: {v}" for k, v in got.items() if k not in ("new_client_error",))
            p = ph["probe"]
            lines.append(f"| {name} | {text} | {p['n']} ({p['errors']}) | {p.get('median_ms')} / "
                         f"{p.get('max_ms')} ms |")
        lines.append(f"\nServer alive at the end: {r['server_alive_at_end']}; resident memory "
                     f"{r['server_end']['VmRSS']} MiB (peak {r['server_end']['VmHWM']} MiB); tracebacks in its "
                     f"log: {r['server_log_tracebacks']}.")
    return "\n".join(lines)


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
    ap.add_argument("--doc", action="store_true", help="write the table into docs/collection.md (results:service)")
    ap.add_argument("--collection", type=Path, help="time this existing collection instead of building one")
    ap.add_argument("--image-queries", type=int, default=0, help="also time this many image uploads")
    ap.add_argument("--load", type=float, default=0, metavar="SECONDS",
                    help="run the load and hostile-client test for this long instead of the latency test")
    ap.add_argument("--load-rounds", type=int, default=1, help="run the load this many times (memory growth)")
    ap.add_argument("--text-clients", type=int, default=8)
    ap.add_argument("--upload-clients", type=int, default=1)
    ap.add_argument("--hostile-seconds", type=float, default=10, help="length of each hostile phase (0: none)")
    ap.add_argument("--idle-connections", type=int, default=1000)
    ap.add_argument("--server-nofile", type=int, default=1024, help="the server's limit of open files (0: as is)")
    args = ap.parse_args(argv)
    if args.collection is None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    col = args.collection or make_collection(args.workdir, args.n_items)
    if args.load:
        result = run_load(col, args.load, args.text_clients, args.upload_clients, args.hostile_seconds,
                          args.idle_connections, args.server_nofile or None, args.load_rounds)
        result["command"] = "python benchmarks/bench_service.py " + " ".join(argv if argv is not None else sys.argv[1:])
        print(json.dumps(result, indent=1))
        print(load_markdown(result))
        if args.out:
            from dmh.report import atomic_write_text

            atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
        return
    result = measure(col, args.queries, image_queries=args.image_queries)
    print(json.dumps(result, indent=1))
    table = markdown(result)
    print(table)
    if args.out:
        from dmh.report import atomic_write_text

        atomic_write_text(args.out, json.dumps(result, indent=1) + "\n")
    if args.doc:
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from _blocks import update_block

        update_block("service", table)


if __name__ == "__main__":
    main()
