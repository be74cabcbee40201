"""``DMH(dam_scaling=...)``: how a view is scaled for the hash networks (docs/quality.md; the
evidence in research/log/quality.md section 39), and the cell keys it leaves alone on dense data."""

import numpy as np
import pytest

from dmh import DMH
from dmh.evaluation import make_cell
from dmh.methods.dmh import PRESETS
from dmh.methods.dmh_options import DMHOptions, never_sparse, sparse_view

from .test_dmh_cle_scaling import TINY, _sparse_words, _views_with_faint_noise

pytestmark = [pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning"),
              pytest.mark.filterwarnings("ignore::dmh.errors.DegenerateCodesWarning")]  # TINY fits, 8 bits


def test_presets_and_bad_values():
    assert PRESETS["paper"]["dam_scaling"] == "feature"  # the paper standardises every input
    assert PRESETS["default"]["dam_scaling"] == "auto"
    assert DMHOptions.of(DMH(8, preset="paper")).dam_scaling == "feature"
    assert DMHOptions.of(DMH(8, dam_scaling="view")).dam_scaling == "view"
    with pytest.raises(ValueError, match="dam_scaling"):
        DMH(8, dam_scaling="pixel", **TINY).fit(_views_with_faint_noise(n=40).train())


def test_auto_gives_a_sparse_view_one_scale():
    train = _sparse_words(_views_with_faint_noise(n=120)).train()
    model = DMH(8, dam_scaling="auto", random_state=0, **TINY).fit(train)
    assert model.dam_scaling_ == {"image": "feature", "text": "view"}
    _, text_scale = model.scalers_["text"]
    # one scale for every word: the root of the words' mean variance (the total variance unchanged)
    assert np.allclose(text_scale, np.sqrt(train.text.var(axis=0).mean()))
    _, image_scale = model.scalers_["image"]
    assert np.allclose(image_scale, train.image.std(axis=0))  # the dense view as the paper scales it
    # per feature, a word seen by 1% of the objects would enter 7 times louder than a cluster's word
    standardised = DMH(8, dam_scaling="feature", random_state=0, **TINY).fit(train).scalers_["text"][1]
    assert standardised[:4].min() > 3 * standardised[4:].min()


def test_auto_on_dense_data_is_the_papers_scaling():
    train = _views_with_faint_noise(n=80).train()
    auto = DMH(8, dam_scaling="auto", random_state=0, **TINY).fit(train)
    assert auto.dam_scaling_ == {"image": "feature", "text": "feature"}
    paper = DMH(8, dam_scaling="feature", random_state=0, **TINY).fit(train)
    assert np.array_equal(auto.codes_, paper.codes_)
    queries = train.text[:10]
    assert np.array_equal(auto.encode(queries, modality="text"), paper.encode(queries, modality="text"))


def test_cle_keeps_its_own_scaling():
    """``cle_scaling="feature"`` standardises every feature for CLE whatever the networks see."""
    train = _sparse_words(_views_with_faint_noise(n=80)).train()
    one_round = dict(TINY, n_rounds=1)
    fits = [DMH(8, cle_scaling="feature", dam_scaling=how, random_state=0, **one_round).fit(train)
            for how in ("feature", "view")]
    assert np.array_equal(fits[0].features_, fits[1].features_)  # CLE's Y of the one round
    assert not np.array_equal(fits[0].scalers_["text"][1], fits[1].scalers_["text"][1])


def test_never_sparse_holds_for_every_subset():
    rng = np.random.default_rng(0)
    dense = rng.normal(size=(50, 20))
    dense[:, :17] = 0.0  # each row 3 of 20 non-zero: 85% zeros, below the 90% of a sparse view
    everyone = np.ones(50, dtype=bool)
    assert never_sparse(dense, everyone)
    for _ in range(200):
        rows = rng.random(50) < rng.uniform(0.05, 1.0)
        assert not rows.any() or not sparse_view(dense, rows)
    mixed = dense.copy()
    mixed[7, 17:19] = 0.0  # one row of one word: a subset holding it alone is sparse
    assert not never_sparse(mixed, everyone) and sparse_view(mixed, np.arange(50) == 7)
    assert never_sparse(mixed, np.arange(50) != 7)  # unless that row is not observed


def test_a_key_holds_auto_at_the_papers_value_where_no_view_can_be_sparse():
    dense = _views_with_faint_noise(n=80)
    sparse = _sparse_words(dense)
    assert DMH.data_inert_options({"dam_scaling": "auto"}, dense.train()) == {"dam_scaling": "feature"}
    assert DMH.data_inert_options({"dam_scaling": "auto"}, sparse.train()) == {}
    fp = {"source": "-", "size": 0, "sha256": "-", "split": "-"}
    cell = dict(dataset="d", fingerprint=fp, method="dmh", n_bits=16, paired_ratio=1.0, seed=0)
    on_dense = make_cell(**cell, params={}, train=dense.train())
    # the default's "auto" on dense data: the key of a result fitted before the option existed
    assert "dam_scaling" not in on_dense["params"]
    assert on_dense["key"] == make_cell(**cell, params={"dam_scaling": "feature"}, train=dense.train())["key"]
    on_sparse = make_cell(**cell, params={}, train=sparse.train())
    assert on_sparse["params"]["dam_scaling"] == "auto" and on_sparse["key"] != on_dense["key"]
    assert "dam_scaling" in make_cell(**cell, params={})["params"]  # without the data nothing is assumed
