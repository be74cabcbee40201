"""The evaluation protocol and its one cell loop, used by ``dmh evaluate``, ``dmh reproduce`` and
``dmh tune`` (which scores its cells on held-out pairs instead: :class:`CellTask`).

Train on a (semi-)paired training set, encode queries and database with the learned hash
functions, score image->text and text->image Hamming ranking. A *cell* is one fit: dataset, method
(with its full parameters), bit length, paired ratio and seed (the seed makes the semi-paired
training set and seeds the method). For each dataset, seed and paired ratio, one semi-paired
training set (:func:`dmh.make_semi_paired`) is made and shared by the consecutive cells that use it.

A *pairs-only* cell (``pairs_only=True``) trains on the paired objects of that same semi-paired set
alone, its image-only and text-only objects dropped: beside the cell that uses every object, it
shows whether a method gains from the unpaired ones (for a method that ignores them, the two cells
train on the same data).

Every cell has one key (:func:`cell_key`): the canonical JSON of the dataset's fingerprint (its
source path, file size and a hash of its arrays), its split, the pairing seed, the method and its
full parameters (defaults included), the bit length, the
label it is shown under, for a pairs-only cell only, ``pairs_only`` and, for a cell scored on the
validation split (:meth:`dmh.CrossModalData.validation`) only, ``validation`` (its fraction and
seed). Where a fit runs (``device``, :data:`EXECUTION_PARAMS`) is not part of the key: it changes
how fast a fit runs, not its result beyond rounding (a deep peer's MAP on a GPU and on the CPU agree within 0.001). How
options added to or removed from a method keep earlier keys valid: :mod:`dmh._keys`. A finished
cell is reused (``evaluate --resume``, ``reproduce`` into the same folder or with ``--reuse``) only
on an exact key match.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ._cell_keys import (  # noqa: F401 - the cell and its key
    KEY_FIELDS,
    OPTIONAL_KEY_FIELDS,
    cell_key,
    check_method_params,
    data_fingerprint,
    full_params,
    make_cell,
    reusable_cells,
)
from ._cell_loop import EVALUATE, CellTask, fit_cell, pairs_only_set, run_cells  # noqa: F401 - the cell loop
from ._keys import normalize_key  # noqa: F401 - part of this module's names
from ._scoring import evaluate_model, label_prior_map  # noqa: F401 - a model's scores
from ._workers import MAX_JOBS, check_jobs  # noqa: F401 - --jobs
from .data import CrossModalData
from .errors import DataError, ParameterError
from .records import TASKS  # noqa: F401 - part of this module's names
from .registry import get_method_class

__all__ = [
    "MAX_JOBS",
    "TASKS",
    "TRAININGS",
    "EVALUATE",
    "CellTask",
    "cell_key",
    "check_jobs",
    "data_fingerprint",
    "evaluate_model",
    "fit_cell",
    "full_params",
    "label_prior_map",
    "make_cell",
    "normalize_key",
    "pairs_only_redundant",
    "pairs_only_set",
    "plan_evaluation",
    "run_cells",
    "reusable_cells",
    "run_evaluation",
]

#: what a cell trains on: every object of the semi-paired set, or its paired objects alone
TRAININGS = ("semi-paired", "pairs-only")


# --------------------------------------------------------------------------- dmh evaluate's plan
def plan_evaluation(
    data: CrossModalData,
    source: str,
    methods: Sequence[str] = ("dmh",),
    bits: Sequence[int] = (16, 32, 64, 128),
    paired_ratios: Sequence[float] = (1.0, 0.5),
    seeds: Sequence[int] = (0,),
    method_params: dict[str, dict] | None = None,
    dataset: str = "data",
    trainings: Sequence[str] = ("semi-paired",),
    validation: dict | None = None,
) -> list[dict]:
    """The cells of one evaluation, ordered seed, paired ratio, method, training, bits. ``source``
    names the data (a file path or a built-in name) in the cells' keys; ``dataset`` is the name
    records carry.

    ``trainings`` (of :data:`TRAININGS`): ``"pairs-only"`` adds cells trained on the pairs of each
    semi-paired set alone, labelled ``"METHOD (pairs only)"``. Beside ``"semi-paired"`` they are
    made only where they differ from it: at paired ratios below 1 and for methods that use unpaired
    objects (:func:`pairs_only_redundant` says which were left out). ``validation``
    (``{"fraction", "random_state"}``): ``data`` is the validation split made with them
    (:meth:`dmh.CrossModalData.validation`), and the cells say so in their keys and records."""
    if not data.has_split:
        raise DataError(f"{source}: the data need train_idx, query_idx and database_idx (see with_split)")
    train = data.train()
    if not train.is_fully_paired:
        raise DataError(
            f"{source}: the training set holds {train.n_image_only} image-only and {train.n_text_only} text-only "
            "objects; the evaluation makes its semi-paired training sets itself (--paired-ratio) from a fully "
            "paired one"
        )
    data.require_labels()
    method_params = method_params or {}
    for name in methods:  # unknown names and parameters fail before any work
        full_params(name, method_params.get(name))
    for r in paired_ratios:
        if not 0.0 < float(r) <= 1.0:
            raise ParameterError(f"paired ratio must lie in (0, 1], got {r}")
    trainings = _check_trainings(trainings)
    fingerprint = data_fingerprint(data, source)
    cells = []
    for s in seeds:
        for r in paired_ratios:
            for m in methods:
                for t in trainings:
                    pairs_only = t == "pairs-only"
                    if pairs_only and len(trainings) > 1 and pairs_only_redundant(m, r):
                        continue
                    label = f"{m} (pairs only)" if pairs_only else m
                    cells += [make_cell(dataset=dataset, fingerprint=fingerprint, method=m,
                                        params=method_params.get(m, {}), n_bits=b, paired_ratio=r, seed=s,
                                        label=label, pairs_only=pairs_only, validation=validation, train=train)
                              for b in bits]
    return cells


def _check_trainings(trainings) -> tuple[str, ...]:
    from ._validation import check_unique

    out = tuple(trainings)
    bad = [t for t in out if t not in TRAININGS]
    if bad or not out:
        raise ParameterError(f"training must be one or both of {', '.join(TRAININGS)}, got {list(out)!r}")
    return tuple(check_unique(list(out), "training"))


def pairs_only_redundant(method: str, paired_ratio: float) -> bool:
    """Whether a pairs-only cell of ``method`` at ``paired_ratio`` trains on exactly the data of the
    semi-paired cell: at full pairing, or for a method that ignores unpaired objects."""
    return float(paired_ratio) >= 1.0 or not getattr(get_method_class(method), "uses_unpaired", False)


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
    source: str = "data",
    trainings: Sequence[str] = ("semi-paired",),
    validation: dict | None = None,
) -> list[dict]:
    """Fit and score every (seed, paired ratio, method, bit length) cell.

    ``data`` needs a split and labels. ``method_params`` maps a method name to extra keyword
    arguments. ``on_record`` is called with each result record as soon as it exists (for writing
    partial results); cells whose key (:func:`cell_key`) is in ``done`` are skipped (to resume an
    interrupted run; a ``(method, n_bits, paired_ratio, seed)`` tuple in ``done``, as earlier
    versions took, skips that cell too). ``source`` names the data in the cells' keys. ``validation``
    (``{"fraction", "random_state"}``): score the validation split of ``data``'s training objects
    made with them instead of its query set. Returns the list of records, one per cell and task.
    """
    name = data.name or "data"
    if validation is not None:
        data = data.validation(**validation)
    cells = plan_evaluation(data, source, methods, bits, paired_ratios, seeds, method_params, dataset=name,
                            trainings=trainings, validation=validation)
    done = set(done or ())
    cells = [c for c in cells
             if c["key"] not in done and (c["method"], c["n_bits"], c["paired_ratio"], c["seed"]) not in done]

    def on_entry(entry):
        for rec in entry["records"]:
            if on_record is not None:
                on_record(rec)

    entries = run_cells(cells, {name: data}, on_entry=on_entry, progress=progress)
    return [rec for e in entries for rec in e["records"]]
