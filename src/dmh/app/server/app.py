"""The search service: a Starlette app over one :class:`dmh.app.collection.Collection`.

API (every answer is JSON; errors are ``{"error": "..."}`` with a 4xx status):

====================================  ===========================================================
``GET /api/info``                     the collection (items, photos, captions, bits) and limits
``GET /api/search?q=TEXT&k=&target=`` items matching a text; ``target`` ``images`` (default) or
                                      ``texts``
``POST /api/search/image?k=&target=`` items like an uploaded image: the raw file as the body
                                      (``Content-Type: image/...``) or a multipart form field
                                      ``image``
``GET /api/similar/ID?k=&target=``    "more like this": items like item ``ID``
``GET /api/items/ID``                 one item
``GET /thumbs/ID.jpg``                the item's thumbnail (made once, kept in the collection)
``GET /photos/ID``                    the item's photo
====================================  ===========================================================

Search answers: ``{"query", "target", "k", "took_ms", "results": [{"id", "name", "caption",
"distance", "score", "thumbnail", "photo"}]}``, best first: by ``score`` (the cosine of the real
values behind the codes) where the collection re-ranks its Hamming candidates, else ``null`` and by
Hamming ``distance`` (ties by smaller id); ``thumbnail`` and ``photo`` are URLs, or null for a
caption without a photo. A text search also answers
``unknown_words``: the query's words that a bag-of-words collection does not know (left out of
the search; always empty with sentence-model text features), and, when it knows none of them, no
results and a ``note`` saying why (also when the query has no word at all, e.g. emoji only).

Limits (:class:`Limits`): upload size (413), ``k`` (400), query length (400); an upload that takes
longer than ``upload_timeout`` seconds to arrive (408); the bytes of all uploads being received at
once (``upload_buffer_bytes``, default 8 uploads of the largest size: beyond, 503); image queries
decoded and encoded at once (``max_uploads``; more wait for their turn). Queries are encoded
in a worker thread, so a slow image query does not hold up the thumbnails. Connections that send
no request are closed: one that has sent no whole request head ``header_timeout`` seconds after
connecting (or after its last answer), and, when the open connections near the process's limit of
open files (raised to its hard limit at start), the longest idle ones first.

Changes made while the server runs (``dmh add``, ``dmh remove``, ``dmh caption``) are served without
a restart (a removed item is then in no answer and its pages are 404): each request checks
whether the collection's manifest was replaced; if so the new state is loaded in a worker thread
while requests go on with the old one, then one reference is swapped (:class:`LiveCollection`).
A request uses one state from start to end, so an answer is of the old state or of the new one.
"""

from __future__ import annotations

import asyncio
import errno
import hashlib
import os
import threading
import time
from dataclasses import asdict, dataclass
from email.utils import formatdate
from pathlib import Path

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ...errors import DmhError, MissingDependencyError, ParameterError, UnknownItemError
from ..collection import TARGETS, Collection, manifest_signature

__all__ = ["BackgroundServer", "Limits", "LiveCollection", "create_app", "run"]

STATIC = Path(__file__).with_name("static")
_MULTIPART_OVERHEAD = 64 * 1024


@dataclass(frozen=True)
class Limits:
    """Input limits of the service."""

    max_upload_bytes: int = 10 * 1024 * 1024
    max_k: int = 100
    max_query_chars: int = 500
    default_k: int = 20
    upload_timeout: float = 60.0
    upload_buffer_bytes: int | None = None  # None: 8 * max_upload_bytes
    max_uploads: int = 4
    header_timeout: float = 10.0


class _Budget:
    """Bytes of uploads held in memory at once (the event loop's thread only uses it)."""

    def __init__(self, total: int):
        self.total, self.used = total, 0

    def take(self, n: int) -> None:
        if self.used + n > self.total:
            raise _BadInput(503, "the server is receiving too many uploads at once; try again in a moment")
        self.used += n


class _BadInput(HTTPException):
    pass


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


class LiveCollection:
    """A collection that follows its folder: :meth:`get` returns the state loaded last, and when
    the manifest on disk has been replaced since (an add, a rebuild), starts loading the new state
    in a thread (one load at a time); the next :meth:`get` after it is loaded returns it. A state
    that cannot be loaded (a rebuild half-way) is logged and the old one kept until the manifest
    changes again."""

    def __init__(self, col: Collection, log=None):
        self.current = col
        self.log = log
        self.reloads = 0
        self._lock = threading.Lock()
        self._loading = False
        self._tried = col.signature

    def get(self) -> Collection:
        col = self.current
        if col.changed():
            with self._lock:
                sig = manifest_signature(col.path)
                start = not self._loading and sig != self._tried
                if start:
                    self._loading, self._tried = True, sig
            if start:
                threading.Thread(target=self._reload, args=(col,), daemon=True, name="dmh-reload").start()
        return self.current

    def _reload(self, col: Collection) -> None:
        try:
            new = col.reload()
            new.warm()
        except (DmhError, OSError) as exc:
            if self.log is not None:
                self.log(f"warning: the collection changed but could not be loaded; still serving the previous "
                         f"state ({' '.join(str(exc).split())})")
        else:
            self.current = new
            self.reloads += 1
            if self.log is not None:
                self.log(f"reloaded {new.path}: {len(new.items)} items")
        finally:
            with self._lock:
                self._loading = False

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Until no load runs (tests)."""
        t0 = time.monotonic()
        while self._loading and time.monotonic() - t0 < timeout:
            time.sleep(0.01)


def create_app(collection, limits: Limits | None = None, log=None) -> Starlette:
    """The ASGI app serving ``collection`` (a :class:`Collection` or its folder), following the
    folder's changes (:class:`LiveCollection`; ``log`` is told of each reload)."""
    live = LiveCollection(collection if isinstance(collection, Collection) else Collection(collection), log=log)
    limits = limits or Limits()

    def params(request: Request) -> tuple[int, str]:
        raw_k = request.query_params.get("k", str(limits.default_k))
        try:
            k = int(raw_k)
        except ValueError:
            raise _BadInput(400, f"k must be an integer, got {raw_k[:40]!r}") from None
        if not 1 <= k <= limits.max_k:
            raise _BadInput(400, f"k must be between 1 and {limits.max_k}, got {k}")
        target = request.query_params.get("target", "images")
        if target not in TARGETS:
            raise _BadInput(400, f"target must be one of {list(TARGETS)}, got {target[:40]!r}")
        return k, target

    def answer(col, query: dict, k: int, target: str, hits, t0: float, extra=None) -> JSONResponse:
        results = []
        for h in hits:
            has_photo = bool(h.image) and not col.item(h.id).get("error")
            results.append({
                "id": h.id, "name": h.name, "caption": h.caption, "distance": h.distance, "score": h.score,
                "thumbnail": f"/thumbs/{h.id}.jpg" if has_photo else None,
                "photo": f"/photos/{h.id}" if has_photo else None,
            })
        return JSONResponse({"query": query, "target": target, "k": k, **(extra or {}),
                             "took_ms": round((time.perf_counter() - t0) * 1000, 2), "results": results})

    async def index(request: Request):
        return FileResponse(STATIC / "index.html", media_type="text/html")

    async def info(request: Request):
        col = live.get()
        return JSONResponse({"collection": {**col.summary(), "generation": col.generation}, "limits": asdict(limits)})

    async def search_text(request: Request):
        t0 = time.perf_counter()
        k, target = params(request)
        q = request.query_params.get("q", "")
        if not q.strip():
            raise _BadInput(400, "the query q is empty: give some words")
        if len(q) > limits.max_query_chars:
            raise _BadInput(400, f"the query is too long ({len(q)} characters; at most {limits.max_query_chars})")
        col = live.get()
        read, hits = await run_in_threadpool(_search_text, col, q, k, target)
        extra = {"unknown_words": read.unknown_words}
        if not read.readable:
            extra["note"] = read.note()
        return answer(col, {"text": q}, k, target, hits, t0, extra)

    budget = _Budget(limits.upload_buffer_bytes or 8 * limits.max_upload_bytes)
    decoding = asyncio.Semaphore(limits.max_uploads)  # decoded images held at once: bounded memory

    async def search_image(request: Request):
        t0 = time.perf_counter()
        k, target = params(request)
        held = [0]  # bytes of the budget this request holds
        try:
            try:
                async with asyncio.timeout(limits.upload_timeout):
                    data = await _read_upload(request, limits.max_upload_bytes, budget, held)
            except TimeoutError:
                raise _BadInput(408, f"the upload took longer than {limits.upload_timeout:g} s") from None
            async with decoding:
                col = live.get()
                hits = await run_in_threadpool(col.search_image, data, k, target)
        finally:
            budget.used -= held[0]
        return answer(col, {"image": f"upload ({len(data)} bytes)"}, k, target, hits, t0)

    async def similar(request: Request):
        t0 = time.perf_counter()
        k, target = params(request)
        item_id = _item_id(request)
        col = live.get()
        hits = await run_in_threadpool(col.similar, item_id, k, target)
        return answer(col, {"like": item_id}, k, target, hits, t0)

    async def item(request: Request):
        it = live.get().item(_item_id(request))
        has_photo = bool(it["image"]) and not it.get("error")
        return JSONResponse({"id": it["id"], "name": it["name"], "caption": it["caption"],
                             "thumbnail": f"/thumbs/{it['id']}.jpg" if has_photo else None,
                             "photo": f"/photos/{it['id']}" if has_photo else None})

    async def thumb(request: Request):
        # the lookup and the few KB of the file in one worker-thread call: FileResponse's own file
        # calls are four more thread hops, which were most of a thumbnail's time on 2 cores
        body, headers = await run_in_threadpool(_thumbnail, live.get(), _item_id(request))
        return Response(body, media_type="image/jpeg", headers=headers)

    async def photo(request: Request):
        it = live.get().item(_item_id(request))
        if not it["image"] or it.get("error") or not Path(it["image"]).is_file():
            raise _BadInput(404, f"item {it['id']} has no photo")
        return FileResponse(it["image"])

    async def on_http(request: Request, exc: HTTPException):
        return _error(exc.status_code, exc.detail if isinstance(exc.detail, str) else str(exc.detail))

    async def on_unknown(request: Request, exc: UnknownItemError):
        return _error(404, str(exc))

    async def on_user_error(request: Request, exc: DmhError):  # the request is wrong: 400
        return _error(400, " ".join(str(exc).split()))

    async def on_import(request: Request, exc: ImportError):  # a featurizer's extra is missing
        return _error(503, str(exc))

    routes = [
        Route("/", index),
        Route("/api/info", info),
        Route("/api/search", search_text),
        Route("/api/search/image", search_image, methods=["POST"]),
        Route("/api/similar/{item_id}", similar),
        Route("/api/items/{item_id}", item),
        Route("/thumbs/{item_id}.jpg", thumb),
        Route("/photos/{item_id}", photo),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    app = Starlette(
        routes=routes,
        # only the dmh family is an answer to the client; anything else is a bug (500, logged)
        exception_handlers={HTTPException: on_http, UnknownItemError: on_unknown, DmhError: on_user_error,
                            MissingDependencyError: on_import},
    )
    app.state.live = live
    app.state.limits = limits
    return app


def _search_text(col: Collection, q: str, k: int, target: str):
    read = col.read_text(q)
    return read, col.search_text(q, k, target)


def _item_id(request: Request) -> int:
    raw = request.path_params["item_id"]
    try:
        return int(raw)
    except ValueError:
        raise _BadInput(400, f"item ids are integers, got {raw[:40]!r}") from None


async def _read_upload(request: Request, limit: int, budget: _Budget, held: list) -> bytes:
    """The uploaded image's bytes: the raw body, or the ``image`` field of a multipart form; the
    bytes are taken from ``budget`` as they come (``held[0]``: how many, for the caller to give
    back). A client that goes away mid-upload gets a 400 that nobody reads (not a logged traceback)."""
    try:
        return await _read_upload_body(request, limit, budget, held)
    except ClientDisconnect:
        raise _BadInput(400, "the client closed the connection during the upload") from None


def _take(budget: _Budget, held: list, n: int) -> None:
    budget.take(n)
    held[0] += n


async def _read_upload_body(request: Request, limit: int, budget: _Budget, held: list) -> bytes:
    too_big = f"the upload is too large (at most {limit / 1024 / 1024:.1f} MB)"
    ctype = request.headers.get("content-type", "")
    length = request.headers.get("content-length")
    if length is not None:
        try:
            n = int(length)
        except ValueError:
            raise _BadInput(400, "bad Content-Length header") from None
        if n > limit + (_MULTIPART_OVERHEAD if ctype.startswith("multipart/") else 0):
            raise _BadInput(413, too_big)
        _take(budget, held, n)  # what it says it will send, before reading any of it
    if ctype.startswith("multipart/form-data"):
        if length is None:
            raise _BadInput(411, "a multipart upload needs a Content-Length header")
        async with request.form(max_files=1, max_fields=10) as form:
            upload = form.get("image")
            if upload is None or isinstance(upload, str):
                raise _BadInput(400, "the form has no file field 'image'")
            data = await upload.read()
    else:
        chunks, size = [], 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _BadInput(413, too_big)
            if size > held[0]:  # more than its Content-Length said, or none was given
                _take(budget, held, size - held[0])
            chunks.append(chunk)
        data = b"".join(chunks)
    if len(data) > limit:
        raise _BadInput(413, too_big)
    if not data:
        raise _BadInput(400, "the upload is empty: send an image file")
    return data


def run(collection, *, host: str = "127.0.0.1", port: int = 8000, limits: Limits | None = None, log=print):
    """Open the collection and serve it until interrupted."""
    import uvicorn

    _check_listen(host, port)
    col = Collection(collection)
    col.warm()
    app = create_app(col, limits, log=log)
    s = col.summary()
    if host not in ("127.0.0.1", "localhost", "::1"):
        log(f"note: bound to {host}, so other machines can reach this server; it has no login")
    log(f"serving {collection} ({s['items']} items: {s['images']} photos, {s['texts']} captions) "
        f"on http://{host}:{port}/  (Ctrl-C to stop)")
    uvicorn.Server(server_config(app, host, port, limits or Limits())).run()


def _thumbnail(col: Collection, item_id: int) -> tuple[bytes, dict]:
    """The item's thumbnail (:meth:`Collection.thumbnail`) as bytes, with the headers FileResponse
    would send: kept a day by browsers, its ETag and date from the file's size and time."""
    path = col.thumbnail(item_id)
    with open(path, "rb") as f:
        stat = os.fstat(f.fileno())
        body = f.read()
    etag = hashlib.md5(f"{stat.st_mtime}-{stat.st_size}".encode(), usedforsecurity=False).hexdigest()
    return body, {"Cache-Control": "max-age=86400", "ETag": f'"{etag}"',
                  "Last-Modified": formatdate(stat.st_mtime, usegmt=True)}


def server_config(app, host: str, port: int, limits: Limits):
    """uvicorn's settings for ``app``: its HTTP/1.1 protocol closing connections that send no
    request (see the module docstring), the open-file limit raised to its hard limit first."""
    import uvicorn

    nofile = _raise_open_files()
    # asyncio accepts up to `backlog` connections per turn of the loop before any of them is seen:
    # the cap leaves room for a few such bursts (and for the files the server opens) below the limit
    backlog = 128
    protocol = _protocol(limits.header_timeout, max(32, nofile - 3 * backlog - 64))
    return uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="off", http=protocol,
                          backlog=backlog)


def _raise_open_files() -> int:
    """The soft limit of open files raised to the hard one (each connection holds a file); returns it."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
            soft = hard
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 65536


def _protocol(header_timeout: float, max_connections: int):
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class Protocol(H11Protocol):
        """uvicorn's HTTP/1.1 protocol that closes a connection which has sent no whole request
        head ``header_timeout`` s after connecting or after its last answer, and, past
        ``max_connections`` open connections, the longest idle ones."""

        def connection_made(self, transport):
            self.idle_since = time.monotonic()
            super().connection_made(transport)
            self._arm()
            if len(self.connections) > max_connections:
                idle = sorted((c for c in self.connections if c is not self and getattr(c, "idle", None) and c.idle()),
                              key=lambda c: c.idle_since)
                for c in idle[: len(self.connections) - max_connections * 9 // 10]:
                    c.transport.close()

        def on_response_complete(self):
            super().on_response_complete()
            self.idle_since = time.monotonic()
            self._arm()

        def idle(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self):
            self.loop.call_later(header_timeout, self._close_if_idle, self.cycle)

        def _close_if_idle(self, cycle):
            if self.cycle is cycle and self.idle() and not self.transport.is_closing():
                self.transport.close()

    return Protocol


def _check_listen(host: str, port: int) -> None:
    """Before loading anything: ``host:port`` can be listened on (a valid address, a free port)."""
    import socket

    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise ParameterError(f"host: cannot use {host!r} as an address to listen on ({exc})") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn does
        try:
            sock.bind(address)
        except OSError as exc:
            why = "the port is in use" if exc.errno == errno.EADDRINUSE else (exc.strerror or str(exc))
            raise ParameterError(f"host: cannot listen on {host}:{port}: {why}") from None


class BackgroundServer:
    """A uvicorn server in a background thread (tests, benchmarks): ``with BackgroundServer(app)
    as srv: get(srv.url + "/api/info")``. ``port=0`` picks a free port."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0):
        import uvicorn

        self.config = server_config(app, host, port, getattr(app.state, "limits", None) or Limits())
        self.server = uvicorn.Server(self.config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)
        self.url = None

    def start(self, timeout: float = 20.0) -> BackgroundServer:
        self.thread.start()
        t0 = time.monotonic()
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() - t0 > timeout:
                raise RuntimeError("the server did not start")
            time.sleep(0.02)
        host, port = self.server.servers[0].sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
