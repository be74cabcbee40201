"""The service under a short load and hostile clients (the figures come from
``python benchmarks/bench_service.py --load 60``; this is its few-seconds version): concurrent text
and photo clients get no error; slow, oversized and malformed uploads and idle connections get
their 4xx or are closed, while a probe client's queries keep being answered."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ..conftest import import_or_skip

import_or_skip("starlette", "serve")

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCH))
    try:
        import bench_service

        yield bench_service
    finally:
        sys.path.remove(str(BENCH))
        sys.modules.pop("bench_service", None)


def test_load_and_hostile_clients(bench, shapes_collection):
    from dmh.app.server import BackgroundServer, Limits, create_app

    limits = Limits(max_upload_bytes=600_000, upload_timeout=1.5, header_timeout=1.0)
    photos = bench.upload_photos(2)
    with BackgroundServer(create_app(shapes_collection, limits)) as srv:
        port = int(srv.url.rsplit(":", 1)[1])
        # a fixed number of requests per client (the 120 s only bound a hung server): however loaded
        # the machine, every one must be answered
        result = bench.load(port, 120.0, text_clients=4, upload_clients=1, photos=photos, max_requests=4)
        assert result["errors"] == 0, result["error_examples"]
        assert result["text"]["n"] == 16 and result["upload"]["n"] == 4
        # each phase lasts until the server has answered or closed every hostile connection (within
        # its 1.5 s upload and 1 s header time-outs); the 60 s only bound a server that never does
        phases = bench.hostile(port, seconds=60.0, idle_connections=60, photo=photos[0], slow_connections=4,
                               stream_bytes=2_000_000)
    for name, phase in phases.items():
        assert phase["probe"]["errors"] == 0 and phase["probe"]["n"] >= 1, (name, phase["probe"])
    assert phases["slow uploads"]["hostile"]["answers"] == {"408": 4}
    assert phases["oversized bodies"]["hostile"]["answers"] == {"413": 13}
    malformed = phases["malformed requests"]["hostile"]
    assert all(status in ("400", "404", "413", "200") for status in malformed.values()), malformed
    assert malformed["64-megapixel PNG (8 KB)"] == "400" and malformed["k=10^12"] == "400"
    idle = phases["idle connections"]["hostile"]
    assert idle["opened"] == 60 and idle["still_open_after_60_s"] == 0 and idle["new_client_answered"]
