"""The boundary of a method one did not write (issue 56): a class named by ``--method
package.module:Class`` whose outputs have another width than the bits asked for, are not numbers,
not finite or not {-1, +1} codes is stopped where dmh takes them, in one line naming the class and
the call; a class that cannot be fitted (the base class, an abstract one, one that implements
nothing) is refused when it is named, before any data are read; and an option that cannot take
effect says so instead of being ignored."""

from __future__ import annotations

import shutil
import sys
import textwrap

import numpy as np
import pytest

from dmh import save_data
from dmh.cli import main

MODULE = "dmh_boundary_plugins"

PLUGINS = '''
import abc

import numpy as np

from dmh.base import BaseHasher


class _Means(BaseHasher):
    def __init__(self, n_bits=8, *, random_state=None):
        self.n_bits = n_bits
        self.random_state = random_state

    def _fit(self, data):
        self.means_ = {m: data.view(m).mean(0) for m in ("image", "text")}

    def _project(self, X, modality):
        centred = X - self.means_[modality]
        return np.tile(centred, (1, -(-self.n_bits_ // centred.shape[1])))[:, : self.n_bits_]

    def _get_state(self):
        return {f"{m}_mean": v for m, v in self.means_.items()}

    def _set_state(self, state):
        self.means_ = {m: state[f"{m}_mean"] for m in ("image", "text")}


class Good(_Means):
    pass


class Narrow(_Means):  # half the bits asked for
    def _project(self, X, modality):
        return super()._project(X, modality)[:, : self.n_bits_ // 2]


class Words(_Means):
    def _project(self, X, modality):
        return np.full((len(X), self.n_bits_), "a", dtype=object)


class BadCodes(_Means):
    """encode written by hand; what it returns is chosen by the class attribute ``give``."""

    give = "narrow"

    def encode(self, X, modality):
        codes = super().encode(X, modality)
        return {
            "narrow": codes[:, :3],
            "rows": codes[:-1],
            "words": codes.astype(str),
            "nan": np.where(codes > 0, 1.0, np.nan),
            "bits": (codes > 0).astype(np.int8),
            "none": None,
        }[self.give]


class NoProject(BaseHasher):
    def __init__(self, n_bits=8, *, random_state=None):
        self.n_bits = n_bits
        self.random_state = random_state

    def _fit(self, data):
        pass


class Abstract(_Means, metaclass=abc.ABCMeta):
    @abc.abstractmethod
    def extra(self):
        ...


class NeedsArgument(_Means):
    def __init__(self, reg, n_bits=8, *, random_state=None):
        self.reg = reg
        self.n_bits = n_bits
        self.random_state = random_state


class NoSeed(_Means):
    def __init__(self, n_bits=8):
        self.n_bits = n_bits


class NotAHasher:
    pass


def not_a_class():
    pass
'''


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """The plugin module above, importable as ``dmh_boundary_plugins`` (fresh in each test)."""
    folder = tmp_path / "plugins"
    folder.mkdir()
    (folder / f"{MODULE}.py").write_text(textwrap.dedent(PLUGINS), encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    yield folder
    sys.modules.pop(MODULE, None)


@pytest.fixture
def data_file(tmp_path, toy_data):
    return save_data(toy_data, tmp_path / "toy.npz")


def _error(capsys) -> str:
    """The one error line, last on standard error (after a build's progress lines, if any)."""
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines and lines[-1].startswith("Error: ") and sum(x.startswith("Error") for x in lines) == 1, err
    assert "Traceback" not in err
    return lines[-1]


def _no_data(monkeypatch):
    """Reading any data set is a failure of the test: the class must be refused before."""
    import dmh.datasets

    def fail(*args, **kwargs):
        raise AssertionError("data were read before the method was checked")

    monkeypatch.setattr(dmh.datasets, "load_dataset", fail)


def _evaluate(data_file, tmp_path, method, bits="8"):
    return main(["--threads", "1", "evaluate", str(data_file), "--method", f"{MODULE}:{method}", "--bits", bits,
                 "--paired-ratio", "1.0", "--out", str(tmp_path / "r.json")])


# ------------------------------------------------------------------------------ what a method returns
def test_a_valid_plugin_runs(plugins, data_file, tmp_path, capsys):
    assert _evaluate(data_file, tmp_path, "Good") == 0
    assert (tmp_path / "r.json").is_file()


def test_projections_of_another_width_are_refused_not_scored(plugins, data_file, tmp_path, capsys):
    assert _evaluate(data_file, tmp_path, "Narrow", bits="16") == 2
    assert _error(capsys) == (f"Error: method {MODULE}:Narrow: _project(modality='image') returned 8 columns "
                              "for n_bits=16")
    assert not (tmp_path / "r.md").exists()  # no table headed with the wrong bit count


def test_projections_that_are_not_numbers_are_refused(plugins, data_file, tmp_path, capsys):
    assert _evaluate(data_file, tmp_path, "Words") == 2
    assert f"method {MODULE}:Words: _project(modality='image') returned values of dtype object, not numbers" in \
        _error(capsys)


@pytest.mark.parametrize(
    ("give", "message"),
    [
        ("narrow", "returned 3 columns for n_bits=8"),
        ("rows", "rows for"),
        ("words", "returned values of dtype <U"),
        ("nan", "returned NaN or infinite values"),
        ("bits", "returned values other than -1 and +1"),
        ("none", "returned None, not numbers"),
    ],
)
def test_codes_from_a_hand_written_encode_are_checked_by_evaluate(plugins, data_file, tmp_path, capsys, monkeypatch,
                                                                   give, message):
    import dmh_boundary_plugins

    monkeypatch.setattr(dmh_boundary_plugins.BadCodes, "give", give)
    assert _evaluate(data_file, tmp_path, "BadCodes") == 2
    line = _error(capsys)
    assert line.startswith(f"Error: method {MODULE}:BadCodes: encode(modality=") and message in line, line


def test_fit_checks_the_codes_before_it_saves_the_model(plugins, data_file, tmp_path, capsys):
    out = tmp_path / "m.npz"
    assert main(["--threads", "1", "fit", str(data_file), "--method", f"{MODULE}:BadCodes", "--bits", "8",
                 "--out", str(out)]) == 2
    assert f"method {MODULE}:BadCodes: encode(modality='image') returned 3 columns for n_bits=8" in _error(capsys)
    assert not out.exists()


def test_encode_and_search_check_the_codes_of_a_saved_model(plugins, data_file, tmp_path, capsys, monkeypatch,
                                                            toy_data):
    import dmh_boundary_plugins

    model = dmh_boundary_plugins.BadCodes(n_bits=8, random_state=0).fit(toy_data.train())
    model.save(tmp_path / "m.npz")  # the library's fit takes no codes: the commands must check them
    monkeypatch.setattr(dmh_boundary_plugins.BadCodes, "give", "bits")
    codes = tmp_path / "c.npz"
    assert main(["encode", str(tmp_path / "m.npz"), str(data_file), "--modality", "text", "--out", str(codes)]) == 2
    assert f"method {MODULE}:BadCodes: encode(modality='text') returned values other than -1 and +1" in \
        _error(capsys)
    assert not codes.exists()
    from dmh.index import HammingIndex

    index = HammingIndex(8).add(np.where(np.arange(16).reshape(2, 8) % 3, 1, -1))
    index.save(tmp_path / "i.dmhidx")
    assert main(["search", str(tmp_path / "i.dmhidx"), "--model", str(tmp_path / "m.npz"), "--data", str(data_file),
                 "--modality", "image", "--k", "1"]) == 2
    assert "encode(modality='image') returned values other than -1 and +1" in _error(capsys)


def test_tune_checks_the_codes(plugins, data_file, tmp_path, capsys):
    assert main(["--threads", "1", "tune", str(data_file), "--method", f"{MODULE}:BadCodes", "--bits", "8",
                 "--out", str(tmp_path / "t.json")]) == 2
    assert f"method {MODULE}:BadCodes: encode(modality=" in _error(capsys)


def test_build_checks_the_projections(plugins, tmp_path, capsys):
    from dmh.datasets.shapes import make_shapes

    photos, captions = make_shapes(tmp_path / "photos", 12, caption_ratio=1.0)
    assert main(["--threads", "1", "build", str(photos), str(captions), "-o", str(tmp_path / "col"), "--method",
                 f"{MODULE}:Narrow", "--bits", "8", "--image-model", "pixels-16", "--no-progress"]) == 2
    assert f"method {MODULE}:Narrow: _project(modality=" in _error(capsys)


# ------------------------------------------------------------------------- what cannot be a method
@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("dmh.base:BaseHasher", "BaseHasher is the base class every method derives from"),
        (f"{MODULE}:Abstract", "Abstract is abstract (it leaves extra unimplemented)"),
        (f"{MODULE}:NoProject", "NoProject does not implement _project"),
        (f"{MODULE}:_Means.__init__", "is a function, not a dmh.BaseHasher subclass"),
        (f"{MODULE}:not_a_class", "'not_a_class' is a function, not a dmh.BaseHasher subclass"),
        (f"{MODULE}:NotAHasher", "'NotAHasher' is not a subclass of dmh.BaseHasher"),
        (f"{MODULE}:NeedsArgument", "NeedsArgument needs reg to be made"),
        (f"{MODULE}:NoSeed", "NoSeed.__init__ takes no random_state"),
    ],
)
@pytest.mark.parametrize("command", ["evaluate", "fit", "tune"])
def test_a_class_that_cannot_be_fitted_is_refused_before_the_data(plugins, data_file, tmp_path, capsys, monkeypatch,
                                                                   spec, message, command):
    _no_data(monkeypatch)
    out = tmp_path / ("m.npz" if command == "fit" else "r.json")
    extra = ["--paired-ratio", "1.0"] if command == "evaluate" else []
    assert main([command, str(data_file), "--method", spec, "--bits", "8", *extra, "--out", str(out)]) == 2
    line = _error(capsys)
    assert spec in line and message in line, line
    assert not out.exists()


def test_build_refuses_the_base_class_before_reading_photos(plugins, tmp_path, capsys):
    photos = tmp_path / "photos"
    photos.mkdir()  # empty: reading it would be another error
    (tmp_path / "captions.csv").write_text("image,caption\n")
    assert main(["build", str(photos), str(tmp_path / "captions.csv"), "-o", str(tmp_path / "col"), "--method",
                 "dmh.base:BaseHasher", "--bits", "8", "--no-progress"]) == 2
    assert "BaseHasher is the base class every method derives from" in _error(capsys)
    assert not (tmp_path / "col").exists()


# --------------------------------------------------------------------- options that cannot take effect
@pytest.fixture
def collection_without_values(tmp_path, shapes_collection):
    """The shared shapes collection as a dmh from before re-ranking wrote it: no stored values."""
    from dmh.index import load_codes, save_codes

    old = tmp_path / "old"
    shutil.copytree(shapes_collection, old)
    for name in ("image_codes.npz", "text_codes.npz"):
        codes, ids = load_codes(old / name)
        save_codes(old / name, codes, ids, modality=name.split("_")[0])
    return old


def test_rerank_on_a_collection_without_values_is_an_error(collection_without_values, capsys):
    query = ["search", str(collection_without_values), "--text", "a red circle", "--k", "3", "--format", "json"]
    assert main([*query, "--rerank"]) == 2
    line = _error(capsys)
    assert line.startswith(f"Error: --rerank: {collection_without_values} keeps no real values"), line
    assert main(query) == 0 and main([*query, "--no-rerank"]) == 0  # Hamming distance alone, as it can


def test_rerank_on_a_collection_with_values_works(shapes_collection, capsys):
    assert main(["search", str(shapes_collection), "--text", "a red circle", "--k", "3", "--rerank"]) == 0


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--backend", "numpy"], "--backend apply to an index file, not to a collection"),
        (["--rows", "train"], "--rows apply to an index file, not to a collection"),
        (["--collection", "other"], "--collection apply to an index file, not to a collection"),
    ],
)
def test_index_options_on_a_collection_are_refused(shapes_collection, capsys, options, message):
    assert main(["search", str(shapes_collection), "--text", "a red circle", *options]) == 2
    assert message in _error(capsys)


@pytest.fixture
def index_and_codes(tmp_path):
    from dmh.index import HammingIndex, save_codes

    codes = np.where(np.random.default_rng(0).random((6, 8)) > 0.5, 1, -1).astype(np.int8)
    HammingIndex(8).add(codes).save(tmp_path / "i.dmhidx")
    save_codes(tmp_path / "q.npz", codes[:2], np.arange(2))
    return tmp_path / "i.dmhidx", tmp_path / "q.npz"


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--target", "texts"], "--target has no effect on an index"),
        (["--rows", "train"], "--rows has no effect with --codes"),
        (["--collection", "mine"], "--collection has no effect on an index file"),
    ],
)
def test_collection_options_on_an_index_are_refused(index_and_codes, capsys, options, message):
    index, codes = index_and_codes
    assert main(["search", str(index), "--codes", str(codes), "--k", "2", *options]) == 2
    assert message in _error(capsys)
    assert main(["search", str(index), "--codes", str(codes), "--k", "2"]) == 0


def test_ray_tuning_without_ray_is_refused(data_file, tmp_path, capsys, toy_data):
    from dmh.registry import make_method

    model = make_method("cvh", n_bits=8, random_state=0).fit(toy_data.train())
    model.save(tmp_path / "m.npz")
    base = ["encode", str(tmp_path / "m.npz"), str(data_file), "--modality", "text", "--out", str(tmp_path / "c.npz")]
    assert main([*base, "--ray-cpus", "2", "--ray-batch-size", "8"]) == 2
    assert "--ray-batch-size, --ray-cpus have no effect without --ray" in _error(capsys)
    assert not (tmp_path / "c.npz").exists()
    assert main(base) == 0


def test_milvus_options_on_a_local_index_are_refused(index_and_codes, tmp_path, capsys):
    _, codes = index_and_codes
    out = tmp_path / "j.dmhidx"
    assert main(["index", str(codes), "--out", str(out), "--milvus-index", "ivf", "--replace"]) == 2
    assert "--milvus-index, --replace have no effect on a local index" in _error(capsys)
    assert not out.exists()
    assert main(["index", str(codes), "--out", str(out)]) == 0


def test_run_options_with_reproduce_list_are_refused(tmp_path, capsys):
    assert main(["reproduce", "--list", "--bits", "16", "--out", str(tmp_path / "r")]) == 2
    assert "--out, --bits have no effect with --list" in _error(capsys)
    assert main(["reproduce", "--list"]) == 0 and not (tmp_path / "r").exists()
