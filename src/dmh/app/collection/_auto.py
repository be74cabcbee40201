"""``method="auto"``: the hashing method of a collection chosen by the collection's own captioned
photos, without labels.

A seeded share of the captioned photos (:func:`dmh.heldout.holdout_pairs`: 15%, at least 50 and
at most 500, never more than half) is held out; in the held-out pair search (:func:`dmh.heldout.search`,
its rule the best score, a tie to the first listed) each candidate method is fitted on the other items
and scored by how well the held-out photos and captions find each other
(:func:`dmh.heldout.score_model`: the mean reciprocal rank of the true partner, both directions,
as ``dmh tune`` scores settings), once by Hamming distance alone and once re-ranked by the real
values behind the codes (:func:`dmh.app.rerank.reranked_pair_scores`); a candidate's score is the
better of the two, the search it would serve, and the chosen one's decides whether the collection
re-ranks (``build.json`` ``"rerank"``). The best candidate is then fitted again on every item, held-out
pairs included: pairs are what the methods learn the link between photos and words from, and a
collection has few of them. Each candidate's score is written to ``build.json`` as it is known, so
an interrupted build resumes at the next candidate.
"""

from __future__ import annotations

import numpy as np

from ...errors import CollectionError, DmhError, ParameterError

#: the candidates of ``method="auto"`` unless told otherwise: DMH, the linear methods that retrieve
#: best on real photos with short captions (docs/peers_linear.md), and every deep peer whose fit is
#: within :data:`FIT_BUDGET_CPU_S` in its CPU setting (:data:`dmh.peers.CPU_SETTINGS`, which auto fits
#: them with; ties in score go to the first listed)
DEFAULT_CANDIDATES = ("dmh", "cca-itq", "fsh", "spdh", "sadch", "ucch", "djsrh", "jdsh", "dgcpn")
#: the budget of a default candidate: CPU seconds of one fit (one thread, 64 bits) on a collection
#: of the shared fashion photos' size (2,080 items, 1,040 of them captioned), no more than DMH's own
#: fit; measured by ``benchmarks/bench_auto_candidates.py`` (docs/collection.md)
FIT_BUDGET_CPU_S = 125
#: the share of the captioned photos held out to score the candidates (as ``dmh tune``)
HOLDOUT = 0.15
#: fewer pairs than this and the candidates are not compared: the first one is used
MIN_PAIRS = 20


def check_candidates(candidates, params, n_bits: int) -> tuple[list[str], dict]:
    """The candidate names (lower-cased, each once, each a known method other than ``auto``) and
    their parameters (``{candidate: {key: value}}``), checked as a fit would check them."""
    from ...registry import get_method_class

    if isinstance(candidates, str):
        candidates = [c for c in candidates.split(",") if c.strip()]
    names = [str(c).strip() if ":" in str(c) else str(c).strip().lower() for c in candidates]
    if not names:
        raise CollectionError("candidates is empty: name at least one method")
    for name in names:
        if name == "auto":
            raise CollectionError("candidates lists auto; name the methods to compare (dmh, cca-itq, ...)")
        try:
            get_method_class(name)
        except KeyError as exc:
            raise CollectionError(f"candidates: {exc.args[0]}") from None
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise CollectionError(f"candidates names {', '.join(twice)} twice")
    params = dict(params or {})
    stray = sorted(set(params) - set(names))
    if stray or not all(isinstance(v, dict) for v in params.values()):
        raise CollectionError(f"params of method auto name their candidate (METHOD.KEY=VALUE, METHOD one of "
                              f"{', '.join(names)}); got {', '.join(stray) or 'a parameter without a method'}")
    for name in names:
        check_build_params(name, params.get(name, {}), n_bits, where=f"{name}.")
    return names, {n: dict(params[n]) for n in names if params.get(n)}


def check_build_params(method: str, params: dict, n_bits: int, where: str = "") -> None:
    """``params`` of ``method`` as the build's fit will check them, before any photo is read;
    ``n_bits`` and ``random_state`` are the build's own arguments (``where``: how a message names
    the parameters, e.g. ``"dmh."``)."""
    from ...evaluation import check_method_params

    for key, argument in (("n_bits", "n_bits"), ("random_state", "seed")):
        if key in params:
            raise CollectionError(f"params: {where}{key} is the build's own {argument} argument")
    try:
        check_method_params(method, params, [n_bits])
    except ParameterError as exc:
        raise CollectionError(f"params: {exc}") from None


def _model(name: str, n_bits: int, seed: int, params: dict, progress: bool):
    from ...peers import CPU_SETTINGS
    from ...registry import get_method_class

    klass = get_method_class(name)
    params = {**CPU_SETTINGS.get(name, {}), **params}  # a deep peer in its CPU setting, unless told otherwise
    extra = {}
    if progress and "verbose" in klass().get_params(deep=False) and "verbose" not in params:
        extra["verbose"] = True  # DMH's progress bars and stage timings
    return klass(n_bits=n_bits, random_state=seed, **params, **extra)


def choose_method(data, *, candidates, params: dict, n_bits: int, seed: int, record: dict, save, progress: bool,
                  log) -> str:
    """The candidate to build with, chosen by held-out pairs of ``data`` (no labels). ``record`` (a
    dict kept in ``build.json``) receives the held-out split's size, each candidate's score (read
    back from it when resuming: those candidates are not fitted again) and the choice; ``save()``
    writes it after each candidate."""
    from ...heldout import Scored, best_mean, holdout_pairs, pair_retrieval_scores, score_model, search
    from ..rerank import reranked_pair_scores

    n_pair = int(data.n_paired)
    if n_pair < MIN_PAIRS:
        record.update(chosen=candidates[0], reason=f"{n_pair} captioned photos: too few to hold out pairs and "
                      f"compare methods (at least {MIN_PAIRS})")
        log(f"auto: only {n_pair} captioned photos, too few to compare methods (at least {MIN_PAIRS}); "
            f"building with {candidates[0]}")
        return candidates[0]
    fit_data, held = holdout_pairs(data, HOLDOUT, random_state=seed)
    scores = record.setdefault("scores", {})
    same = np.ones((held.n, 8))  # one code for all: the score of a random ranking
    random_score = pair_retrieval_scores(same, same)["mrr"]
    record.update(candidates=list(candidates), n_fit=int(fit_data.n_objects), n_heldout_pairs=int(held.n),
                  random_score=round(random_score, 6))
    log(f"auto: comparing {', '.join(candidates)}: each fitted on {fit_data.n_objects} items and scored by how well "
        f"{held.n} held-out captioned photos and their captions find each other (mean reciprocal rank of the true "
        f"partner, both ways; a random ranking scores {random_score:.3f}; no labels)")
    known = {n: Scored(scores[n]["score"]) for n in candidates if n in scores}  # scored before an interruption

    def fitter(name: str):
        def fit(fit_data):
            model = _model(name, n_bits, seed, params.get(name, {}), progress)
            model.fit(fit_data)
            return model

        return fit

    def served(model, held) -> Scored:
        """The score of the search this candidate would serve: re-ranked where that finds more."""
        s = score_model(model, held)
        r = reranked_pair_scores(model.project(held.image, modality="image"), model.project(held.text, modality="text"))
        rerank = r["mrr"] >= s["score"]
        sv = r if rerank else s
        row = {
            "score": round(sv["mrr"], 6),
            "image->text": round(sv["image->text"]["mrr"], 6),
            "text->image": round(sv["text->image"]["mrr"], 6),
            "recall@10": round((sv["image->text"]["recall@10"] + sv["text->image"]["recall@10"]) / 2, 6),
            "rerank": bool(rerank), "hamming_score": round(s["score"], 6), "reranked_score": round(r["mrr"], 6),
        }
        return Scored(row["score"], details=row)

    def scored(name: str, result: Scored) -> None:
        if name in known:
            log(f"auto: {name}: score {_shown(scores[name])} (from the interrupted build)")
        elif result.error is not None:  # this method cannot learn from these items: the others still can
            scores[name] = {"score": None, "error": result.error}
            save()
            log(f"auto: {name}: left out, it cannot be fitted here ({result.error})")
        else:
            scores[name] = {**result.details, "fit_seconds": round(result.seconds, 2)}
            save()
            log(f"auto: {name}: score {_shown(scores[name])}, fit {result.seconds:.1f} s")

    # the best score wins, a tie to the first listed
    found = search({n: fitter(n) for n in candidates}, fit_data, held, rule=best_mean, score=served, known=known,
                   skip=(DmhError,), on_scored=scored)
    if found.chosen is None:  # too few pairs once some are held out: the first candidate, on every item
        record.update(chosen=candidates[0], reason="no candidate could be fitted without the held-out pairs")
        save()
        log(f"auto: no candidate could be fitted without the held-out pairs; building with {candidates[0]} "
            "on every item")
        return candidates[0]
    best = found.chosen
    record.update(chosen=best, refit=True)
    save()
    log(f"auto: chose {best} (best score); fitting it on all {data.n_objects} items")
    return best


def _shown(row: dict) -> str:
    if row.get("score") is None:
        return f"none ({row.get('error')})"
    how = ""
    if "reranked_score" in row:
        how = (f"; re-ranked {row['reranked_score']:.3f}, Hamming alone {row['hamming_score']:.3f}: "
               f"{'re-ranks' if row['rerank'] else 'Hamming alone'}")
    return (f"{row['score']:.3f} (photo->caption {row['image->text']:.3f}, caption->photo {row['text->image']:.3f}"
            f"{how})")


def rerank_decision(record: dict | None) -> dict:
    """Whether the collection's searches re-rank (``build.json`` ``"rerank"``): for ``auto``, as its
    held-out pairs found for the chosen candidate (re-ranked when that scored at least as well as
    Hamming distance alone); otherwise, and for a candidate scored before re-ranking was, on."""
    from ..rerank import OVERSAMPLE

    row = ((record or {}).get("scores") or {}).get((record or {}).get("chosen"), {})
    if "rerank" in row:
        return {"on": bool(row["rerank"]), "oversample": OVERSAMPLE,
                "reason": f"held-out pairs: re-ranked {row['reranked_score']:.3f}, Hamming alone "
                          f"{row['hamming_score']:.3f}"}
    return {"on": True, "oversample": OVERSAMPLE, "reason": "default"}
