"""The bag of words reads every script: words, CJK character bigrams, Thai words (or character
pairs), mixed scripts split, any Unicode without an exception; old bags of words keep scikit-learn's
token pattern."""

from __future__ import annotations

import importlib.util
import json
import pickle
import warnings

import numpy as np
import pytest

from dmh._featurizers.analyzer import UnicodeAnalyzer, normalize_text, sklearn_analyzer
from dmh.errors import DataError, DmhError
from dmh.featurizer_spec import BOW_TOKEN_PATTERN, FeaturizerSpec

from .conftest import import_or_skip

A = UnicodeAnalyzer()


@pytest.mark.parametrize("text, terms", [
    # Chinese: overlapping bigrams of a run of Han characters (the query)
    ("蔬菜种子看起来像小糖豆", ["蔬菜", "菜种", "种子", "子看", "看起", "起来", "来像", "像小", "小糖", "糖豆"]),
    ("鞋", ["鞋"]),  # a lone character is its own term
    ("红色、鞋。", ["红色", "鞋"]),  # CJK punctuation separates runs
    # Japanese: kanji and kana bigrammed together, the prolonged sound mark kept with its word
    ("ラーメンを食べる", ["ラー", "ーメ", "メン", "ンを", "を食", "食べ", "べる"]),
    ("ﾗｰﾒﾝ", ["ラー", "ーメ", "メン"]),  # half-width katakana is read as full-width (NFKC)
    # Korean: Hangul bigrams within each space-separated word
    ("한국어 학교에서", ["한국", "국어", "학교", "교에", "에서"]),
    # mixed scripts are split at the boundary
    ("iPhone手机壳", ["iphone", "手机", "机壳"]),
    ("Nike男士跑鞋 2024年", ["nike", "男士", "士跑", "跑鞋", "2024", "年"]),
    # words where the script separates them (marks stay in their word), single letters dropped
    ("A red CIRCLE, drawn!", ["red", "circle", "drawn"]),
    ("हिन्दी भाषा", ["हिन्दी", "भाषा"]),
    ("مرحبا بالعالم", ["مرحبا", "بالعالم"]),
    ("שלום עולם", ["שלום", "עולם"]),
    ("Straße ＡＢＣ１２３", ["strasse", "abc123"]),  # case folding, full-width forms
    # zero-width, bidirectional and control characters are not word boundaries or terms
    ("zero\u200bwidth soft\u00adhyphen \u202eabc\u202c", ["zerowidth", "softhyphen", "abc"]),
    ("tab\there\x00nul\nnew", ["tab", "here", "nul", "new"]),
    ("\ufeff手机\u200d壳", ["手机", "机壳"]),
    # emoji and symbols give no term
    ("🙂👍🏽\u200d🔥 ★ → ©", []),
    ("", []),
])
def test_terms_of_each_script(text, terms):
    assert A(text) == terms


def test_thai_without_segmenter_is_read_as_pairs_of_grapheme_clusters():
    # NFKC would split SARA AM (ำ) in two: the analyzer keeps it whole, in its grapheme cluster
    assert A("สีดำ สำหรับ") == ["สีดำ", "สำห", "หรั", "รับ"]
    assert all("\u0e4d" not in t for t in A("สีดำ สำหรับ"))
    assert A("ผู้ชาย") == ["ผู้ช", "ชา", "าย"]  # grapheme clusters keep a letter with its marks
    assert normalize_text("สำหรับ") == "สำหรับ"


def test_thai_words_with_pythainlp():
    import_or_skip("pythainlp", "thai")
    thai = UnicodeAnalyzer(thai="pythainlp-newmm")
    terms = thai("รองเท้าวิ่งสีดำสำหรับผู้ชาย iPhone")
    assert "รองเท้า" in terms and "ผู้ชาย" in terms and "สำหรับ" in terms and terms[-1] == "iphone"
    assert "".join(terms[:-1]) == "รองเท้าวิ่งสีดำสำหรับผู้ชาย"  # words cover the run, nothing lost
    assert pickle.loads(pickle.dumps(thai))("ผู้ชาย") == ["ผู้ชาย"]  # picklable once used (Ray, processes)
    # a new bag of words over Thai captions segments them when pythainlp is there, and says so
    from dmh.featurize import bow_features

    analyzer = UnicodeAnalyzer.for_texts(["รองเท้าวิ่ง", "รองเท้าสีดำ"])
    X, vocab = bow_features(["รองเท้าวิ่ง", "รองเท้าสีดำ"], analyzer=analyzer)
    assert analyzer.thai == "pythainlp-newmm" and "รองเท้า" in vocab and X[:, vocab.index("รองเท้า")].tolist() == [1, 1]
    assert FeaturizerSpec(text=FeaturizerSpec.bow_settings(vocab, analyzer.settings())).text_analyzer().thai == (
        "pythainlp-newmm")


def test_ascii_text_gives_exactly_sklearns_words():
    """On ASCII text the new analyzer is the old one: English bags of words are unchanged."""
    old = sklearn_analyzer(BOW_TOKEN_PATTERN)
    rng = np.random.default_rng(0)
    alphabet = np.array(list("abcXYZ019_ -,.!?'\"\t\n()é"[:-1]))
    samples = ["Wildcraft Unisex Olive Green Backpack", "Nike Men's Swoosh T-Shirt (2 pack)",
               "a b cd e_f __ 3 45 x1 1x it's", "Puma Men Black Sports Shoes"]
    samples += ["".join(rng.choice(alphabet, size=int(rng.integers(0, 40)))) for _ in range(300)]
    for s in samples:
        assert A(s) == old(s), s


def test_any_unicode_never_raises():
    """Random strings over all of Unicode (surrogates, private use, unassigned code points
    included) give a list of non-empty strings without a word boundary inside."""
    rng = np.random.default_rng(1)
    for _ in range(300):
        cps = rng.integers(0, 0x110000, size=int(rng.integers(1, 30)))
        text = "".join(chr(int(c)) for c in cps)
        terms = A(text)
        assert all(isinstance(t, str) and t and not t.isspace() for t in terms)
    assert A(12345) == ["12345"]  # not a string: read as its str()


def test_for_texts_chooses_the_thai_segmenter_and_says_when_it_is_missing(monkeypatch):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert UnicodeAnalyzer.for_texts(["手机壳", "a red circle"]).thai == "grapheme-bigrams"
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pythainlp" else real(name, *a))
    with pytest.warns(UserWarning, match=r"pairs of characters.*dmh\[thai\]"):
        assert UnicodeAnalyzer.for_texts(["รองเท้า"]).thai == "grapheme-bigrams"


def test_settings_round_trip_and_unknown_analyzers_fail_in_one_line():
    s = UnicodeAnalyzer(thai="pythainlp-newmm").settings()
    assert json.loads(json.dumps(s))["name"] == "unicode" and s["version"] == 1
    assert UnicodeAnalyzer.from_settings(s).thai == "pythainlp-newmm"
    for bad, why in [({**s, "name": "icu"}, "unknown text analyzer 'icu'"),
                     ({**s, "version": 9}, "newer dmh"),
                     ({**s, "thai": "deepcut"}, "unknown Thai segmenter")]:
        with pytest.raises(DataError, match=why):
            UnicodeAnalyzer.from_settings(bad, "model.npz")
        d = FeaturizerSpec(text={**FeaturizerSpec.bow_settings(["ab"]), "analyzer": bad}).to_dict()
        with pytest.raises(DmhError, match=why) as err:
            FeaturizerSpec.from_dict(d, "model.npz")
        assert "\n" not in str(err.value)


OLD_SPEC = {  # a bag of words as dmh wrote it before the Unicode analyzer (format 1, a token pattern)
    "format": "dmh-featurizer", "format_version": 1, "dmh_version": "0.1.0", "image": None,
    "text": {"model": "bow", "n_features": 3, "binary": True, "lowercase": True,
             "token_pattern": "(?u)\\b\\w\\w+\\b", "vocabulary": ["iphone", "手机", "手机壳"],
             "packages": {"scikit-learn": "1.9.1"}},
}


def test_a_spec_written_before_keeps_its_token_pattern():
    old = FeaturizerSpec.from_dict(json.loads(json.dumps(OLD_SPEC)))
    # scikit-learn's pattern takes the whole run of Han characters as one word, as it was built
    np.testing.assert_array_equal(old.text_features(["iPhone 手机壳", "手机"]), [[1, 0, 1], [0, 1, 0]])
    assert old.text_analyzer()("iPhone手机壳") == ["iphone手机壳"]
    assert old.to_dict() == OLD_SPEC  # written back unchanged, still format 1
    new = FeaturizerSpec(text=FeaturizerSpec.bow_settings(["iphone", "手机", "手机壳"]))
    np.testing.assert_array_equal(new.text_features(["iPhone 手机壳", "手机"]), [[1, 1, 0], [0, 1, 0]])
    assert new.to_dict()["format_version"] == 2


def test_a_thai_bag_of_words_names_its_extra_when_pythainlp_is_missing(monkeypatch):
    from dmh.featurize import MissingExtraError

    spec = FeaturizerSpec(text=FeaturizerSpec.bow_settings(
        ["รองเท้า"], UnicodeAnalyzer(thai="pythainlp-newmm").settings()))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "pythainlp" else real(name, *a))
    assert any("dmh[thai]" in m for m in spec.missing_extras())
    with pytest.raises(MissingExtraError, match=r"pythainlp.*dmh\[thai\]"):
        spec.text_features(["รองเท้า"])


def test_a_collection_built_before_reads_queries_with_its_token_pattern(shapes_collection):
    """A collection whose model holds a spec as the old code wrote it reads a query as it was
    built: scikit-learn's words (a run of Han characters is one word), not the new terms."""
    from dmh.app.collection import Collection

    col = Collection(shapes_collection)
    old = json.loads(json.dumps(OLD_SPEC))
    old["text"]["vocabulary"] = col.model.featurizer_.text["vocabulary"]
    col.model.featurizer_ = FeaturizerSpec.from_dict(old)
    read = col.read_text("a red circle iPhone手机壳")
    assert read.known_words == ["red", "circle"] and read.unknown_words == ["iphone手机壳"]
    assert len(col.search_text("a red circle iPhone手机壳", 3)) == 3
