"""``dmh tune``: choose a method's settings without labels (see :mod:`dmh.selection`)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ._options import int_list, jobs_option, method_of, methods_help, reject_own_options, seed_list, split_param

__all__ = ["tune"]


@click.command(
    help="""Score candidate settings of METHOD on DATA without labels: each candidate is fitted on
the training set minus a seeded part of its paired objects, and scored by how well each held-out
image's code retrieves its own text among the held-out texts and vice versa (mean reciprocal rank,
ties counted fairly), with code health (bit balance, bit correlation, distinct codes).

GRID is 'KEY=V1,V2;KEY2=V1,V2' (method prefixes optional, e.g. 'dmh.n_rounds=1,3'). Every candidate
is reported (two that are one setting, such as a default's own value beside it, are refused); the
choice is the best mean score over bits and seeds. --out is resumable: a rerun
reuses the fits made with the same data, settings and parameter values (defaults included) and
refuses a file of other settings."""
)
@click.argument("data")
@click.option("--method", default="dmh", show_default=True, help=methods_help("the method"))
@click.option("--grid", default="", help="candidate settings, e.g. 'dmh.n_rounds=1,3;dmh.gamma=0.01,0.1'")
@click.option("--param", "params", multiple=True, help="KEY=VALUE fixed for every candidate")
@click.option("--bits", default="16,64", show_default=True)
@click.option("--seeds", default="0", show_default=True)
@click.option("--paired-ratio", "paired_ratio", default=1.0, show_default=True, type=float)
@click.option("--holdout", default=0.15, show_default=True, type=float,
              help="fraction of the paired training objects held out for scoring")
@click.option("--test-map", is_flag=True,
              help="also record test MAP (needs labels) to validate the criterion; never used to choose")
@click.option("--out", type=click.Path(dir_okay=False), default="tune.json", show_default=True)
@jobs_option
def tune(data, method, grid, params, bits, seeds, paired_ratio, holdout, test_map, out, jobs):
    from .._atomic import atomic_write_text
    from .._json import jsonable
    from ..datasets import load_dataset
    from ..errors import DataError
    from ..registry import resolve_method
    from ..selection import (best_mean, check_distinct_candidates, choose, load_records, parse_grid, rank_correlations,
                              summarize_candidates)
    from ..selection import tune as run_tune

    method = resolve_method(method)
    candidates = parse_grid(grid, method)
    fixed = {}
    for item in params:
        key, value = split_param(item)
        fixed[method_of(key, [method])[1]] = value
    if not 0.0 < paired_ratio <= 1.0:
        raise click.BadParameter(f"--paired-ratio must lie in (0, 1], got {paired_ratio}")
    bit_list, seeds_ = int_list(bits, "--bits"), seed_list(seeds, "--seeds")
    from ..evaluation import check_method_params

    reject_own_options(fixed, "--param")
    for cand in candidates:  # every candidate's values, before the data and the first fit
        reject_own_options(cand, "--grid")
        check_method_params(method, {**fixed, **cand}, bit_list)
    check_distinct_candidates(method, candidates, bit_list, fixed)
    from .._atomic import check_writable

    check_writable(out, "--out")  # a fit must not be lost to an --out that cannot be written
    dataset = load_dataset(data)
    if test_map:
        dataset.require_labels()
    click.echo(dataset.summary())
    records = load_records(out)
    if records:
        before = json.loads(Path(out).read_text()).get("config", {}).get("fixed", {})
        if before != jsonable(fixed):
            raise DataError(f"{out} holds a tune with other --param values ({before}, now {jsonable(fixed)}): "
                            "start a new --out")
    config = {"data": str(data), "method": method, "grid": grid, "fixed": fixed, "bits": bit_list,
              "seeds": seeds_, "paired_ratio": paired_ratio, "holdout": holdout}

    def write(recs):
        payload = {"config": config, "records": recs, "summary": summarize_candidates(recs)}
        if recs:
            payload["chosen"] = choose(recs, rule=best_mean)
        if test_map:
            payload["rank_correlation"] = rank_correlations(recs)
        atomic_write_text(Path(out), json.dumps(jsonable(payload), indent=1))

    def on_record(rec):
        records.append(rec)
        write(records)
        lf = rec["label_free"]
        nb = f"(neighbourhood MAP {lf['neighbourhood']['map']:.4f}) " if "neighbourhood" in lf else ""
        line = (f"{rec['candidate']} {rec['n_bits']} bits seed {rec['seed']}: score {lf['score']:.4f} {nb}"
                f"(balance {lf['health_image']['bit_balance']:.2f}/{lf['health_text']['bit_balance']:.2f})")
        if "test_map" in rec:
            line += "  test MAP " + "/".join(f"{v:.3f}" for v in rec["test_map"].values())
        click.echo(line)

    records = run_tune(
        dataset, method, candidates, bit_list, seeds_, paired_ratio=paired_ratio, holdout=holdout,
        fixed_params=fixed, test_map=test_map, records=list(records), on_record=on_record, jobs=jobs, echo=click.echo,
        on_resume=lambda reused, planned: click.echo(f"Resuming: {reused} of {planned} fit(s) already in {out}"),
    )
    write(records)  # in the plan's order (with --jobs, fits finish in any order)
    click.echo("candidate | bits | label-free score" + (" | test MAP (not used to choose)" if test_map else ""))
    for row in summarize_candidates(records):
        extra = f" | {row['test_map']:.4f}" if "test_map" in row else ""
        click.echo(f"{row['candidate']} | {row['n_bits']} | {row['score']:.4f}{extra}")
    chosen = choose(records, rule=best_mean)
    click.echo(f"Chosen (best mean label-free score): {chosen['candidate']} (score {chosen['score']:.4f})")
    for row in chosen["others"]:
        if row["lead"] is None:
            click.echo(f"  {row['candidate']}: score {row['score']:.4f} (its per-pair ranks are not in {out})")
        else:
            verdict = ("within one standard error: the held-out pairs cannot tell the two apart" if row["within_one_se"]
                       else "more than one standard error")
            click.echo(f"  {row['candidate']}: score {row['score']:.4f}, the choice ahead by {row['lead']:.4f} "
                       f"(standard error {row['lead_se']:.4f}, paired by held-out pair; {verdict})")
    if test_map:
        for rc in rank_correlations(records):
            rho = "n/a" if rc["spearman"] is None else f"{rc['spearman']:.2f}"
            line = (f"Spearman(label-free score, test MAP) at {rc['n_bits']} bits over "
                    f"{rc['n_candidates']} candidates: {rho}")
            if rc.get("spearman_neighbourhood") is not None:
                line += f" (neighbourhood MAP: {rc['spearman_neighbourhood']:.2f})"
            click.echo(line)
    click.echo(f"Wrote {out}")
