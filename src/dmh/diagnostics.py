"""See each stage of a DMH fit: per round, label-free figures and (where labels exist) the MAP of
every intermediate.

Fit with ``DMH(..., record_diagnostics=True)`` (each round's CLE features, GBE codes and network
weights are kept in ``rounds_``), then call :func:`diagnose`. Per round it reports:

label-free (anyone can compute them on their own data)
    ``heldout``: the pair-retrieval score of :func:`dmh.heldout.score_model` on held-out pairs
    (when given); ``gbe_health``: bit balance, bit correlation and distinct codes of GBE's training
    codes; ``gbe_loss``; ``dam_agreement``: the fraction of bits of the networks' training codes that
    equal GBE's codes (how well DAM fits its targets), per modality; ``dam_loss``.

with labels (for diagnosis and reports only; never for choosing settings)
    ``map_Y``: CLE features Y ranked by cosine similarity, queries = the paired, image-only and
    text-only training objects separately, database = every other training object;
    ``map_gbe``: GBE's training codes ranked by Hamming distance, same groups;
    ``map_net_train``: the networks' codes on the training objects, image->text and text->image
    (each object excluded from its own list); ``map_test``: the networks' codes on the queries
    against the database (the protocol's MAP). ``map_net_train - map_test`` is DAM's
    generalisation gap.

Ties in cosine similarity or Hamming distance are broken by a seeded random order (an unbiased
estimate of the tie-aware MAP).
"""

from __future__ import annotations

import copy

import numpy as np

from .data import CrossModalData, label_matrix
from .errors import ParameterError
from .heldout._codes import _cosine

__all__ = ["model_at_round", "ranking_map", "diagnose"]


def _check_recorded(model) -> None:
    """Refuse a model without per-round records, saying why (one line)."""
    if getattr(model, "blocks_", None):
        raise ParameterError("the model's code is made of blocks (block_bits): diagnose each of its blocks_, "
                             "each fitted with record_diagnostics=True")
    if getattr(model, "rounds_", None) is None:
        raise ParameterError("the model was not fitted with record_diagnostics=True")


def model_at_round(model, r: int):
    """A copy of a DMH fitted with ``record_diagnostics=True`` whose networks are those after round
    ``r`` (0-based): the model a fit with ``n_rounds = r + 1`` would have given."""
    _check_recorded(model)
    if not 0 <= r < len(model.rounds_):
        raise ParameterError(f"round must lie in 0..{len(model.rounds_) - 1}, got {r}")
    from .methods import dam

    out = copy.copy(model)
    nets = {}
    for m, state in model.rounds_[r]["nets"].items():
        net = dam.make_net(m, model.n_features_[m], model.n_bits_, (model.hidden_size,))
        net.load_state_dict(state)
        net.eval()
        nets[m] = net
    out.nets_ = nets
    out.codes_ = model.rounds_[r]["codes"]
    out.features_ = model.rounds_[r]["Y"]
    return out


def ranking_map(scores: np.ndarray, relevant: np.ndarray, exclude: np.ndarray | None = None,
                random_state=0) -> float:
    """MAP of ranking each row's columns by decreasing ``scores`` (``relevant``: bool, same shape);
    entries where ``exclude`` is True are left out; ties broken by a seeded random order. Rows with
    no relevant entry are skipped."""
    S = np.asarray(scores, dtype=np.float64).copy()
    R = np.asarray(relevant, dtype=bool).copy()
    if exclude is not None:
        S[exclude] = -np.inf
        R[exclude] = False
    rng = np.random.default_rng(random_state)
    jitter = rng.random(S.shape)
    order = np.lexsort((jitter, -S), axis=1)
    Rs = np.take_along_axis(R, order, axis=1)
    hits = np.cumsum(Rs, axis=1)
    n_rel = Rs.sum(1)
    ranks = np.arange(1, S.shape[1] + 1)
    ap = (Rs * hits / ranks).sum(1)
    ok = n_rel > 0
    return float((ap[ok] / n_rel[ok]).mean()) if ok.any() else float("nan")


def _groups(train: CrossModalData) -> dict[str, np.ndarray]:
    g = {"paired": np.flatnonzero(train.paired_mask),
         "image_only": np.flatnonzero(train.image_mask & ~train.text_mask),
         "text_only": np.flatnonzero(train.text_mask & ~train.image_mask)}
    return {k: v for k, v in g.items() if v.size}


def _group_maps(score_fn, train: CrossModalData, L: np.ndarray) -> dict:
    out = {}
    n = train.n_objects
    for name, idx in _groups(train).items():
        S = score_fn(idx)
        rel = (L[idx].astype(np.int32) @ L.T.astype(np.int32)) > 0
        excl = np.zeros((idx.size, n), bool)
        excl[np.arange(idx.size), idx] = True
        out[name] = ranking_map(S, rel, excl)
    return out


def diagnose(model, train: CrossModalData, held=None, query: CrossModalData | None = None,
             database: CrossModalData | None = None) -> list[dict]:
    """Per-round report of a DMH fitted on ``train`` with ``record_diagnostics=True`` (see the module
    docstring). ``held`` (:class:`dmh.heldout.HeldOutPairs`) adds the label-free held-out score;
    labels of ``train`` add the MAP of Y, GBE codes and training codes; ``query`` and ``database``
    add the test MAP."""
    from .evaluation import evaluate_model
    from .heldout import code_health, score_model

    _check_recorded(model)
    L = label_matrix(train.labels) if train.labels is not None else None
    out = []
    for r, rec in enumerate(model.rounds_):
        mr = model_at_round(model, r)
        H = rec["codes"]
        row = {"round": r + 1, "gbe_loss": rec["gbe_loss"], "dam_loss": rec["dam_loss"],
               "gbe_health": code_health(H)}
        net_codes = {}
        agree = {}
        for m in ("image", "text"):
            mask = train.mask(m)
            net_codes[m] = mr.encode(train.view(m), modality=m)
            agree[m] = float((net_codes[m] == H[mask]).mean())
        row["dam_agreement"] = agree
        if held is not None:
            row["heldout"] = score_model(mr, held)
        if L is not None:
            Y = rec["Y"].astype(np.float64)
            row["map_Y"] = _group_maps(lambda idx, Y=Y: _cosine(Y[idx], Y), train, L)
            Hf = H.astype(np.float64)
            row["map_gbe"] = _group_maps(lambda idx, Hf=Hf: Hf[idx] @ Hf.T, train, L)  # = c - 2 Hamming
            im, tm = train.image_mask, train.text_mask
            ii, ti = np.flatnonzero(im), np.flatnonzero(tm)
            rel = (L[ii].astype(np.int32) @ L[ti].T.astype(np.int32)) > 0
            same = ii[:, None] == ti[None, :]
            S = net_codes["image"].astype(np.float64) @ net_codes["text"].T.astype(np.float64)
            row["map_net_train"] = {"image->text": ranking_map(S, rel, same),
                                    "text->image": ranking_map(S.T, rel.T, same.T)}
        if query is not None and database is not None:
            row["map_test"] = {k: v["map"] for k, v in evaluate_model(mr, query, database).items()}
        out.append(row)
    return out


def format_report(rows: list[dict]) -> str:
    """The per-round report as a markdown table (one line per round)."""
    head = ["round", "held-out MRR", "GBE balance", "GBE mean abs corr", "GBE loss", "DAM agree I/T",
            "MAP Y (paired/img/txt)", "MAP GBE (paired/img/txt)", "MAP net train I>T/T>I", "MAP test I>T/T>I"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]

    def f(x):
        return "-" if x is None else f"{x:.3f}"

    for r in rows:
        g = r["gbe_health"]
        cells = [str(r["round"]), f(r.get("heldout", {}).get("score")), f(g["bit_balance"]), f(g["mean_abs_corr"]),
                 f(r["gbe_loss"]), f"{r['dam_agreement']['image']:.3f}/{r['dam_agreement']['text']:.3f}"]
        for key in ("map_Y", "map_gbe"):
            d = r.get(key)
            cells.append("-" if d is None else "/".join(f(d.get(k)) for k in ("paired", "image_only", "text_only")))
        for key in ("map_net_train", "map_test"):
            d = r.get(key)
            cells.append("-" if d is None else f"{d['image->text']:.3f}/{d['text->image']:.3f}")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
