"""The JSON API of ``dmh serve``: answers equal the library's, limits and errors are 4xx + JSON."""

from __future__ import annotations

import io

import pytest

from ..conftest import import_or_skip

import_or_skip("starlette", "serve")
import_or_skip("httpx", "test", "httpx (Starlette's test client) is not installed; pip install -e '.[test]'")


@pytest.fixture(scope="module")
def client(shapes_collection):
    from starlette.testclient import TestClient

    from dmh.app.server import Limits, create_app

    app = create_app(shapes_collection, Limits(max_upload_bytes=200_000, max_k=30, max_query_chars=50))
    with TestClient(app) as c:
        yield c


def test_page_and_assets_are_served_locally(client):
    page = client.get("/")
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "/static/app.js" in page.text and "http://" not in page.text and "https://" not in page.text
    for asset in ("/static/app.js", "/static/style.css"):
        r = client.get(asset)
        assert r.status_code == 200 and "http" not in r.text.replace("http-equiv", "")


def test_info(client):
    info = client.get("/api/info").json()
    assert info["collection"]["items"] == 52 and info["collection"]["images"] == 48
    assert info["limits"]["max_k"] == 30


def test_text_search_matches_library(client, shapes_collection):
    from dmh.app.collection import Collection

    col = Collection(shapes_collection)
    for target in ("images", "texts"):
        r = client.get("/api/search", params={"q": "a green square", "k": 7, "target": target})
        assert r.status_code == 200
        body = r.json()
        hits = col.search_text("a green square", 7, target)
        assert [x["id"] for x in body["results"]] == [h.id for h in hits]
        assert [x["distance"] for x in body["results"]] == [h.distance for h in hits]
        assert [x["score"] for x in body["results"]] == [h.score for h in hits] and col.reranks
        for x in body["results"]:
            assert (x["thumbnail"] is None) == (col.item(x["id"])["image"] is None)
    url = body["results"][0]["thumbnail"] or "/thumbs/0.jpg"
    thumb = client.get(url)
    assert thumb.status_code == 200 and thumb.headers["content-type"] == "image/jpeg"
    # the file's bytes, kept a day by browsers, with the validators a file response sends
    assert thumb.content == col.thumbnail(int(url.split("/")[-1].removesuffix(".jpg"))).read_bytes()
    assert thumb.headers["cache-control"] == "max-age=86400"
    assert int(thumb.headers["content-length"]) == len(thumb.content)
    assert thumb.headers["etag"].startswith('"') and thumb.headers["last-modified"].endswith(" GMT")


def test_unknown_words_in_the_answer(client):
    body = client.get("/api/search", params={"q": "a green zzzz square", "k": 5}).json()
    assert body["unknown_words"] == ["zzzz"] and len(body["results"]) == 5 and "note" not in body
    body = client.get("/api/search", params={"q": "zzzz qqqq", "k": 5}).json()
    assert body["results"] == [] and body["unknown_words"] == ["zzzz", "qqqq"]
    assert "none of the query's words is in the collection's vocabulary" in body["note"]
    assert "unknown_words" not in client.get("/api/similar/5", params={"k": 4}).json()


@pytest.mark.parametrize("q", ["🙂👍🏽", "\u200b\u2067", "\x00\x1b[31m", "مرحبا", "手机壳", "ร้าน"])
def test_any_unicode_query_gets_an_answer_or_a_one_line_note(client, q):
    r = client.get("/api/search", params={"q": q, "k": 5})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["results"] == [] and body["note"].startswith("no ranking") and "\n" not in body["note"]


def test_image_upload_raw_and_multipart(client, shapes_collection):
    from dmh.app.collection import Collection

    data = (shapes_collection.parent / "query.png").read_bytes()
    raw = client.post("/api/search/image?k=5", content=data, headers={"Content-Type": "image/png"})
    form = client.post("/api/search/image?k=5", files={"image": ("q.png", data, "image/png")})
    assert raw.status_code == form.status_code == 200
    expected = [h.id for h in Collection(shapes_collection).search_image(data, 5)]
    assert [x["id"] for x in raw.json()["results"]] == [x["id"] for x in form.json()["results"]] == expected


def test_more_like_this_and_items(client):
    r = client.get("/api/similar/5", params={"k": 4})
    assert r.status_code == 200 and len(r.json()["results"]) == 4
    assert 5 not in [x["id"] for x in r.json()["results"]]
    item = client.get("/api/items/5").json()
    assert item["id"] == 5 and item["thumbnail"] == "/thumbs/5.jpg"
    assert client.get("/photos/5").status_code == 200


@pytest.mark.parametrize(
    "method, url, kwargs, status, message",
    [
        ("get", "/api/search", {"params": {"q": ""}}, 400, "empty"),
        ("get", "/api/search", {"params": {"q": "x" * 51}}, 400, "too long"),
        ("get", "/api/search", {"params": {"q": "red", "k": "31"}}, 400, "between 1 and 30"),
        ("get", "/api/search", {"params": {"q": "red", "k": "ten"}}, 400, "k must be an integer"),
        ("get", "/api/search", {"params": {"q": "red", "target": "videos"}}, 400, "target must be one of"),
        ("get", "/api/similar/999", {}, 404, "no item with id 999"),
        ("get", "/api/similar/abc", {}, 400, "item ids are integers"),
        ("get", "/thumbs/50.jpg", {}, 404, "has no photo"),  # a caption without a photo
        ("post", "/api/search/image", {"content": b"", "headers": {"Content-Type": "image/png"}}, 400, "empty"),
        ("post", "/api/search/image", {"content": b"hello", "headers": {"Content-Type": "image/png"}}, 400,
         "not an image"),
        ("post", "/api/search/image", {"content": b"\0" * 200_001, "headers": {"Content-Type": "image/png"}}, 413,
         "too large"),
        ("post", "/api/search/image", {"files": {"other": ("q.png", b"x", "image/png")}}, 400, "no file field"),
        ("get", "/api/nothing", {}, 404, "Not Found"),
    ],
)
def test_errors_are_json(client, method, url, kwargs, status, message):
    r = getattr(client, method)(url, **kwargs)
    assert r.status_code == status, r.text
    assert message in r.json()["error"]


def test_streamed_upload_over_the_limit(client):
    def chunks():
        for _ in range(10):
            yield b"\0" * 50_000

    r = client.post("/api/search/image", content=chunks(), headers={"Content-Type": "image/png"})
    assert r.status_code == 413 and "too large" in r.json()["error"]


def test_huge_image_dimensions_are_refused(client):
    from PIL import Image

    buf = io.BytesIO()
    Image.new("1", (8000, 8000)).save(buf, format="PNG")  # small file, 64 M pixels
    r = client.post("/api/search/image", content=buf.getvalue(), headers={"Content-Type": "image/png"})
    assert r.status_code == 400 and "too large" in r.json()["error"]


def test_serve_binds_localhost_by_default():
    from dmh.cli.collection import serve

    host = next(p for p in serve.params if p.name == "host")
    assert host.default == "127.0.0.1"


def test_missing_serve_extra_names_the_install(monkeypatch):
    import importlib
    import importlib.util
    import sys

    from dmh.featurize import MissingExtraError

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "uvicorn" else real(name, *a))
    for mod in ("dmh.app.server", "dmh.app.server.app"):
        monkeypatch.delitem(sys.modules, mod, raising=False)
    with pytest.raises(MissingExtraError, match=r'pip install "dmh\[serve\]"'):
        importlib.import_module("dmh.app.server")


def test_cli_serve_on_a_missing_collection(tmp_path, capsys):
    from dmh.cli import main

    assert main(["serve", str(tmp_path / "none")]) == 2
    assert "collection folder not found" in capsys.readouterr().err
