"""Growing a collection safely: one writer at a time (an OS lock naming its holder), adds that are
all or nothing (killed at any step, the collection is the old one and a rerun completes), the
generations of the data files, and a server that follows the adds without showing a half state."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from dmh.app.collection import Collection, add_to_collection
from dmh.app.collection._files import _read_current_state
from dmh.datasets.shapes import make_shapes
from dmh.errors import OutputError

from .conftest import import_or_skip

#: runs ``dmh COMMAND ARGS...`` in a child process whose writer (add, remove, caption) stops at each of
#: the steps STEP[,STEP...]: killed there (SIGKILL), or held there until the test opens a gate
#: (``wait:DIR``: the child creates DIR/STEP.reached, then waits for DIR/STEP.go), to make two writers
#: or a writer and queries overlap in a known order however slow the machine is
CHILD = r"""
import os, pathlib, signal, sys, time
import dmh.app.collection._build as build
steps, action = sys.argv[1].split(","), sys.argv[2]
def checkpoint(name):
    if name in steps:
        if action == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        gates = pathlib.Path(action.removeprefix("wait:"))
        (gates / f"{name}.reached").touch()
        t0 = time.monotonic()
        while not (gates / f"{name}.go").exists():
            if time.monotonic() - t0 > 300:
                sys.exit(f"the gate {name}.go was never opened")
            time.sleep(0.02)
build._checkpoint = checkpoint
from dmh.cli import main
sys.exit(main(sys.argv[3:]))
"""

#: the longest a test waits for a child or a client to get somewhere (a bound on a hang, not a window)
PATIENCE = 180.0


def writer_child(steps: str, action: str, command: str, *args) -> subprocess.Popen:
    """``dmh COMMAND ARGS...`` in a child process, stopped at ``steps`` as ``action`` says (:data:`CHILD`)."""
    return subprocess.Popen([sys.executable, "-c", CHILD, steps, action, command, *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _child(steps: str, action: str, *args) -> subprocess.Popen:
    """``dmh add ARGS... --no-progress`` in a child process (:func:`writer_child`)."""
    return writer_child(steps, action, "add", *args, "--no-progress")


def _until(condition, what: str, child: subprocess.Popen | None = None) -> None:
    """Wait until ``condition()`` holds; fail (with the child's output where it has ended) after
    :data:`PATIENCE` seconds or when ``child`` ends first."""
    t0 = time.monotonic()
    while not condition():
        if child is not None and child.poll() is not None:
            pytest.fail(f"the child ended (exit code {child.returncode}) before {what}: {child.communicate()}")
        if time.monotonic() - t0 > PATIENCE:
            pytest.fail(f"no {what} within {PATIENCE:g} s")
        time.sleep(0.02)


def second_waits_for_first(first: subprocess.Popen, gates: Path, step: str, start_second) -> tuple[list, list]:
    """Hold ``first`` (started with ``wait:GATES``) at ``step``, start the second writer
    (``start_second()``, held nowhere), and let the first go only once the second has said that it
    waits for the collection's lock. Returns both ``(stdout, stderr)`` and both exit codes."""
    _until((gates / f"{step}.reached").exists, f"first writer at {step}", first)
    second = start_second()
    lines, said = [], threading.Event()

    def read_second():  # its stderr, line by line to the end; the line that says it waits sets `said`
        for line in second.stderr:
            lines.append(line)
            if "waiting up to 600 s for the collection" in line:
                said.set()

    reader = threading.Thread(target=read_second, daemon=True)
    reader.start()
    _until(said.is_set, "'waiting' from the second writer", second)
    (gates / f"{step}.go").touch()
    outs = [first.communicate(timeout=PATIENCE), (second.stdout.read(), None)]
    second.wait(timeout=PATIENCE)
    reader.join(timeout=PATIENCE)
    return [outs[0], (outs[1][0], "".join(lines))], [first.returncode, second.returncode]


class QueryClients:
    """Two threads that query a running server in rounds until stopped: ``GET /api/info`` (the
    number of items) then each of ``queries``; ``seen[c]`` holds client c's answers in order, each
    ``(request number, items or [(id, distance), ...])``; a failed request goes to ``errors``."""

    def __init__(self, url: str, queries, n: int = 2):
        self.url, self.queries = url, list(queries)
        self.seen, self.errors, self._stop = [[] for _ in range(n)], [], threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(record,)) for record in self.seen]

    def _run(self, record):
        import urllib.request

        while not self._stop.is_set():
            try:
                with urllib.request.urlopen(self.url + "/api/info", timeout=30) as r:
                    record.append((0, json.loads(r.read())["collection"]["items"]))
                for i, q in enumerate(self.queries, start=1):
                    with urllib.request.urlopen(self.url + q, timeout=30) as r:
                        record.append((i, [(x["id"], x["distance"]) for x in json.loads(r.read())["results"]]))
            except Exception as exc:  # noqa: BLE001 - every failure is recorded and fails the test
                self.errors.append(repr(exc))

    def __enter__(self):
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        for t in self._threads:
            t.join(timeout=60)

    def query_at_each(self, gates: Path, steps, child: subprocess.Popen) -> None:
        """Hold ``child`` (started with ``wait:GATES``) at each of ``steps`` until every client has
        sent a whole round of requests there, then let it go on."""
        round_ = 2 * (1 + len(self.queries))  # records enough to hold one whole round of requests
        for step in steps:
            _until((gates / f"{step}.reached").exists, f"writer at {step}", child)
            marks = [len(r) for r in self.seen]
            _until(lambda m=marks: self.errors or all(len(r) - k >= round_ for r, k in zip(self.seen, m, strict=True)),
                   f"round of queries at {step}", child)
            (gates / f"{step}.go").touch()

    def until_items(self, n_items: int) -> None:
        """Wait until every client's last answer to ``/api/info`` says ``n_items``."""
        _until(lambda: self.errors or all(r and r[-1] == (0, n_items) for r in self.seen), "answer of the new state")


def _copy(shapes_collection, dest: Path) -> Path:
    shutil.copytree(shapes_collection, dest)
    return dest


def _more(root: Path, n: int, seed: int) -> tuple[Path, Path]:
    """``n`` new shape photos, each with a caption (names prefixed so that batches never clash)."""
    photos, captions = make_shapes(root, n, caption_ratio=1.0, extra_captions=0, seed=seed)
    lines = captions.read_text().splitlines()
    for p in photos.glob("*.png"):
        p.rename(p.with_name(f"s{seed}-{p.name}"))
    captions.write_text("\n".join([lines[0]] + [f"s{seed}-{line}" for line in lines[1:]]) + "\n")
    return photos, captions


def check_consistent(path: Path, contiguous: bool = False) -> list[dict]:
    """Every data file of the current generation agrees with the manifest (ids ascending, those of
    the listed items only), the indexes with the codes, the stored values with the codes; listed
    photos have a thumbnail. ``contiguous``: the ids are 0..n-1 (nothing was ever removed). Returns
    the items."""
    from dmh.app.collection import load_features
    from dmh.app.collection._search import _index_matches
    from dmh.index import HammingIndex, load_codes

    items, P, generation, next_id = _read_current_state(path)
    ids = [it["id"] for it in items]
    assert ids == sorted(ids) and (not ids or next_id > ids[-1])
    assert not contiguous or ids == list(range(len(ids)))
    has = {"image": lambda it: bool(it["image"]) and not it.get("error"), "text": lambda it: bool(it["caption"])}
    _, _, feature_ids = load_features(P.features)
    assert feature_ids.tolist() == [it["id"] for it in items if has["image"](it) or has["text"](it)]
    for modality, holds in has.items():
        codes, cids, values = load_codes(getattr(P, f"{modality}_codes"), with_values=True)
        assert cids.tolist() == [it["id"] for it in items if holds(it)], modality
        # the real values behind the codes (re-ranking) stay with their rows
        assert values is not None and values.shape == codes.shape, modality
        nonzero = values != 0  # float16 keeps entries below ~6e-8 of a unit row as zero
        assert nonzero.mean() > 0.5 and np.array_equal(np.where(values > 0, 1, -1)[nonzero], codes[nonzero]), modality
        if not P.store.is_file():
            assert _index_matches(HammingIndex.load(getattr(P, f"{modality}_index")), codes, cids), modality
    for it in items:
        if it["image"]:
            assert (path / "thumbs" / f"{it['id']}.jpg").is_file()
    col = Collection(path)
    assert [it["id"] for it in col.items] == ids and col.generation == generation
    return items


def test_two_adds_at_once_keep_every_item(shapes_collection, tmp_path):
    """Two ``dmh add`` processes on one collection: the second starts while the first is held inside
    its add (after reading the manifest), says it waits for the first's lock, and only then is the
    first let go; without the lock both would read the same old manifest."""
    col = _copy(shapes_collection, tmp_path / "col")
    n0 = len(Collection(col).items)
    batches = [_more(tmp_path / f"more{s}", 5, seed=s) for s in (1, 2)]
    gates = tmp_path / "gates"
    gates.mkdir()
    first = _child("features", f"wait:{gates}", col, *batches[0])
    outs, codes = second_waits_for_first(first, gates, "features", lambda: _child("none", "kill", col, *batches[1]))
    assert codes == [0, 0], outs
    assert all("added 5 item(s)" in err for _, err in outs)
    assert ["waiting up to 600 s for the collection" in err for _, err in outs] == [False, True]
    items = check_consistent(col, contiguous=True)
    assert len(items) == n0 + 10
    names = {it["name"] for it in items}
    assert all(f"s{s}-shape-{i:04d}" in names for s in (1, 2) for i in range(5))


def test_a_held_collection_is_refused_in_one_line_naming_the_holder(shapes_collection, tmp_path, capsys):
    from dmh.app.collection._build import _writer_lock
    from dmh.cli import main

    col = _copy(shapes_collection, tmp_path / "col")
    photos, captions = _more(tmp_path / "more", 2, seed=3)
    before = (col / "manifest.json").read_bytes()
    with _writer_lock(col, 0, None):
        assert main(["add", str(col), str(photos), str(captions), "--wait", "0", "--no-progress"]) == 2
        err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
        assert len(err) == 1 and err[0].startswith("Error: cannot write ") and str(col) in err[0]
        assert f"being written by another dmh run (pid {os.getpid()} on " in err[0]
        assert main(["build", str(photos), str(captions), "-o", str(col), "--method", "cvh", "--bits", "16",
                     "--image-model", "pixels-16", "--no-progress", "--wait", "0.2", "--restart"]) == 2
        assert "still being written by another dmh run after 0.2 s" in capsys.readouterr().err
        with pytest.raises(OutputError, match="collection is being written"):
            add_to_collection(col, photos, captions, wait=0, progress=False, log=lambda m: None)
    assert (col / "manifest.json").read_bytes() == before
    assert add_to_collection(col, photos, captions, wait=0, progress=False, log=lambda m: None) == 2


#: after the features (work chunks only), mid-generation (its features file only), with the new
#: generation whole but not switched to, and after the switch (before the cleanup)
STEPS = ["features", "features-saved", "thumbs", "switched"]


def test_an_add_killed_at_any_step_leaves_the_old_collection_and_a_rerun_completes(shapes_collection, tmp_path):
    """SIGKILL at each step of an add (children run in parallel, one copy each): the collection
    opens, consistent, as the old state (or, killed after the switch, the new one); rerunning the
    add finishes it and removes what the killed one left."""
    old = [it["id"] for it in Collection(shapes_collection).items]
    photos, captions = _more(tmp_path / "more", 6, seed=4)
    cols = {step: _copy(shapes_collection, tmp_path / step) for step in STEPS}
    procs = {step: _child(step, "kill", cols[step], photos, captions) for step in STEPS}
    for step, p in procs.items():
        p.communicate(timeout=120)
        assert p.returncode == -9, step
    for step, col in cols.items():
        items = check_consistent(col, contiguous=True)
        assert len(items) == len(old) + (6 if step == "switched" else 0), step
        if step != "switched":  # the features computed so far are kept for the rerun
            assert list(col.glob(".add-*/images-*.npz")), step
        logs = []
        n = add_to_collection(col, photos, captions, progress=False, log=logs.append)
        assert n == (0 if step == "switched" else 6), (step, logs)
        items = check_consistent(col, contiguous=True)
        assert len(items) == len(old) + 6 and not list(col.glob(".add-*")), step
        assert sorted(p.name for p in col.glob("gen-*")) == ["gen-000001"], step
        assert (col / "manifest.json").stat().st_size > 0 and json.loads((col / "manifest.json").read_text())[
            "data"] == "gen-000001"


def test_a_rerun_reuses_the_features_of_a_killed_add(shapes_collection, tmp_path, monkeypatch):
    import dmh.featurize as features

    col = _copy(shapes_collection, tmp_path / "col")
    photos, captions = _more(tmp_path / "more", 4, seed=5)
    p = _child("features", "kill", col, photos, captions)
    p.communicate(timeout=120)
    assert p.returncode == -9
    monkeypatch.setattr(features, "image_features", lambda *a, **k: pytest.fail("features computed again"))
    assert add_to_collection(col, photos, captions, progress=False, log=lambda m: None) == 4
    check_consistent(col, contiguous=True)


def test_generations_and_old_collections(shapes_collection, tmp_path):
    """A built collection (format 1, data files at the top) grows into gen-000001, gen-000002...;
    each writer keeps the current and the previous generation only. Codes of unlisted items that an
    older dmh's interrupted add left at the top are cut back."""
    from dmh.index import load_codes, save_codes

    col = _copy(shapes_collection, tmp_path / "col")
    assert json.loads((col / "manifest.json").read_text())["format_version"] == 1
    codes, ids = load_codes(col / "image_codes.npz")
    save_codes(col / "image_codes.npz", np.concatenate([codes, codes[:2]]), np.concatenate([ids, [900, 901]]),
               modality="image")
    for seed in (6, 7, 8):
        photos, captions = _more(tmp_path / f"more{seed}", 2, seed=seed)
        assert add_to_collection(col, photos, captions, progress=False, log=lambda m: None) == 2
        items = check_consistent(col, contiguous=True)
        generation = seed - 5
        manifest = json.loads((col / "manifest.json").read_text())
        assert manifest["format_version"] == 2 and manifest["generation"] == generation
        kept = sorted(p.name for p in col.glob("gen-*"))
        assert kept == [f"gen-{g:06d}" for g in range(max(1, generation - 1), generation + 1)]
        assert (col / "image_codes.npz").exists() == (generation == 1)  # generation 0 is kept while previous
    assert len(items) == 52 + 6 and 900 not in [it["id"] for it in items]
    # a rebuild (--restart) removes every generation
    from .conftest import build_shapes_collection

    shutil.rmtree(tmp_path / "photos", ignore_errors=True)
    build_shapes_collection(tmp_path, n=24, restart=True)
    assert not list(col.glob("gen-*")) and json.loads((col / "manifest.json").read_text())["format_version"] == 1


def test_a_damaged_generation_pointer_is_one_line(shapes_collection, tmp_path):
    from dmh.errors import CollectionFileError

    col = _copy(shapes_collection, tmp_path / "col")
    photos, captions = _more(tmp_path / "more", 2, seed=9)
    add_to_collection(col, photos, captions, progress=False, log=lambda m: None)
    shutil.rmtree(col / "gen-000001")
    with pytest.raises(CollectionFileError, match="names the data folder gen-000001, which is missing"):
        Collection(col)
    m = json.loads((col / "manifest.json").read_text())
    m["data"] = "../elsewhere"
    (col / "manifest.json").write_text(json.dumps(m))
    with pytest.raises(CollectionFileError, match="no valid data generation"):
        Collection(col)


def test_the_server_follows_an_add_and_answers_old_or_new(shapes_collection, tmp_path):
    """Queries keep arriving while an add runs (held at three of its steps until every client has
    sent a whole round of queries there): every answer is the old state's or the new state's, and
    the new items are served once the add has finished, without a restart."""
    import_or_skip("starlette", "serve")

    from dmh.app.server import BackgroundServer, create_app

    col = _copy(shapes_collection, tmp_path / "col")
    photos, captions = _more(tmp_path / "more", 6, seed=10)
    queries = ["/api/search?q=a+red+circle+on+the+left&k=40&target=texts", "/api/similar/3?k=40",
               "/api/search?q=a+blue+square&k=30"]

    def state(c: Collection):
        answers = []
        for q in queries:
            if "similar" in q:
                hits = c.similar(3, 40)
            else:
                text = q.split("q=")[1].split("&")[0].replace("+", " ")
                hits = c.search_text(text, int(q.split("k=")[1].split("&")[0]),
                                     "texts" if "texts" in q else "images")
            answers.append([(h.id, h.distance) for h in hits])
        return len(c.items), answers

    old = state(Collection(col))
    app = create_app(col)
    with BackgroundServer(app) as srv, QueryClients(srv.url, queries) as clients:
        gates = tmp_path / "gates"
        gates.mkdir()
        child = _child("features,codes,thumbs", f"wait:{gates}", col, photos, captions)
        clients.query_at_each(gates, ("features", "codes", "thumbs"), child)
        out = child.communicate(timeout=PATIENCE)
        assert child.returncode == 0, out
        new = state(Collection(col))
        clients.until_items(new[0])
    seen, errors = clients.seen, clients.errors
    assert not errors, errors[:3]
    assert new[0] == old[0] + 6 and all(a != b for a, b in zip(old[1], new[1], strict=True))
    states = [{0: old[0], **dict(enumerate(old[1], start=1))}, {0: new[0], **dict(enumerate(new[1], start=1))}]
    for record in seen:
        assert sum(1 for i, v in record if i == 0 and v == old[0]) >= 3  # queries ran during the add
        which = [next(s for s, state_ in enumerate(states) if state_[i] == v) for i, v in record]  # old or new
        assert which == sorted(which) and which[-1] == 1  # never back to the old state; ends on the new
    assert app.state.live.reloads >= 1
