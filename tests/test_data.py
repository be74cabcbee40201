import numpy as np
import pytest

from dmh import CrossModalData, load_data, make_semi_paired
from dmh.data import random_split
from dmh.errors import DataFileError, ParameterError


def test_masks_are_explicit_and_missing_rows_zeroed():
    img = np.arange(12, dtype=float).reshape(4, 3)
    txt = np.ones((4, 2))
    txt[1] = np.nan  # allowed: row 1 has no text, so it is never read
    d = CrossModalData(image=img, text=txt, text_mask=[True, False, True, True])
    assert d.n_paired == 3 and d.n_image_only == 1 and d.n_text_only == 0
    assert np.all(d.text[1] == 0)
    assert d.view("text").shape == (3, 2)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(image=np.ones((3, 2)), text=np.ones((4, 2))), "text has 4 rows, expected 3"),
        (dict(image=np.ones(3), text=np.ones((3, 2))), "image must be a 2-D array"),
        (dict(image=np.array([[1.0, np.nan]] * 3), text=np.ones((3, 2))), "NaN"),
        (dict(image=np.ones((3, 2)), text=np.ones((3, 2)), labels=np.ones(4)), "labels must be"),
        (dict(image=np.ones((3, 2)), text=np.ones((3, 2)), image_mask=[1, 0, 1], text_mask=[1, 0, 1]),
         "neither an image nor a text"),
        (dict(image=np.ones((3, 2)), text=np.ones((3, 2)), query_idx=[0, 5]), "outside"),
        (dict(image=np.array([["a", "b"]] * 3), text=np.ones((3, 2))), "numeric"),
    ],
)
def test_bad_input_names_the_problem(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        CrossModalData(**kwargs)


@pytest.mark.parametrize("ratio", [0.0, 0.1, 0.5, 0.93, 1.0])
def test_semi_pairing_keeps_exactly_the_requested_pairs(toy_data, ratio):
    train = toy_data.train()
    n = train.n_objects
    sp = make_semi_paired(train, ratio, random_state=3)
    n_m = int(round(ratio * n))
    assert sp.n_paired == n_m
    assert sp.n_image_only == sp.n_text_only == n - n_m
    assert sp.n_objects == n_m + 2 * (n - n_m)
    # paired objects keep their true correspondence and features
    pm = sp.paired_mask
    assert np.array_equal(sp.image_origin[pm], sp.text_origin[pm])
    assert np.allclose(sp.image[pm], train.image[sp.image_origin[pm]])
    assert np.allclose(sp.text[pm], train.text[sp.text_origin[pm]])
    # every image and every text of the source is used exactly once
    assert np.array_equal(np.sort(sp.image_origin[sp.image_mask]), np.arange(n))
    assert np.array_equal(np.sort(sp.text_origin[sp.text_mask]), np.arange(n))
    # the paper's order: paired, then image-only, then text-only
    assert pm[:n_m].all() and not pm[n_m:].any()
    assert sp.image_mask[n_m : n_m + n - n_m].all() and sp.text_mask[n_m + n - n_m :].all()
    # labels follow their modality
    img_only = sp.image_mask & ~sp.text_mask
    assert np.array_equal(sp.labels[img_only], train.labels[sp.image_origin[img_only]])


def test_semi_pairing_is_seeded(toy_data):
    a = make_semi_paired(toy_data.train(), 0.5, random_state=1)
    b = make_semi_paired(toy_data.train(), 0.5, random_state=1)
    c = make_semi_paired(toy_data.train(), 0.5, random_state=2)
    assert np.array_equal(a.image_origin, b.image_origin) and np.array_equal(a.text_origin, b.text_origin)
    assert not np.array_equal(a.text_origin, c.text_origin)


def test_semi_pairing_rejects_bad_input(toy_data):
    with pytest.raises(ValueError, match="paired_ratio"):
        make_semi_paired(toy_data, 1.5)
    sp = make_semi_paired(toy_data.train(), 0.5, random_state=0)
    with pytest.raises(ValueError, match="fully paired"):
        make_semi_paired(sp, 0.5)


def test_random_split_sizes_and_disjointness():
    train, query, db = random_split(1000, query_size=100, train_size=500, random_state=0)
    assert query.size == 100 and db.size == 900 and train.size == 500
    assert not set(query) & set(db)
    assert set(train) <= set(db)


@pytest.mark.parametrize(("kwargs", "name"), [
    ({"train_size": -1}, "train_size"),  # used to drop one object silently
    ({"train_size": 2.5}, "train_size"),  # used to mean 2
    ({"train_size": 0}, "train_size"),
    ({"query_size": float("nan")}, "query_size"),  # a ValueError from int()
    ({"query_size": "a"}, "query_size"),
    ({"query_size": None}, "query_size"),  # a TypeError from int()
    ({"query_size": True}, "query_size"),
])
def test_random_split_refuses_careless_sizes(kwargs, name):
    with pytest.raises(ParameterError, match=name):
        random_split(100, **kwargs)
    with pytest.raises(ParameterError, match="must be an integer"):
        random_split(None)
    # fractions and whole counts, including integral floats, as documented
    assert random_split(100, query_size=0.25, train_size=1.0)[0].size == 75
    assert random_split(100, query_size=10, train_size=20.0)[0].size == 20


def test_subset_and_splits(toy_data):
    q = toy_data.query()
    assert q.n_objects == 40 and q.labels.shape == (40,)
    assert toy_data.label_matrix().shape == (120, 4)


# ---------------------------------------------------------------- bad input (issue 9)

def _rand_data(n=30, seed=0, **kw):
    rng = np.random.default_rng(seed)
    return CrossModalData(image=rng.normal(size=(n, 5)), text=rng.normal(size=(n, 4)),
                          labels=rng.integers(0, 3, n), **kw)


def _split_file(tmp_path, n=50, **idx):
    rng = np.random.default_rng(1)
    path = tmp_path / "d.npz"
    np.savez(path, image=rng.normal(size=(n, 3)), text=rng.normal(size=(n, 2)), **idx)
    return load_data(path)


def _assert_consistent(d, n=50):
    assert np.intersect1d(d.query_idx, d.train_idx).size == 0, "queries leak into the training set"
    assert np.intersect1d(d.query_idx, d.database_idx).size == 0
    assert np.isin(d.train_idx, d.database_idx).all()
    assert np.union1d(d.query_idx, d.database_idx).size == n, "some objects are in no set"


def test_partial_split_query_only_derives_the_rest(tmp_path):
    d = _split_file(tmp_path, query_idx=np.arange(5, 15))
    assert np.array_equal(d.query_idx, np.arange(5, 15))
    assert np.array_equal(d.database_idx, np.setdiff1d(np.arange(50), np.arange(5, 15)))
    _assert_consistent(d)


def test_partial_split_database_only_and_train_only(tmp_path):
    d = _split_file(tmp_path, database_idx=np.arange(40))
    assert np.array_equal(d.query_idx, np.arange(40, 50))
    _assert_consistent(d)
    d = _split_file(tmp_path, train_idx=np.arange(20))
    assert np.array_equal(d.train_idx, np.arange(20))
    assert d.query_idx.size == 6 and d.query_idx.min() >= 20  # 20% of the 30 objects outside training
    _assert_consistent(d)
    d = _split_file(tmp_path, train_idx=np.arange(10), database_idx=np.arange(30))
    assert np.array_equal(d.query_idx, np.arange(30, 50))


def test_partial_split_refuses_what_cannot_be_derived(tmp_path):
    with pytest.raises(DataFileError, match="none is left for the queries"):
        _split_file(tmp_path, database_idx=np.arange(50))
    with pytest.raises(DataFileError, match="none is left for the database"):
        _split_file(tmp_path, query_idx=np.arange(50))
    with pytest.raises(DataFileError, match="no object for the queries"):
        _split_file(tmp_path, train_idx=np.arange(50))


@pytest.mark.parametrize("ratio", [1.5, float("nan"), -0.1, "a"])
def test_paired_ratio_validation(ratio):
    from dmh import make_semi_paired

    with pytest.raises(ParameterError, match="paired_ratio"):
        make_semi_paired(_rand_data(), ratio)
