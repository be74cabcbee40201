"""What a skip means (tests/conftest.py): without DMH_REQUIRE a missing thing skips, saying what it
needs; with it, a skip of a required thing, or one that names nothing, fails; CUDA tests are counted."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

CASES = '''
import pytest
from conftest import import_or_skip, needs, skip_unless

def test_missing_extra():
    import_or_skip("no_such_module_dmh", "text")

def test_ray_did_not_start():
    needs("ray", "a local Ray runtime could not start here: timed out")

@skip_unless(False, "shared-data", "real data absent")
def test_shared_data():
    pass

def test_untagged():
    pytest.skip("for no stated reason")

@pytest.mark.cuda
def test_on_gpu():
    pass

def test_runs():
    pass
'''


def _run(tmp_path: Path, require: str | None) -> str:
    shutil.copy(Path(__file__).with_name("conftest.py"), tmp_path / "conftest.py")
    (tmp_path / "test_cases.py").write_text(CASES)
    env = {k: v for k, v in os.environ.items() if k != "DMH_REQUIRE"}
    if require is not None:
        env["DMH_REQUIRE"] = require
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rfEs", "-p", "no:cacheprovider", str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    return proc.stdout + proc.stderr


def test_without_dmh_require_skips_stay_skips_and_say_what_they_need(tmp_path):
    out = _run(tmp_path, None)
    assert "1 passed" in out and "failed" not in out and "error" not in out, out
    assert "test_cases.py:5: no_such_module_dmh is not importable" in out and "[needs: text]" in out, out
    assert "a local Ray runtime could not start here: timed out [needs: ray]" in out
    assert "real data absent [needs: shared-data]" in out and "for no stated reason" in out
    assert "CUDA tests: 0 of 1 ran (1 skipped; torch sees no GPU)" in out or "CUDA tests: 1 of 1 ran" in out, out


def test_dmh_require_fails_the_skips_of_what_it_names_and_untagged_ones(tmp_path):
    out = _run(tmp_path, "text,ray")
    for name in ("test_missing_extra", "test_ray_did_not_start", "test_untagged"):
        assert f"FAILED test_cases.py::{name}" in out, out
    assert "says this run has 'text'" in out and "says this run has 'ray'" in out
    assert "it names nothing it needs" in out
    # what it does not name stays a skip: the shared data, a GPU
    assert "real data absent [needs: shared-data]" in out and "3 failed, 1 passed" in out, out
