"""Bad input to the collection commands (``dmh build``, ``dmh add``, ``dmh search COLLECTION``,
``dmh serve``) through :func:`dmh.cli.main`: one line ``Error: ...`` naming the file or argument,
exit code 2, no traceback; outputs checked before any work; an interrupted add never leaves a
collection that searches wrong. The full list of hostile inputs is in ``test_hostile_inputs.py`` and
``test_hostile_collection.py``."""

from __future__ import annotations

import json
import os
import shutil
import socket

import pytest

from dmh.app.collection import Collection, add_to_collection
from dmh.cli import main

from ..conftest import import_or_skip, skip_unless

SMALL = ["--method", "cvh", "--bits", "16", "--image-model", "pixels-16", "--no-progress"]


def _error(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("Error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.fixture(scope="module")
def root(shapes_collection, tmp_path_factory):
    """Beside the shared shapes collection: captions files and damaged copies of the collection."""
    r = tmp_path_factory.mktemp("collection-bad")
    photos = shapes_collection.parent / "photos"
    first = sorted(p.name for p in photos.iterdir())[0]
    (r / "latin1.csv").write_bytes(f"image,caption\n{first},caf\xe9\n".encode("latin-1"))
    (r / "nul.csv").write_bytes(f"image,caption\n{first},a\x00b\n".encode())
    (r / "header.csv").write_text(f"file,text\n{first},x\n")
    (r / "empty.csv").write_text("")
    (r / "dup.csv").write_text(f"image,caption\n{first},one\n{first},two\n")
    (r / "unknown.csv").write_text("image,caption\nnope.jpg,a caption\n")
    (r / "long.csv").write_text(f"image,caption\n{first},{'word ' * 40_000}\n")
    (r / "notimage.png").write_text("text")
    (r / "notcol").mkdir()
    (r / "notcol" / "x.txt").write_text("x")
    (r / "afile").write_text("x")
    for name, change in [
        ("manifest_list", lambda c: (c / "manifest.json").write_text("[]")),
        ("manifest_items", lambda c: (c / "manifest.json").write_text(
            json.dumps({"format": "dmh-collection", "format_version": 1, "items": [{"id": 1, "name": 3}]}))),
        ("build_garbage", lambda c: (c / "build.json").write_text("{not json")),
        ("build_missing", lambda c: (c / "build.json").unlink()),
        ("model_trunc", lambda c: (c / "model.npz").write_bytes((c / "model.npz").read_bytes()[:300])),
        ("index_gone", lambda c: (c / "images.dmhidx").unlink()),
    ]:
        shutil.copytree(shapes_collection, r / name, ignore=shutil.ignore_patterns("thumbs"))
        change(r / name)
    return r


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["build", "{photos}", "{r}/latin1.csv", "-o", "{r}/o1"], "latin1.csv is not UTF-8"),
        (["build", "{photos}", "{r}/nul.csv", "-o", "{r}/o2"], "nul.csv, line 2: holds a NUL byte"),
        (["build", "{photos}", "{r}/header.csv", "-o", "{r}/o3"], "header.csv lacks the column(s)"),
        (["build", "{photos}", "{r}/empty.csv", "-o", "{r}/o4"], "empty.csv lacks the column(s)"),
        (["build", "{photos}", "{r}/dup.csv", "-o", "{r}/o5"], "dup.csv, line 3: image"),
        (["build", "{photos}", "{r}/unknown.csv", "-o", "{r}/o6"], "'nope.jpg' is not in the photos folder"),
        (["build", "{photos}", "{r}/long.csv", "-o", "{r}/o7"], "long.csv, line 2: a field is longer"),
        (["build", "{r}/nope", "{r}/empty.csv", "-o", "{r}/o8"], "photos folder not found"),
        (["build", "{photos}", "-o", "{r}/o9"], "at least 2 captioned photos"),
        (["build", "{photos}", "{captions}", "-o", "{r}/notcol"], "notcol is not empty and holds no collection"),
        (["build", "{photos}", "{captions}", "-o", "{r}/afile/col"], "afile is a file, not a folder"),
        (["build", "{photos}", "{captions}", "-o", "{r}/o10", "--param", "reg=abc"], "--param: CVH: reg must be"),
        (["build", "{photos}", "{captions}", "-o", "{r}/o11", "--param", "n_bits=8"], "--param n_bits is set by"),
        (["build", "{photos}", "{captions}", "-o", "{r}/o12", "--param", "reg= "], "the value of 'reg' must not"),
        (["build", "{photos}", "{captions}", "-o", "{r}/o13", "--param", "=0.5"], "--param: '=0.5' names no parameter"),
        (["search", "{col}"], "give exactly one query"),
        (["search", "{col}", "--text", "red", "--like", "1"], "give exactly one query"),
        (["search", "{col}", "--text", "red", "--k", "0"], "--k must be a positive integer"),
        (["search", "{col}", "--text", "red", "--k", "-2"], "--k must be a positive integer"),
        (["search", "{col}", "--like", "99999"], "no item with id 99999"),
        (["search", "{col}", "--image", "{r}/notimage.png"], "notimage.png"),
        (["search", "{col}", "--image", "{r}/nope.jpg"], "--image: query image not found"),
        (["search", "{r}/notcol", "--text", "red"], "notcol is a folder but not a collection"),
        (["search", "{r}/manifest_list", "--text", "red"], "manifest.json: is not a collection manifest"),
        (["search", "{r}/manifest_items", "--text", "red"], "manifest.json: item 0 is damaged"),
        (["search", "{r}/build_garbage", "--text", "red"], "build.json: is not a readable collection build"),
        (["search", "{r}/build_missing", "--text", "red"], "build.json: is missing"),
        (["search", "{r}/model_trunc", "--text", "red"], "model.npz"),
        (["search", "{r}/index_gone", "--text", "red"], "images.dmhidx"),
        (["add", "{r}/notcol", "{r}/dup.csv"], "notcol is not a dmh collection"),
        (["add", "{col}", "--captions", "{r}/unknown.csv"], "'nope.jpg' is not in any photos folder"),
        (["serve", "{r}/notcol"], "notcol is not a dmh collection"),
        (["serve", "{col}", "--host", "no..such..host", "--port", "0"], "--host"),
    ],
)
def test_collection_commands_refuse_bad_input_in_one_line(root, shapes_collection, capsys, args, expected):
    names = {"r": root, "col": shapes_collection, "photos": shapes_collection.parent / "photos",
             "captions": shapes_collection.parent / "captions.csv"}
    argv = [a.format(**names) for a in args]
    if argv[0] == "build":
        argv += SMALL
    elif argv[0] == "add":
        argv += ["--no-progress"]
    assert main(argv) == 2
    assert expected in _error(capsys)


def test_build_checks_its_output_before_any_work(shapes_collection, tmp_path, capsys, monkeypatch):
    import dmh.app.collection._build as collection

    monkeypatch.setattr(collection, "scan_inputs", lambda *a, **k: pytest.fail("scanned before checking -o"))
    photos, captions = shapes_collection.parent / "photos", shapes_collection.parent / "captions.csv"
    (tmp_path / "file").write_text("x")
    for out, expected in [(tmp_path / "file", "is a file"), (tmp_path / "file" / "col", "is a file, not a folder"),
                          ("/proc/dmh-col", "cannot write /proc/dmh-col")]:
        assert main(["build", str(photos), str(captions), "-o", str(out), *SMALL]) == 2
        assert expected in _error(capsys)


@skip_unless(hasattr(os, "geteuid") and os.geteuid() != 0, "non-root",
             "root writes read-only folders (.ci/run runs this test as a non-root user)")
def test_add_refuses_a_read_only_collection_before_any_work(shapes_collection, tmp_path, capsys):
    col_path = tmp_path / "col"
    shutil.copytree(shapes_collection, col_path)
    before = (col_path / "manifest.json").read_bytes()
    os.chmod(col_path, 0o555)
    try:
        assert main(["add", str(col_path), str(shapes_collection.parent / "captions.csv"), "--no-progress"]) == 2
        assert "cannot write" in _error(capsys)
    finally:
        os.chmod(col_path, 0o755)
    assert (col_path / "manifest.json").read_bytes() == before


def test_serve_refuses_a_port_in_use(shapes_collection, capsys):
    import_or_skip("uvicorn", "serve")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        port = sock.getsockname()[1]
        assert main(["serve", str(shapes_collection), "--port", str(port)]) == 2
    assert f"cannot listen on 127.0.0.1:{port}: the port is in use" in _error(capsys)


def test_unreadable_photos_are_skipped_with_a_warning_naming_them(shapes_collection, tmp_path, capsys):
    photos = tmp_path / "photos"
    shutil.copytree(shapes_collection.parent / "photos", photos)
    first = sorted(photos.iterdir())[0]
    first.write_bytes(first.read_bytes()[:100])  # truncated
    (photos / "fake.jpg").write_bytes(b"\xff\xd8\xff not a jpeg")
    (photos / "notes.txt").write_text("not a photo")
    captions = shapes_collection.parent / "captions.csv"
    assert main(["build", str(photos), str(captions), "-o", str(tmp_path / "col"), *SMALL]) == 0
    err = capsys.readouterr().err
    assert "unreadable photo(s) skipped" in err and first.name in err and "fake.jpg" in err
    col = Collection(tmp_path / "col")
    broken = [it for it in col.items if it["image"] and it.get("error")]
    assert sorted(it["name"] for it in broken) == sorted([first.stem, "fake"])
    assert not {it["id"] for it in broken} & set(col.indexes["images"].ids.tolist())


def test_an_interrupted_add_leaves_the_collection_as_it_was(shapes_collection, tmp_path, monkeypatch):
    """add rewrites features, codes and indexes first and the manifest last: stopped before the
    manifest, the collection searches only its listed items, and the next add makes fresh
    thumbnails for the ids it reuses."""
    import dmh.app.collection._add as collection
    from dmh.datasets.shapes import make_shapes

    col_path = tmp_path / "col"
    shutil.copytree(shapes_collection, col_path)
    before = Collection(col_path)
    n_images = before.indexes["images"].ntotal
    expected = [(h.id, h.distance) for h in before.search_text("a red circle", k=10)]
    more, more_captions = make_shapes(tmp_path / "more", 6, caption_ratio=1.0, seed=7)

    def stop(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(collection, "write_manifest", stop)
    with pytest.raises(KeyboardInterrupt):
        add_to_collection(col_path, more, more_captions, progress=False, log=lambda m: None)
    monkeypatch.undo()
    after = Collection(col_path)
    assert after.indexes["images"].ntotal == n_images
    assert [(h.id, h.distance) for h in after.search_text("a red circle", k=10)] == expected
    assert all(h.id in after._by_id for h in after.search_text("a square", k=200))
    # a different photo under the reused ids: its thumbnail is its own, not the stale one
    other, other_captions = make_shapes(tmp_path / "other", 6, caption_ratio=1.0, seed=11)
    stale = (col_path / "thumbs" / f"{max(before._by_id) + 1}.jpg").read_bytes()
    add_to_collection(col_path, other, other_captions, progress=False, log=lambda m: None)
    fresh = Collection(col_path)
    assert fresh.indexes["images"].ntotal == n_images + 6
    assert (col_path / "thumbs" / f"{max(before._by_id) + 1}.jpg").read_bytes() != stale


# ---- found by test_fuzz_options.py: refusals that came after the build had written files
@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["{r}/nope", "{captions}"], "photos folder not found"),  # build.json was written first
        (["{photos}", "{r}/nope.csv"], "captions file not found"),
        (["{r}/notcol", "{captions}"], "is not in the photos folder"),
        (["{photos}", "{captions}", "--bits", "10000000000000"], "--bits"),  # after scan and features
        (["{photos}", "{captions}", "--seed", "-1"], "--seed"),
        (["{photos}", "{captions}", "--param", "reg=-1"], "reg"),
    ],
)
def test_build_refuses_bad_inputs_and_values_before_writing(root, shapes_collection, tmp_path, capsys, args,
                                                             expected):
    names = {"r": root, "photos": shapes_collection.parent / "photos",
             "captions": shapes_collection.parent / "captions.csv"}
    out = tmp_path / "col"
    assert main(["build", *SMALL, *[a.format(**names) for a in args], "-o", str(out)]) == 2  # the last --bits wins
    assert expected in _error(capsys)
    assert not out.exists()


@pytest.mark.parametrize("command", ["build", "add"])
def test_a_bad_ray_address_is_refused_before_writing(shapes_collection, tmp_path, capsys, command):
    import_or_skip("ray", "ray")
    photos, captions = shapes_collection.parent / "photos", shapes_collection.parent / "captions.csv"
    col = tmp_path / "col"
    if command == "add":
        shutil.copytree(shapes_collection, col)
        (tmp_path / "more.csv").write_text("image,caption\n,a caption added later\n")
        argv = ["add", str(col), str(tmp_path / "more.csv"), "--no-progress"]
    else:
        argv = ["build", str(photos), str(captions), "-o", str(col), *SMALL]
    before = {p: p.read_bytes() for p in col.rglob("*") if p.is_file()}
    assert main([*argv, "--ray", "no-such-address"]) == 2  # add rewrote features and codes first
    assert "no-such-address" in _error(capsys)
    assert {p: p.read_bytes() for p in col.rglob("*") if p.is_file()} == before
    assert command == "add" or not col.exists()
