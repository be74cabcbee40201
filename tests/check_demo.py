"""``dmh demo``, the README's first command, run to completion as a user runs it: its MAP table and
label-prior line against what README.md says it prints ("0.721-0.791, random ranking 0.099").

``python tests/check_demo.py`` (``.ci/run`` runs it; about 26 CPU s, kept out of the pytest suite's
time) prints the demo's output and fails (exit code 1) where it differs from the README."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"
#: other machines and thread counts move the last digits of a MAP: a value this close outside the
#: README's range still passes
SLACK = 0.02


def stated_range(readme: str) -> tuple[float, float, float]:
    """(lowest MAP, highest MAP, random-ranking MAP) the README states for ``dmh demo``."""
    m = re.search(r"\((\d\.\d+)-(\d\.\d+), random ranking (\d\.\d+)\)", readme)
    assert m, "README.md no longer states the demo's range as '(LOW-HIGH, random ranking PRIOR)'"
    return float(m[1]), float(m[2]), float(m[3])


def table_values(output: str) -> dict[str, list[float]]:
    """The demo's MAP table: ``{row label: [MAP, ...]}``."""
    rows = {}
    for line in output.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.lstrip().startswith("|") and len(cells) > 1 and all(re.fullmatch(r"\d\.\d+", c) for c in cells[1:]):
            rows[cells[0]] = [float(c) for c in cells[1:]]
    return rows


def check(output: str, readme: str) -> dict[str, list[float]]:
    low, high, prior = stated_range(readme)
    rows = table_values(output)
    # DMH at 100% and 50% pairing, image->text and text->image (one row per pairing and bit length)
    assert len(rows) == 2 and all(len(v) == 2 for v in rows.values()), output
    for label, values in rows.items():
        for v in values:
            assert low - SLACK <= v <= high + SLACK, f"{label}: MAP {v} outside the README's {low}-{high}"
    m = re.search(r"Label-prior baseline \(random ranking\): MAP ~ (\d\.\d+)", output)
    assert m and float(m[1]) == prior, output
    assert "Warning" not in output and "warning" not in output, output  # the README says: no warning
    return rows


def run_demo() -> str:
    dmh = shutil.which("dmh", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    assert dmh, "the dmh command is not installed (pip install -e .)"
    proc = subprocess.run([dmh, "demo"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout + proc.stderr


if __name__ == "__main__":
    out = run_demo()
    print(out)
    print("dmh demo: as README.md says:", check(out, README.read_text()))
