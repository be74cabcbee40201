"""Benchmark loaders: real MIRFLICKR text/labels (skipped without ../shared/data) and synthetic
folders written in the community's exact formats (scipy v5 and h5py v7.3-style files)."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import scipy.io as sio

import dmh
from dmh.datasets import benchmarks as bm

from ..conftest import needs, skip_unless

SHARED = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
MIR = SHARED / "mirflickr25k_text_labels"
needs_mir = skip_unless(
    (MIR / "mirflickr25k-yall.mat").is_file(), "shared-data",
    f"real MIRFLICKR text/labels not found at {MIR} (shared data absent)",
)


def _needs(path: Path):
    if not path.exists():
        needs("shared-data", f"real data not found at {path} (shared data absent)")


# ------------------------------------------------------------------------------ real data
@needs_mir
def test_real_mirflickr_text_labels_shapes_and_row_order():
    text, labels = bm.load_text_labels("mirflickr25k", MIR)
    assert text.shape == (20015, 1386)
    assert labels.shape == (20015, 24)
    # Row order: rebuilding YAll / LAll from the raw per-image tag and label lines reproduces them.
    vocab = (MIR / "yall_column_vocab_DERIVED.txt").read_text(encoding="utf-8").split("\n")[:1386]
    column = {t: j for j, t in enumerate(vocab)}
    lines = (MIR / "all_tags.txt").read_text(encoding="utf-8").splitlines()
    rebuilt = np.zeros_like(text)
    for i, line in enumerate(lines):
        for tag in line.split(","):
            if tag.strip() in column:
                rebuilt[i, column[tag.strip()]] = 1
    np.testing.assert_array_equal(rebuilt, text)
    names = (MIR / "lall_column_names_DERIVED.txt").read_text().split()
    rebuilt = np.zeros_like(labels)
    for i, line in enumerate((MIR / "labels_annotation.txt").read_text().splitlines()):
        for name in filter(None, (s.strip() for s in line.split(","))):
            rebuilt[i, names.index(name)] = 1
    np.testing.assert_array_equal(rebuilt, labels)
    assert labels.sum(0)[:4].tolist() == [2647, 179, 644, 986]


@needs_mir
def test_real_mirflickr_without_images_names_the_missing_file():
    with pytest.raises(FileNotFoundError) as err:
        bm.load_benchmark("mirflickr25k", MIR)
    msg = str(err.value)
    assert "mirflickr25k-iall-vgg.mat" in msg and "'XAll'" in msg and "(20015, 4096)" in msg
    assert "load_text_labels" in msg  # points to what can be loaded
    with pytest.raises(FileNotFoundError, match="iall-vgg"):
        dmh.load_dataset(f"mirflickr25k:{MIR}")
    with pytest.raises(FileNotFoundError, match="iall-vgg"):
        dmh.load_dataset(str(MIR))  # a folder is recognised by its files
    assert bm.detect_benchmark(MIR) == "mirflickr25k"


def test_toolkit_benchmarks_by_name():
    _needs(SHARED / "wiki" / "wiki_data.mat")
    wiki = dmh.load_dataset(f"wiki:{SHARED / 'wiki'}")
    assert (wiki.query_idx.size, wiki.train_idx.size, wiki.database_idx.size) == (693, 2173, 2173)
    assert wiki.name == "wiki" and wiki.n_features == {"image": 128, "text": 10}
    _needs(SHARED / "uci_handwritten" / "uci_all.mat")
    uci = dmh.load_dataset(f"uci-digits:{SHARED / 'uci_handwritten'}")
    assert (uci.query_idx.size, uci.train_idx.size, uci.n_objects) == (500, 1500, 2000)


def test_medpix_folder():
    """The fourth development set, once it is among the shared data (research/build_medpix.py)."""
    _needs(SHARED / "medpix" / "medpix_effl0.npz")
    data = dmh.load_dataset(f"medpix:{SHARED / 'medpix'}")
    assert (data.n_objects, data.query_idx.size, data.train_idx.size) == (2050, 397, 1653)
    assert data.database_idx.tolist() == data.train_idx.tolist()
    assert data.n_features == {"image": 1280, "text": 2000} and data.labels.max() == 4


# ------------------------------------------------------------------------------ synthetic
def test_generic_data_file_keeps_its_split(tmp_path):
    rng = np.random.default_rng(0)
    n = 40
    split = {"train_idx": np.arange(30), "query_idx": np.arange(30, 40), "database_idx": np.arange(30)}
    np.savez(tmp_path / "medpix_effl0.npz", image=rng.standard_normal((n, 5)), text=rng.random((n, 3)) < 0.5,
             labels=rng.integers(0, 5, n), **split)
    for spec in (f"medpix:{tmp_path}", str(tmp_path), f"medpix:{tmp_path / 'medpix_effl0.npz'}"):
        data = dmh.load_dataset(spec)
        assert data.name == "medpix" and data.query_idx.tolist() == list(range(30, 40))
        assert data.train_idx.tolist() == data.database_idx.tolist() == list(range(30))
    (tmp_path / "medpix_effl0.npz").rename(tmp_path / "other.npz")
    with pytest.raises(FileNotFoundError, match="lacks medpix_effl0.npz: it should hold dmh's generic layout"):
        dmh.load_dataset(f"medpix:{tmp_path}")
    with pytest.raises(dmh.errors.ParameterError, match=r"medpix has no random split.*medpix_effl0\.npz"):
        bm.benchmark_split("medpix", 40)


def _mir_arrays(n=20015, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 6)).astype(np.float32)
    y = (rng.random((n, 5)) < 0.3).astype(np.uint8)
    lab = (rng.random((n, 4)) < 0.4).astype(np.uint8)
    lab[lab.sum(1) == 0, 0] = 1
    return x, y, lab


def _write_v73(path: Path, arrays: dict, matlab_order=True):
    """A MATLAB v7.3-style file: HDF5 with a 512-byte user block, arrays column-major."""
    with h5py.File(path, "w", userblock_size=512) as f:
        for key, arr in arrays.items():
            f.create_dataset(key, data=arr.T if matlab_order else arr)
    with open(path, "r+b") as fh:
        header = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: dmh test HDF5 schema 1.00 ."
        fh.write(header.ljust(116))


@pytest.fixture(scope="module")
def mir_folder(tmp_path_factory):
    folder = tmp_path_factory.mktemp("mir")
    x, y, lab = _mir_arrays()
    _write_v73(folder / "mirflickr25k-iall-vgg.mat", {"XAll": x})  # the large file: v7.3
    sio.savemat(folder / "mirflickr25k-yall.mat", {"YAll": y})
    sio.savemat(folder / "mirflickr25k-lall.mat", {"LAll": lab})
    return folder, (x, y, lab)


def test_mirflickr_community_files_paper_split(mir_folder):
    folder, (x, y, lab) = mir_folder
    data = dmh.load_dataset(f"mirflickr25k:{folder}")
    np.testing.assert_array_equal(
        data.image, x.astype(np.float64)
    )  # v7.3 transposed back, order kept
    np.testing.assert_array_equal(data.text, y)
    np.testing.assert_array_equal(data.labels, lab)
    q, db, tr = data.query_idx, data.database_idx, data.train_idx
    assert (q.size, db.size, tr.size) == (2000, 18015, 10000)
    assert np.intersect1d(q, db).size == 0 and np.union1d(q, db).size == 20015
    assert np.isin(tr, db).all()
    again = bm.load_benchmark("mirflickr25k", folder)
    np.testing.assert_array_equal(again.query_idx, q)  # seeded: same split every time
    other = bm.load_benchmark("mirflickr25k", folder, random_state=1)
    assert not np.array_equal(other.query_idx, q)
    expected = dmh.random_split(20015, query_size=2000, train_size=10_000, random_state=0)
    for got, want in zip((tr, q, db), expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_mirflickr_image_choice_and_raw_images(mir_folder, tmp_path):
    folder, (x, y, lab) = mir_folder
    feats = np.arange(20015 * 3, dtype=np.float64).reshape(20015, 3)
    np.savez(tmp_path / "my_features.npz", XAll=feats)
    data = bm.load_benchmark("mirflickr25k", folder, image=tmp_path / "my_features.npz")
    np.testing.assert_array_equal(data.image, feats)
    with pytest.raises(ValueError, match="CNN"):
        bm.load_benchmark("mirflickr25k", folder, image="raw")
    with pytest.raises(FileNotFoundError, match="neither an image-file choice"):
        bm.load_benchmark("mirflickr25k", folder, image="no-such-file.npz")


def _small_mir(folder: Path, n=2100, files=("x", "y", "l")):
    x, y, lab = _mir_arrays(n, seed=3)
    if "x" in files:
        sio.savemat(folder / "mirflickr25k-iall-vgg.mat", {"XAll": x})
    if "y" in files:
        sio.savemat(folder / "mirflickr25k-yall.mat", {"YAll": y})
    if "l" in files:
        sio.savemat(folder / "mirflickr25k-lall.mat", {"LAll": lab})
    return x, y, lab


def test_missing_label_file_is_named(tmp_path):
    _small_mir(tmp_path, files=("x", "y"))
    with pytest.raises(FileNotFoundError) as err:
        bm.load_benchmark("mirflickr25k", tmp_path)
    assert "mirflickr25k-lall.mat" in str(err.value) and "'LAll'" in str(err.value)
    assert "mirflickr25k-yall.mat" in str(err.value)  # the listing of what the folder holds


def test_dcmh_bundle_hdf5(tmp_path):
    """FLICKR-25K.mat (DCMH): HDF5 with 'images' raw pixels, YAll and LAll stored objects-first."""
    n = 2100
    x, y, lab = _mir_arrays(n, seed=5)
    images = np.zeros((n, 3, 4, 4), dtype=np.uint8)
    _write_v73(
        tmp_path / "FLICKR-25K.mat", {"images": images, "YAll": y, "LAll": lab}, matlab_order=False
    )
    text, labels = bm.load_text_labels("mirflickr25k", tmp_path)
    np.testing.assert_array_equal(text, y)
    np.testing.assert_array_equal(labels, lab)
    with pytest.raises(FileNotFoundError, match="raw images .* need a CNN"):
        bm.load_benchmark("mirflickr25k", tmp_path)
    sio.savemat(tmp_path / "mirflickr25k-iall-vgg.mat", {"XAll": x})
    data = bm.load_benchmark("mirflickr25k", tmp_path)
    np.testing.assert_array_equal(data.text, y)
    np.testing.assert_array_equal(data.image, x.astype(np.float64))
    assert data.query_idx.size == 2000 and data.database_idx.size == 100


def test_disagreeing_row_counts(tmp_path):
    _small_mir(tmp_path, files=("y", "l"))
    sio.savemat(tmp_path / "mirflickr25k-iall-vgg.mat", {"XAll": np.zeros((2000, 6))})
    with pytest.raises(ValueError, match="disagree on the number of objects"):
        bm.load_benchmark("mirflickr25k", tmp_path)


def test_toolkit_file_in_folder(tmp_path):
    rng = np.random.default_rng(0)
    parts = {"tr": 30, "te": 10, "db": 50}
    arrays = {}
    for p, m in parts.items():
        arrays[f"I_{p}"] = rng.standard_normal((m, 4))
        arrays[f"T_{p}"] = rng.standard_normal((m, 3))
        arrays[f"L_{p}"] = (rng.random((m, 2)) < 0.5).astype(np.uint8)
    sio.savemat(tmp_path / "mir_cnn.mat", arrays)
    data = dmh.load_dataset(f"mirflickr25k:{tmp_path}")
    assert (data.train_idx.size, data.query_idx.size, data.database_idx.size) == (30, 10, 50)


def test_nus_wide_and_coco_splits(tmp_path):
    rng = np.random.default_rng(1)
    n = 3000
    nus = tmp_path / "nus"
    nus.mkdir()
    sio.savemat(nus / "nus-wide-tc10-xall-vgg.mat", {"XAll": rng.standard_normal((n, 4))})
    _write_v73(
        nus / "nus-wide-tc10-yall.mat", {"YAll": (rng.random((n, 7)) < 0.2).astype(np.uint8)}
    )
    sio.savemat(
        nus / "nus-wide-tc10-lall.mat", {"LAll": np.eye(10, dtype=np.uint8)[rng.integers(0, 10, n)]}
    )
    data = dmh.load_dataset(str(nus))  # recognised by its files
    assert data.name == "nus-wide-tc10"
    assert (data.query_idx.size, data.train_idx.size, data.database_idx.size) == (2100, 900, 900)
    coco = tmp_path / "coco"
    coco.mkdir()
    n = 5100
    sio.savemat(
        coco / "coco-xall-vgg.mat", {"XAll": rng.standard_normal((n, 4))}
    )  # accepted alternative
    sio.savemat(coco / "coco-yall.mat", {"YAll": (rng.random((n, 9)) < 0.2).astype(np.uint8)})
    sio.savemat(coco / "coco-lall.mat", {"LAll": (rng.random((n, 80)) < 0.05).astype(np.uint8)})
    data = dmh.load_dataset(f"coco:{coco}")
    assert (data.query_idx.size, data.train_idx.size) == (5000, 100)
    with pytest.raises(FileNotFoundError, match="nus-wide-tc21-yall.mat.*'YAll'"):
        bm.load_benchmark("nus-wide", coco)


def test_names_specs_and_descriptions(tmp_path):
    assert bm.parse_benchmark_spec("C:/data/file.mat") is None
    assert bm.parse_benchmark_spec("nus-wide:/d") == ("nus-wide", Path("/d"))
    with pytest.raises(FileNotFoundError, match="mirflickr25k:/path/to/folder"):
        dmh.load_dataset("mirflickr25k")
    with pytest.raises(KeyError, match="unknown benchmark"):
        bm.load_benchmark("imagenet", tmp_path)
    with pytest.raises(FileNotFoundError, match="holds no benchmark file"):
        dmh.load_dataset(str(tmp_path))
    for name, b in bm.BENCHMARKS.items():
        text = bm.describe_benchmark(name)
        assert all(f in text for f in b.known_files()[:3])
    assert "2000 random queries" in bm.describe_benchmark("mirflickr25k")


def test_datasets_command(mir_folder):
    from click.testing import CliRunner

    from dmh.cli.data import datasets

    runner = CliRunner()
    out = runner.invoke(datasets, [])
    assert out.exit_code == 0 and "mirflickr25k" in out.output and "nus-wide-tc10" in out.output
    out = runner.invoke(datasets, ["mscoco"])
    assert out.exit_code == 0 and "mscoco-xall-vgg.mat" in out.output
    out = runner.invoke(datasets, ["medpix"])
    assert out.exit_code == 0 and "medpix_effl0.npz" in out.output and "the split is the file's" in out.output
    out = runner.invoke(datasets, [f"mirflickr25k:{mir_folder[0]}"])
    assert out.exit_code == 0 and "20015 objects" in out.output and "query 2000" in out.output
