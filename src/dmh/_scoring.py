"""The scores of a fitted model on a query and a database set, both tasks (:func:`evaluate_model`),
and the floor a MAP is read against (:func:`label_prior_map`): what :mod:`dmh.evaluation` reports
for each cell.
"""

from __future__ import annotations

from .data import CrossModalData
from .errors import DataError
from .records import TASKS


def _score(query_codes, database_codes, query_labels, database_labels) -> dict:
    from .metrics import evaluate_retrieval

    return evaluate_retrieval(query_codes, database_codes, query_labels, database_labels)


def evaluate_model(model, query: CrossModalData, database: CrossModalData) -> dict[str, dict]:
    """Scores of a fitted model for both tasks: ``{"image->text": {...}, "text->image": {...}}``."""
    from .base import encode_checked  # codes checked as they are taken: a method may be one's own

    q_labels, db_labels = query.require_labels(), database.require_labels()
    for part, d in (("query", query), ("database", database)):
        if not d.is_fully_paired:
            raise DataError(f"the {part} set must hold both modalities for every object (cross-modal evaluation)")
    out = {}
    for task, (qm, dm) in zip(TASKS, (("image", "text"), ("text", "image")), strict=True):
        qc = encode_checked(model, getattr(query, qm), qm)
        dc = encode_checked(model, getattr(database, dm), dm)
        out[task] = _score(qc, dc, q_labels, db_labels)
    return out


def label_prior_map(data: CrossModalData) -> float:
    """Expected MAP of a random ranking: about the mean share of relevant database items per query
    (the floor any method's MAP is to be read against)."""
    from .metrics import relevance

    q, db = data.query(), data.database()
    return float(relevance(q.labels, db.labels).mean(axis=1).mean())
