"""Label-free selection: held-out pairs, tie-aware partner ranks, code health, grid parsing, tune."""

import json

import numpy as np
import pytest

from dmh import CrossModalData, make_semi_paired
from dmh.selection import (
    check_distinct_candidates,
    choose,
    code_health,
    holdout_pairs,
    pair_retrieval_scores,
    parse_grid,
    rank_correlations,
    spearman,
    tune,
)


def test_holdout_pairs_removes_only_paired_objects(toy_data):
    semi = make_semi_paired(toy_data.train(), 0.5, random_state=0)
    fit, held = holdout_pairs(semi, 0.25, min_count=10, random_state=1)
    assert held.n == 10  # round(0.25 * 40) = 10
    assert semi.paired_mask[held.index].all()
    assert fit.n_objects == semi.n_objects - held.n
    assert fit.n_image_only == semi.n_image_only and fit.n_text_only == semi.n_text_only
    assert np.array_equal(held.image, semi.image[held.index])
    fit2, held2 = holdout_pairs(semi, 0.25, min_count=10, random_state=1)
    assert np.array_equal(held.index, held2.index)  # seeded
    with pytest.raises(ValueError, match="too few"):
        holdout_pairs(semi.subset(np.flatnonzero(semi.paired_mask)[:12]), 0.2)
    with pytest.raises(ValueError, match="fraction"):
        holdout_pairs(semi, 1.5)


def _naive_expected(codes_a, codes_b, k):
    """Reference: average over many random tie-breaking orders."""
    rng = np.random.default_rng(0)
    n = codes_a.shape[0]
    D = (codes_a[:, None, :] != codes_b[None, :, :]).sum(2)
    rr, rec = np.zeros(n), np.zeros(n)
    reps = 4000
    for _ in range(reps):
        jit = rng.random(D.shape)
        order = np.lexsort((jit, D), axis=1)
        rank = np.argmax(order == np.arange(n)[:, None], axis=1) + 1
        rr += 1 / rank
        rec += rank <= k
    return rr.mean() / reps, rec.mean() / reps


def test_partner_scores_are_tie_aware_expectations():
    rng = np.random.default_rng(3)
    A = np.where(rng.random((12, 3)) > 0.5, 1, -1).astype(np.int8)  # 3 bits: many ties
    B = A.copy()
    B[rng.random(B.shape) < 0.2] *= -1
    s = pair_retrieval_scores(A, B, ks=(2,))
    mrr, rec = _naive_expected(A, B, 2)
    assert s["image->text"]["mrr"] == pytest.approx(mrr, abs=0.01)
    assert s["image->text"]["recall@2"] == pytest.approx(rec, abs=0.01)


def test_constant_codes_score_as_a_random_ranking_and_perfect_codes_score_one():
    n = 50
    const = np.ones((n, 8), np.int8)
    s = pair_retrieval_scores(const, const)
    assert s["mrr"] == pytest.approx(s["mrr_random"])
    assert s["image->text"]["mean_rank"] == pytest.approx((n + 1) / 2 / n)
    distinct = np.where((np.arange(n)[:, None] >> np.arange(8)) & 1, 1, -1).astype(np.int8)
    assert pair_retrieval_scores(distinct, distinct)["mrr"] == 1.0


def test_code_health():
    n = 64
    bits = np.where((np.arange(n)[:, None] >> np.arange(6)) & 1, 1, -1).astype(np.int8)
    h = code_health(bits)
    assert h["bit_balance"] == pytest.approx(1.0) and h["mean_abs_corr"] == pytest.approx(0.0)
    assert h["distinct"] == 1.0
    bad = np.concatenate([bits[:, :1], bits[:, :1], np.ones((n, 1), np.int8)], axis=1)
    hb = code_health(bad)
    assert hb["max_imbalance"] == 1.0 and hb["distinct"] == 2 / n
    assert hb["mean_abs_corr"] == pytest.approx(1 / 3)  # the one duplicated pair of 3


def test_parse_grid():
    g = parse_grid("dmh.n_rounds=1,3; gamma=0.01,0.1;similarity=clip", "dmh")
    assert len(g) == 4 and g[0] == {"n_rounds": 1, "gamma": 0.01, "similarity": "clip"}
    assert parse_grid("", "dmh") == [{}]
    with pytest.raises(ValueError, match="names method"):
        parse_grid("fsh.x=1", "dmh")
    with pytest.raises(ValueError, match="KEY="):
        parse_grid("n_rounds", "dmh")


def test_spearman():
    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert spearman([1, 2], [1, 2]) is None


def test_tune_resumes_and_never_reads_test_map(toy_data):
    recs = tune(toy_data, "cvh", [{}], [8], [0], holdout=0.2, test_map=True)
    assert len(recs) == 1 and "test_map" in recs[0] and 0 < recs[0]["label_free"]["score"] <= 1
    again = tune(toy_data, "cvh", [{}], [8], [0], holdout=0.2, records=recs)
    assert again == recs  # nothing refitted
    # choose() must not depend on test MAP: scramble it and the choice stays
    fake = [dict(r, candidate=json.dumps({"a": i}), params={"a": i},
                 label_free=dict(r["label_free"], score=s), test_map={"image->text": t, "text->image": t})
            for i, (r, s, t) in enumerate(zip(recs * 3, [0.1, 0.3, 0.2], [0.9, 0.1, 0.5], strict=True))]
    assert choose(fake)["params"] == {"a": 1}
    rc = rank_correlations(fake)
    assert rc[0]["n_candidates"] == 3 and rc[0]["spearman"] == pytest.approx(-1.0)


def test_tune_resumes_only_fits_of_the_same_settings(toy_data, monkeypatch):
    from dmh.errors import DataError
    from dmh.methods import dmh as dmh_module

    recs = tune(toy_data, "cvh", [{}], [8], [0], holdout=0.2)
    assert json.loads(recs[0]["key"])["params"]["reg"] is not None  # every parameter written out
    # another held-out share, other data, another paired ratio: never mixed in
    with pytest.raises(DataError, match="another tune"):
        tune(toy_data, "cvh", [{}], [8], [1], holdout=0.3, records=recs)
    other = CrossModalData(image=toy_data.image + 1.0, text=toy_data.text, labels=toy_data.labels,
                           train_idx=toy_data.train_idx, query_idx=toy_data.query_idx,
                           database_idx=toy_data.database_idx)
    with pytest.raises(DataError, match="another tune"):
        tune(other, "cvh", [{}], [8], [0], holdout=0.2, records=recs)
    # the same candidate under other fixed parameters: refused, not reused
    with pytest.raises(DataError, match="other parameter values"):
        tune(toy_data, "cvh", [{}], [8], [0], holdout=0.2, fixed_params={"reg": 0.5}, records=recs)
    keyless = [{k: v for k, v in r.items() if k != "key"} for r in recs]
    with pytest.raises(DataError, match="without a key"):
        tune(toy_data, "cvh", [{}], [8], [0], holdout=0.2, records=keyless)
    # a changed preset value of DMH changes the key
    params = {"n_rounds": 1, "d": 4, "hidden_size": 8, "dam_epochs": 1}
    from dmh.selection import data_ident, fit_key

    key = fit_key(data_ident(toy_data), "dmh", params, 8, 0, 1.0, 0.2)
    monkeypatch.setitem(dmh_module.PRESETS, "default", {**dmh_module.PRESETS["default"], "cle_scaling": "view"})
    assert fit_key(data_ident(toy_data), "dmh", params, 8, 0, 1.0, 0.2) != key


def test_tune_rejects_unknown_parameters(toy_data):
    with pytest.raises(ValueError, match="unknown parameter"):
        tune(toy_data, "cvh", [{"nope": 1}], [8], [0])


def test_tune_refuses_candidates_that_are_one_setting_at_every_bit_length(toy_data):
    """A grid of None and 16 (the preset's value) fitted the same setting twice and ranked the two."""
    with pytest.raises(ValueError, match="same setting at 64 bits"):
        tune(toy_data, "dmh", [{"gbe_block_bits": None}, {"gbe_block_bits": 16}], [64], [0])
    with pytest.raises(ValueError, match="same setting at 8, 16 bits"):  # both lengths the codes are within
        tune(toy_data, "dmh", [{"gbe_block_bits": 16}, {"gbe_block_bits": 32}], [8, 16], [0])
    # they differ at 64 bits, so both are fitted (at 16 bits the same problem twice, which is reported)
    check_distinct_candidates("dmh", [{"gbe_block_bits": 16}, {"gbe_block_bits": 64}], [16, 64], {})


def test_cli_tune(toy_data, tmp_path, capsys):
    from dmh import save_data
    from dmh.cli import main

    path = tmp_path / "toy.npz"
    save_data(toy_data, path)
    out = tmp_path / "tune.json"
    args = [str(path), "--method", "cvh", "--bits", "8", "--seeds", "0", "--holdout", "0.2", "--test-map",
            "--out", str(out)]
    assert main(["tune", *args]) == 0
    payload = json.loads(out.read_text())
    assert len(payload["records"]) == 1 and payload["chosen"]["params"] == {}
    capsys.readouterr()
    assert main(["tune", *args]) == 0  # resumes: nothing to do
    assert "Resuming: 1 of 1 fit(s)" in capsys.readouterr().out
    assert len(json.loads(out.read_text())["records"]) == 1
    other = [a if a != "0.2" else "0.3" for a in args]  # another held-out share: refused, nothing said resumed
    assert main(["tune", *other]) == 2
    said = capsys.readouterr()
    assert "Resuming" not in said.out and "another tune" in said.err
    assert main(["tune", *args, "--param", "cvh.reg=0.5"]) == 2  # other --param values: refused
    for bad in ('{"records": [3]}', '{"records": [{"key": "x"}]}', '{"records": [{"candidate": "{}"}]}'):
        broken = tmp_path / "broken.json"
        broken.write_text(bad)
        assert main(["tune", *args[:-1], str(broken)]) == 2  # one error line, no traceback
    assert len(json.loads(out.read_text())["records"]) == 1
    assert main(["tune", str(path), "--grid", "cvh.bad", "--method", "cvh", "--out", str(out)]) == 2
    assert main(["tune", str(tmp_path / "missing.npz"), "--out", str(out)]) == 2


def test_holdout_needs_pairs():
    data = CrossModalData(image=np.random.default_rng(0).normal(size=(30, 3)),
                          text=np.random.default_rng(1).normal(size=(30, 3)))
    fit, held = holdout_pairs(data, 0.2)
    assert held.n == 15  # at least min_count=50, at most half of the 30 pairs


def test_neighbourhood_relevance_and_scores():
    """Database objects alike to a held-out object in both views count as relevant; codes that keep
    such groups together score above random codes."""
    from dmh.selection import HeldOutPairs, neighbourhood_relevance, neighbourhood_scores

    rng = np.random.default_rng(0)
    n, m = 400, 60
    cls = rng.integers(0, 4, n + m)
    centres = rng.normal(size=(4, 12))
    image = centres[cls] + 0.4 * rng.normal(size=(n + m, 12))
    text = centres[cls] @ rng.normal(size=(12, 25)) + 0.8 * rng.normal(size=(n + m, 25))
    R, k = neighbourhood_relevance(image[n:], text[n:], image[:n], text[:n])
    assert R.shape == (m, n) and k <= 30 and R.sum(1).mean() >= 5
    assert (R & (cls[n:, None] == cls[None, :n])).sum() / R.sum() > 0.95
    # one view says nothing: the neighbourhoods widen, and fewer objects count as alike
    noise = rng.normal(size=(n + m, 25))
    R2, k2 = neighbourhood_relevance(image[n:], noise[n:], image[:n], noise[:n])
    assert k2 > k

    class Coder:
        def __init__(self, codes):
            self.codes = codes

        def encode(self, X, modality):
            rows = [int(np.flatnonzero((image if modality == "image" else text)[:, 0] == x0)[0]) for x0 in X[:, 0]]
            return self.codes[rows]

    train = CrossModalData(image=image[:n], text=text[:n])
    held = HeldOutPairs(image=image[n:], text=text[n:], index=np.arange(n, n + m))
    good = neighbourhood_scores(Coder(np.sign(rng.normal(size=(4, 16)))[cls]), held, train)
    rand = neighbourhood_scores(Coder(np.sign(rng.normal(size=(n + m, 16)))), held, train)
    assert good["map"] > 2 * rand["map"] and good["k"] == k and good["n_db"] == n
    assert set(good) >= {"image->text", "text->image", "map", "mean_relevant"}


def _rr_record(candidate, seed, n_bits, rr):
    return {"candidate": candidate, "params": json.loads(candidate), "seed": seed, "n_bits": n_bits,
            "paired_ratio": 1.0, "label_free": {"score": float(np.mean(rr)), "pair_rr": list(rr)}}


def test_choose_sets_each_other_candidate_beside_the_choice_with_the_standard_error_of_the_lead():
    rng = np.random.default_rng(0)
    base = {s: rng.uniform(0.05, 0.6, 200) for s in (0, 1)}
    noise = {s: rng.normal(0, 0.1, 200) for s in (0, 1)}
    recs = []
    for s in (0, 1):
        for b in (16, 64):
            recs.append(_rr_record('{"a": 0}', s, b, base[s] + 0.05))  # ahead on every pair by 0.05
            recs.append(_rr_record('{"a": 1}', s, b, base[s]))
            recs.append(_rr_record('{"a": 2}', s, b, base[s] + 0.05 + noise[s] - 0.003))  # behind by noise
    chosen = choose(recs)
    assert chosen["params"] == {"a": 0}
    close, far = chosen["others"]  # best first
    assert close["candidate"] == '{"a": 2}' and far["candidate"] == '{"a": 1}'
    assert far["lead"] == pytest.approx(0.05) and far["lead_se"] == pytest.approx(0.0, abs=1e-12)
    assert far["within_one_se"] is False
    # the per-pair differences of a seed are the same at both lengths: one unit per (seed, pair)
    units = np.concatenate([0.003 - noise[s] for s in (0, 1)])
    assert close["lead"] == pytest.approx(units.mean())
    assert close["lead_se"] == pytest.approx(units.std(ddof=1) / np.sqrt(400))
    assert close["lead"] <= close["lead_se"] and close["within_one_se"] is True
    # a file written before the per-pair ranks were recorded: the scores alone, the choice unchanged
    old = [dict(r, label_free={"score": r["label_free"]["score"]}) for r in recs]
    assert choose(old)["params"] == {"a": 0}
    assert all(o["lead"] is None and o["within_one_se"] is None for o in choose(old)["others"])


def test_paired_score_difference_needs_fits_in_common(toy_data):
    from dmh.selection import paired_score_difference

    recs = [_rr_record('{"a": 0}', 0, 16, [0.5, 0.25]), _rr_record('{"a": 1}', 1, 16, [0.5, 0.5])]
    assert paired_score_difference(recs, '{"a": 0}', '{"a": 1}') is None  # other seeds: other pairs
    # tune writes each held-out pair's reciprocal rank, whose mean is the score
    rec = tune(toy_data, "cvh", [{}], [8], [0], holdout=0.2)[0]
    assert len(rec["label_free"]["pair_rr"]) == rec["n_heldout_pairs"]
    assert np.mean(rec["label_free"]["pair_rr"]) == pytest.approx(rec["label_free"]["score"], abs=1e-6)


def test_a_tune_file_with_malformed_per_pair_ranks_is_refused_naming_the_record(toy_data, tmp_path):
    from dmh.errors import DataError
    from dmh.selection import load_records

    rec = tune(toy_data, "cvh", [{}], [8], [0], holdout=0.2)[0]
    path = tmp_path / "t.json"
    for bad in ("garbage", ["a", "b"], {"x": 1}):
        path.write_text(json.dumps({"records": [rec, dict(rec, label_free={**rec["label_free"], "pair_rr": bad})]}))
        with pytest.raises(DataError, match=r"t.json is not a tune results file \(record 1's pair_rr"):
            load_records(path)
    path.write_text(json.dumps({"records": [rec]}))
    assert load_records(path) == [rec]
