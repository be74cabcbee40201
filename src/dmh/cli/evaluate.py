"""``dmh demo`` and ``dmh evaluate``: fit methods and score cross-modal retrieval. The commands only
parse options and print; :mod:`dmh.evaluation` runs the cells (the loop ``dmh reproduce`` uses too)
and :mod:`dmh.report` writes the results."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ._options import check_params, float_list, int_list, parse_params

__all__ = ["demo", "evaluate"]


@click.command()
@click.option("--bits", default="16,32", show_default=True, help="comma-separated code lengths")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="also write results JSON here")
def demo(bits, seed, out):
    """DMH on the built-in UCI digits at 100% and 50% pairing; prints a MAP table."""
    from ..datasets import BUILTIN, load_builtin
    from ..evaluation import label_prior_map, run_evaluation
    from ..report import markdown_table, write_results

    data = load_builtin("uci-digits")
    click.echo(f"Data: {BUILTIN['uci-digits']}")
    click.echo(data.summary())
    click.echo("Fitting DMH (CLE -> GBE -> DAM, 3 rounds) at 100% and 50% pairing; "
               "this takes a few minutes on 2 cores.")
    records = run_evaluation(
        data, methods=["dmh"], bits=int_list(bits, "--bits"), paired_ratios=[1.0, 0.5], seeds=[seed], progress=True,
        source="uci-digits",
    )
    click.echo("")
    click.echo("MAP over the whole database (Hamming ranking), image->text (I→T) and text->image (T→I):")
    click.echo(markdown_table(records, "map", digits=3))
    prior = label_prior_map(data)
    click.echo(f"Label-prior baseline (random ranking): MAP ~ {prior:.3f}")
    if out:
        config = {"methods": ["dmh"], "bits": bits, "paired_ratios": [1.0, 0.5], "seeds": [seed]}
        write_results(out, records, dataset=data.summary(), config=config, label_prior_map=prior)
        click.echo(f"Wrote {out}")


@click.command()
@click.argument("data")
@click.option("--method", default="dmh", show_default=True, help="comma-separated method names")
@click.option("--bits", default="16,32,64,128", show_default=True)
@click.option("--paired-ratio", "paired_ratio", default="1.0,0.5", show_default=True)
@click.option("--seeds", default="0", show_default=True)
@click.option("--param", "params", multiple=True, help="METHOD.KEY=VALUE or KEY=VALUE, e.g. dmh.n_rounds=2")
@click.option("--out", type=click.Path(dir_okay=False), default="results.json", show_default=True)
@click.option("--resume/--no-resume", default=False,
              help="reuse the cells of --out whose cell key (data, split, method, full parameters, bits, "
              "paired ratio, seed) is this run's")
@click.option("--plots", is_flag=True, help="also write TopN-precision and PR-curve figures (PNG) beside --out")
def evaluate(data, method, bits, paired_ratio, seeds, params, out, resume, plots):
    """Fit METHOD(s) on DATA (a data file or a built-in name) and score image->text and text->image."""
    from .._validation import check_n_bits
    from ..datasets import load_dataset
    from ..evaluation import label_prior_map, plan_evaluation, reusable_cells, run_cells
    from ..registry import get_method_class
    from ..report import markdown_table, write_results

    methods = [m.strip().lower() for m in method.split(",") if m.strip()]
    for m in methods:
        get_method_class(m)
    bit_list = int_list(bits, "--bits")
    for b in bit_list:
        check_n_bits(b)
    ratios = float_list(paired_ratio, "--paired-ratio")
    seed_list = int_list(seeds, "--seeds")
    mparams = parse_params(params, methods)
    check_params(methods, mparams)
    dataset = load_dataset(data)
    dataset.require_labels()
    click.echo(dataset.summary())
    name = dataset.name or "data"
    cells = plan_evaluation(dataset, str(data), methods, bit_list, ratios, seed_list, mparams, dataset=name)
    reused: dict[str, list[dict]] = {}
    if resume and Path(out).exists():
        try:
            old = json.loads(Path(out).read_text())["results"]
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise ValueError(f"--resume {out}: not a results file of dmh evaluate ({exc})") from None
        reused, lines = reusable_cells(cells, old, where=str(out))
        for line in lines:
            click.echo(line)
    records = [rec for c in cells if c["key"] in reused for rec in reused[c["key"]]]
    todo = [c for c in cells if c["key"] not in reused]
    config = {"data": str(data), "methods": methods, "bits": bit_list, "paired_ratios": ratios,
              "seeds": seed_list, "params": mparams}
    prior = label_prior_map(dataset)

    def save_partial(entry):
        records.extend(entry["records"])
        write_results(out, records, dataset=dataset.summary(), config=config, label_prior_map=prior)

    run_cells(todo, {name: dataset}, on_entry=save_partial, progress=True)
    written = write_results(out, records, dataset=dataset.summary(), config=config, label_prior_map=prior,
                            tables=True, plots=plots)
    click.echo("MAP over the whole database (Hamming ranking):")
    click.echo(markdown_table(records, "map", digits=3))
    click.echo("Wrote " + ", ".join(str(p) for p in written.values()))
