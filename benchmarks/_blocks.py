"""Write generated text between ``<!-- results:MARKER:start -->`` and ``<!-- results:MARKER:end -->``
of a page (atomically), so that the figures of README.md and of docs/ come from the commands that
measured them. Each block lives on one page (``PAGES``): README.md keeps one results table and the
leaderboard's counts; the rest is on the docs page it belongs to."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the page of each block
PAGES = {
    "experiments": "README.md",
    "leaderboard": "README.md",
    "leaderboard-table": "docs/experiments.md",
    "engineers": "docs/collection.md",
    "service": "docs/collection.md",
    "bench": "docs/speed.md",
}


def page_of(marker: str) -> Path:
    return ROOT / PAGES[marker]


def update_block(marker: str, text: str, page: Path | str | None = None) -> None:
    """Replace the text of block ``marker`` on ``page`` (default: the block's own page)."""
    from dmh.report import atomic_write_text

    path = Path(page) if page is not None else page_of(marker)
    s = path.read_text(encoding="utf-8")
    pat = re.compile(rf"(<!-- results:{re.escape(marker)}:start -->\n).*?(<!-- results:{re.escape(marker)}:end -->)",
                     re.S)
    if not pat.search(s):
        raise SystemExit(f"{path} has no results:{marker} markers")
    text = text if text.endswith("\n") else text + "\n"
    atomic_write_text(path, pat.sub(lambda m: m.group(1) + text + m.group(2), s))
