"""``dmh reproduce``: run one of the paper's tables or figures from its config (see
``docs/experiments.md``). The command only parses options; :func:`dmh.experiments.run_experiment`
does the work."""

from __future__ import annotations

import click

from ._options import float_list, int_list, jobs_option, refuse_unused, seed_list

__all__ = ["reproduce"]


def _names() -> str:
    from ..experiments import config_names

    return ", ".join(config_names())


@click.command(
    help="""Reproduce a table or figure of the DMH paper: NAME is one of the shipped
experiments or a path to a JSON config.

Writes into --out: config.json (the resolved config), cells.json (finished cells: a rerun into the
same folder resumes without refitting them), metrics.json (every record, mean and std over seeds),
report.md (our numbers beside the paper's) and PNG plots."""
)
@click.argument("name", required=False)
@click.option(
    "--data",
    "data_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="folder that the config's data paths start from (e.g. holding wiki/wiki_data.mat); "
    "not needed for built-in data (uci-digits)",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False),
    default=None,
    help="output folder  [default: results/NAME, or results/NAME-quick with --quick]",
)
@click.option(
    "--datasets",
    default=None,
    help="comma-separated dataset names of the config, or NAME=FILE  [default: the config's "
    "default_datasets, wiki and uci-digits]",
)
@click.option("--seeds", default=None, help="comma-separated seeds  [default: the config's, 0..4]")
@click.option("--bits", default=None, help="comma-separated bit lengths  [default: the config's]")
@click.option(
    "--ratios",
    default=None,
    help="comma-separated paired ratios to keep (runs with none of them are left out)  [default: the config's]",
)
@click.option(
    "--runs",
    default=None,
    help="comma-separated labels of the config's runs to keep (e.g. DMH,IMH)  [default: every run]",
)
@click.option(
    "--reuse",
    multiple=True,
    type=click.Path(exists=True, file_okay=False),
    help="output folder of another run whose identical cells are taken instead of refitted (repeatable): its "
    "cells.json or, where it keeps none (docs/results), its metrics.json",
)
@click.option(
    "--shard",
    default=None,
    metavar="K/N",
    help="fit only every N-th cell from the K-th on (K = 1..N), into its own --out, so that N processes "
    "share the experiment; a run without --shard that --reuse's the N folders then writes the report",
)
@click.option("--quick", is_flag=True, help="reduced run for a smoke test (the config's 'quick' settings)")
@click.option("--no-plots", is_flag=True, help="skip the PNG figures")
@click.option("--report-only", is_flag=True,
              help="fit nothing: write the report from the cells finished here or in --reuse folders, saying how "
              "many are missing")
@jobs_option
@click.option("--list", "list_only", is_flag=True, help="list the experiments (NAME is ignored)")
def reproduce(name, data_dir, out_dir, datasets, seeds, bits, ratios, runs, reuse, shard, quick, no_plots,
              report_only, jobs, list_only):
    from pathlib import Path

    from ..experiments import load_config, run_experiment

    if list_only:
        from ..experiments import config_names

        options = [p.name for p in click.get_current_context().command.params if isinstance(p, click.Option)]
        refuse_unused([o for o in options if o != "list_only"], "with --list (it lists the experiments, runs none)")
        for n in config_names():
            click.echo(f"{n}: {load_config(n)['title']}")
        return
    if name is None:
        raise click.UsageError(f"missing NAME: one of {_names()}, or a path to a JSON config")
    shard_ = None if shard is None else _shard(shard)
    config = load_config(name)  # unknown names fail here, before anything is written
    if out_dir is None:
        out_dir = Path("results") / (config["name"] + ("-quick" if quick else ""))
    ds = None if datasets is None else [d.strip() for d in datasets.split(",") if d.strip()]
    if ds == []:
        raise click.BadParameter(f"names no dataset, got {datasets!r}", param_hint="--datasets")
    seeds_ = None if seeds is None else seed_list(seeds, "--seeds")
    bit_list = None if bits is None else int_list(bits, "--bits")
    ratio_list = None if ratios is None else float_list(ratios, "--ratios")
    run_list = None if runs is None else [r.strip() for r in runs.split(",") if r.strip()]
    result = run_experiment(
        config,
        out_dir=out_dir,
        data_dir=data_dir,
        datasets=ds,
        seeds=seeds_,
        quick=quick,
        bits=bit_list,
        paired_ratios=ratio_list,
        runs=run_list,
        reuse=list(reuse),
        plots=not no_plots,
        echo=click.echo,
        shard=shard_,
        jobs=jobs,
        report_only=report_only,
    )
    click.echo(f"{result['n_fitted']} cell(s) fitted, {result['n_reused']} reused; wrote {result['out_dir']}:")
    partial = "report" not in result["files"]  # a shard (K/N with N > 1): part of the cells, no report
    for key in ("cells", "config") if partial else ("report", "metrics", "config"):
        click.echo(f"  {result['files'][key]}")
    if partial:
        click.echo(f"shard {shard}: when every shard has finished, write the report with the same command "
                   "without --shard, naming each shard's folder with --reuse")


def _shard(text: str) -> tuple[int, int]:
    k, sep, n = text.partition("/")
    try:
        k_, n_ = int(k), int(n)
    except ValueError:
        k_ = n_ = 0
    if not sep or not 1 <= k_ <= n_:
        raise click.BadParameter(f"expected K/N with 1 <= K <= N (e.g. 2/4), got {text!r}", param_hint="--shard")
    return k_, n_
