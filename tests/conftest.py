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
