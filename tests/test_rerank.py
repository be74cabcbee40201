"""Re-ranking Hamming candidates by the stored real values (:mod:`dmh.app.rerank`): the ordering, the
held-out pair score that decides it, and collections that re-rank, were built before values were
kept, or grow."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from dmh.app.collection import Collection, CollectionError, add_to_collection
from dmh.app.rerank import cosine_to, rerank_order, reranked_pair_scores
from dmh.code_files import compact_values
from dmh.errors import DataError
from dmh.index import load_codes, save_codes


def _ordered_naively(query, hits, values_of):
    """Brute force: every candidate's cosine in float64, then sorted by (-cosine, distance, id)."""
    q = np.asarray(query, np.float64)
    q = q / np.linalg.norm(q)
    rows = []
    for h in hits:
        v = values_of[h.id].astype(np.float64)
        rows.append((-(q @ v) / np.linalg.norm(v), h.distance, h.id))
    return [i for _, _, i in sorted(rows)]


def test_rerank_order_breaks_ties_by_distance_then_id():
    order = rerank_order([0.5, 0.9, 0.9, 0.9, -1.0], [3, 2, 1, 1, 0], [7, 9, 8, 6, 5])
    assert order.tolist() == [3, 2, 1, 0, 4]  # 0.9 at distance 1 (ids 6, 8), 0.9 at 2, then 0.5, -1.0


def test_compact_values_keep_the_cosine_and_refuse_bad_values():
    rng = np.random.default_rng(0)
    v = rng.normal(size=(50, 64)) * rng.uniform(0.01, 100, size=(50, 1))
    c = compact_values(v)
    assert c.dtype == np.float16 and np.allclose(np.linalg.norm(c.astype(np.float64), axis=1), 1, atol=2e-3)
    q = rng.normal(size=64)
    exact = (v @ q) / np.linalg.norm(v, axis=1) / np.linalg.norm(q)
    np.testing.assert_allclose(cosine_to(q, c), exact, atol=2e-3)
    assert compact_values(c) is c  # stored rows are written again unchanged
    assert not compact_values(np.zeros((1, 8))).any()
    with pytest.raises(DataError, match="NaN"):
        compact_values(np.array([[np.nan, 1.0]]))


def test_reranked_pair_scores_equal_a_naive_loop():
    rng = np.random.default_rng(1)
    n, bits, oversample, k = 40, 16, 2, 5
    image = rng.normal(size=(n, bits))
    text = image + rng.normal(scale=1.5, size=(n, bits))
    got = reranked_pair_scores(image, text, oversample=oversample, k=k)
    ci, ct = compact_values(image).astype(np.float32), compact_values(text).astype(np.float32)
    bi, bt = image > 0, text > 0
    for name, (qv, qb, dv, db) in {"image->text": (ci, bi, ct, bt), "text->image": (ct, bt, ci, bi)}.items():
        rr, hit10 = [], []
        for i in range(n):
            dist = [(int((qb[i] != db[j]).sum()), j) for j in range(n)]
            cand = [j for _, j in sorted(dist)[: oversample * k]]
            if i in cand:  # its place among the candidates ordered by cosine (then distance, row)
                ranked = sorted(cand, key=lambda j: (-float(qv[i] @ dv[j]), dist[j][0], j))
                ranks = [ranked.index(i) + 1]
            else:  # after them, uniformly within its Hamming tie among the others
                rest = [d for d, j in dist if j not in cand]
                ahead = sum(d < dist[i][0] for d in rest)
                tied = sum(d == dist[i][0] for d in rest)
                ranks = [oversample * k + ahead + t for t in range(1, tied + 1)]
            rr.append(np.mean([1 / r for r in ranks]))
            hit10.append(np.mean([r <= 10 for r in ranks]))
        assert got[name]["mrr"] == pytest.approx(np.mean(rr), abs=1e-6)
        assert got[name]["recall@10"] == pytest.approx(np.mean(hit10), abs=1e-6)
    # values that carry nothing beyond their signs cannot lift the score above Hamming alone
    from dmh.selection import pair_retrieval_scores

    signs = reranked_pair_scores(np.sign(image), np.sign(text), oversample=oversample, k=k)
    assert signs["mrr"] <= pair_retrieval_scores(np.sign(image), np.sign(text))["mrr"] + 0.05


def test_collection_reranks_as_brute_force_among_its_candidates(shapes_collection):
    col = Collection(shapes_collection, oversample=3)
    assert col.reranks
    codes, ids, values = load_codes(shapes_collection / "image_codes.npz", with_values=True)
    assert values is not None and values.dtype == np.float16 and values.shape == codes.shape
    # the stored values are the model's projections of the stored features (sign = code)
    from dmh.app.collection import load_features

    data, _, fids = load_features(shapes_collection / "features.npz")
    row = {int(i): r for r, i in enumerate(fids)}
    proj = col.model.project(data.image[[row[int(i)] for i in ids]], modality="image")
    assert np.all(np.sum(compact_values(proj).astype(np.float64) * values, axis=1) > 0.999)
    np.testing.assert_array_equal(np.where(proj > 0, 1, -1), codes)
    values_of = dict(zip(ids.tolist(), values, strict=True))
    hamming = Collection(shapes_collection, rerank=False)
    for text in ("a red circle", "a blue square on the left", "green triangle"):
        k = 5
        candidates = hamming.search_text(text, 3 * k)
        reranked = col.search_text(text, k)
        q = col.model.project(col.model.featurizer_.text_features([text]), modality="text")[0]
        assert [h.id for h in reranked] == _ordered_naively(q, candidates, values_of)[:k]
        scores = [h.score for h in reranked]
        assert scores == sorted(scores, reverse=True) and all(h.score is None for h in candidates)
        assert {h.id for h in reranked} <= {h.id for h in candidates}
    # "more like this" re-ranks by the item's stored values, and still leaves the item out
    like = col.similar(3, 6)
    assert 3 not in [h.id for h in like] and len(like) == 6
    assert [h.id for h in like] == _ordered_naively(values_of[3], hamming.similar(3, 18), values_of)[:6]
    with pytest.raises(CollectionError, match="oversample"):
        Collection(shapes_collection, oversample=0)


def test_ties_in_hamming_distance_are_ordered_by_the_values(shapes_collection):
    """Among the answers at one Hamming distance, re-ranking orders by cosine, not by id."""
    col = Collection(shapes_collection)
    hits = col.search_text("a red circle", 30)
    by_distance = {}
    for h in hits:
        by_distance.setdefault(h.distance, []).append(h)
    tied = [g for g in by_distance.values() if len(g) > 1]
    assert tied, "the toy collection has ties in Hamming distance"
    for group in tied:
        assert [h.score for h in group] == sorted((h.score for h in group), reverse=True)
    # by Hamming alone, the same tie is in id order: re-ranking changed at least one tie's order
    plain = Collection(shapes_collection, rerank=False).search_text("a red circle", 300)
    plain_order = {d: [h.id for h in plain if h.distance == d] for d in by_distance}
    assert any([h.id for h in g] != [i for i in plain_order[g[0].distance] if i in {h.id for h in g}]
               for g in tied)


def _drop_values(col):
    """The code files of ``col`` rewritten as a dmh from before re-ranking wrote them."""
    for name in ("image_codes.npz", "text_codes.npz"):
        codes, ids = load_codes(col / name)
        save_codes(col / name, codes, ids, modality=name.split("_")[0])


def test_a_collection_without_values_searches_by_hamming_distance(tmp_path, shapes_collection):
    old = tmp_path / "old"
    shutil.copytree(shapes_collection, old)
    _drop_values(old)
    state = json.loads((old / "build.json").read_text())
    state.pop("rerank", None)
    (old / "build.json").write_text(json.dumps(state))
    col = Collection(old)
    assert not col.reranks and not Collection(old, rerank=True).reranks
    hits = col.search_text("a red circle", 20)
    assert [(h.distance, h.id) for h in hits] == sorted((h.distance, h.id) for h in hits)
    assert all(h.score is None for h in hits)
    assert [h.id for h in hits] == [h.id for h in Collection(shapes_collection, rerank=False).search_text(
        "a red circle", 20)]
    # an add gives the old items their values too (from the stored features), and the new ones theirs
    from dmh.datasets.shapes import make_shapes

    more, captions = make_shapes(tmp_path / "more", 4, caption_ratio=1.0, extra_captions=0, seed=5)
    assert add_to_collection(old, more, captions, progress=False, log=lambda m: None) == 4
    grown = Collection(old)
    assert grown.reranks
    gen = json.loads((old / "manifest.json").read_text())["data"]
    for name in ("image_codes.npz", "text_codes.npz"):
        codes, ids, values = load_codes(old / gen / name, with_values=True)
        _, ids0, values0 = load_codes(shapes_collection / name, with_values=True)
        assert values is not None and values.shape == codes.shape
        np.testing.assert_array_equal(np.where(values > 0, 1, -1)[np.abs(values) > 1e-3],
                                      codes[np.abs(values) > 1e-3])
        # the old items' values are those a build stores
        np.testing.assert_allclose(values[: ids0.size].astype(np.float32), values0.astype(np.float32), atol=2e-3)
    # and a second add keeps every stored row as it was
    more2, captions2 = make_shapes(tmp_path / "more2", 3, caption_ratio=1.0, extra_captions=0, seed=6)
    add_to_collection(old, more2, captions2, progress=False, log=lambda m: None)
    gen2 = json.loads((old / "manifest.json").read_text())["data"]
    first = load_codes(old / gen / "image_codes.npz", with_values=True)[2]
    second = load_codes(old / gen2 / "image_codes.npz", with_values=True)[2]
    np.testing.assert_array_equal(second[: first.shape[0]], first)
    assert second.shape[0] == first.shape[0] + 3


def test_build_records_the_decision_and_search_follows_it(tmp_path, shapes_collection):
    state = json.loads((shapes_collection / "build.json").read_text())
    assert state["rerank"]["on"] is True  # one method named: on by default
    off = tmp_path / "off"
    shutil.copytree(shapes_collection, off)
    state["rerank"] = {"on": False, "reason": "held-out pairs"}
    (off / "build.json").write_text(json.dumps(state))
    assert not Collection(off).reranks and Collection(off, rerank=True).reranks
    hits = Collection(off).search_text("a red circle", 10)
    assert [h.id for h in hits] == [h.id for h in Collection(shapes_collection, rerank=False).search_text(
        "a red circle", 10)]
