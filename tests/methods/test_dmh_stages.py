"""DMH as a composition: one slot per stage, each a component with its own settings, and the flat
keywords every earlier model, config and result cell uses mapped onto the same components."""

import re

import numpy as np
import pytest
from sklearn.base import clone

from dmh import DMH, load_model
from dmh.errors import ParameterError
from dmh.evaluation import full_params
from dmh.methods.dmh import FLAT_DEFAULTS, NESTED
from dmh.methods.dmh_options import ONE_PROBLEM
from dmh.methods.dmh_parts import LLE, SIMILARITIES, Clip, Network, Perplexity, Ridge, SparseRidge, Zero
from dmh.methods.dmh_stages import CLE, DAM, GBE, PCA

TINY = dict(d=8, hidden_size=32, n_rounds=2, dam_epochs=3, random_state=0)


def test_a_component_is_its_flat_keywords():
    by_parts = DMH(16, cle=CLE(complement=LLE(unpaired="neighbours"), max_iter=5),
                   gbe=GBE(similarity=Perplexity(50.0), lr=0.1), dam=DAM(encoder=Ridge(0.5), stop="fixed"))
    flat = DMH(16, unpaired_complement="neighbours", cle_max_iter=5, similarity="perplexity", perplexity=50.0,
               gbe_lr=0.1, encoder="ridge", ridge_weight=0.5, dam_stop="fixed")
    assert by_parts.get_params() == flat.get_params() == clone(by_parts).get_params()
    assert by_parts.similarity == "perplexity" and by_parts.gbe_lr == 0.1  # read as the flat names
    key = {k: v for k, v in by_parts.get_params().items() if k not in ("n_bits", "random_state")}
    assert full_params("dmh", key) == full_params("dmh", {"similarity": "perplexity", "perplexity": 50.0,
                                                          "gbe_lr": 0.1, "unpaired_complement": "neighbours",
                                                          "cle_max_iter": 5, "encoder": "ridge",
                                                          "ridge_weight": 0.5, "dam_stop": "fixed"})


def test_flat_keywords_resolve_onto_the_components_and_win_over_a_slot():
    stages = DMH(similarity="clip", perplexity=30, encoder="auto", complement="zero").stages()
    assert stages.gbe.part("similarity") == Clip() and stages.dam.part("encoder") == SparseRidge(1.0)
    assert stages.cle.part("complement") == Zero()
    assert DMH(gbe=GBE(lr=0.1), gbe_lr=0.2).stages().gbe.lr == 0.2
    assert isinstance(DMH(gbe="pca").stages().gbe, PCA) and DMH(gbe="pca").get_params()["binary_embedding"] == "pca"


def test_presets_fill_the_settings_left_as_none_and_paper_is_a_constructor():
    assert DMH.paper(16).get_params() == DMH(16, preset="paper").get_params()
    paper, default = DMH.paper().stages(), DMH().stages()
    assert paper.gbe.part("similarity") == Clip() and paper.gbe.lr == 0.05 and paper.dam.part("encoder") == Network()
    assert default.gbe.part("similarity") == Perplexity(30.0) and default.cle.part("complement") == LLE("ridge")
    assert DMH(gbe=GBE(similarity="perplexity")).stages().gbe.part("similarity") == Perplexity(30.0)


def test_every_family_member_at_its_defaults_gives_the_family_defaults():
    from dmh.methods.dmh_parts import COMPLEMENTS, ENCODERS, FAMILY_DEFAULTS, SIMILARITIES

    for registry in (SIMILARITIES, COMPLEMENTS, ENCODERS):
        for name, klass in registry.items():
            flat = klass().flat()
            kind = klass._kind
            assert flat.pop(kind) == name
            assert flat.items() <= FAMILY_DEFAULTS.items(), klass


def test_nested_names_set_the_flat_ones():
    # every setting reachable as stage__setting (binary_embedding: the gbe slot's name)
    assert set(NESTED.values()) | {"binary_embedding"} == set(FLAT_DEFAULTS)
    m = DMH().set_params(gbe__lr=0.2, gbe__similarity="perplexity", gbe__similarity__perplexity=40.0,
                         dam__encoder__weight=0.5, cle__max_iter=7, n_rounds=2)
    p = m.get_params()
    assert (p["gbe_lr"], p["similarity"], p["perplexity"], p["ridge_weight"], p["cle_max_iter"], p["n_rounds"]) == \
        (0.2, "perplexity", 40.0, 0.5, 7, 2)
    with pytest.raises(ParameterError, match="no parameter 'gbe__speed'"):
        m.set_params(gbe__speed=1)


def test_bad_settings_are_one_line_errors_naming_them():
    with pytest.raises(ParameterError, match="GBE: lr must be a finite number"):
        GBE(lr=-1.0).check()
    classes = ", ".join(k.__name__ for k in SIMILARITIES.values())  # a similarity added is named there too
    with pytest.raises(ParameterError, match="GBE.similarity must be one of .* or an object of one of their "
                       + re.escape(f"classes ({classes}), got 'cos'")):
        GBE(similarity="cos").check()

    class Mine(Perplexity):  # not a registered class: refused, not silently fitted as Perplexity
        pass

    with pytest.raises(ParameterError, match="GBE.similarity must be one of"):
        DMH(gbe=GBE(similarity=Mine(5.0))).check_hyperparameters()
    with pytest.raises(ParameterError, match="GBE: lr must be"):
        DMH(gbe=GBE(lr=-1.0)).check_hyperparameters()
    with pytest.raises(ParameterError, match="DMH: gbe_lr must be"):
        DMH(gbe=GBE(lr=0.1), gbe_lr=-1.0).check_hyperparameters()
    with pytest.raises(ParameterError, match="gbe must be one of \\('gbe', 'pca'\\)"):
        DMH(gbe="tsne").check_hyperparameters()
    with pytest.raises(ParameterError, match="Perplexity: perplexity must be a finite number in \\(1, inf\\)"):
        DMH(gbe=GBE(similarity=Perplexity(0.5))).check_hyperparameters()
    with pytest.raises(TypeError, match="similarty"):
        DMH(similarty="clip")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.filterwarnings("ignore::dmh.errors.DegenerateCodesWarning")
def test_components_and_flat_keywords_give_the_same_codes_and_files(toy_data, tmp_path):
    train = toy_data.train()
    a = DMH(8, gbe=GBE(similarity=Clip(), max_iter=20), dam=DAM(encoder=Ridge(0.5)), **TINY).fit(train)
    b = DMH(8, similarity="clip", gbe_max_iter=20, encoder="ridge", ridge_weight=0.5, **TINY).fit(train)
    assert np.array_equal(a.codes_, b.codes_)
    assert np.array_equal(a.encode(toy_data.image, "image"), b.encode(toy_data.image, "image"))
    assert a.stages_.gbe.part("similarity") == Clip() and a.stages_ == b.stages_
    loaded = load_model(a.save(tmp_path / "a.npz"))
    assert loaded.get_params() == a.get_params()
    assert np.array_equal(loaded.encode(toy_data.text, "text"), a.encode(toy_data.text, "text"))


def test_gbe_in_blocks_is_short_problems_side_by_side_and_one_block_is_the_one_problem():
    from dmh.data import make_semi_paired
    from dmh.datasets import load_dataset

    data = make_semi_paired(load_dataset("uci-digits").train().subset(np.arange(200)), 1.0, random_state=0)
    one = DMH(16, gbe_block_bits=ONE_PROBLEM, **TINY).fit(data)
    assert np.array_equal(DMH(16, gbe_block_bits=16, **TINY).fit(data).codes_, one.codes_)  # one block
    assert np.array_equal(DMH(16, **TINY).fit(data).codes_, one.codes_)  # the default's 16, at 16 bits
    blocks = DMH(16, gbe=GBE(block_bits=8), **TINY).fit(data)
    again = DMH(16, gbe_block_bits=8, **TINY).fit(data)
    assert blocks.codes_.shape == (200, 16) and np.array_equal(blocks.codes_, again.codes_)
    assert not np.array_equal(blocks.codes_, one.codes_)
    assert all(len(h) > 0 for h in blocks.history_["gbe"])  # the blocks' summed loss, each round
    assert full_params("dmh", {})["gbe_block_bits"] == 16  # the default preset's
    assert "gbe_block_bits" not in full_params("dmh", {"preset": "paper"})  # one problem: the paper keys stay
    with pytest.raises(ParameterError, match="gbe_block_bits|block_bits"):
        DMH(16, gbe_block_bits=0).fit(data)


def test_gbe_in_blocks_saves_and_loads(tmp_path):
    from dmh.data import make_semi_paired
    from dmh.datasets import load_dataset

    data = make_semi_paired(load_dataset("uci-digits").train().subset(np.arange(120)), 1.0, random_state=0)
    model = DMH(12, gbe_block_bits=5, **{**TINY, "n_rounds": 1}).fit(data)
    model.save(tmp_path / "m.npz")
    back = load_model(tmp_path / "m.npz")
    assert back.gbe_block_bits == 5
    x = data.image[:7]
    assert np.array_equal(back.encode(x, modality="image"), model.encode(x, modality="image"))
