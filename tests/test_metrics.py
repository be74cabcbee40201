"""Every vectorised, chunked metric against a naive per-query loop, on small data with many ties."""

import itertools
import json
import math

import numpy as np
import pytest

from dmh import _ranking
from dmh.metrics import (
    average_precisions,
    average_precisions_tie_aware,
    evaluate_retrieval,
    hamming_distance,
    mean_average_precision,
    mean_average_precision_tie_aware,
    pr_curve_by_radius,
    precision_within_radius,
    relevance,
    topn_precision,
)


# ------------------------------------------------------------------------------- naive references
def naive_ranking(q, d):
    """Per query: database indices sorted by (Hamming distance, position), and the distances."""
    out = []
    for qi in q:
        dist = np.array([int(np.sum(qi != di)) for di in d])
        order = sorted(range(len(d)), key=lambda j: (dist[j], j))
        out.append((np.array(order), dist))
    return out


def naive_rel(ql, dl):
    if ql.ndim == 1:
        return np.array([[a == b for b in dl] for a in ql])
    return np.array([[bool(np.any(a & b)) for b in dl] for a in ql.astype(bool)])


def naive_ap(rel_sorted, k=None):
    k = len(rel_sorted) if k is None else min(k, len(rel_sorted))
    hits, s = 0, 0.0
    for r in range(k):
        if rel_sorted[r]:
            hits += 1
            s += hits / (r + 1)
    return s / hits if hits else 0.0


def make_case(seed, n_q=7, n_d=40, n_bits=4, multi_hot=False, n_labels=3):
    rng = np.random.default_rng(seed)
    q = np.where(rng.random((n_q, n_bits)) > 0.5, 1, -1).astype(np.int8)
    d = np.where(rng.random((n_d, n_bits)) > 0.5, 1, -1).astype(np.int8)
    if multi_hot:
        ql = (rng.random((n_q, n_labels)) < 0.3).astype(np.uint8)
        dl = (rng.random((n_d, n_labels)) < 0.3).astype(np.uint8)
    else:
        ql = rng.integers(0, n_labels, n_q)
        dl = rng.integers(0, n_labels, n_d)
    return q, d, ql, dl


CASES = [
    dict(seed=0),
    dict(seed=1, n_bits=3, multi_hot=True),
    dict(seed=2, n_bits=8, n_d=60, n_labels=5),
    dict(seed=3, n_bits=2, n_d=25, multi_hot=True, n_labels=2),
    dict(seed=4, n_bits=70, n_d=30, multi_hot=True, n_labels=300),  # 2 code words, matmul labels
    dict(seed=5, n_bits=5, n_d=33, multi_hot=True, n_labels=70),  # 2 label words
]


@pytest.fixture(params=CASES, ids=lambda c: f"seed{c['seed']}")
def case(request):
    return make_case(**request.param)


# ------------------------------------------------------------------------------- tests
def test_hamming_and_relevance_match_naive(case):
    q, d, ql, dl = case
    expect = np.array([[np.sum(a != b) for b in d] for a in q])
    np.testing.assert_array_equal(hamming_distance(q, d), expect)
    np.testing.assert_array_equal(relevance(ql, dl), naive_rel(ql, dl))
    np.testing.assert_array_equal(_ranking._Relevance(ql, dl)(0, len(ql)), naive_rel(ql, dl))


@pytest.mark.parametrize("top_k", [None, 1, 5, 17, 1000])
@pytest.mark.parametrize("chunk_size", [1, 3, 256])
def test_average_precision_matches_naive_loop(case, top_k, chunk_size):
    q, d, ql, dl = case
    rel = naive_rel(ql, dl)
    expect = [naive_ap(rel[i][order], top_k) for i, (order, _) in enumerate(naive_ranking(q, d))]
    got = average_precisions(q, d, ql, dl, top_k=top_k, chunk_size=chunk_size)
    np.testing.assert_allclose(got, expect, rtol=1e-12, atol=1e-12)
    assert mean_average_precision(q, d, ql, dl, top_k, chunk_size) == pytest.approx(np.mean(expect))


def test_tie_aware_ap_equals_mean_over_all_orderings():
    """Enumerate every ordering within every tie group (small enough to do so)."""
    rng = np.random.default_rng(7)
    q = np.array([[1, 1]], dtype=np.int8)
    d = np.array(
        [[1, 1], [1, -1], [-1, 1], [1, -1], [-1, -1], [1, 1], [-1, 1], [-1, -1], [1, -1]],
        dtype=np.int8,
    )
    for trial in range(4):
        dl = rng.integers(0, 2, size=len(d))
        ql = np.array([trial % 2])
        dist = hamming_distance(q, d)[0]
        rel = dl == ql[0]
        groups = [np.flatnonzero(dist == g) for g in range(3)]
        aps = [
            naive_ap(rel[np.concatenate(perm)])
            for perm in itertools.product(*(itertools.permutations(g) for g in groups))
        ]
        got = average_precisions_tie_aware(q, d, ql, dl)[0]
        assert got == pytest.approx(np.mean(aps), rel=1e-12, abs=1e-14)


def test_tie_aware_ap_matches_closed_form_by_sampling_free_reference(case):
    """Against a per-group evaluation of the defining expectation (sum over positions t)."""
    q, d, ql, dl = case
    rel = naive_rel(ql, dl)
    dist = hamming_distance(q, d)
    expect = []
    for i in range(len(q)):
        total_rel, n_before, r_before, s = rel[i].sum(), 0, 0, 0.0
        for g in range(q.shape[1] + 1):
            members = dist[i] == g
            n, r = int(members.sum()), int(rel[i][members].sum())
            for t in range(1, n + 1):
                if r:
                    exp_hits = r_before + 1 + ((t - 1) * (r - 1) / (n - 1) if n > 1 else 0)
                    s += (r / n) * exp_hits / (n_before + t)
            n_before, r_before = n_before + n, r_before + r
        expect.append(s / total_rel if total_rel else 0.0)
    np.testing.assert_allclose(
        average_precisions_tie_aware(q, d, ql, dl, chunk_size=2), expect, rtol=1e-11, atol=1e-13
    )
    assert mean_average_precision_tie_aware(q, d, ql, dl) == pytest.approx(np.mean(expect))


def test_tie_aware_equals_plain_without_ties():
    rng = np.random.default_rng(0)
    # database codes at distinct distances 0..8 from the query: no ties
    q = np.ones((1, 8), dtype=np.int8)
    d = np.ones((9, 8), dtype=np.int8)
    for j in range(9):
        d[j, :j] = -1
    dl = rng.integers(0, 2, 9)
    dl[0] = 1
    ql = np.array([1])
    assert average_precisions_tie_aware(q, d, ql, dl)[0] == pytest.approx(
        average_precisions(q, d, ql, dl)[0], rel=1e-12
    )


@pytest.mark.parametrize("ns", [(1, 2, 5, 10), (3, 40, 100)])
def test_topn_precision_matches_naive_loop(case, ns):
    q, d, ql, dl = case
    rel = naive_rel(ql, dl)
    ranking = naive_ranking(q, d)
    expect = [
        np.mean([rel[i][order][: min(n, len(d))].mean() for i, (order, _) in enumerate(ranking)])
        for n in ns
    ]
    np.testing.assert_allclose(topn_precision(q, d, ql, dl, ns, chunk_size=2), expect, rtol=1e-12)
    # tie-aware: enumerating is too costly here, check against the expectation per group
    expect_tie = []
    for n in ns:
        vals = []
        for i, (_, dist) in enumerate(ranking):
            m = min(n, len(d))
            hits, before = 0.0, 0
            for g in range(q.shape[1] + 1):
                members = dist == g
                cnt = int(members.sum())
                take = min(cnt, max(0, m - before))
                if cnt:
                    hits += take * rel[i][members].mean()
                before += cnt
            vals.append(hits / m)
        expect_tie.append(np.mean(vals))
    np.testing.assert_allclose(
        topn_precision(q, d, ql, dl, ns, tie_aware=True), expect_tie, rtol=1e-12
    )


def test_pr_by_radius_matches_naive_loop(case):
    q, d, ql, dl = case
    rel = naive_rel(ql, dl)
    dist = hamming_distance(q, d)
    n_bits = q.shape[1]
    pooled = pr_curve_by_radius(q, d, ql, dl)
    per_query = pr_curve_by_radius(q, d, ql, dl, form="per_query", chunk_size=3)
    assert pooled["radius"] == list(range(n_bits + 1))
    for h in range(n_bits + 1):
        got = dist <= h
        hits = (got & rel).sum(axis=1)
        retrieved = got.sum(axis=1)
        n_rel = rel.sum(axis=1)
        # pooled
        p = hits.sum() / retrieved.sum() if retrieved.sum() else None
        assert pooled["precision"][h] == (pytest.approx(p) if p is not None else None)
        assert pooled["recall"][h] == pytest.approx(hits.sum() / n_rel.sum())
        # per query: precision over queries that retrieve, recall over those with relevant items
        covered = retrieved > 0
        p_q = np.mean(hits[covered] / retrieved[covered]) if covered.any() else None
        assert per_query["precision"][h] == (pytest.approx(p_q) if p_q is not None else None)
        assert per_query["recall"][h] == pytest.approx(np.mean(hits[n_rel > 0] / n_rel[n_rel > 0]))
        assert per_query["coverage"][h] == pytest.approx(covered.mean())
        # precision within radius: every query, empty lookup = 0
        p0 = np.mean([hits[i] / retrieved[i] if retrieved[i] else 0.0 for i in range(len(q))])
        assert precision_within_radius(q, d, ql, dl, radius=h) == pytest.approx(p0)
    assert pooled["recall"][-1] == pytest.approx(1.0)


def test_evaluate_retrieval_keys_values_and_json(case):
    q, d, ql, dl = case
    res = evaluate_retrieval(q, d, ql, dl, top_k=(5, 50), topn=(1, 10))
    json.dumps(res, allow_nan=False)
    for key in (
        "map",
        "map_tie_aware",
        "map@5",
        "map@50",
        "precision@radius2",
        "topn",
        "pr_radius",
        "pr_radius_per_query",
    ):
        assert key in res
    assert res["map"] == pytest.approx(mean_average_precision(q, d, ql, dl))
    assert res["map@5"] == pytest.approx(mean_average_precision(q, d, ql, dl, top_k=5))
    assert res["map_tie_aware"] == pytest.approx(mean_average_precision_tie_aware(q, d, ql, dl))
    r2 = min(2, q.shape[1])
    assert res["precision@radius2"] == pytest.approx(
        precision_within_radius(q, d, ql, dl, radius=r2)
    )
    assert res["topn"]["n"] == [1, 10]
    np.testing.assert_allclose(res["topn"]["precision"], topn_precision(q, d, ql, dl, (1, 10)))
    assert res["pr_radius"] == pr_curve_by_radius(q, d, ql, dl)
    assert res["pr_radius_per_query"] == pr_curve_by_radius(q, d, ql, dl, form="per_query")
    short = evaluate_retrieval(q, d, ql, dl, curves=False)
    assert "topn" not in short and "pr_radius" not in short and "map@50" in short


def test_query_with_no_relevant_item_counts_as_zero():
    q = np.array([[1, 1], [1, -1]], dtype=np.int8)
    d = np.array([[1, 1], [-1, -1]], dtype=np.int8)
    ql, dl = np.array([0, 5]), np.array([0, 0])
    aps = average_precisions(q, d, ql, dl)
    assert aps.tolist() == [1.0, 0.0]
    assert mean_average_precision(q, d, ql, dl) == 0.5
    assert average_precisions_tie_aware(q, d, ql, dl).tolist() == [1.0, 0.0]


def test_map_at_k_normalises_by_relevant_in_top_k():
    # ranking (no ties): rel, irrel, rel, rel ; AP@2 = 1 (R_2 = 1), not 1/min(R, 2) = 0.5
    q = np.ones((1, 4), dtype=np.int8)
    d = np.ones((4, 4), dtype=np.int8)
    for j in range(4):
        d[j, :j] = -1
    ql, dl = np.array([1]), np.array([1, 0, 1, 1])
    assert mean_average_precision(q, d, ql, dl, top_k=2) == 1.0
    assert mean_average_precision(q, d, ql, dl) == pytest.approx((1 + 2 / 3 + 3 / 4) / 3)


def test_larger_random_case_against_reference_sort():
    """A vectorised argsort reference (not the engine) on a few hundred items, 8 bits."""
    q, d, ql, dl = make_case(11, n_q=50, n_d=700, n_bits=8, multi_hot=True, n_labels=6)
    dist = hamming_distance(q, d)
    rel = relevance(ql, dl)
    order = np.argsort(dist, axis=1, kind="stable")
    srel = np.take_along_axis(rel, order, axis=1)
    hits = np.cumsum(srel, axis=1)
    ranks = np.arange(1, d.shape[0] + 1)
    ap = np.divide(
        (srel * hits / ranks).sum(1), hits[:, -1], out=np.zeros(50), where=hits[:, -1] > 0
    )
    np.testing.assert_allclose(average_precisions(q, d, ql, dl, chunk_size=7), ap, rtol=1e-12)


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda q, d, ql, dl: mean_average_precision(q, d[:, :3], ql, dl), "bits"),
        (lambda q, d, ql, dl: mean_average_precision(q, d[:0], ql, dl[:0]), "database is empty"),
        (
            lambda q, d, ql, dl: mean_average_precision(q, d, ql, dl, top_k=0),
            "top_k must be positive",
        ),
        (lambda q, d, ql, dl: mean_average_precision(q * 0, d, ql, dl), "-1 and \\+1"),
        (lambda q, d, ql, dl: mean_average_precision(q, d, ql[:2], dl), "query labels"),
        (
            lambda q, d, ql, dl: precision_within_radius(q, d, ql, dl, radius=9),
            "radius must be between",
        ),
        (lambda q, d, ql, dl: topn_precision(q, d, ql, dl, (0, 5)), "n must be positive"),
        (lambda q, d, ql, dl: pr_curve_by_radius(q, d, ql, dl, form="macro"), "form must be"),
        (lambda q, d, ql, dl: evaluate_retrieval(q, d, ql, np.ones((40, 3))), "both be class ids"),
    ],
)
def test_bad_input_names_the_problem(call, message):
    q, d, ql, dl = make_case(0)
    with pytest.raises((ValueError, TypeError), match=message):
        call(q, d, ql, dl)


def test_memory_bound_chunking_gives_same_result(monkeypatch):
    q, d, ql, dl = make_case(3, n_q=20, n_d=200, n_bits=6, multi_hot=True)
    full = evaluate_retrieval(q, d, ql, dl, top_k=(10,), topn=(5, 50))
    monkeypatch.setattr(_ranking, "_PAIR_BUDGET", 200)  # one query per chunk
    one = evaluate_retrieval(q, d, ql, dl, top_k=(10,), topn=(5, 50))
    for key in ("map", "map_tie_aware", "map@10", "precision@radius2"):
        assert one[key] == pytest.approx(full[key], rel=1e-12)
    assert not math.isnan(full["map"])
