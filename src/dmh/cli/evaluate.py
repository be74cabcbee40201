"""``dmh demo`` and ``dmh evaluate``: fit methods and score cross-modal retrieval. The commands only
parse options and print; :mod:`dmh.evaluation` runs the cells (the loop ``dmh reproduce`` uses too)
and :mod:`dmh.report` writes the results."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ..errors import OutputError
from ._options import (
    check_params,
    int_list,
    jobs_option,
    method_list,
    methods_help,
    name_list,
    paired_ratio_list,
    parse_params,
    seed_list,
)

__all__ = ["demo", "evaluate"]


#: rounds of the demo's fits (the library default is 3): two keep the alternation (CLE -> GBE -> DAM,
#: then CLE on the networks' features)
DEMO_ROUNDS = 2
#: DAM epochs per round in the demo (the library default is 10); with DEMO_ROUNDS, the demo's two
#: fits at 16 bits take under a minute of one core's time
DEMO_DAM_EPOCHS = 5


@click.command()
@click.option("--bits", default="16", show_default=True, help="comma-separated code lengths")
@click.option("--rounds", default=DEMO_ROUNDS, show_default=True, type=click.IntRange(min=1),
              help="DMH rounds (CLE -> GBE -> DAM); DMH's default is 3")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="also write results JSON here")
def demo(bits, rounds, seed, out):
    """DMH on the built-in UCI digits at 100% and 50% pairing; prints a MAP table. Reduced to be
    quick (2 rounds of 5 DAM epochs, 16 bits); the time it took is printed at the end."""
    import time

    from .._atomic import check_writable
    from .._validation import check_n_bits, check_seed
    from ..datasets import BUILTIN, load_builtin
    from ..evaluation import label_prior_map, run_evaluation
    from ..report import markdown_table, write_results

    t0 = time.perf_counter()
    bit_list = [check_n_bits(b) for b in int_list(bits, "--bits")]
    check_seed(seed, "--seed")
    if out:
        check_writable(out, "--out")
    data = load_builtin("uci-digits")
    click.echo(f"Data: {BUILTIN['uci-digits']}")
    click.echo(data.summary())
    n_fits = 2 * len(bit_list)
    params = {"n_rounds": rounds, "dam_epochs": DEMO_DAM_EPOCHS}
    click.echo(f"Fitting DMH (CLE -> GBE -> DAM) at {', '.join(map(str, bit_list))} bits, 100% and 50% pairing: "
               f"{n_fits} fits, reduced to be quick: {rounds} round{'s' if rounds > 1 else ''} of "
               f"{DEMO_DAM_EPOCHS} DAM epochs (DMH's defaults: 3 rounds of 10 epochs); at 50% each fit first "
               "fits two candidates on 85% of the pairs to choose whether to use the unpaired objects "
               "(use_unpaired='auto').")
    records = run_evaluation(
        data, methods=["dmh"], bits=bit_list, paired_ratios=[1.0, 0.5], seeds=[seed],
        method_params={"dmh": params}, progress=True, source="uci-digits",
    )
    click.echo("")
    click.echo("MAP over the whole database (Hamming ranking), image->text (I→T) and text->image (T→I):")
    click.echo(markdown_table(records, "map", digits=3))
    prior = label_prior_map(data)
    click.echo(f"Label-prior baseline (random ranking): MAP ~ {prior:.3f}")
    if out:
        config = {"methods": ["dmh"], "bits": bit_list, "paired_ratios": [1.0, 0.5], "seeds": [seed],
                  "method_params": {"dmh": params}}
        write_results(out, records, dataset=data.summary(), config=config, label_prior_map=prior)
        click.echo(f"Wrote {out}")
    click.echo(f"Done in {time.perf_counter() - t0:.0f} s.")


@click.command()
@click.argument("data")
@click.option("--method", default="dmh", show_default=True, help=methods_help("comma-separated methods"))
@click.option("--bits", default="16,32,64,128", show_default=True)
@click.option("--paired-ratio", "paired_ratio", default="1.0,0.5", show_default=True)
@click.option("--seeds", default="0", show_default=True)
@click.option("--param", "params", multiple=True, help="METHOD.KEY=VALUE or KEY=VALUE, e.g. dmh.n_rounds=2")
@click.option("--out", type=click.Path(dir_okay=False), default="results.json", show_default=True)
@click.option("--resume/--no-resume", default=False,
              help="reuse the cells of --out whose cell key (data, split, method, full parameters, bits, "
              "paired ratio, seed) is this run's")
@click.option("--overwrite", is_flag=True, help="replace an existing --out (without it, an existing file is refused "
              "unless --resume)")
@click.option("--plots", is_flag=True, help="also write TopN-precision and PR-curve figures (PNG) beside --out")
@click.option("--training", default="semi-paired", show_default=True,
              help="comma-separated: semi-paired (every object of each semi-paired training set) and/or pairs-only "
              "(its paired objects alone, recorded as 'METHOD (pairs only)'; beside semi-paired, fitted only at "
              "paired ratios below 1 for methods that use unpaired objects, where the two differ)")
@click.option("--split", type=click.Choice(["test", "validation"]), default="test", show_default=True,
              help="what the fits are scored on: the data's query set (test), or a seeded validation split of the "
              "training objects (validation: --validation-fraction of them as queries, the rest as training set "
              "and database; what design defaults are chosen on, docs/defaults.md)")
@click.option("--validation-fraction", "validation_fraction", type=click.FloatRange(0, 1, min_open=True, max_open=True),
              default=None, help="with --split validation: the share of the training objects that become the "
              "validation queries  [default: 0.2]")
@click.option("--validation-seed", "validation_seed", type=click.IntRange(min=0), default=None,
              help="with --split validation: the seed that draws them  [default: 0]")
@jobs_option
def evaluate(data, method, bits, paired_ratio, seeds, params, out, resume, overwrite, plots, training, split,
             validation_fraction, validation_seed, jobs):
    """Fit METHOD(s) on DATA (a data file or a built-in name) and score image->text and text->image.

    An existing --out is refused unless --resume (continue it: its cells with this run's cell key
    are reused) or --overwrite (replace it). While the run lasts, a lock file beside --out makes a
    second run writing the same file fail at once instead of overwriting this one's rows.
    """
    from .._atomic import check_writable, exclusive_lock
    from .._validation import check_n_bits

    methods = method_list(method, "--method")
    bit_list = [check_n_bits(b) for b in int_list(bits, "--bits")]
    ratios = paired_ratio_list(paired_ratio, "--paired-ratio")
    seeds = seed_list(seeds, "--seeds")
    mparams = parse_params(params, methods)
    check_params(methods, mparams, bit_list)
    trainings = training_list(training)
    validation = validation_spec(split, validation_fraction, validation_seed)
    if resume and overwrite:
        raise click.UsageError("give at most one of --resume and --overwrite")
    out = Path(out)
    check_writable(out, "--out")
    _refuse_existing(out, resume or overwrite)  # the cheap refusal first, again under the lock
    dataset = _labelled_data(data)  # a bad DATA fails before the lock file is made
    with exclusive_lock(out):
        _refuse_existing(out, resume or overwrite)
        _evaluate(dataset, data, methods, bit_list, ratios, seeds, mparams, out, resume, plots, jobs, trainings,
                  validation)


def _refuse_existing(out: Path, allowed: bool) -> None:
    if out.exists() and not allowed:
        raise OutputError(out, "the file exists; pass --resume to continue it or --overwrite to replace it (--out)")


def _labelled_data(data):
    """DATA loaded, with the labels that scoring needs (else a one-line error naming it)."""
    from ..datasets import load_dataset

    dataset = load_dataset(data)
    dataset.require_labels()
    return dataset


def validation_spec(split: str, fraction: float | None, seed: int | None) -> dict | None:
    """``--split`` and its two options: ``{"fraction", "random_state"}`` of the validation split, or
    None for the query set (where the two options are refused, not ignored)."""
    if split != "validation":
        options = (("--validation-fraction", fraction), ("--validation-seed", seed))
        given = [name for name, v in options if v is not None]
        if given:
            raise click.UsageError(f"{' and '.join(given)} {'apply' if len(given) > 1 else 'applies'} only with "
                                   "--split validation")
        return None
    return {"fraction": 0.2 if fraction is None else fraction, "random_state": 0 if seed is None else seed}


def training_list(text: str) -> list[str]:
    """``--training``: comma-separated values of :data:`dmh.evaluation.TRAININGS`, each once."""
    from ..evaluation import TRAININGS

    out = name_list(text, "--training")
    bad = [t for t in out if t not in TRAININGS]
    if bad:
        raise click.BadParameter(f"--training takes {' and/or '.join(TRAININGS)}, got {', '.join(bad)}")
    return out


def _evaluate(dataset, data, methods, bit_list, ratios, seeds, mparams, out: Path, resume, plots, jobs=1,
              trainings=("semi-paired",), validation=None):
    from ..evaluation import label_prior_map, plan_evaluation, reusable_cells, run_cells
    from ..report import markdown_table, write_results

    old = _read_results(out) if resume and out.exists() else None
    click.echo(dataset.summary())
    if validation is not None:
        dataset = dataset.validation(**validation)
        click.echo(f"Validation split (seed {validation['random_state']}): {dataset.query_idx.size} of the "
                   f"training objects as queries, the other {dataset.train_idx.size} as training set and "
                   "database; the query set is not used")
    name = dataset.name or "data"
    cells = plan_evaluation(dataset, str(data), methods, bit_list, ratios, seeds, mparams, dataset=name,
                            trainings=trainings, validation=validation)
    if "pairs-only" in trainings and len(trainings) > 1:
        from ..evaluation import pairs_only_redundant

        same = sorted({f"{m} at {r:g}" for m in methods for r in ratios if pairs_only_redundant(m, r)})
        if same:
            click.echo(f"pairs-only cells not fitted where they would train on the semi-paired cells' data: "
                       f"{', '.join(same)}")
    reused: dict[str, list[dict]] = {}
    if old is not None:
        reused, lines = reusable_cells(cells, old, where=str(out))
        for line in lines:
            click.echo(line)
    records = [rec for c in cells if c["key"] in reused for rec in reused[c["key"]]]
    todo = [c for c in cells if c["key"] not in reused]
    config = {"data": str(data), "methods": methods, "bits": bit_list, "paired_ratios": ratios,
              "seeds": seeds, "params": mparams, "training": list(trainings),
              "split": "test" if validation is None else "validation",
              **({"validation": validation} if validation is not None else {})}
    prior = label_prior_map(dataset)

    def save_partial(entry):
        records.extend(entry["records"])
        write_results(out, records, dataset=dataset.summary(), config=config, label_prior_map=prior)

    if jobs > 1 and len(todo) > 1:
        from .._workers import split_line

        click.echo(split_line(len(todo), jobs))  # as reproduce and tune say it
    entries = run_cells(todo, {name: dataset}, on_entry=save_partial, progress=True, jobs=jobs)
    # in the plan's order (with --jobs, cells finish in any order)
    records = [rec for c in cells if c["key"] in reused for rec in reused[c["key"]]]
    records += [rec for e in entries for rec in e["records"]]
    written = write_results(out, records, dataset=dataset.summary(), config=config, label_prior_map=prior,
                            tables=True, plots=plots)
    click.echo("MAP over the whole database (Hamming ranking):")
    click.echo(markdown_table(records, "map", digits=3))
    click.echo("Wrote " + ", ".join(str(p) for p in written.values()))


def _read_results(path: Path) -> list[dict]:
    """The records of a results file of ``dmh evaluate`` (for --resume), checked before any is reused."""
    from ..errors import DmhError, ResultsFileError
    from ..records import check_records

    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsFileError(path, f"is not valid JSON ({exc}) (--resume)") from None
    if not isinstance(payload, dict) or not isinstance(payload.get("results"), list):
        raise ResultsFileError(path, "is not a results file of dmh evaluate: expected an object with a 'results' "
                                     "list (--resume)")
    if not payload["results"]:
        return []
    try:
        return check_records(payload["results"])
    except DmhError as exc:
        raise ResultsFileError(path, f"holds damaged records ({exc}) (--resume)") from None
