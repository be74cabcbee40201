"""The featurizer travels with the data file and the model: round trips, encode_raw, old files."""

from __future__ import annotations

import csv
import json
import warnings

import numpy as np
import pytest

from dmh import CrossModalData
from dmh.featurizer_spec import FEATURIZER_KEY, FeaturizerSpec, MissingExtraWarning, read_featurizer_spec

TEXTS = [
    "a red circle", "a blue square", "a red square", "a green circle", "a blue triangle",
    "red and blue", "the green square", "a small red triangle", "a big blue circle", "green",
]


def _texts_file(tmp_path):
    path = tmp_path / "texts.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["id", "text"])
        for i, t in enumerate(TEXTS):
            w.writerow([f"o{i}", t])
    return path


def test_spec_round_trip_dict_and_array():
    spec = FeaturizerSpec(image=FeaturizerSpec.image_settings("pixels-16"),
                          text=FeaturizerSpec.bow_settings(["blue", "circle", "red"]))
    d = spec.to_dict()
    # the Unicode analyzer of a new bag of words needs a dmh that reads format 2; without a text
    # side a spec stays format 1, which older dmh read
    assert d["format"] == "dmh-featurizer" and d["format_version"] == 2
    assert d["text"]["analyzer"]["name"] == "unicode" and "token_pattern" not in d["text"]
    assert FeaturizerSpec(image=spec.image).to_dict()["format_version"] == 1
    assert d["text"]["vocabulary"] == ["blue", "circle", "red"]
    assert d["image"]["preprocessing"]["center_crop"] == 224
    assert FeaturizerSpec.from_dict(json.loads(json.dumps(d))) == spec
    assert FeaturizerSpec.from_json_array(spec.to_json_array(), "x") == spec
    np.testing.assert_array_equal(spec.text_features(["Red circle, red!", "nothing"]),
                                  [[0, 1, 1], [0, 0, 0]])


def test_spec_rejects_newer_or_broken():
    d = FeaturizerSpec(text=FeaturizerSpec.bow_settings(["a1"])).to_dict()
    with pytest.raises(ValueError, match="newer dmh"):
        FeaturizerSpec.from_dict({**d, "format_version": 99})
    with pytest.raises(ValueError, match="no vocabulary"):
        FeaturizerSpec.from_dict({**d, "text": {"model": "bow"}})
    with pytest.raises(ValueError, match="not dmh featurizer"):
        FeaturizerSpec.from_dict({"format": "other"})


def test_featurize_file_to_fitted_model_to_encode_raw(tmp_path):
    """dmh featurize -> data file holds the vocabulary -> dmh fit keeps it -> encode_raw of the
    raw texts gives exactly the codes of the stored features."""
    from dmh import featurize as fz
    from dmh.base import load_model
    from dmh.cli import main
    from dmh.io import load_data

    data, report = fz.featurize(texts=_texts_file(tmp_path), progress=False)
    path, side = fz.write_featurized(data, report, tmp_path / "d.npz")
    spec = read_featurizer_spec(path)
    assert spec.text["vocabulary"] == report.vocabulary and spec.image is None
    assert json.loads(side.read_text())["featurizer"] == spec.to_dict()
    loaded = load_data(path)  # the extra key does not disturb the generic layout
    np.testing.assert_array_equal(loaded.text, data.text)
    np.testing.assert_array_equal(spec.text_features(TEXTS), data.text)

    # texts only cannot train a cross-modal model: add image features to the same file
    rng = np.random.default_rng(0)
    both = CrossModalData(image=rng.normal(size=(len(TEXTS), 6)), text=data.text)
    from dmh.io import save_data

    save_data(both, tmp_path / "both.npz", extra={FEATURIZER_KEY: spec.to_json_array()})
    assert main(["fit", str(tmp_path / "both.npz"), "--method", "cvh", "--bits", "8", "--all-rows",
                 "--out", str(tmp_path / "m.npz")]) == 0
    model = load_model(tmp_path / "m.npz")
    assert model.featurizer_ == spec
    np.testing.assert_array_equal(model.encode_raw(texts=TEXTS), model.encode(data.text, modality="text"))
    np.testing.assert_array_equal(model.encode_raw(texts="a red circle"), model.encode(data.text[:1], "text"))
    with pytest.raises(ValueError, match="not fitted on image features made by dmh"):
        model.encode_raw(images=[tmp_path / "x.png"])
    with pytest.raises(ValueError, match="exactly one"):
        model.encode_raw()


def test_images_path_and_pil_agree(tmp_path):
    from dmh.datasets.shapes import draw_shape

    spec = FeaturizerSpec(image=FeaturizerSpec.image_settings("pixels-16"))
    im = draw_shape("square", "blue", rng=0)
    im.save(tmp_path / "a.png")
    a, b = spec.image_features([tmp_path / "a.png"]), spec.image_features([im])
    assert a.shape == (1, 768)
    np.testing.assert_allclose(a, b)
    (tmp_path / "bad.png").write_bytes(b"not a png")
    with pytest.raises(ValueError, match="bad.png"):
        spec.image_features([tmp_path / "bad.png"])
    with pytest.raises(FileNotFoundError, match="missing.png"):
        spec.image_features([tmp_path / "missing.png"])


def test_old_model_without_featurizer_loads(toy_data, tmp_path):
    from dmh.base import load_model
    from dmh.baselines.cvh import CVH

    CVH(n_bits=8, random_state=0).fit(toy_data).save(tmp_path / "old.npz")
    model = load_model(tmp_path / "old.npz")
    assert getattr(model, "featurizer_", None) is None
    with pytest.raises(ValueError, match="does not know how its inputs were featurized"):
        model.encode_raw(texts=["x"])
    assert read_featurizer_spec(tmp_path / "old.npz") is None


def test_missing_extra_is_named_on_load_and_on_use(toy_data, tmp_path, monkeypatch):
    import importlib.util

    from dmh.base import load_model
    from dmh.baselines.cvh import CVH
    from dmh.featurize import MissingExtraError

    model = CVH(n_bits=8, random_state=0).fit(toy_data)
    model.featurizer_ = FeaturizerSpec(image=FeaturizerSpec.image_settings("efficientnet-lite0"))
    model.save(tmp_path / "m.npz")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name.startswith("efficientnet") else real(name, *a))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loaded = load_model(tmp_path / "m.npz")
    msgs = [str(w.message) for w in caught if issubclass(w.category, MissingExtraWarning)]
    assert msgs and 'pip install "dmh[images]"' in msgs[0]
    with pytest.raises(MissingExtraError, match=r'pip install "dmh\[images\]"'):
        loaded.encode_raw(images=[tmp_path / "x.jpg"])
