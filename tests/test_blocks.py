"""dmh.BlockHasher: any method fitted as a block code (independent fits side by side)."""

import json
import warnings

import numpy as np
import pytest

import dmh
from dmh import BlockHasher, load_model
from dmh._archive import META_KEY
from dmh.baselines.fsh import FSH
from dmh.blocks import block_sizes, blocks_of
from dmh.errors import ModelFileError, ParameterError
from dmh.testing import CHECKS, FAST_PARAMS, check_hasher

from .conftest import make_toy_data

FAST_FSH = FAST_PARAMS["fsh"]


def _quiet_fit(model, data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # convergence and degenerate-bit warnings of tiny fits
        return model.fit(data)


@pytest.fixture(scope="module")
def fsh_blocks():
    data = make_toy_data()
    return data, _quiet_fit(BlockHasher(FSH(**FAST_FSH), n_bits=16, block_bits=6, random_state=0), data)


def test_block_sizes_are_dmhs():
    """The blocks are cut as DMH(block_bits=...) cuts them: as even as possible, the first longer."""
    from dmh.methods.dmh import block_sizes as dmh_block_sizes

    for n_bits in (1, 7, 16, 33, 64, 128):
        for n_blocks in range(1, n_bits + 1, 5):
            assert block_sizes(n_bits, n_blocks) == dmh_block_sizes(n_bits, n_blocks)
    assert blocks_of(16, 6) == [6, 5, 5] and blocks_of(128, 32) == [32] * 4
    assert blocks_of(64, 64) == blocks_of(64, 100) == blocks_of(64, None) == [64]


def test_codes_are_independently_fitted_clones_side_by_side(fsh_blocks):
    """Each block is the method fitted alone at its bits with a seed drawn from random_state."""
    data, model = fsh_blocks
    seeds = np.random.default_rng(0).integers(2**31, size=3)
    assert model.seeds_ == [int(s) for s in seeds] and [b.n_bits_ for b in model.blocks_] == [6, 5, 5]
    assert model.n_bits_ == 16 and model.method.n_bits == 32  # the wrapped method is left as it was
    for modality in ("image", "text"):
        X = data.view(modality)
        parts = [_quiet_fit(FSH(n, random_state=int(s), **FAST_FSH), data).encode(X, modality)
                 for n, s in zip((6, 5, 5), seeds, strict=True)]
        codes = model.encode(X, modality)
        assert codes.shape == (data.n_objects, 16)
        np.testing.assert_array_equal(codes, np.concatenate(parts, axis=1))
    # the blocks differ from one another (their seeds do): not one fit repeated
    assert not np.array_equal(model.blocks_[1].encode(data.image, "image"),
                              model.blocks_[2].encode(data.image, "image"))


def test_seed_and_bits_default_to_the_wrapped_methods(fsh_blocks):
    """n_bits=None and random_state=None take the wrapped method's; one block is its own fit."""
    data, model = fsh_blocks
    same = _quiet_fit(BlockHasher(FSH(16, random_state=0, **FAST_FSH), block_bits=6), data)
    assert same.n_bits_ == 16 and same.seeds_ == model.seeds_
    np.testing.assert_array_equal(same.encode(data.image, "image"), model.encode(data.image, "image"))
    other = _quiet_fit(BlockHasher(FSH(16, random_state=0, **FAST_FSH), block_bits=6, random_state=1), data)
    assert other.seeds_ != model.seeds_
    alone = _quiet_fit(FSH(8, random_state=3, **FAST_FSH), data)
    for block_bits in (8, 50):
        one = _quiet_fit(BlockHasher(FSH(8, random_state=3, **FAST_FSH), block_bits=block_bits), data)
        assert len(one.blocks_) == 1 and one.seeds_ == [3]
        np.testing.assert_array_equal(one.encode(data.text, "text"), alone.encode(data.text, "text"))


def test_dmh_wrapped_gives_dmh_block_bits_codes():
    """BlockHasher(DMH(64 bits), block_bits=32) is bit for bit DMH(64 bits, block_bits=32)."""
    d = dmh.load_dataset("uci-digits")
    train = d.train().subset(np.arange(300))
    kw = dict(hidden_size=64, d=32, n_rounds=1, dam_epochs=2, n_threads=1)
    built_in = _quiet_fit(dmh.DMH(n_bits=64, block_bits=32, random_state=0, **kw), train)
    wrapped = _quiet_fit(BlockHasher(dmh.DMH(n_bits=64, random_state=0, **kw), block_bits=32), train)
    assert [b.n_bits_ for b in wrapped.blocks_] == [32, 32]
    for modality in ("image", "text"):
        X = d.view(modality)[:200]
        np.testing.assert_array_equal(wrapped.encode(X, modality), built_in.encode(X, modality))


def test_save_load_round_trip(fsh_blocks, tmp_path):
    """load_model gives the wrapper back: the method's class and parameters from the header, each
    block's arrays under block{j}., the same codes."""
    data, model = fsh_blocks
    path = model.save(tmp_path / "blocks.npz")
    with np.load(path) as z:
        meta = json.loads(bytes(z[META_KEY]).decode())
        keys = [k for k in z.files if k != META_KEY]
    assert meta["method"] == "dmh.blocks:BlockHasher"
    assert meta["params"]["method"]["method"] == "fsh" and meta["params"]["method"]["params"]["n_anchors"] == 12
    assert {k.split(".", 1)[0] for k in keys} == {"block0", "block1", "block2"}
    loaded = load_model(path)
    assert type(loaded) is BlockHasher and type(loaded.method) is FSH
    assert loaded.method.get_params() == model.method.get_params() and loaded.block_bits == 6
    assert loaded.seeds_ == model.seeds_ and [b.n_bits_ for b in loaded.blocks_] == [6, 5, 5]
    for modality in ("image", "text"):
        X = data.view(modality)
        np.testing.assert_array_equal(loaded.encode(X, modality), model.encode(X, modality))
        np.testing.assert_allclose(loaded.project(X, modality), model.project(X, modality))


def test_a_wrapper_of_a_wrapper_round_trips(tmp_path):
    """The wrapped method may itself be a wrapper: its header and arrays nest."""
    data = make_toy_data()
    inner = BlockHasher(FSH(**FAST_FSH), block_bits=4)
    model = _quiet_fit(BlockHasher(inner, n_bits=16, block_bits=8, random_state=0), data)
    assert [len(b.blocks_) for b in model.blocks_] == [2, 2]
    loaded = load_model(model.save(tmp_path / "nested.npz"))
    assert type(loaded.method) is BlockHasher and type(loaded.method.method) is FSH
    assert [[c.n_bits_ for c in b.blocks_] for b in loaded.blocks_] == [[4, 4], [4, 4]]
    np.testing.assert_array_equal(loaded.encode(data.image, "image"), model.encode(data.image, "image"))


def _rewrite(path, out, edit):
    with np.load(path) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(bytes(arrays[META_KEY]).decode())
    edit(meta, arrays)
    arrays[META_KEY] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
    np.savez(out, **arrays)
    return out


@pytest.mark.parametrize("edit, match", [
    (lambda m, a: m["params"].update(method="fsh"), "'method' must be an object"),
    (lambda m, a: m["params"]["method"].update(method="no-such-method"), "not available here"),
    (lambda m, a: m["params"]["method"]["params"].update(n_tries=3), "FSH does not have"),
    (lambda m, a: m["params"]["method"]["params"].update(n_anchors=0), "n_anchors"),
    (lambda m, a: m["extra"].update(seeds=[1, 2]), "'seeds' must list one value per block"),
    (lambda m, a: a.pop("block2.objective"), "block2.objective"),
    (lambda m, a: a.update({"block1.image_weights": a["block1.image_weights"][:, :3]}), "block1.image_weights"),
])
def test_a_damaged_file_is_refused_in_one_line(fsh_blocks, tmp_path, edit, match):
    data, model = fsh_blocks
    path = _rewrite(model.save(tmp_path / "m.npz"), tmp_path / "bad.npz", edit)
    with pytest.raises(ModelFileError, match=match) as info:
        load_model(path)
    assert "\n" not in str(info.value) and "bad.npz" in str(info.value)


@pytest.mark.parametrize("method", ["fsh", FSH, None, np.ones(3)])
def test_method_must_be_a_hasher_instance(method):
    """Anything but a BaseHasher instance: one line naming `method`, before the data are read."""
    for model in (BlockHasher(method, n_bits=16), BlockHasher(method)):
        with pytest.raises(ParameterError, match=r"^BlockHasher: method must be a dmh.BaseHasher instance") as info:
            model.fit(np.ones(3))
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("block_bits", [0, -4, 2.5, True, "32", None])
def test_block_bits_must_be_a_positive_integer(block_bits):
    with pytest.raises(ParameterError, match="block_bits must be an integer >= 1") as info:
        BlockHasher(FSH(), block_bits=block_bits).fit(np.ones(3))
    assert "\n" not in str(info.value)


def test_the_methods_own_values_are_checked_at_each_blocks_bits():
    """A bad value of the wrapped method fails before the data, as the method's own fit would."""
    with pytest.raises(ParameterError, match="n_anchors"):
        BlockHasher(FSH(n_anchors=0), n_bits=16).fit(np.ones(3))
    with pytest.raises(ParameterError, match="n_bits"):
        BlockHasher(FSH(), n_bits=0).check_hyperparameters()
    BlockHasher(FSH(), n_bits=64, block_bits=32).check_hyperparameters()


@pytest.mark.parametrize("check", list(CHECKS))
def test_the_wrapper_passes_check_hasher(check):
    check_hasher(BlockHasher(FSH(**FAST_FSH), n_bits=8, block_bits=3, random_state=0), checks=[check])
