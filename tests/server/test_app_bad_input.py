"""Hostile requests to the API of ``dmh serve``: every one is a 4xx JSON ``{"error": ...}`` in one
line, never a 500; the service keeps answering afterwards."""

from __future__ import annotations

import shutil

import pytest

from ..conftest import import_or_skip

import_or_skip("starlette", "serve")
import_or_skip("httpx", "test", "httpx (Starlette's test client) is not installed; pip install -e '.[test]'")


@pytest.fixture(scope="module")
def client(shapes_collection):
    from starlette.testclient import TestClient

    from dmh.app.server import Limits, create_app

    app = create_app(shapes_collection, Limits(max_upload_bytes=200_000, max_k=30, max_query_chars=50))
    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def _truncated_png(shapes_collection) -> bytes:
    photo = sorted((shapes_collection.parent / "photos").iterdir())[0]
    return photo.read_bytes()[:150]


@pytest.mark.parametrize(
    "method, url, kwargs, status, message",
    [
        ("get", "/api/search", {}, 400, "empty"),
        ("get", "/api/search", {"params": {"q": "red", "k": "0"}}, 400, "between 1 and 30"),
        ("get", "/api/search", {"params": {"q": "red", "k": "-5"}}, 400, "between 1 and 30"),
        ("get", "/api/search", {"params": {"q": "red", "k": "1.5"}}, 400, "k must be an integer"),
        ("get", "/api/search", {"params": {"q": "red", "k": "9" * 40}}, 400, "between 1 and 30"),
        ("get", "/api/search", {"params": {"q": "red", "k": ""}}, 400, "k must be an integer"),
        ("get", "/api/search", {"params": {"q": "\x00\x01", "k": "3"}}, 200, ""),  # odd text is still text
        ("get", "/api/items/99999", {}, 404, "no item with id 99999"),
        ("get", "/api/items/-1", {}, 404, "no item with id -1"),
        ("get", "/api/items/" + "9" * 40, {}, 404, "no item with id"),
        ("get", "/api/items/abc", {}, 400, "item ids are integers"),
        ("get", "/api/similar/99999", {"params": {"k": "3"}}, 404, "no item with id 99999"),
        ("get", "/api/similar/3", {"params": {"k": "31"}}, 400, "between 1 and 30"),
        ("get", "/thumbs/99999.jpg", {}, 404, "no item with id 99999"),
        ("get", "/thumbs/abc.jpg", {}, 400, "item ids are integers"),
        ("get", "/photos/99999", {}, 404, "no item with id 99999"),
        ("get", "/photos/50", {}, 404, "has no photo"),  # a caption without a photo
        ("post", "/api/search/image", {"content": b'{"q": "red"}', "headers": {"Content-Type": "application/json"}},
         400, "not an image"),
        ("post", "/api/search/image", {"content": b"{not json", "headers": {"Content-Type": "application/json"}},
         400, "not an image"),
        ("post", "/api/search/image", {"content": b"x" * 10, "headers": {"Content-Length": "ten",
                                                                         "Content-Type": "image/png"}},
         400, "Content-Length"),
        ("post", "/api/search/image?k=abc", {"content": b"x"}, 400, "k must be an integer"),
        ("post", "/api/search/image", {"files": {"image": ("q.png", b"", "image/png")}}, 400, "empty"),
        ("post", "/api/search/image", {"files": {"image": ("q.txt", b"plain text", "text/plain")}}, 400,
         "not an image"),
        ("post", "/api/search/image", {"data": {"image": "a string, not a file"}}, 400, "not an image"),
        ("post", "/api/search/image", {"files": {"image": ("big.png", b"\0" * 300_000, "image/png")}}, 413,
         "too large"),
        ("get", "/api/search/image", {}, 405, ""),
    ],
)
def test_hostile_requests_get_a_json_error(client, method, url, kwargs, status, message):
    r = getattr(client, method)(url, **kwargs)
    assert r.status_code == status, r.text
    if status >= 400 and r.headers.get("content-type", "").startswith("application/json"):
        error = r.json()["error"]
        assert message in error and "\n" not in error
    assert client.get("/api/info").status_code == 200  # still serving


def test_a_truncated_photo_upload_is_a_400(client, shapes_collection):
    r = client.post("/api/search/image", content=_truncated_png(shapes_collection),
                    headers={"Content-Type": "image/png"})
    assert r.status_code == 400 and "not an image that can be read" in r.json()["error"]


def test_a_photo_gone_from_disk_is_a_404_not_a_500(shapes_collection, tmp_path):
    """The collection refers to its photos by path: a photo deleted since the build has no
    thumbnail to make and no photo to send."""
    from starlette.testclient import TestClient

    from dmh.app.collection import Collection
    from dmh.app.server import create_app

    col_path = tmp_path / "col"
    shutil.copytree(shapes_collection, col_path, ignore=shutil.ignore_patterns("thumbs"))
    col = Collection(col_path)
    gone = next(it for it in col.items if it["image"])
    moved = tmp_path / "moved.png"
    shutil.move(gone["image"], moved)
    try:
        with TestClient(create_app(col), raise_server_exceptions=False) as c:
            for url in (f"/thumbs/{gone['id']}.jpg", f"/photos/{gone['id']}"):
                r = c.get(url)
                assert r.status_code == 404 and str(gone["id"]) in r.json()["error"], (url, r.text)
    finally:
        shutil.move(moved, gone["image"])


def test_a_bad_host_or_a_port_in_use_is_refused_before_loading(shapes_collection):
    import socket

    from dmh.app.server.app import _check_listen
    from dmh.errors import ParameterError

    with pytest.raises(ParameterError, match="^host: cannot use"):
        _check_listen("256.256.256.256", 0)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        with pytest.raises(ParameterError, match="port is in use"):
            _check_listen("127.0.0.1", sock.getsockname()[1])
