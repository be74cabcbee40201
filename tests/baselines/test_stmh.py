"""STMH: topics per code, text codes, and its top-m functions against naive references."""

from __future__ import annotations

import numpy as np

from dmh.baselines.stmh import top_m_indicator, top_m_margin

from .paired_toys import N_BITS, _toy


def test_stmh_every_code_has_m_topics(fitted):
    m = fitted["stmh"]
    assert m.n_active_ == N_BITS // 2
    G = m.train_indicators_
    assert set(np.unique(G)) <= {0.0, 1.0}
    np.testing.assert_array_equal(G.sum(1), m.n_active_)
    data = _toy(seed=6, n=40)
    for modality in ("image", "text"):
        codes = m.encode(getattr(data, modality), modality)
        np.testing.assert_array_equal((codes == 1).sum(1), m.n_active_)


def test_stmh_text_codes_are_nearest_topics(fitted):
    m = fitted["stmh"]
    X = _toy(seed=7, n=15).text
    d = ((X[:, None, :] - m.topic_centres_[None]) ** 2).sum(-1)
    for i in range(X.shape[0]):
        nearest = set(np.argsort(d[i])[: m.n_active_])
        assert nearest == set(np.flatnonzero(m.encode(X[i : i + 1], "text")[0] == 1))



def test_top_m_helpers_against_naive():
    rng = np.random.default_rng(3)
    C = rng.normal(size=(7, 6))
    G = top_m_indicator(C, 2)
    for i in range(7):
        assert set(np.flatnonzero(G[i])) == set(np.argsort(C[i])[:2])
    M = top_m_margin(C, 3)
    for i in range(7):
        assert set(np.flatnonzero(M[i] > 0)) == set(np.argsort(-C[i])[:3])
