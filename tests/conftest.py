"""Fixtures shared by the tests, and what a skip may mean.

A test that cannot run here skips through :func:`needs`, :func:`import_or_skip` or
:func:`skip_unless`, naming the thing it needs: an extra of pyproject.toml (``images``, ``onnx``,
``serve``, ``text``, ``ray``, ``milvus``, ``test``), ``faiss``, ``chromium`` (headless Chromium and its
driver), ``cuda`` (a GPU torch sees), ``non-root`` (a user whom file permissions bind) or
``shared-data`` (``../shared``). The reason then ends with ``[needs: NAME]`` (``pytest -rs`` lists them).

``DMH_REQUIRE=NAME,NAME,...`` (``.ci/run`` sets it) says what this run has: a skip for a thing it
names fails instead, and so does any skip that names nothing. Without it, skips stay skips.

Tests marked ``cuda`` run where torch sees a GPU and skip elsewhere; the summary says how many ran.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import numpy as np
import pytest

# Under pytest-xdist (pyproject.toml runs the suite on two workers) each worker is one process of
# one thread: two processes of the machine's full pool each would thrash two cores. A DMH_THREADS
# set by the caller stays.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.setdefault("DMH_THREADS", "1")

SHARED_DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
WIKI = SHARED_DATA / "wiki" / "wiki_data.mat"

#: the things a skip may name (see the module's docstring)
NEEDS = ("images", "onnx", "serve", "text", "multilingual", "thai", "ray", "milvus", "test", "bench", "faiss",
         "chromium", "cuda", "non-root", "shared-data")


def _required() -> frozenset[str]:
    names = frozenset(n.strip() for n in os.environ.get("DMH_REQUIRE", "").split(",") if n.strip())
    unknown = sorted(names - set(NEEDS))
    if unknown:
        raise pytest.UsageError(f"DMH_REQUIRE names {unknown}, not among {', '.join(NEEDS)}")
    return names


REQUIRED = _required()
_TAG = " [needs: "


def _tagged(what: str, reason: str) -> str:
    if what not in NEEDS:
        raise ValueError(f"unknown need {what!r}; one of {NEEDS}")
    return f"{reason}{_TAG}{what}]"


def needs(what: str, reason: str):
    """Skip the running test (or module, at its top) because ``what`` is missing: ``reason`` says
    what and how to get it. Where ``DMH_REQUIRE`` names ``what``, the skip is a failure."""
    pytest.skip(_tagged(what, reason), allow_module_level=True)


def skip_unless(condition: bool, what: str, reason: str):
    """A ``skipif`` marker: the test skips, naming ``what``, where ``condition`` is false."""
    return pytest.mark.skipif(not condition, reason=_tagged(what, reason))


def import_or_skip(module: str, what: str, reason: str | None = None):
    """``module`` imported, or a skip naming ``what`` (an extra: the reason says how to install it)."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        hint = f"pip install -e '.[{what}]'" if what in ("images", "onnx", "serve", "text", "multilingual", "thai",
                                                             "ray", "milvus", "test", "bench") else ""
        needs(what, reason or f"{module} is not importable ({exc}); {hint}".rstrip("; "))


def requires_file(path: Path):
    return skip_unless(path.exists(), "shared-data", f"real data file absent: {path}")


def _skip_reason(report) -> str | None:
    if not report.skipped or hasattr(report, "wasxfail"):
        return None
    longrepr = report.longrepr
    return longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)


def _enforce(report) -> None:
    """Under ``DMH_REQUIRE``: a skip for a required thing, or one that names nothing, fails."""
    reason = _skip_reason(report)
    if reason is None or not REQUIRED:
        return
    what = reason.rsplit(_TAG, 1)[1].rstrip("]") if reason.endswith("]") and _TAG in reason else None
    if what is None:
        why = "it names nothing it needs (skip through tests/conftest.py's needs(), import_or_skip(), skip_unless())"
    elif what in REQUIRED:
        why = f"DMH_REQUIRE={','.join(sorted(REQUIRED))} says this run has {what!r}"
    else:
        return
    report.outcome = "failed"
    report.longrepr = f"skipped ({reason.removeprefix('Skipped: ')}), but {why}"


def _at(report, path, lineno) -> None:
    """A skip raised in this file's helpers reported at the test (or module) that called them."""
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3 and Path(longrepr[0]).resolve() == _HERE:
        report.longrepr = (str(path), lineno, longrepr[2])


_HERE = Path(__file__).resolve()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    path, lineno, _ = item.reportinfo()
    _at(report, path, None if lineno is None else lineno + 1)
    _enforce(report)


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    report = outcome.get_result()
    _at(report, collector.path, None)
    _enforce(report)


def pytest_configure(config):
    config.addinivalue_line("markers", "cuda: runs on a CUDA GPU (skips, naming 'cuda', where torch sees none)")


def cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def pytest_runtest_setup(item):
    if item.get_closest_marker("cuda") is not None and not cuda_available():
        needs("cuda", "needs a CUDA GPU (torch sees none)")


def pytest_terminal_summary(terminalreporter):
    """How many of the CUDA tests ran: a run on a GPU machine must show them passing, not skipped."""
    counts: dict[str, int] = {}
    for outcome in ("passed", "failed", "skipped", "error"):
        for rep in terminalreporter.stats.get(outcome, []):
            if "cuda" in getattr(rep, "keywords", {}) and (rep.when == "call" or rep.outcome != "passed"):
                counts[outcome] = counts.get(outcome, 0) + 1
    total = sum(counts.values())
    if total:
        ran = counts.get("passed", 0) + counts.get("failed", 0)
        detail = ", ".join(f"{n} {k}" for k, n in counts.items())
        if cuda_available():
            import torch

            where = f"on {torch.cuda.get_device_name()}"
        else:
            where = "torch sees no GPU"
        terminalreporter.write_line(f"CUDA tests: {ran} of {total} ran ({detail}; {where})")


@pytest.fixture(autouse=True)
def _restore_threads():
    """A test that runs the command line in this process with ``--threads N`` sets the process's
    thread count (as the command does for its own run); put it back after the test, so that a later
    fit does not run at another thread count (same seed, same codes holds per thread count)."""
    from dmh import _threads

    before = _threads._setting
    yield
    if _threads._setting != before:
        _threads.set_threads(before)


@pytest.fixture
def toy_data():
    """Two noisy views of 4 clusters, fully paired, with class labels and a split."""
    return make_toy_data()


def make_toy_data():
    """The ``toy_data`` fixture's data (the same arrays on every call), for module-scoped fixtures."""
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

    from dmh.app.collection import build_collection
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
