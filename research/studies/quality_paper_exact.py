"""Check that ``DMH(preset="paper")`` gives the same codes as DMH at an earlier commit (before the
options of docs/quality.md existed), on a small fit (600 UCI digits objects, 50% paired, 16 bits).

    python research/studies/quality_paper_exact.py [--rev 8a3215c]

Exports the old ``src`` with ``git archive`` into a temporary folder and runs the same fit with
both; prints the two code fingerprints and exits 1 when they differ.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SNIPPET = """
import hashlib, sys, warnings
import numpy as np
warnings.simplefilter("ignore")
import dmh
from dmh import DMH, make_semi_paired
d = dmh.load_dataset("uci-digits")
tr = make_semi_paired(d.train().subset(np.arange(600)), 0.5, random_state=0)
kw = dict(n_rounds=2, hidden_size=256, dam_epochs=3, cle_max_iter=5, gbe_max_iter=40)
if sys.argv[1] == "new":
    kw["preset"] = "paper"
m = DMH(16, random_state=0, **kw).fit(tr)
q = d.query()
c = np.concatenate([m.encode(q.image, "image"), m.encode(q.text, "text")])
print(hashlib.sha1(c.tobytes()).hexdigest())
"""


def run(src: Path, which: str) -> str:
    env = dict(os.environ, PYTHONPATH=str(src))
    out = subprocess.run([sys.executable, "-c", SNIPPET, which], env=env, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--rev", default="8a3215c", help="commit before the options (default: the merge base of issue 12)")
    args = ap.parse_args(argv)
    root = Path(__file__).resolve().parents[2]
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(root), "archive", args.rev, "src"], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tmp], input=archive.stdout, check=True)
        old = run(Path(tmp) / "src", "old")
    new = run(root / "src", "new")
    print(f"{args.rev}: {old}\nnow, preset='paper': {new}")
    sys.exit(0 if old == new else 1)


if __name__ == "__main__":
    main()
