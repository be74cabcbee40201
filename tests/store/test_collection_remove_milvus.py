"""Removing items and replacing captions in a collection whose codes are kept in Milvus
(milvus-lite): it answers as the same collection with local index files, and what a writer killed
after its switch left undone in Milvus is done by the next writer."""

import json
import shutil
import warnings

import pytest

from ..conftest import import_or_skip, needs

import_or_skip("pymilvus", "milvus")
try:
    with warnings.catch_warnings():  # milvus-lite 2.5 imports the deprecated pkg_resources
        warnings.simplefilter("ignore", UserWarning)
        import milvus_lite  # noqa: F401
except Exception as exc:  # pragma: no cover - depends on the install
    needs("milvus", f"milvus-lite not importable ({exc}); pip install -e '.[milvus]'")


class _Killed(Exception):
    pass


def test_remove_and_caption_in_milvus_answer_as_local(tmp_path, shapes_collection, monkeypatch):
    import dmh.app.collection._build as build
    from dmh.app.collection import Collection, remove_from_collection, set_captions

    from ..conftest import build_shapes_collection

    col_m = build_shapes_collection(tmp_path, store="milvus")
    local = tmp_path / "local"
    shutil.copytree(shapes_collection, local)
    pairs = (local, col_m)

    def answers(path):
        col = Collection(path)
        return [
            [(h.id, h.distance) for h in hits]
            for hits in (
                col.search_text("a purple cross on the right", 60, "texts"),
                col.search_text("a green square on the left", 60, "texts"),
                col.search_text("a red circle", 60),
                col.similar(8, 60, "texts"),
            )
        ], {t: len(col.indexes[t]) for t in ("images", "texts")}

    def quiet(message):
        pass

    for col in pairs:
        assert remove_from_collection(col, ids=[3, 10, 51], log=quiet) == [3, 10, 51]
        assert set_captions(col, {0: "a purple cross on the right", 1: None, 7: "a green square on the left"},
                            log=quiet) == [0, 1, 7]
    expected = answers(local)
    assert answers(col_m) == expected and expected[1] == {"images": 46, "texts": 39}
    assert not {3, 10, 51} & {i for a in expected[0] for i, _ in a}

    # killed after the switch: Milvus still holds the old codes, listed in pending.json
    def checkpoint(step):
        if step == "switched":
            raise _Killed

    monkeypatch.setattr(build, "_checkpoint", checkpoint)
    for col in pairs:
        with pytest.raises(_Killed):
            set_captions(col, {4: "a purple cross on the right", 5: None}, log=quiet)
    monkeypatch.undo()
    assert list(col_m.glob("gen-*/pending.json"))
    assert answers(col_m) != answers(local)  # stale in Milvus: what the next writer puts right
    for col in pairs:
        assert remove_from_collection(col, ids=[6], log=quiet) == [6]
    expected = answers(local)
    assert answers(col_m) == expected and expected[1] == {"images": 45, "texts": 37}
    [record] = col_m.glob("gen-*/pending.json")  # Milvus done; only the thumbnail is left for the next writer
    assert json.loads(record.read_text()) == {"thumbs": [6], "store": []}
