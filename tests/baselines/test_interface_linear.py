"""CVH, IMH and CMFH beyond the checks every method passes (tests/test_testing.py): their errors,
which objects each trains on, and a check on the shared Wikipedia data (skipped where it is absent);
retrieval above chance on the shipped UCI digits: tests/test_above_chance.py."""


import numpy as np
import pytest

import dmh
from dmh import CrossModalData, make_semi_paired
from dmh.baselines.cmfh import CMFH
from dmh.baselines.cvh import CVH
from dmh.baselines.imh import IMH

from ..conftest import requires_file
from .linear_toys import CLASSES, WIKI, _data, _fit, _views


# ---------------------------------------------------------------------- errors and training sets
@pytest.mark.parametrize("name", sorted(CLASSES))
def test_no_paired_object_is_an_error(name):
    image, text, _ = _views(n=40)
    half = np.arange(40) < 20  # first half image-only, second half text-only
    data = CrossModalData(image=image, text=text, image_mask=half, text_mask=~half)
    with pytest.raises(ValueError, match="paired objects"):
        CLASSES[name](4).fit(data)


def test_cvh_needs_more_paired_objects_than_bits():
    data = _data(n=8)
    with pytest.raises(ValueError, match=r"needs at least 9 of them \(8 bits from centred views need more paired"):
        CVH(8).fit(data)
    CVH(7).fit(data)  # 8 > 7 is enough
    with pytest.raises(ValueError, match="at most d_image"):
        CVH(30).fit(_data(n=60, d1=12, d2=9))


def test_imh_needs_more_images_than_bits():
    image, text, _ = _views(n=30)
    image_mask = np.arange(30) < 6  # 6 images (all paired), 30 texts
    data = CrossModalData(image=image, text=text, image_mask=image_mask)
    with pytest.raises(ValueError, match="more observed images than bits"):
        IMH(6).fit(data)
    IMH(5).fit(data)


def test_cmfh_fits_with_fewer_pairs_than_bits_as_documented():
    model = _fit("cmfh", _data(n=5), n_bits=8)
    assert model.projections_["image"].shape == (12, 8)


def test_paired_only_methods_ignore_unpaired_objects():
    image, text, y = _views(n=80)
    paired = CrossModalData(image=image[:50], text=text[:50])
    rng = np.random.default_rng(1)
    extra_img = rng.normal(size=(30, image.shape[1]))
    extra_txt = rng.normal(size=(30, text.shape[1]))
    both = CrossModalData(
        image=np.vstack([image[:50], extra_img, np.zeros_like(extra_img)]),
        text=np.vstack([text[:50], np.zeros_like(extra_txt), extra_txt]),
        image_mask=np.r_[np.ones(80, bool), np.zeros(30, bool)],
        text_mask=np.r_[np.ones(50, bool), np.zeros(30, bool), np.ones(30, bool)],
    )
    for name in ("cvh", "cmfh"):
        a, b = _fit(name, paired), _fit(name, both)
        np.testing.assert_array_equal(a.encode(image, "image"), b.encode(image, "image"))
        np.testing.assert_array_equal(a.encode(text, "text"), b.encode(text, "text"))


def test_imh_uses_unpaired_objects():
    semi = make_semi_paired(_data(n=80), 0.5, random_state=0)
    assert semi.n_image_only > 0
    base = _fit("imh", semi)
    image = semi.image.copy()
    image[semi.image_mask & ~semi.text_mask] += 3.0  # move the image-only objects
    moved = CrossModalData(image=image, text=semi.text, image_mask=semi.image_mask,
                           text_mask=semi.text_mask)
    changed = _fit("imh", moved)
    assert not np.allclose(base.projections_["image"], changed.projections_["image"])


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_training_means_are_stored_and_used(name):
    data = _data()
    model = _fit(name, data)
    np.testing.assert_allclose(model.means_["image"], data.image.mean(0))
    np.testing.assert_allclose(model.means_["text"], data.text.mean(0))
    # projections of the training views are zero-mean: the fit-time mean is subtracted
    np.testing.assert_allclose(model.project(data.image, "image").mean(0), 0, atol=1e-10)


# ---------------------------------------------------------------------- real data
def _map_both(model, q, db):
    mp = dmh.mean_average_precision
    return (mp(model.encode(q.image, "image"), model.encode(db.text, "text"), q.labels, db.labels),
            mp(model.encode(q.text, "text"), model.encode(db.image, "image"), q.labels, db.labels))


@requires_file(WIKI)
def test_wiki_cvh_and_cmfh_beat_chance():
    data = dmh.load_dataset(WIKI)
    tr, q, db = data.train(), data.query(), data.database()
    # random codes give about sum_c p_c^2 ~ 0.11 on Wikipedia's 10 classes
    i2t, t2i = _map_both(CVH(16).fit(tr), q, db)
    assert i2t > 0.13 and t2i > 0.13
    i2t, t2i = _map_both(CMFH(16, random_state=0).fit(tr), q, db)
    assert i2t > 0.18 and t2i > 0.16
