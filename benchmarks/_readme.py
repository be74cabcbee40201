"""Write generated text between ``<!-- results:MARKER:start -->`` and ``<!-- results:MARKER:end -->``
in README.md (atomically), so the README's numbers come from the commands that measured them."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def update_readme(marker: str, text: str, readme: Path | str | None = None) -> None:
    from dmh._atomic import atomic_write_text

    path = Path(readme) if readme is not None else ROOT / "README.md"
    s = path.read_text(encoding="utf-8")
    pat = re.compile(rf"(<!-- results:{marker}:start -->\n).*?(<!-- results:{marker}:end -->)", re.S)
    if not pat.search(s):
        raise SystemExit(f"{path} has no results:{marker} markers")
    text = text if text.endswith("\n") else text + "\n"
    atomic_write_text(path, pat.sub(lambda m: m.group(1) + text + m.group(2), s))
