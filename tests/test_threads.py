"""One thread setting for torch, BLAS/OpenMP and faiss: applied, restored, precedence, CLI."""

import subprocess
import sys

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import dmh
from dmh import _threads
from dmh._threads import default_threads, resolve_threads, set_threads, thread_limit
from dmh.base import BaseHasher
from dmh.cli import main
from dmh.data import CrossModalData

from .conftest import import_or_skip


def pool_sizes():
    return sorted((p["filepath"], p["num_threads"]) for p in threadpool_info())


@pytest.fixture(autouse=True)
def no_setting(monkeypatch):
    """Every test starts from no process setting and restores the pools it changed."""
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()
    before = {lib.filepath: lib.num_threads for lib in controller.lib_controllers}
    mods = {name: sys.modules.get(name) for name in ("torch", "faiss")}
    torch_before = mods["torch"].get_num_threads() if mods["torch"] else None
    faiss_before = mods["faiss"].omp_get_max_threads() if mods["faiss"] else None
    monkeypatch.setattr(_threads, "_setting", None)
    yield
    _threads._setting = None
    for lib in controller.lib_controllers:  # set_threads leaves its limit in place on purpose
        lib.set_num_threads(before[lib.filepath])
    if torch_before is not None:
        mods["torch"].set_num_threads(torch_before)
    if faiss_before is not None:
        mods["faiss"].omp_set_num_threads(faiss_before)


def test_limit_applied_inside_and_restored_after():
    before = pool_sizes()
    assert before, "no BLAS/OpenMP pool loaded: nothing to check"
    target = 1 if max(n for _, n in before) > 1 else 2
    with thread_limit(target) as n:
        assert n == target
        assert {size for _, size in pool_sizes()} == {target}
    assert pool_sizes() == before


def test_faiss_pool_limited_and_restored():
    faiss = import_or_skip("faiss", "faiss")
    before = faiss.omp_get_max_threads()
    target = 1 if before > 1 else 2
    with thread_limit(target):
        assert faiss.omp_get_max_threads() == target
    assert faiss.omp_get_max_threads() == before


def test_torch_limited_and_restored():
    import torch
    before = torch.get_num_threads()
    target = 1 if before > 1 else 2
    with thread_limit(target, torch=True):
        assert torch.get_num_threads() == target
    assert torch.get_num_threads() == before


def test_a_pool_loaded_after_a_limit_is_limited_too():
    """The pools are looked up again only after imports (a lookup on every search was most of a
    query's time): the pools faiss brings, loaded after a first limit, are in the next limit's view
    and limited there."""
    import_or_skip("faiss", "faiss")
    code = ("import numpy\n"
            "from threadpoolctl import threadpool_info\n"
            "from dmh._threads import _pools, thread_limit\n"
            "with thread_limit(1):\n    pass\n"
            "seen = {lib.filepath for lib in _pools().lib_controllers}\n"
            "import faiss\n"
            "before = {p['filepath']: p['num_threads'] for p in threadpool_info()}\n"
            "assert set(before) - seen, 'faiss brought no pool of its own: nothing to check'\n"
            "target = 1 if max(before.values()) > 1 else 2\n"
            "with thread_limit(target):\n"
            "    inside = {p['filepath']: p['num_threads'] for p in threadpool_info()}\n"
            "    viewed = {lib.filepath for lib in _pools().lib_controllers}\n"
            "assert viewed == set(before), (viewed, set(before))\n"
            "assert inside == dict.fromkeys(before, target), inside\n"
            "assert {p['filepath']: p['num_threads'] for p in threadpool_info()} == before\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_setting_never_imports_torch():
    code = ("import sys, dmh\n"
            "from dmh._threads import thread_limit\n"
            "with thread_limit(1):\n    pass\n"
            "dmh.set_threads(1)\n"
            "from dmh.index import HammingIndex\n"
            "HammingIndex(16).add([[1] * 16, [-1] * 16]).search([[1] * 16], 1)\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_precedence(monkeypatch):
    monkeypatch.delenv("DMH_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    assert default_threads() == _threads.available_cores() >= 1
    monkeypatch.setenv("OMP_NUM_THREADS", "3,2")
    assert resolve_threads() == 3
    monkeypatch.setenv("DMH_THREADS", "5")
    assert resolve_threads() == 5
    set_threads(2)
    assert resolve_threads() == 2 and dmh.get_threads() == 2
    assert resolve_threads(7) == 7
    set_threads(None)
    assert resolve_threads() == 5


@pytest.mark.parametrize("bad", [0, -1, 1.5, "two", True])
def test_bad_values_name_the_problem(bad):
    with pytest.raises(ValueError, match="n_threads must be a positive integer"):
        resolve_threads(bad)


def test_bad_environment_names_the_variable(monkeypatch):
    monkeypatch.setenv("DMH_THREADS", "many")
    with pytest.raises(ValueError, match="DMH_THREADS"):
        default_threads()


class Recorder(BaseHasher):
    """A method whose _fit/_project record the pool sizes they ran under."""

    method_name = "recorder"

    def __init__(self, n_bits=8, n_threads=None):
        self.n_bits = n_bits
        self.n_threads = n_threads

    def _fit(self, data):
        self.seen_fit_ = {size for _, size in pool_sizes()}

    def _project(self, X, modality):
        self.seen_project_ = {size for _, size in pool_sizes()}
        return np.ones((X.shape[0], self.n_bits_))


class NoParam(Recorder):
    def __init__(self, n_bits=8):
        self.n_bits = n_bits


def tiny_data():
    rng = np.random.default_rng(0)
    return CrossModalData(image=rng.normal(size=(6, 3)), text=rng.normal(size=(6, 2)))


def test_estimator_fit_and_encode_run_under_its_n_threads():
    before = pool_sizes()
    model = Recorder(n_threads=1).fit(tiny_data())
    model.encode(np.zeros((2, 3)), "image")
    assert model.seen_fit_ == {1} and model.seen_project_ == {1}
    assert pool_sizes() == before


def test_estimator_without_the_parameter_uses_the_process_setting():
    set_threads(1)
    model = NoParam().fit(tiny_data())
    assert model.seen_fit_ == {1}


def test_dmh_takes_n_threads():
    assert dmh.DMH(n_threads=1).get_params()["n_threads"] == 1


def test_cli_threads_option():
    assert main(["--threads", "1", "info", "uci-digits"]) == 0
    assert dmh.get_threads() == 1


def test_cli_threads_option_rejects_bad_values(capsys):
    assert main(["--threads", "0", "info", "uci-digits"]) == 2
    assert "--threads" in capsys.readouterr().err
