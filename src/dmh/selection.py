"""Label-free model selection: score a fit by how well held-out *pairs* find each other.

Unlabeled data is the premise of DMH, so hyperparameters must never be chosen on query labels or
test MAP. What every training set of a cross-modal method does hold is pairs: an image and the text
that describes it. :func:`holdout_pairs` removes a seeded part of the paired training objects
before fitting; :func:`pair_retrieval_scores` then asks, for each held-out image, where its own
text ranks among the held-out texts by Hamming distance (and vice versa). A method that maps both
modalities of an object close together, while keeping different objects apart, ranks the true
partner high.

Ties in Hamming distance are common with short codes; every figure here is its expectation under
a uniformly random order within ties (a constant code gets the score of a random ranking, never a
lucky one).

:func:`code_health` adds figures that need no pairs at all: bit balance, mean absolute correlation
between bits and the fraction of distinct codes.

:func:`score_model` combines both for a fitted model; :func:`tune` runs a grid of candidate
settings (used by ``dmh tune``). The *score* used to choose is ``score_model(...)["score"]``: the mean
reciprocal rank of the true partner, averaged over the two directions.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ._json import jsonable
from ._literal import literal_value
from .data import CrossModalData
from .errors import DataError, ParameterError

__all__ = [
    "HeldOutPairs",
    "holdout_pairs",
    "pair_retrieval_scores",
    "pair_reciprocal_ranks",
    "code_health",
    "score_model",
    "parse_grid",
    "tune",
    "choose",
    "paired_score_difference",
    "spearman",
]

#: recall@k of the true partner reported for these k
RECALL_KS = (1, 5, 10)


@dataclass(frozen=True)
class HeldOutPairs:
    """Paired objects removed from training: ``image[i]`` and ``text[i]`` describe the same object."""

    image: np.ndarray
    text: np.ndarray
    index: np.ndarray  # rows of the original data

    @property
    def n(self) -> int:
        return self.image.shape[0]


def holdout_pairs(data: CrossModalData, fraction: float = 0.15, min_count: int = 50, max_count: int = 500,
                  random_state=0) -> tuple[CrossModalData, HeldOutPairs]:
    """Split the paired objects of ``data``: a seeded ``fraction`` (at least ``min_count``, at most
    ``max_count``, never more than half of the pairs) is held out; the rest of ``data`` (all unpaired
    objects and the remaining pairs) is returned for fitting.

    Raises ``ValueError`` when fewer than 10 paired objects would be held out.
    """
    if not 0.0 < float(fraction) < 1.0:
        raise ParameterError(f"holdout fraction must lie in (0, 1), got {fraction}")
    paired = np.flatnonzero(data.paired_mask)
    n_hold = int(round(fraction * paired.size))
    n_hold = max(n_hold, int(min_count))
    n_hold = min(n_hold, int(max_count), paired.size // 2)
    if n_hold < 10:
        raise DataError(
            f"label-free selection needs paired training objects to hold out: the data hold {paired.size} "
            "pairs, too few to hold out 10"
        )
    rng = np.random.default_rng(random_state)
    held = np.sort(rng.choice(paired, size=n_hold, replace=False))
    keep = np.setdiff1d(np.arange(data.n_objects), held)
    fit_data = data.subset(keep)
    return fit_data, HeldOutPairs(image=data.image[held], text=data.text[held], index=held)


def pair_reciprocal_ranks(image_codes, text_codes) -> np.ndarray:
    """Per held-out pair (row ``i`` of both arrays one object): the expected reciprocal rank of its
    own partner by Hamming distance, the mean of the two directions (image->text, text->image),
    ties in random order. Its mean is :func:`pair_retrieval_scores`'s ``mrr``; per pair, it lets two
    models scored on the same pairs be compared with the spread of their paired difference."""
    D = _pair_distances(image_codes, text_codes)
    return (_expected_reciprocal_rank(*_tie_aware_partner_ranks(D))
            + _expected_reciprocal_rank(*_tie_aware_partner_ranks(D.T))) / 2.0


def _pair_distances(image_codes, text_codes) -> np.ndarray:
    """The Hamming distances of the held-out pairs' image codes (rows) to their text codes (columns;
    the diagonal holds the partners), after checking both arrays have one row per pair, at least 2."""
    from .metrics import hamming_distance

    image_codes = np.asarray(image_codes)
    text_codes = np.asarray(text_codes)
    if image_codes.shape != text_codes.shape:
        raise DataError(f"image codes {image_codes.shape} and text codes {text_codes.shape} must have one row "
                         "per held-out pair and the same number of bits")
    if image_codes.shape[0] < 2:
        raise DataError("pair retrieval needs at least 2 held-out pairs")
    return hamming_distance(image_codes, text_codes)


def _tie_aware_partner_ranks(D: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For a square distance matrix whose diagonal holds the true partners: the number of
    candidates strictly closer (``a``) and tied with the partner excluding itself (``t``), per row."""
    diag = np.diag(D)[:, None]
    a = (D < diag).sum(1)
    t = (D == diag).sum(1) - 1
    return a, t


def _expected_reciprocal_rank(a: np.ndarray, t: np.ndarray) -> np.ndarray:
    """E[1/rank] when the partner's rank is uniform on a+1 .. a+t+1."""
    # harmonic numbers: H(a+t+1) - H(a), divided by t+1
    from scipy.special import digamma

    return (digamma(a + t + 2.0) - digamma(a + 1.0)) / (t + 1.0)


def pair_retrieval_scores(image_codes, text_codes, ks: Sequence[int] = RECALL_KS, per_pair: bool = False) -> dict:
    """How well each image code retrieves its own text among all texts (``image->text``), and vice
    versa. Row ``i`` of both arrays is one object. Returns, per direction, the mean reciprocal
    rank (``mrr``), the mean rank divided by n (``mean_rank``, 0.5 for a random ranking) and
    ``recall@k``, all expectations under random order within Hamming ties; plus ``mrr`` (mean of the
    two directions) and ``mrr_random`` (the MRR of a random ranking, for reference). ``per_pair``
    adds ``pair_rr``, each pair's reciprocal rank averaged over the two directions
    (:func:`pair_reciprocal_ranks`' values, to 6 decimals: their mean is ``mrr``)."""
    D = _pair_distances(image_codes, text_codes)
    n = D.shape[0]
    out = {"n_pairs": int(n)}
    mrrs, rrs = [], []
    for name, M in (("image->text", D), ("text->image", D.T)):
        a, t = _tie_aware_partner_ranks(M)
        rr = _expected_reciprocal_rank(a, t)
        rrs.append(rr)
        rank = a + 1.0 + t / 2.0
        res = {"mrr": float(rr.mean()), "mean_rank": float(rank.mean() / n)}
        for k in ks:
            res[f"recall@{k}"] = float(np.clip((k - a) / (t + 1.0), 0.0, 1.0).mean())
        out[name] = res
        mrrs.append(res["mrr"])
    out["mrr"] = float(np.mean(mrrs))
    if per_pair:
        out["pair_rr"] = np.round((rrs[0] + rrs[1]) / 2.0, 6).tolist()
    out["mrr_random"] = float(_expected_reciprocal_rank(np.zeros(1), np.array([n - 1.0]))[0])
    return out


#: :func:`neighbourhood_relevance`: the database objects it compares with at most, and the share of
#: them by which it widens each view's neighbourhood (and the mean count of objects alike in both
#: views it widens them to reach, as a share of the database)
NEIGHBOURHOOD_MAX_DB = 5000
NEIGHBOURHOOD_STEP = 0.02
NEIGHBOURHOOD_TARGET = 0.01


def _ranked(S: np.ndarray) -> np.ndarray:
    """Column indices of each row, largest entry first (ties by column index)."""
    return np.lexsort((np.broadcast_to(np.arange(S.shape[1]), S.shape), -S), axis=1)


def _top_k(order: np.ndarray, k: int) -> np.ndarray:
    """Boolean mask of each row's first ``k`` columns in ``order`` (from :func:`_ranked`)."""
    out = np.zeros(order.shape, dtype=bool)
    np.put_along_axis(out, order[:, :k], True, axis=1)
    return out


def _cosine(A, B):
    """Cosine similarity of the rows of ``A`` and ``B`` (a zero row gives 0)."""
    A = A / np.maximum(np.linalg.norm(A, axis=1, keepdims=True), 1e-12)
    B = B / np.maximum(np.linalg.norm(B, axis=1, keepdims=True), 1e-12)
    return A @ B.T


def neighbourhood_relevance(query_image, query_text, db_image, db_text,
                            target: float = NEIGHBOURHOOD_TARGET) -> tuple[np.ndarray, int]:
    """Label-free relevance of database objects to held-out objects (both fully described): ``j``
    is relevant to ``i`` when it is among ``i``'s ``k`` nearest database objects in *both* views
    (cosine of the raw features, centred on the database). Two objects whose images and whose
    texts are both alike most likely show the same kind of thing; one view alone is not trusted (a
    SIFT histogram or a short title is a poor judge of meaning on its own). ``k`` starts at
    :data:`NEIGHBOURHOOD_STEP` of the database (at least 10) and widens by as much until the
    held-out objects average ``target`` (:data:`NEIGHBOURHOOD_TARGET`) of it (at least 5) alike in both views,
    at most a quarter of it: where one view's neighbourhoods say little, the two agree rarely.
    Returns the boolean (n_query, n_db) matrix and the k used."""
    n = np.asarray(db_image).shape[0]

    def ranked_cosine(query, db):  # cosine of the features centred on the database
        db = np.asarray(db, dtype=np.float64)
        centre = db.mean(0)
        return _ranked(_cosine(np.asarray(query, dtype=np.float64) - centre, db - centre))

    oi, ot = ranked_cosine(query_image, db_image), ranked_cosine(query_text, db_text)
    step = max(10, int(NEIGHBOURHOOD_STEP * n))
    target = max(5.0, target * n)
    k = min(step, n)
    while True:
        R = _top_k(oi, k) & _top_k(ot, k)
        if R.sum(1).mean() >= target or k + step > max(step, n // 4):
            return R, k
        k += step


def neighbourhood_scores(model, held: HeldOutPairs, train: CrossModalData, held_codes=None) -> dict:
    """Retrieval from the held-out objects into the paired training objects (at most
    :data:`NEIGHBOURHOOD_MAX_DB`, evenly spaced), judged by :func:`neighbourhood_relevance`: the
    protocol of test MAP (queries against the training set as database) with relevance that needs
    no labels. Per direction the tie-aware MAP (expected AP under random order within Hamming
    ties), their mean (``map``), the k used and the mean number of relevant objects per query.
    Where pair retrieval (MRR) rewards finding the very partner among the held-out objects, this
    rewards placing the objects that both views call alike near each query. ``held_codes``: the
    held-out objects' (image, text) codes when the caller has them already."""
    from .metrics import average_precisions_tie_aware

    paired = np.flatnonzero(train.paired_mask)
    if paired.size > NEIGHBOURHOOD_MAX_DB:
        paired = paired[np.linspace(0, paired.size - 1, NEIGHBOURHOOD_MAX_DB).astype(int)]
    db_image, db_text = train.image[paired], train.text[paired]
    R, k = neighbourhood_relevance(held.image, held.text, db_image, db_text)
    eye = np.eye(paired.size, dtype=bool)  # one-hot "labels" of the database: relevance is then R itself
    if held_codes is None:
        held_codes = (model.encode(held.image, modality="image"), model.encode(held.text, modality="text"))
    qi, qt = held_codes
    di, dt = model.encode(db_image, modality="image"), model.encode(db_text, modality="text")
    out = {"k": int(k), "n_db": int(paired.size), "mean_relevant": float(R.sum(1).mean())}
    maps = []
    for name, q, d in (("image->text", qi, dt), ("text->image", qt, di)):
        v = float(average_precisions_tie_aware(q, d, R, eye).mean())
        out[name] = v
        maps.append(v)
    out["map"] = float(np.mean(maps))
    return out


def code_health(codes) -> dict:
    """Label-free figures of a set of {-1,+1} codes (rows = objects): ``bit_balance`` (mean over bits
    of ``1 - |mean|``: 1 = every bit splits the objects in half, 0 = constant bits), ``max_imbalance``
    (largest ``|mean|``), ``mean_abs_corr`` (mean absolute correlation between distinct bits; constant
    bits count as 0) and ``distinct`` (fraction of distinct codes)."""
    C = np.asarray(codes, dtype=np.float64)
    if C.ndim != 2 or C.shape[0] < 2:
        raise DataError(f"code_health needs a 2-D array with at least 2 rows, got shape {C.shape}")
    means = C.mean(0)
    c = C.shape[1]
    corr_mean = 0.0
    if c > 1:
        sd = C.std(0)
        ok = sd > 0
        Z = np.zeros_like(C)
        Z[:, ok] = (C[:, ok] - means[ok]) / sd[ok]
        R = Z.T @ Z / C.shape[0]
        off = ~np.eye(c, dtype=bool)
        corr_mean = float(np.abs(R[off]).mean())
    distinct = np.unique(C > 0, axis=0).shape[0] / C.shape[0]
    return {
        "bit_balance": float(1.0 - np.abs(means).mean()),
        "max_imbalance": float(np.abs(means).max()),
        "mean_abs_corr": corr_mean,
        "distinct": float(distinct),
    }


def score_model(model, held: HeldOutPairs, train: CrossModalData | None = None, per_pair: bool = False) -> dict:
    """Label-free score of a fitted model: pair retrieval on the held-out pairs (``score`` = their
    mean MRR over both directions), and code health of the held-out codes of each modality (and of
    the training objects' codes when ``train`` is given, with then the neighbourhood figure of
    :func:`neighbourhood_scores`, reported beside the score, not used to choose). ``per_pair`` adds
    ``pair_rr``, each held-out pair's reciprocal rank (:func:`pair_retrieval_scores`, in the pairs'
    order; their mean is ``score``), from which :func:`choose` gives the standard error of the
    difference between two candidates scored on the same pairs."""
    from .base import encode_checked

    ci, ct = encode_checked(model, held.image, "image"), encode_checked(model, held.text, "text")
    out = pair_retrieval_scores(ci, ct, per_pair=per_pair)
    out["score"] = out["mrr"]
    if train is not None and train.paired_mask.sum() >= 2:
        out["neighbourhood"] = neighbourhood_scores(model, held, train, held_codes=(ci, ct))
    out["health_image"] = code_health(ci)
    out["health_text"] = code_health(ct)
    if train is not None:
        for m in ("image", "text"):
            out[f"health_train_{m}"] = code_health(model.encode(train.view(m), modality=m))
    return out


# ---------------------------------------------------------------------------------------- tuning
def parse_grid(spec: str, method: str) -> list[dict]:
    """``'dmh.n_rounds=1,3;dmh.gamma=0.01,0.1'`` -> the list of candidate parameter dicts (the
    Cartesian product; ``method.`` prefixes are optional). An empty spec is one candidate: the
    defaults."""
    from .registry import resolve_method

    axes: list[tuple[str, list]] = []
    for part in (p.strip() for p in spec.split(";")):
        if not part:
            continue
        if "=" not in part:
            raise ParameterError(f"grid entries are KEY=V1,V2,... separated by ';', got {part!r}")
        key, values = part.split("=", 1)
        key = key.strip()
        if "." in key:  # METHOD.KEY: a parameter name has no dot (a method may: package.module:Class)
            prefix, _, key = key.rpartition(".")
            if prefix.lower() != method.lower() and not (":" in prefix and resolve_method(prefix) == method):
                raise ParameterError(f"grid entry {part!r} names method {prefix!r}, but the method tuned is {method!r}")
        vals = [literal_value(v.strip()) for v in values.split(",") if v.strip()]
        if not vals:
            raise ParameterError(f"grid entry {part!r} lists no values")
        if any(k == key for k, _ in axes):
            raise ParameterError(f"grid names {key!r} twice")
        axes.append((key, vals))
    if not axes:
        return [{}]
    keys = [k for k, _ in axes]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(v for _, v in axes))]


def candidate_key(params: dict) -> str:
    return json.dumps(params, sort_keys=True)


def data_ident(data: CrossModalData) -> dict:
    """The data part of a tune fit's key: the hashes of :func:`dmh.evaluation.data_fingerprint`
    (features, masks and labels; the split), computed once per tune."""
    from .evaluation import data_fingerprint

    fp = data_fingerprint(data, "")
    return {"data": fp["sha256"], "split": fp["split"]}


def fit_key(ident: dict, method: str, params: dict, n_bits: int, seed: int, paired_ratio: float,
            holdout: float) -> str:
    """Everything that determines one tune fit's result: the data (``ident``, from
    :func:`data_ident`), the method with every parameter (defaults and preset values written out,
    see :func:`dmh.evaluation.full_params`), bits, seed, paired ratio and held-out share. A resumed
    tune reuses a finished fit only under an equal key."""
    from .evaluation import full_params

    key = {
        **ident, "method": method, "params": full_params(method, params), "n_bits": int(n_bits), "seed": int(seed),
        "paired_ratio": float(paired_ratio), "holdout": float(holdout),
    }
    return json.dumps(jsonable(key), sort_keys=True, separators=(",", ":"))


def spearman(x, y) -> float | None:
    """Spearman rank correlation (average ranks for ties); ``None`` with fewer than 3 values or a
    constant input."""
    from scipy.stats import spearmanr

    x, y = np.asarray(x, float), np.asarray(y, float)
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(spearmanr(x, y).statistic)


def tune(data: CrossModalData, method: str, grid: Sequence[dict], bits: Sequence[int], seeds: Sequence[int],
         *, paired_ratio: float = 1.0, holdout: float = 0.15, fixed_params: dict | None = None,
         test_map: bool = False, records: list | None = None, on_record: Callable[[dict], None] | None = None,
         on_resume: Callable[[int, int], None] | None = None, progress: bool = False, jobs: int = 1,
         echo: Callable[[str], None] | None = None) -> list[dict]:
    """Fit every candidate (grid x bits x seeds) on the training set minus held-out pairs and score
    it without labels (:func:`score_model`). ``records`` are finished results (resuming: their cells
    are skipped). With ``test_map`` the MAP on the data's query/database split is also recorded, to
    *validate* the criterion and for reports; :func:`choose` never reads it. ``on_resume(reused,
    planned)`` is called once the finished records have been checked against this run's settings
    (a mismatch raises :class:`DataError` before it), when some are reused.

    ``data`` needs a training split (``train_idx``) or is used whole. For each seed, the training
    set is made semi-paired at ``paired_ratio`` (:func:`dmh.make_semi_paired`) and then the held-out
    pairs are drawn from its pairs with the same seed.

    ``jobs=N`` (N > 1) fits N candidates at a time in worker processes (:mod:`dmh._workers`: each
    with dmh's threads // N, a fit's result that of a serial run at that thread count; ``echo``
    gets the line saying so). ``on_record`` then receives records as they finish. The list returned
    holds ``records`` and the new ones, in the plan's order either way.
    """
    from ._workers import check_jobs
    from .methods import get_method_class

    jobs = check_jobs(jobs)
    klass = get_method_class(method)
    valid = set(klass().get_params(deep=False))
    fixed_params = dict(fixed_params or {})
    for params in [fixed_params, *grid]:
        unknown = sorted(set(params) - valid)
        if unknown:
            raise ParameterError(f"unknown parameter(s) {unknown} for method {method!r}; it has {sorted(valid)}")
    records = list(records or [])
    cells = [(s, b, p) for s in seeds for b in bits for p in grid]
    ident = data_ident(data)
    keys = [fit_key(ident, method, {**fixed_params, **p}, b, s, paired_ratio, holdout) for s, b, p in cells]
    done = {r.get("key") for r in records}
    if None in done:
        raise DataError("the tune results to resume hold fits without a key (written by an older dmh): "
                        "they cannot be told apart from other settings; start a new results file")
    setting = ("data", "split", "method", "paired_ratio", "holdout")
    if keys:
        ours = json.loads(keys[0])
        other = [r for r in records if any(json.loads(r["key"]).get(f) != ours[f] for f in setting)]
        if other:
            raise DataError(f"the tune results to resume hold {len(other)} fit(s) of another tune (other data, split, "
                            "method, paired ratio or held-out share): start a new results file")
    planned = {(candidate_key(p), int(b), int(s), float(paired_ratio)): k
               for (s, b, p), k in zip(cells, keys, strict=True)}
    clash = [r for r in records if r["key"] != planned.get((r["candidate"], r["n_bits"], r["seed"], r["paired_ratio"]),
                                                           r["key"])]
    if clash:
        r = clash[0]
        raise DataError(f"the tune results to resume hold {len(clash)} fit(s) of this run's candidates made under "
                        "other parameter values (other fixed parameters, or a changed default; first: "
                        f"{r['candidate']} {r['n_bits']} bits seed {r['seed']}): start a new results file")
    train_full = data.train() if data.train_idx is not None else data
    n_planned = len(cells)
    cells = [(c, k) for c, k in zip(cells, keys, strict=True) if k not in done]
    if on_resume is not None and n_planned > len(cells):
        on_resume(n_planned - len(cells), n_planned)
    bar = None
    if progress:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(cells), desc="tune", unit="fit")
    state = {"klass": klass, "method": method, "fixed_params": fixed_params, "train": train_full,
             "paired_ratio": paired_ratio, "holdout": holdout,
             "test": (data.query(), data.database()) if test_map else None}

    def finished(_i, rec):
        records.append(rec)
        if on_record is not None:
            on_record(rec)
        if bar is not None:
            bar.update(1)

    try:
        if jobs > 1 and len(cells) > 1:
            from ._workers import run_in_workers

            run_in_workers(_tune_fit, cells, jobs=jobs, state=state, on_result=finished, echo=echo)
        else:
            for i, cell in enumerate(cells):
                finished(i, _tune_fit(state, cell))
    finally:
        if bar is not None:
            bar.close()
    order = {k: i for i, k in enumerate(keys)}  # the plan's order, whatever finished first
    return sorted(records, key=lambda r: order.get(r["key"], -1))


def _tune_fit(state: dict, cell) -> dict:
    """Fit and score one candidate of :func:`tune` (in this process or a worker's)."""
    import time

    from .data import make_semi_paired

    (seed, n_bits, params), key = cell
    cache = state.setdefault("split_cache", {})
    if seed not in cache:
        cache.clear()
        train = state["train"]
        if state["paired_ratio"] < 1.0:
            train = make_semi_paired(train, state["paired_ratio"], random_state=seed)
        cache[seed] = holdout_pairs(train, state["holdout"], random_state=seed)
    fit_data, held = cache[seed]
    model = state["klass"](n_bits=int(n_bits), random_state=int(seed), **{**state["fixed_params"], **params})
    t0 = time.perf_counter()
    model.fit(fit_data)
    fit_s = time.perf_counter() - t0
    rec = {
        "key": key,
        "method": state["method"],
        "candidate": candidate_key(params),
        "params": params,
        "n_bits": int(n_bits),
        "seed": int(seed),
        "paired_ratio": float(state["paired_ratio"]),
        "fit_seconds": round(fit_s, 3),
        "n_fit": fit_data.n_objects,
        "n_heldout_pairs": held.n,
        "label_free": score_model(model, held, fit_data, per_pair=True),
    }
    if state["test"] is not None:
        from .evaluation import evaluate_model

        sc = evaluate_model(model, *state["test"])
        rec["test_map"] = {task: v["map"] for task, v in sc.items()}
    return rec


def summarize(records: Sequence[dict]) -> list[dict]:
    """One row per (candidate, bits): the mean label-free score over seeds (and the mean test MAP
    where recorded, for reports only)."""
    groups: dict = {}
    for r in records:
        groups.setdefault((r["candidate"], r["n_bits"], r["paired_ratio"]), []).append(r)
    rows = []
    for (cand, b, p), rs in groups.items():
        row = {"candidate": cand, "params": rs[0]["params"], "n_bits": b, "paired_ratio": p,
               "n_seeds": len(rs), "score": float(np.mean([r["label_free"]["score"] for r in rs]))}
        if all("neighbourhood" in r["label_free"] for r in rs):
            row["neighbourhood_map"] = float(np.mean([r["label_free"]["neighbourhood"]["map"] for r in rs]))
        for key in ("bit_balance", "mean_abs_corr", "distinct"):
            row[key] = float(np.mean([(r["label_free"]["health_image"][key] + r["label_free"]["health_text"][key]) / 2
                                      for r in rs]))
        if all("test_map" in r for r in rs):
            row["test_map"] = float(np.mean([np.mean(list(r["test_map"].values())) for r in rs]))
        rows.append(row)
    rows.sort(key=lambda r: (r["paired_ratio"], r["n_bits"], -r["score"]))
    return rows


def choose(records: Sequence[dict]) -> dict:
    """The chosen candidate: the highest label-free score averaged over every bit length and seed
    run (one setting for all code lengths). Never reads test MAP.

    ``others`` sets every other candidate beside it, best first: its score, and, where the records
    hold each held-out pair's reciprocal rank (``pair_rr``, written by :func:`tune`), the chosen
    candidate's lead over it as a paired difference with its standard error
    (:func:`paired_score_difference`) and whether that lead is within one standard error, i.e.
    whether the held-out pairs can tell the two apart. The choice itself is the best mean either way."""
    by_cand: dict = {}
    for r in records:
        by_cand.setdefault(r["candidate"], []).append(r["label_free"]["score"])
    if not by_cand:
        raise DataError("no finished candidates to choose from")
    mean = {c: float(np.mean(v)) for c, v in by_cand.items()}
    best = max(by_cand, key=mean.__getitem__)
    others = []
    for c in sorted((c for c in by_cand if c != best), key=lambda c: -mean[c]):
        row = {"candidate": c, "score": mean[c], "lead": None, "lead_se": None, "within_one_se": None}
        d = paired_score_difference(records, best, c)
        if d is not None:
            row.update(lead=d["difference"], lead_se=d["se"], within_one_se=bool(d["difference"] <= d["se"]))
        others.append(row)
    return {"candidate": best, "params": json.loads(best), "score": mean[best], "others": others}


def paired_score_difference(records: Sequence[dict], a: str, b: str) -> dict | None:
    """Candidate ``a``'s held-out pair score minus ``b``'s, paired by held-out pair: per seed (one
    set of held-out pairs), each pair's reciprocal rank under ``a`` minus under ``b`` averaged over
    the bit lengths both have; the mean of these differences over every (seed, pair), and its
    standard error (their standard deviation over the square root of their number). ``None`` where
    the two share no (bits, seed) fit or a record lacks ``pair_rr`` (a file written before it was
    recorded)."""
    def fits(c):
        return {(r["seed"], r["n_bits"]): r["label_free"].get("pair_rr") for r in records if r["candidate"] == c}

    fa, fb = fits(a), fits(b)
    common = sorted(set(fa) & set(fb))
    if not common or any(fa[k] is None or fb[k] is None or len(fa[k]) != len(fb[k]) for k in common):
        return None
    per_seed: dict = {}
    for seed, n_bits in common:
        per_seed.setdefault(seed, []).append(np.asarray(fa[seed, n_bits]) - np.asarray(fb[seed, n_bits]))
    if any(len({len(d) for d in diffs}) > 1 for diffs in per_seed.values()):
        return None  # not the same held-out pairs at every length of a seed
    units = np.concatenate([np.mean(diffs, axis=0) for diffs in per_seed.values()])
    mean, se = mean_and_standard_error(units)
    return {"difference": mean, "se": se, "n": int(units.size)}


def mean_and_standard_error(differences) -> tuple[float, float]:
    """The mean of paired differences (one per held-out pair) and its standard error, their sample
    standard deviation over the square root of their number (NaN for fewer than two)."""
    d = np.asarray(differences, dtype=np.float64)
    se = float(d.std(ddof=1) / np.sqrt(d.size)) if d.size > 1 else float("nan")
    return float(d.mean()), se


def rank_correlations(records: Sequence[dict]) -> list[dict]:
    """Validation of the criterion: per (bits, paired ratio), the Spearman correlation over candidates
    between the mean label-free score and the mean test MAP (records made with ``test_map=True``)."""
    rows = summarize(records)
    out = []
    for key in sorted({(r["n_bits"], r["paired_ratio"]) for r in rows}):
        sel = [r for r in rows if (r["n_bits"], r["paired_ratio"]) == key and "test_map" in r]
        rho = spearman([r["score"] for r in sel], [r["test_map"] for r in sel])
        row = {"n_bits": key[0], "paired_ratio": key[1], "n_candidates": len(sel), "spearman": rho}
        if sel and all("neighbourhood_map" in r for r in sel):
            row["spearman_neighbourhood"] = spearman([r["neighbourhood_map"] for r in sel],
                                                     [r["test_map"] for r in sel])
        out.append(row)
    return out


def load_records(path) -> list[dict]:
    path = Path(path)
    if not path.exists():
        return []
    try:
        records = list(json.loads(path.read_text())["records"])
        malformed = [i for i, rec in enumerate(records)
                     if isinstance(rec, dict) and "key" in rec and not isinstance(json.loads(rec["key"]), dict)]
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"{path} is not a tune results file ({exc})") from None
    for i, rec in enumerate(records):
        missing = [f for f in _RECORD_FIELDS if not isinstance(rec, dict) or f not in rec]
        if missing:
            raise DataError(f"{path} is not a tune results file (record {i} lacks {missing})")
    if malformed:
        raise DataError(f"{path} is not a tune results file (record {malformed[0]} has a malformed key)")
    for i, rec in enumerate(records):  # optional (files before it lack it), but numbers where present
        rr = rec["label_free"].get("pair_rr") if isinstance(rec["label_free"], dict) else None
        if rr is not None and not (isinstance(rr, list) and all(isinstance(x, (int, float)) for x in rr)):
            raise DataError(f"{path} is not a tune results file (record {i}'s pair_rr is not a list of numbers)")
    return records


#: what every record of a tune results file holds (its ``key`` too, from this dmh on)
_RECORD_FIELDS = ("candidate", "params", "n_bits", "seed", "paired_ratio", "label_free")
