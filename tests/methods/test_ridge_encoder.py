"""DMH's ridge encoder (``encoder="ridge"`` / ``"auto"``): the map is ridge regression at the penalty
generalised cross-validation picks, a fitted model encodes through it and saves and loads it, and
``"auto"`` gives it to sparse views only."""
import numpy as np
import pytest
from sklearn.linear_model import Ridge

from dmh import DMH, CrossModalData, load_model
from dmh.errors import ModelFileError
from dmh.methods.ridge_encoder import ALPHAS, fit_ridge_encoder

from .test_dmh import TINY


def _blocks(Z, step):
    return lambda: (Z[s : s + step] for s in range(0, Z.shape[0], step))


def _gcv_by_hand(Z, H, a):
    """GCV from the hat matrix itself: n ||(I - S) Hc||^2 / (n - tr S - 1)^2 (1: the intercept)."""
    n = Z.shape[0]
    Hc = H - H.mean(0)
    S = Z @ np.linalg.solve(Z.T @ Z + a * np.eye(Z.shape[1]), Z.T)
    r = Hc - S @ Hc
    return n * (r * r).sum() / (n - np.trace(S) - 1) ** 2


def test_ridge_encoder_is_ridge_at_the_gcv_penalty():
    rng = np.random.default_rng(0)
    n, d, c = 300, 40, 12
    X = rng.normal(size=(n, d))
    Z = (X - X.mean(0)) / X.std(0)
    H = np.sign(Z @ rng.normal(size=(d, c)) + 2.0 * rng.normal(size=(n, c)))
    enc = fit_ridge_encoder(_blocks(Z, 64), H)  # blocks that do not divide n
    scale = np.linalg.eigvalsh(Z.T @ Z).mean()
    # the chosen penalty is the grid's GCV minimum, computed here from the hat matrix
    gcv = [_gcv_by_hand(Z, H, a * scale) for a in ALPHAS]
    assert enc.alpha == pytest.approx(ALPHAS[int(np.argmin(gcv))])
    assert ALPHAS[0] < enc.alpha < ALPHAS[-1]  # an inner minimum on noisy targets
    # and the map is scikit-learn's ridge at that penalty
    ref = Ridge(alpha=enc.alpha * scale).fit(Z, H)
    np.testing.assert_allclose(enc.outputs(Z), ref.predict(Z), rtol=1e-4, atol=1e-4)


def test_noisier_codes_get_a_larger_penalty():
    rng = np.random.default_rng(1)
    n, d, c = 400, 30, 16
    Z = rng.normal(size=(n, d))
    Z = (Z - Z.mean(0)) / Z.std(0)
    W = rng.normal(size=(d, c))
    clean = fit_ridge_encoder(_blocks(Z, 1000), np.sign(Z @ W))
    noisy = fit_ridge_encoder(_blocks(Z, 1000), np.sign(Z @ W + 6.0 * rng.normal(size=(n, c))))
    assert noisy.alpha > clean.alpha


def test_block_count_mismatch_is_refused():
    Z = np.zeros((10, 3))
    with pytest.raises(ValueError, match="10 rows, the codes 12"):
        fit_ridge_encoder(_blocks(Z, 4), np.ones((12, 2)))


def _sparse_text(toy_data):
    """``toy_data`` with a sparse, binary text view (a bag of words: most entries zero)."""
    T = (toy_data.text > np.quantile(toy_data.text, 0.9, axis=0)).astype(float)
    return CrossModalData(image=toy_data.image, text=T, labels=toy_data.labels,
                          train_idx=toy_data.train_idx, query_idx=toy_data.query_idx,
                          database_idx=toy_data.database_idx)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_auto_gives_sparse_views_the_ridge_and_saves_it(toy_data, tmp_path):
    data = _sparse_text(toy_data)
    train = data.train()
    auto = DMH(8, random_state=0, encoder="auto", **TINY).fit(train)
    assert auto.encoders_ == {"image": "network", "text": "ridge"}
    net = DMH(8, random_state=0, **TINY).fit(train)
    assert net.encoders_ == {"image": "network", "text": "network"}
    # the same fit up to the encoders: the networks and the training codes are those of encoder="network"
    np.testing.assert_array_equal(auto.codes_, net.codes_)
    np.testing.assert_array_equal(auto.encode(data.image, "image"), net.encode(data.image, "image"))
    # the text codes are the ridge map's signs, not the network's
    ridge = auto.ridge_encoders_["text"]
    mu, sd = auto.scalers_["text"]
    expected = np.where(ridge.outputs((data.text - mu) / sd) >= 0, 1, -1)
    np.testing.assert_array_equal(auto.encode(data.text, "text"), expected)
    assert not np.array_equal(auto.encode(data.text, "text"), net.encode(data.text, "text"))
    # saved and loaded: the same codes, the same encoders
    path = auto.save(tmp_path / "m.npz")
    back = load_model(path)
    assert back.encoders_ == auto.encoders_
    assert back.ridge_encoders_["text"].alpha == pytest.approx(ridge.alpha)
    np.testing.assert_array_equal(back.encode(data.text, "text"), auto.encode(data.text, "text"))
    # a file with the header's penalty but not the arrays is refused by name
    arrays = dict(np.load(path))
    del arrays["text_ridge_coef"]
    np.savez(tmp_path / "cut.npz", **arrays)
    with pytest.raises(ModelFileError, match="text_ridge_coef"):
        load_model(tmp_path / "cut.npz")


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_encoder_option_values_presets_and_keys(toy_data):
    from dmh.evaluation import full_params

    assert "encoder" not in full_params("dmh")  # "network", the value of every earlier result
    assert full_params("dmh", {"encoder": "auto"})["encoder"] == "auto"
    assert full_params("dmh", {"preset": "paper"}).get("encoder", "network") == "network"
    both = DMH(8, random_state=0, encoder="ridge", **TINY).fit(toy_data.train())
    assert both.encoders_ == {"image": "ridge", "text": "ridge"}
    dense_auto = DMH(8, random_state=0, encoder="auto", **TINY).fit(toy_data.train())
    assert dense_auto.encoders_ == {"image": "network", "text": "network"}  # the toy's views are dense
    with pytest.raises(ValueError, match="encoder"):
        DMH(encoder="linear").fit(toy_data.train())


def test_ridge_over_a_view_too_wide_is_refused_before_the_fit(toy_data, monkeypatch):
    from dmh.errors import ParameterError
    from dmh.methods import ridge_encoder

    monkeypatch.setattr(ridge_encoder, "MAX_FEATURES", min(toy_data.image.shape[1], toy_data.text.shape[1]) - 1)
    with pytest.raises(ParameterError, match=r"encoder='ridge': the (image|text) view has \d+ features, more than"):
        DMH(8, random_state=0, encoder="ridge", **TINY).fit(toy_data.train())
    data = _sparse_text(toy_data)  # "auto" keeps the network for a sparse view that wide
    assert DMH(8, random_state=0, encoder="auto", **TINY).fit(data.train()).encoders_["text"] == "network"


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
def test_ridge_weight_blends_the_two_outputs(toy_data):
    from dmh.evaluation import full_params

    assert "ridge_weight" not in full_params("dmh")
    data = _sparse_text(toy_data)
    half = DMH(8, random_state=0, encoder="auto", ridge_weight=0.5, **TINY).fit(data.train())
    mu, sd = half.scalers_["text"]
    Z = (data.text - mu) / sd
    from dmh.methods.dam import net_outputs

    expected = 0.5 * half.ridge_encoders_["text"].outputs(Z) + 0.5 * net_outputs(half.nets_["text"], Z)
    np.testing.assert_allclose(half.project(data.text, "text"), expected, rtol=1e-5, atol=1e-6)
    # a view the network encodes is untouched by the weight
    full = DMH(8, random_state=0, encoder="auto", **TINY).fit(data.train())
    np.testing.assert_array_equal(half.project(data.image, "image"), full.project(data.image, "image"))
    with pytest.raises(ValueError, match="ridge_weight"):
        DMH(ridge_weight=0.0).fit(data.train())
