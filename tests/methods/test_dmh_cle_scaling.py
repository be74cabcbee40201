"""``DMH(cle_scaling=...)``: how the input descriptions enter CLE's first round (docs/quality.md;
the evidence in research/log/quality.md section 8)."""

import numpy as np
import pytest

from dmh import DMH, CrossModalData
from dmh.diagnostics import _cosine, ranking_map
from dmh.methods.dmh import PRESETS
from dmh.methods.dmh_options import DMHOptions

TINY = dict(d=16, hidden_size=32, n_rounds=1, dam_epochs=2, cle_max_iter=10, gbe_max_iter=20, use_unpaired=True)
pytestmark = pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")


def _views_with_faint_noise(n=200, n_signal=6, n_noise=60, seed=0):
    """4 clusters seen by both views through ``n_signal`` strong features each, plus ``n_noise``
    faint features per view (standard deviation 0.05) unrelated to the clusters or to the other
    view: the many rare words of a bag of words, or a CNN's low-variance channels. Standardising
    every feature to unit variance makes the faint ones as loud as the signal."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(4), n // 4)
    views = []
    for _ in range(2):
        centres = 3.0 * rng.normal(size=(4, n_signal))
        signal = centres[y] + rng.normal(size=(n, n_signal))
        views.append(np.hstack([signal, 0.05 * rng.normal(size=(n, n_noise))]))
    idx = np.arange(n)
    return CrossModalData(image=views[0], text=views[1], labels=y, train_idx=idx, query_idx=idx[:40],
                          database_idx=idx, name="faint-noise")


def _map_of_features(Y, labels):
    rel = labels[:, None] == labels[None, :]
    return ranking_map(_cosine(Y, Y), rel, np.eye(len(labels), dtype=bool))


def test_paper_preset_standardises_every_feature():
    assert PRESETS["paper"]["cle_scaling"] == "feature"
    assert DMHOptions.of(DMH(8, preset="paper")).cle_scaling == "feature"
    assert DMHOptions.of(DMH(8, preset="paper", cle_scaling="view")).cle_scaling == "view"
    with pytest.raises(ValueError, match="cle_scaling"):
        DMH(8, cle_scaling="pixel", **TINY).fit(_views_with_faint_noise(n=40))


def test_view_scaling_keeps_faint_features_faint():
    train = _views_with_faint_noise().train()
    fits = {how: DMH(8, cle_scaling=how, random_state=0, **TINY).fit(train) for how in ("feature", "view")}
    maps = {how: _map_of_features(m.features_, train.labels) for how, m in fits.items()}
    assert maps["view"] > maps["feature"] + 0.1, maps
    codes = {how: _map_of_features(m.codes_.astype(float), train.labels) for how, m in fits.items()}
    assert codes["view"] > codes["feature"], codes


@pytest.mark.parametrize("cle_dtype", ["float64", "float32"])
def test_view_scaling_leaves_the_callers_arrays_alone(cle_dtype):
    train = _views_with_faint_noise(n=80).train()
    image = train.image.astype(np.float32 if cle_dtype == "float32" else np.float64)
    data = CrossModalData(image=image, text=train.text, labels=train.labels, train_idx=np.arange(80),
                          query_idx=np.arange(8), database_idx=np.arange(80), name="copy-check")
    fit_on = data.train()
    before = fit_on.image.copy()
    DMH(8, cle_scaling="view", cle_dtype=cle_dtype, random_state=0, **TINY).fit(fit_on)
    assert np.array_equal(fit_on.image, before)


def _sparse_words(data, n_words=300, seed=1):
    """``data`` with its text view replaced by a sparse 0/1 bag of words: a few frequent words
    that follow the clusters, and many rare ones (seen by 1-3% of the objects) that do not."""
    rng = np.random.default_rng(seed)
    n = data.image.shape[0]
    words = np.zeros((n, n_words))
    for c in range(4):
        words[data.labels == c, c] = 1.0  # one frequent word per cluster
    words[:, 4:] = rng.random((n, n_words - 4)) < rng.uniform(0.01, 0.03, size=n_words - 4)
    return CrossModalData(image=data.image, text=words, labels=data.labels, train_idx=data.train_idx,
                          query_idx=data.query_idx, database_idx=data.database_idx, name="sparse-words")


def test_auto_scales_a_sparse_view_as_a_whole_and_standardises_a_dense_one():
    from dmh.methods.dmh import SPARSE_ZERO_SHARE, sparse_view

    assert PRESETS["default"]["cle_scaling"] == "auto"
    dense = _views_with_faint_noise(n=80)
    sparse = _sparse_words(dense)
    everyone = np.ones(80, dtype=bool)
    assert not sparse_view(dense.text, everyone) and sparse_view(sparse.text, everyone)
    assert (sparse.text == 0).mean() >= SPARSE_ZERO_SHARE
    # rows not observed do not count: a view whose only dense rows are missing is still sparse
    filled = sparse.text.copy()
    filled[:8] = 1.0
    assert sparse_view(filled, np.arange(80) >= 8) and not sparse_view(filled[:8], np.ones(8, dtype=bool))
    on_dense = DMH(8, cle_scaling="auto", random_state=0, **TINY).fit(dense.train())
    assert on_dense.cle_scaling_ == {"image": "feature", "text": "feature"}
    by_hand = DMH(8, cle_scaling="feature", random_state=0, **TINY).fit(dense.train())
    assert np.array_equal(on_dense.codes_, by_hand.codes_)  # dense data: exactly the paper's scaling
    on_sparse = DMH(8, cle_scaling="auto", random_state=0, **TINY).fit(sparse.train())
    assert on_sparse.cle_scaling_ == {"image": "feature", "text": "view"}


def test_auto_on_sparse_words_keeps_rare_words_from_drowning_the_clusters():
    train = _sparse_words(_views_with_faint_noise(n=200)).train()
    maps = {how: _map_of_features(DMH(8, cle_scaling=how, random_state=0, **TINY).fit(train).features_, train.labels)
            for how in ("feature", "auto")}
    assert maps["auto"] > maps["feature"] + 0.05, maps
