from pathlib import Path

import numpy as np
import pytest

SHARED_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
WIKI = SHARED_DATA / "wiki" / "wiki_data.mat"


def requires_file(path: Path):
    return pytest.mark.skipif(not path.exists(), reason=f"real data file absent: {path}")


@pytest.fixture
def toy_data():
    """Two noisy views of 4 clusters, fully paired, with class labels and a split."""
    from dmh import CrossModalData

    rng = np.random.default_rng(0)
    n, c = 120, 4
    y = np.repeat(np.arange(c), n // c)
    centers_i = rng.normal(size=(c, 12)) * 3
    centers_t = rng.normal(size=(c, 9)) * 3
    image = centers_i[y] + rng.normal(size=(n, 12))
    text = centers_t[y] + rng.normal(size=(n, 9))
    idx = rng.permutation(n)
    return CrossModalData(
        image=image, text=text, labels=y, train_idx=np.sort(idx[:80]), query_idx=np.sort(idx[80:]),
        database_idx=np.sort(idx[:80]), name="toy",
    )


def build_shapes_collection(root: Path, n: int = 48, **kwargs) -> Path:
    """A small collection of generated shape photos (3 in 4 captioned, plus 4 captions without a
    photo), CVH 16 bits on pixels-16 image features: seconds to build."""
    import os

    from dmh.collection import build_collection
    from dmh.datasets.shapes import make_shapes

    photos, captions = make_shapes(root / "photos", n, caption_ratio=0.75, extra_captions=4)
    os.replace(captions, root / "captions.csv")
    settings = {"method": "cvh", "n_bits": 16, "image_model": "pixels-16", "progress": False, "log": lambda m: None}
    settings.update(kwargs)
    return build_collection(photos, root / "captions.csv", root / "col", **settings)


@pytest.fixture(scope="session")
def shapes_collection(tmp_path_factory):
    """A built shapes collection (read-only for tests) and, beside it, ``query.png``: a shape
    photo that is not in the collection."""
    from dmh.datasets.shapes import draw_shape

    root = tmp_path_factory.mktemp("shapes")
    col = build_shapes_collection(root)
    draw_shape("circle", "red", "centre", rng=123).save(root / "query.png")
    return col
