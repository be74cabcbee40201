"""The evaluation protocol: train on a (semi-)paired training set, encode queries and database with
the learned hash functions, and score image->text and text->image Hamming ranking.

Every method in one call sees identical data: for each seed and paired ratio, one semi-paired
training set is made (:func:`dmh.make_semi_paired`) and shared by all methods and bit lengths.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from .data import CrossModalData, make_semi_paired
from .registry import get_method_class

__all__ = ["TASKS", "evaluate_model", "run_evaluation"]

TASKS = ("image->text", "text->image")


def _score(query_codes, database_codes, query_labels, database_labels) -> dict:
    from .metrics import evaluate_retrieval

    return evaluate_retrieval(query_codes, database_codes, query_labels, database_labels)


def evaluate_model(model, query: CrossModalData, database: CrossModalData) -> dict[str, dict]:
    """Scores of a fitted model for both tasks: ``{"image->text": {...}, "text->image": {...}}``."""
    q_labels, db_labels = query.require_labels(), database.require_labels()
    for part, d in (("query", query), ("database", database)):
        if not d.is_fully_paired:
            raise ValueError(f"the {part} set must hold both modalities for every object (cross-modal evaluation)")
    out = {}
    for task, (qm, dm) in zip(TASKS, (("image", "text"), ("text", "image")), strict=True):
        qc = model.encode(getattr(query, qm), modality=qm)
        dc = model.encode(getattr(database, dm), modality=dm)
        out[task] = _score(qc, dc, q_labels, db_labels)
    return out


def run_evaluation(
    data: CrossModalData,
    methods: Sequence[str] = ("dmh",),
    bits: Sequence[int] = (16, 32, 64, 128),
    paired_ratios: Sequence[float] = (1.0, 0.5),
    seeds: Sequence[int] = (0,),
    method_params: dict[str, dict] | None = None,
    on_record: Callable[[dict], None] | None = None,
    done: set | None = None,
    progress: bool = False,
) -> list[dict]:
    """Fit and score every (seed, paired ratio, method, bit length) cell.

    ``data`` needs a split and labels. ``method_params`` maps a method name to extra keyword
    arguments. ``on_record`` is called with each result record as soon as it exists (for writing
    partial results); cells whose ``(method, n_bits, paired_ratio, seed)`` is in ``done`` are skipped
    (to resume an interrupted run). Returns the list of records, one per cell and task.
    """
    if not data.has_split:
        raise ValueError("data need train_idx, query_idx and database_idx (see CrossModalData.with_split)")
    data.require_labels()
    method_params = method_params or {}
    classes = {m: get_method_class(m) for m in methods}  # unknown names fail before any work
    for r in paired_ratios:
        if not 0.0 < float(r) <= 1.0:
            raise ValueError(f"paired ratio must lie in (0, 1], got {r}")
    query, database, train_full = data.query(), data.database(), data.train()
    cells = [(s, r, m, b) for s in seeds for r in paired_ratios for m in methods for b in bits]
    cells = [c for c in cells if done is None or (c[2], int(c[3]), float(c[1]), int(c[0])) not in done]
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(cells), desc="evaluate", unit="fit")
    records = []
    train_cache: dict = {}
    for seed, ratio, name, n_bits in cells:
        key = (seed, ratio)
        if key not in train_cache:
            train_cache.clear()
            train_cache[key] = make_semi_paired(train_full, float(ratio), random_state=int(seed))
        train = train_cache[key]
        if bar is not None:
            bar.set_postfix_str(f"{name} {n_bits} bits, paired {ratio:g}, seed {seed}")
        model = classes[name](n_bits=int(n_bits), random_state=int(seed), **method_params.get(name, {}))
        t0 = time.perf_counter()
        model.fit(train)
        fit_s = time.perf_counter() - t0
        scores = evaluate_model(model, query, database)
        for task, sc in scores.items():
            rec = {
                "method": name,
                "n_bits": int(n_bits),
                "paired_ratio": float(ratio),
                "seed": int(seed),
                "task": task,
                **sc,
                "fit_seconds": round(fit_s, 3),
                "n_train": train.n_objects,
                "n_paired": train.n_paired,
            }
            records.append(rec)
            if on_record is not None:
                on_record(rec)
        if bar is not None:
            bar.update(1)
    if bar is not None:
        bar.close()
    return records
