"""How a caption or a query becomes the terms of a bag of words, in any script, with no language
setting.

:class:`UnicodeAnalyzer` (recorded in a featurizer spec as ``{"name": "unicode", "version": 1,
...}``) does, in order:

1. **Normalise**: Unicode NFKC (full-width Latin and digits become ASCII, half-width katakana
   full-width, ligatures split), case folding (``str.casefold``), NFKC again; format characters
   (``\\p{Cf}``: zero-width space and joiners, the byte order mark, soft hyphens, bidirectional
   marks and isolates) removed; control characters (``\\p{Cc}``, tabs and newlines included)
   turned into spaces; Thai and Lao AM, which NFKC splits in two, joined again.
2. **Split into runs** of word characters (letters, combining marks, digits, connectors: the
   ``regex`` package's Unicode ``\\w``), cut where the script changes between three kinds:
   CJK (Han, Hiragana, Katakana, Hangul, Bopomofo, by Unicode script extensions, so the
   prolonged sound mark and iteration marks stay with their script), the Southeast Asian
   scripts written without spaces (Thai, Lao, Khmer, Myanmar), and every other script.
   "iphone手机壳" is two runs, "iphone" and "手机壳".
3. **Terms** of each run:

   * CJK: overlapping character bigrams, and the character itself when it stands alone, as
     Lucene's CJK analyzer and Elasticsearch's ``cjk_bigram`` filter do ("手机壳" -> "手机",
     "机壳"; "鞋" -> "鞋"). No dictionary, so no word list can be out of date.
   * Thai: words from PyThaiNLP's ``newmm`` segmenter (dictionary maximal matching, the
     dictionary inside the wheel) when the analyzer was created with ``thai="pythainlp-newmm"``;
     else (``"grapheme-bigrams"``) overlapping pairs of grapheme clusters, as for CJK.
   * Lao, Khmer, Myanmar: overlapping pairs of grapheme clusters (no segmenter is used).
   * any other script (Latin, Cyrillic, Greek, Arabic, Hebrew, Devanagari, ...): the run is one
     word, kept when it has two or more characters. On ASCII text this gives exactly the words of
     scikit-learn's default token pattern ``(?u)\\b\\w\\w+\\b``, lower-cased.

Emoji, symbols and punctuation are not word characters and give no term. The analyzer never
raises on a ``str``.
"""

from __future__ import annotations

import importlib.util
import unicodedata
import warnings

import regex

from ..errors import DataError

__all__ = ["ANALYZER_NAME", "ANALYZER_VERSION", "THAI_SEGMENTERS", "UnicodeAnalyzer", "sklearn_analyzer"]

ANALYZER_NAME = "unicode"
ANALYZER_VERSION = 1
#: how Thai runs are split: a dictionary segmenter (the optional extra ``thai``), or pairs of
#: grapheme clusters (no dependency)
THAI_SEGMENTERS = ("pythainlp-newmm", "grapheme-bigrams")
THAI_EXTRA = ("thai", ("pythainlp>=5.0",))

_CJK = r"\p{scx=Han}\p{scx=Hiragana}\p{scx=Katakana}\p{scx=Hangul}\p{scx=Bopomofo}"
# runs of one kind of script (V1: set intersection and difference inside [...])
_RUNS = regex.compile(
    rf"(?V1)(?P<cjk>[[{_CJK}]&&\w]+)"
    r"|(?P<thai>[\p{Thai}&&\w]+)"
    r"|(?P<sea>[\p{Lao}&&\w]+|[\p{Khmer}&&\w]+|[\p{Myanmar}&&\w]+)"
    rf"|(?P<word>[\w--[{_CJK}\p{{Thai}}\p{{Lao}}\p{{Khmer}}\p{{Myanmar}}]]+)"
)
_FORMAT = regex.compile(r"\p{Cf}+")
_CONTROL = regex.compile(r"\p{Cc}+")
_GRAPHEME = regex.compile(r"\X")
_HAS_THAI = regex.compile(r"\p{Thai}")


# NFKC splits Thai SARA AM and Lao AM into NIKHAHIT/NIGGAHITA + AA, which no Thai dictionary
# spells that way: they are joined again
_AM = {"\u0e4d\u0e32": "\u0e33", "\u0ecd\u0eb2": "\u0eb3"}
_SPLIT_AM = regex.compile("|".join(_AM))


def normalize_text(text: str) -> str:
    """Step 1 above: NFKC, case folding, format characters removed, controls made spaces (Thai
    and Lao AM kept whole)."""
    text = _FORMAT.sub("", unicodedata.normalize("NFKC", text))
    text = _FORMAT.sub("", unicodedata.normalize("NFKC", text.casefold()))
    return _SPLIT_AM.sub(lambda m: _AM[m.group()], _CONTROL.sub(" ", text))


def _bigrams(units: list[str]) -> list[str]:
    if len(units) == 1:
        return units
    return [units[i] + units[i + 1] for i in range(len(units) - 1)]


def _pythainlp_available() -> bool:
    return importlib.util.find_spec("pythainlp") is not None


class UnicodeAnalyzer:
    """Terms of a text in any script (the module docstring says how). Called on a string, returns
    its terms in order, repeats included: the ``analyzer`` of scikit-learn's ``CountVectorizer``.

    Parameters
    ----------
    thai : {"pythainlp-newmm", "grapheme-bigrams"}
        How runs of Thai are split. ``"pythainlp-newmm"`` needs the optional package pythainlp
        (``pip install "dmh[thai]"``). :meth:`for_texts` chooses it when the texts hold Thai and
        the package is installed.
    """

    def __init__(self, thai: str = "grapheme-bigrams"):
        if thai not in THAI_SEGMENTERS:
            raise DataError(f"unknown Thai segmenter {thai!r}; this dmh knows {', '.join(THAI_SEGMENTERS)}")
        self.thai = thai
        self._thai_words = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def for_texts(cls, texts) -> UnicodeAnalyzer:
        """The analyzer for a new bag of words over ``texts``: Thai is segmented into words by
        pythainlp when the texts hold Thai and pythainlp is installed; when they hold Thai and it
        is not, into pairs of characters, with a warning that says how to get words."""
        if not any(_HAS_THAI.search(t) for t in texts if isinstance(t, str)):
            return cls()
        if _pythainlp_available():
            return cls(thai="pythainlp-newmm")
        warnings.warn(
            "the captions hold Thai, which is split into pairs of characters: for Thai words install "
            "the segmenter (pip install \"dmh[thai]\") and build again",
            UserWarning,
            stacklevel=2,
        )
        return cls()

    def settings(self) -> dict:
        """What a featurizer spec records (enough to rebuild the same analyzer)."""
        from importlib.metadata import PackageNotFoundError, version

        packages = {}
        for dist in ("regex", *(("pythainlp",) if self.thai == "pythainlp-newmm" else ())):
            try:
                packages[dist] = version(dist)
            except PackageNotFoundError:
                packages[dist] = None
        return {
            "name": ANALYZER_NAME,
            "version": ANALYZER_VERSION,
            "normalize": "NFKC, casefold, format characters removed, controls as spaces",
            "cjk": "character bigrams (a lone character as itself)",
            "thai": self.thai,
            "other": "runs of two or more word characters",
            "packages": packages,
        }

    @classmethod
    def from_settings(cls, settings: dict, source: str = "the featurizer settings") -> UnicodeAnalyzer:
        if not isinstance(settings, dict) or settings.get("name") != ANALYZER_NAME:
            name = settings.get("name") if isinstance(settings, dict) else settings
            raise DataError(f"{source}: unknown text analyzer {name!r}; written by a newer dmh?")
        if int(settings.get("version", 0)) > ANALYZER_VERSION:
            raise DataError(
                f"{source}: text analyzer version {settings['version']} was written by a newer dmh "
                f"(this one knows up to {ANALYZER_VERSION})"
            )
        thai = settings.get("thai", "grapheme-bigrams")
        if thai not in THAI_SEGMENTERS:
            raise DataError(f"{source}: unknown Thai segmenter {thai!r}; written by a newer dmh?")
        return cls(thai=thai)

    def needs(self) -> tuple[str, ...]:
        """Modules this analyzer imports when it reads Thai."""
        return ("pythainlp",) if self.thai == "pythainlp-newmm" else ()

    # ------------------------------------------------------------------ analysis
    def _thai(self, run: str) -> list[str]:
        if self.thai == "grapheme-bigrams":
            return _bigrams(_GRAPHEME.findall(run))
        if self._thai_words is None:
            from .extras import _require

            self._thai_words = _require("pythainlp.tokenize", THAI_EXTRA, "Thai word segmentation").word_tokenize
        return [w for w in self._thai_words(run, engine="newmm", keep_whitespace=False) if w.strip()]

    def __call__(self, text) -> list[str]:
        if not isinstance(text, str):
            text = str(text)
        out: list[str] = []
        for m in _RUNS.finditer(normalize_text(text)):
            kind, run = m.lastgroup, m.group()
            if kind == "word":
                if len(run) >= 2:
                    out.append(run)
            elif kind == "cjk":
                out.extend(_bigrams(list(run)))
            elif kind == "thai":
                out.extend(self._thai(run))
            else:
                out.extend(_bigrams(_GRAPHEME.findall(run)))
        return out

    def __repr__(self) -> str:
        return f"UnicodeAnalyzer(thai={self.thai!r})"


def sklearn_analyzer(token_pattern: str, lowercase: bool = True):
    """The analyzer of bags of words saved before :class:`UnicodeAnalyzer` (their spec has a
    ``token_pattern`` and no ``analyzer``): scikit-learn's, as they were built."""
    from sklearn.feature_extraction.text import CountVectorizer

    return CountVectorizer(lowercase=lowercase, token_pattern=token_pattern).build_analyzer()
