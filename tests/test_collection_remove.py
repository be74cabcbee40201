"""Removing items from a collection and replacing captions: by id or photo path, under the same
lock and generation switch as ``add`` (killed at any step, the collection is the old one and a
rerun completes), ids never reused, a concurrent add and remove both landing, and a server that
stops answering with removed items once the remove has switched."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from dmh.app.collection import Collection, add_to_collection, remove_from_collection, set_captions
from dmh.app.collection._files import _read_current_state
from dmh.cli import main
from dmh.errors import CollectionError, OutputError, UnknownItemError

from .conftest import import_or_skip
from .test_collection_growth import QueryClients, _more, check_consistent, second_waits_for_first
from .test_collection_growth import writer_child as _child


def _copy(shapes_collection, dest: Path) -> Path:
    shutil.copytree(shapes_collection, dest)
    return dest


def _quiet(message):
    pass


def _codes_of(col: Collection, target: str) -> dict[int, bytes]:
    pos, codes = col._codes[target]
    return {i: codes[r].tobytes() for i, r in pos.items()}


def test_remove_by_id_and_by_photo_path(shapes_collection, tmp_path, monkeypatch):
    col = _copy(shapes_collection, tmp_path / "col")
    before = Collection(col)
    top = max(before._by_id)
    photo_item = next(it for it in before.items if it["image"] and it["caption"] and it["id"] not in (3, top))
    monkeypatch.chdir(tmp_path)  # a photo named by a relative path, as on the command line
    relative = os.path.relpath(photo_item["image"], tmp_path)
    gone = {3, top, photo_item["id"]}
    assert remove_from_collection(col, ids=[3, top], images=[relative], log=_quiet) == sorted(gone)

    items = check_consistent(col)
    after = Collection(col)
    assert [it for it in before.items if it["id"] not in gone] == items
    for target in ("images", "texts"):  # the other items' codes are those of before: nothing refitted
        old, new = _codes_of(before, target), _codes_of(after, target)
        assert not gone & set(new) and new == {i: c for i, c in old.items() if i not in gone}
        hits = after.search_text("a red circle on the left", 100, target)
        assert len(hits) == after.indexes[target].ntotal and not gone & {h.id for h in hits}
    for i in gone:
        with pytest.raises(UnknownItemError, match=f"no item with id {i}"):
            after.item(i)
    thumbs = [col / "thumbs" / f"{i}.jpg" for i in sorted(gone) if before.item(i)["image"]]
    assert len(thumbs) == 2 and all(t.is_file() for t in thumbs)  # for readers of the old state, till the next write
    assert Path(photo_item["image"]).is_file()  # the user's photo is left alone
    manifest = json.loads((col / "manifest.json").read_text())
    assert manifest["format_version"] == 3 and manifest["next_id"] == top + 1  # the largest id went

    # ids are never given again: an add continues after the largest id ever given
    photos, captions = _more(tmp_path / "more", 2, seed=21)
    assert add_to_collection(col, photos, captions, progress=False, log=_quiet) == 2
    items = check_consistent(col)
    assert [it["id"] for it in items[-2:]] == [top + 1, top + 2]
    assert not any(t.exists() for t in thumbs) and not list(col.glob("gen-*/pending.json"))
    assert json.loads((col / "manifest.json").read_text())["format_version"] == 2
    with pytest.raises(UnknownItemError, match=f"item {top} was already removed"):
        remove_from_collection(col, ids=[top], log=_quiet)


def test_bad_items_are_refused_in_one_line_and_nothing_is_written(shapes_collection, tmp_path, capsys):
    col = _copy(shapes_collection, tmp_path / "col")
    items = Collection(col).items
    assert main(["remove", str(col), "5"]) == 0
    capsys.readouterr()
    before = (col / "manifest.json").read_bytes()
    photo = items[0]["image"]

    def error(*args) -> str:
        assert main(list(args)) == 2
        err = capsys.readouterr().err
        lines = [line for line in err.splitlines() if line.strip()]
        assert len(lines) == 1 and lines[0].startswith("Error: ") and "Traceback" not in err, err
        return lines[0]

    line = error("remove", str(col), "0", "5", "999", "nope.png", photo)
    assert "item 5 was already removed; no item 999; no item has the photo nope.png; nothing was changed" in line
    assert (col / "manifest.json").read_bytes() == before and Collection(col).item(0)  # all or nothing
    assert "no item 999" in error("caption", str(col), "999", "a red circle")
    assert "item 5 was already removed" in error("caption", str(col), "5", "--clear")
    assert "give the new caption TEXT, or --clear" in error("caption", str(col), "0")
    assert "give TEXT or --clear, not both" in error("caption", str(col), "0", "a red circle", "--clear")
    assert "Missing argument" in error("remove", str(col))
    assert "not a dmh collection" in error("remove", str(tmp_path), "1")
    caption_only = next(it["id"] for it in items if not it["image"])
    assert "has no photo, so without its caption nothing would be left" in error(
        "caption", str(col), str(caption_only), "--clear")
    assert (col / "manifest.json").read_bytes() == before
    with pytest.raises(CollectionError, match="is given two different captions"):
        set_captions(col, {0: "a red circle", photo: "a blue square"}, log=_quiet)
    with pytest.raises(CollectionError, match="new caption of 0 is empty"):
        set_captions(col, {0: "  "}, log=_quiet)
    with pytest.raises(CollectionError, match="ids: item ids are integers"):
        remove_from_collection(col, ids=["1"], log=_quiet)
    # a collection being written: refused at once with --wait 0, naming the holder
    from dmh.app.collection._build import _writer_lock

    with _writer_lock(col, 0, None):
        assert "being written by another dmh run" in error("remove", str(col), "1", "--wait", "0")
        with pytest.raises(OutputError, match="being written"):
            set_captions(col, {1: "a blue square"}, wait=0, log=_quiet)
    assert (col / "manifest.json").read_bytes() == before


def test_a_replaced_caption_is_encoded_and_found_by_its_new_words(shapes_collection, tmp_path, capsys):
    col = _copy(shapes_collection, tmp_path / "col")
    before = Collection(col)
    item = next(it for it in before.items if it["image"] and (it["caption"] or "").startswith("a red"))
    photo_only = next(it for it in before.items if it["image"] and not it["caption"])
    new_text = "a purple cross on the right"  # words of the build's vocabulary, none of the old caption's colour
    new_code = before.encode_text(new_text)[0].tobytes()
    assert _codes_of(before, "texts")[item["id"]] != new_code  # else the test could not fail
    assert main(["caption", str(col), item["image"], new_text]) == 0
    assert main(["caption", str(col), str(photo_only["id"]), "a green square on the left"]) == 0
    assert "1 caption(s) replaced in" in capsys.readouterr().err

    check_consistent(col)
    after = Collection(col)
    assert after.item(item["id"])["caption"] == new_text and after.item(item["id"])["image"] == item["image"]
    texts = _codes_of(after, "texts")
    assert texts[item["id"]] == new_code  # the stored featurizer and model, not refitted
    assert after.reranks and after.search_text(new_text, 3, "texts")[0].score is not None
    assert texts[photo_only["id"]] == before.encode_text("a green square on the left")[0].tobytes()
    assert _codes_of(after, "images") == _codes_of(before, "images")
    hits = after.search_text(new_text, after.indexes["texts"].ntotal, "texts")
    assert item["id"] in {h.id for h in hits if h.distance == 0}
    assert {h.id for h in hits if h.distance == 0} == {i for i, c in texts.items() if c == new_code}
    old_hits = before.search_text(new_text, before.indexes["texts"].ntotal, "texts")
    assert item["id"] not in {h.id for h in old_hits if h.distance == 0}

    # --clear drops a caption (the photo stays); the same caption again changes nothing
    assert main(["caption", str(col), str(item["id"]), "--clear"]) == 0
    assert main(["caption", str(col), str(item["id"]), "--clear"]) == 0
    assert "nothing to change" in capsys.readouterr().err
    check_consistent(col)
    cleared = Collection(col)
    assert cleared.item(item["id"])["caption"] is None and item["id"] not in _codes_of(cleared, "texts")
    assert cleared.generation == after.generation + 1
    # words outside the vocabulary: a warning that nothing can find the item by them
    assert main(["caption", str(col), str(item["id"]), "zzyzx qwerty"]) == 0
    assert "warning: 1 new caption(s) have none of the words of the collection's vocabulary" in capsys.readouterr().err


#: with the new generation's features only, with it whole but not switched to, and after the switch
#: (the removed items' thumbnails not yet deleted)
STEPS = ["features-saved", "codes", "switched"]


def test_a_killed_remove_leaves_the_old_collection_and_a_rerun_completes(shapes_collection, tmp_path):
    """SIGKILL at each step of a remove (children in parallel, one copy each), and of a caption
    change once: the collection opens, consistent, as the old state (killed after the switch: the
    new one); a rerun completes, and the next writer does what was left after the switch."""
    old = Collection(shapes_collection)
    gone = [2, 9]
    photo = old.item(9)["image"]
    cols = {step: _copy(shapes_collection, tmp_path / step) for step in [*STEPS, "caption"]}
    procs = {step: _child(step, "kill", "remove", cols[step], 2, photo) for step in STEPS}
    assert old.item(4)["caption"] != "a blue square on the right"
    procs["caption"] = _child("codes", "kill", "caption", cols["caption"], 4, "a blue square on the right")
    for step, p in procs.items():
        p.communicate(timeout=120)
        assert p.returncode == -9, step
    for step, col in cols.items():
        items = check_consistent(col)
        ids = [it["id"] for it in items]
        if step == "switched":
            assert ids == [i for i in old._by_id if i not in gone]
            assert list(col.glob("gen-*/pending.json"))
            with pytest.raises(UnknownItemError, match="item 2 was already removed; no item has the photo"):
                remove_from_collection(col, ids=[2], images=[photo], log=_quiet)
        elif step == "caption":
            assert items == old.items
            assert set_captions(col, {4: "a blue square on the right"}, log=_quiet) == [4]
            assert Collection(col).item(4)["caption"] == "a blue square on the right"
        else:
            assert items == old.items, step
            assert remove_from_collection(col, ids=[2], images=[photo], log=_quiet) == gone
        items = check_consistent(col)
        assert not {2, 9} & {it["id"] for it in items} or step == "caption"
        assert set_captions(col, {0: "a blue square"}, log=_quiet) == [0]  # the next writer
        check_consistent(col)
        assert not any((col / "thumbs" / f"{i}.jpg").exists() for i in gone) or step == "caption", step
        assert not list(col.glob("gen-*/pending.json")), step
        kept = sorted(p.name for p in col.glob("gen-*"))
        generation = _read_current_state(col)[2]
        assert kept == [f"gen-{g:06d}" for g in range(max(1, generation - 1), generation + 1)], step


def test_an_add_and_a_remove_at_once_both_land(shapes_collection, tmp_path):
    """``dmh add`` held inside its write while ``dmh remove`` starts: the remove says it waits for
    the add's lock, and only then is the add let go; the added items are there, the removed ones
    are not (none comes back)."""
    col = _copy(shapes_collection, tmp_path / "col")
    n0 = len(Collection(col).items)
    photos, captions = _more(tmp_path / "more", 4, seed=22)
    gates = tmp_path / "gates"
    gates.mkdir()
    add = _child("features", f"wait:{gates}", "add", col, photos, captions, "--no-progress")
    remove = lambda: _child("none", "kill", "remove", col, 1, 7, 30)  # noqa: E731 - held nowhere
    outs, codes = second_waits_for_first(add, gates, "features", remove)
    assert codes == [0, 0], outs
    assert "added 4 item(s)" in outs[0][1] and "removed 3 item(s)" in outs[1][1]
    assert ["waiting up to 600 s for the collection" in err for _, err in outs] == [False, True]
    items = check_consistent(col)
    ids = {it["id"] for it in items}
    assert len(items) == n0 + 4 - 3 and not {1, 7, 30} & ids
    assert {f"s22-shape-{i:04d}" for i in range(4)} <= {it["name"] for it in items}
    assert len(ids) == len(items) and max(ids) == n0 + 3  # the new ids follow the old ones


def test_the_server_stops_answering_with_removed_items(shapes_collection, tmp_path):
    """Queries keep arriving while a remove runs in another process (held at three of its steps
    until every client has sent a whole round of queries there): every answer is the old state's or
    the new state's, never back to the old one; at the end the removed items are absent from every
    answer, and their pages and thumbnails are 404."""
    import_or_skip("starlette", "serve")
    import urllib.error
    import urllib.request

    from dmh.app.server import BackgroundServer, create_app

    col = _copy(shapes_collection, tmp_path / "col")
    gone = [0, 3, 5, 11]
    queries = ["/api/search?q=a+red+circle+on+the+left&k=40&target=texts", "/api/similar/1?k=40",
               "/api/search?q=a+blue+square&k=30"]

    def state(c: Collection):
        answers = [[(h.id, h.distance) for h in c.search_text("a red circle on the left", 40, "texts")],
                   [(h.id, h.distance) for h in c.similar(1, 40)],
                   [(h.id, h.distance) for h in c.search_text("a blue square", 30)]]
        return len(c.items), answers

    old = state(Collection(col))
    assert all(set(gone) & {i for i, _ in answer} for answer in old[1][:1] + old[1][2:])
    app = create_app(col)
    with BackgroundServer(app) as srv, QueryClients(srv.url, queries) as clients:
        gates = tmp_path / "gates"
        gates.mkdir()
        steps = ("validated", "features-saved", "codes")
        child = _child(",".join(steps), f"wait:{gates}", "remove", col, *gone)
        clients.query_at_each(gates, steps, child)
        out = child.communicate(timeout=120)
        assert child.returncode == 0, out
        new = state(Collection(col))
        clients.until_items(new[0])
        statuses = []
        for i in gone:
            for url in (f"/api/items/{i}", f"/thumbs/{i}.jpg", f"/api/similar/{i}"):
                try:
                    urllib.request.urlopen(srv.url + url, timeout=30)
                    statuses.append(200)
                except urllib.error.HTTPError as exc:
                    statuses.append(exc.code)
    seen, errors = clients.seen, clients.errors
    assert not errors, errors[:3]
    assert new[0] == old[0] - len(gone) and not any(set(gone) & {i for i, _ in a} for a in new[1])
    assert statuses == [404] * len(statuses)
    states = [{0: old[0], **dict(enumerate(old[1], start=1))}, {0: new[0], **dict(enumerate(new[1], start=1))}]
    for record in seen:
        assert sum(1 for i, v in record if i == 0 and v == old[0]) >= 3  # queries ran during the remove
        which = [next(s for s, state_ in enumerate(states) if state_[i] == v) for i, v in record]  # old or new
        assert which == sorted(which) and which[-1] == 1  # never back to the old state; ends on the new
    assert app.state.live.reloads >= 1


def test_removing_every_item_is_refused(shapes_collection, tmp_path):
    col = _copy(shapes_collection, tmp_path / "col")
    ids = [it["id"] for it in Collection(col).items]
    before = (col / "manifest.json").read_bytes()
    with pytest.raises(CollectionError, match="would leave no item to search"):
        remove_from_collection(col, ids=ids, log=_quiet)
    assert (col / "manifest.json").read_bytes() == before and not list(col.glob("gen-*"))
    assert remove_from_collection(col, ids=ids[1:], log=_quiet) == ids[1:]
    assert [it["id"] for it in check_consistent(col)] == ids[:1]
