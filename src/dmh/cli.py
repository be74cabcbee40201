"""Command line interface: ``dmh demo``, ``dmh evaluate``, ``dmh fit``, ``dmh info`` (and more).

``main(argv)`` is a plain function returning an exit code, so tests call the CLI in-process.
Errors in the user's input are reported in one line naming the problem (exit code 2), never as a
traceback.
"""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import click

from ._atomic import atomic_write_text

USER_ERRORS = (ValueError, KeyError, TypeError, FileNotFoundError)


def _int_list(text: str, what: str) -> list[int]:
    try:
        out = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise click.BadParameter(f"{what} must be comma-separated integers, got {text!r}") from None
    if not out:
        raise click.BadParameter(f"{what} is empty")
    return out


def _float_list(text: str, what: str) -> list[float]:
    try:
        out = [float(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise click.BadParameter(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not out:
        raise click.BadParameter(f"{what} is empty")
    return out


def _parse_params(items, methods) -> dict[str, dict]:
    """``method.key=value`` (or ``key=value`` for every method) -> {method: {key: value}}."""
    out: dict[str, dict] = {m: {} for m in methods}
    for item in items:
        if "=" not in item:
            raise click.BadParameter(f"--param expects KEY=VALUE or METHOD.KEY=VALUE, got {item!r}")
        key, value = item.split("=", 1)
        try:
            value = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            pass  # a plain string
        targets = methods
        if "." in key:
            m, key = key.split(".", 1)
            if m not in methods:
                raise click.BadParameter(f"--param {item!r} names method {m!r}, which is not being run")
            targets = [m]
        for m in targets:
            out[m][key] = value
    return out


def _check_params(methods, params):
    from .methods import get_method_class

    for m in methods:
        valid = get_method_class(m)().get_params(deep=False)
        unknown = sorted(set(params.get(m, {})) - set(valid) - {"n_bits", "random_state"})
        if unknown:
            raise click.BadParameter(f"unknown parameter(s) {unknown} for method {m!r}; it has {sorted(valid)}")


@click.group(help=__doc__.split("\n\n")[0])
@click.version_option(package_name="dmh")
def cli():
    pass


@cli.command()
@click.option("--bits", default="16,32", show_default=True, help="comma-separated code lengths")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="also write results JSON here")
def demo(bits, seed, out):
    """DMH on the built-in UCI digits at 100% and 50% pairing; prints a MAP table."""
    from .datasets import BUILTIN, load_builtin
    from .evaluation import run_evaluation
    from .report import markdown_table

    data = load_builtin("uci-digits")
    click.echo(f"Data: {BUILTIN['uci-digits']}")
    click.echo(data.summary())
    click.echo("Fitting DMH (CLE -> GBE -> DAM, 3 rounds) at 100% and 50% pairing; "
               "this takes a few minutes on 2 cores.")
    records = run_evaluation(
        data, methods=["dmh"], bits=_int_list(bits, "--bits"), paired_ratios=[1.0, 0.5], seeds=[seed], progress=True
    )
    click.echo("")
    click.echo("MAP over the whole database (Hamming ranking), image->text (I→T) and text->image (T→I):")
    click.echo(markdown_table(records, "map", digits=3))
    prior = _label_prior(data)
    click.echo(f"Label-prior baseline (random ranking): MAP ~ {prior:.3f}")
    if out:
        config = {"methods": ["dmh"], "bits": bits, "paired_ratios": [1.0, 0.5], "seeds": [seed]}
        _write_results(out, data, records, config)
        click.echo(f"Wrote {out}")


def _label_prior(data) -> float:
    """Expected MAP of a random ranking ~ mean fraction of relevant database items per query."""
    from .metrics import relevance

    q, db = data.query(), data.database()
    return float(relevance(q.labels, db.labels).mean(axis=1).mean())


def _write_results(path, data, records, config, tables: bool = False, plots: bool = False):
    """The results JSON (``results``: one record per cell and task); with ``tables`` also CSV and
    markdown beside it, with ``plots`` the TopN-precision and PR figures."""
    from ._json import jsonable
    from .report import summarize, write_csv, write_markdown

    payload = {
        "dataset": data.summary(),
        "config": config,
        "label_prior_map": _label_prior(data),
        "results": records,
        "summary": summarize(records),
    }
    path = Path(path)
    atomic_write_text(path, json.dumps(jsonable(payload), indent=1))
    written = [path]
    if tables:
        written.append(write_csv(records, path.with_suffix(".csv")))
        written.append(write_markdown(records, path.with_suffix(".md")))
    if plots:
        from .plots import plot_curves

        written += list(plot_curves(records, path.parent).values())
    return written


@cli.command()
@click.argument("data")
@click.option("--method", default="dmh", show_default=True, help="comma-separated method names")
@click.option("--bits", default="16,32,64,128", show_default=True)
@click.option("--paired-ratio", "paired_ratio", default="1.0,0.5", show_default=True)
@click.option("--seeds", default="0", show_default=True)
@click.option("--param", "params", multiple=True, help="METHOD.KEY=VALUE or KEY=VALUE, e.g. dmh.n_rounds=2")
@click.option("--out", type=click.Path(dir_okay=False), default="results.json", show_default=True)
@click.option("--resume/--no-resume", default=False, help="skip cells already in --out")
@click.option("--plots", is_flag=True, help="also write TopN-precision and PR-curve figures (PNG) beside --out")
def evaluate(data, method, bits, paired_ratio, seeds, params, out, resume, plots):
    """Fit METHOD(s) on DATA (a data file or a built-in name) and score image->text and text->image."""
    from .datasets import load_dataset
    from .evaluation import run_evaluation
    from .methods import get_method_class
    from .report import markdown_table

    methods = [m.strip().lower() for m in method.split(",") if m.strip()]
    for m in methods:
        get_method_class(m)
    bit_list = _int_list(bits, "--bits")
    from ._validation import check_n_bits

    for b in bit_list:
        check_n_bits(b)
    ratios = _float_list(paired_ratio, "--paired-ratio")
    seed_list = _int_list(seeds, "--seeds")
    mparams = _parse_params(params, methods)
    _check_params(methods, mparams)
    dataset = load_dataset(data)
    dataset.require_labels()
    click.echo(dataset.summary())
    records: list[dict] = []
    done = None
    if resume and Path(out).exists():
        records = json.loads(Path(out).read_text())["results"]
        done = {(r["method"], r["n_bits"], r["paired_ratio"], r["seed"]) for r in records}
        click.echo(f"Resuming: {len(done)} finished cell(s) in {out}")
    config = {"data": str(data), "methods": methods, "bits": bit_list, "paired_ratios": ratios,
              "seeds": seed_list, "params": mparams}

    def save_partial(rec):
        records.append(rec)
        if rec["task"] == "text->image":
            _write_results(out, dataset, records, config)

    run_evaluation(dataset, methods, bit_list, ratios, seed_list, mparams, on_record=save_partial, done=done,
                   progress=True)
    written = _write_results(out, dataset, records, config, tables=True, plots=plots)
    click.echo("MAP over the whole database (Hamming ranking):")
    click.echo(markdown_table(records, "map", digits=3))
    click.echo("Wrote " + ", ".join(str(p) for p in written))


@cli.command()
@click.argument("data")
@click.option("--method", default="dmh", show_default=True)
@click.option("--bits", default=64, show_default=True, type=int)
@click.option("--paired-ratio", "paired_ratio", default=1.0, show_default=True, type=float)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--param", "params", multiple=True, help="KEY=VALUE hyperparameters")
@click.option("--all-rows", is_flag=True, help="train on every object of DATA instead of its training split")
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="model file (.npz)")
def fit(data, method, bits, paired_ratio, seed, params, all_rows, out):
    """Fit one model on DATA's training set (made semi-paired when --paired-ratio < 1) and save it."""
    from .data import make_semi_paired
    from .datasets import load_dataset
    from .methods import get_method_class

    klass = get_method_class(method)
    mparams = _parse_params(params, [method])[method]
    _check_params([method], {method: mparams})
    dataset = load_dataset(data)
    train = dataset if all_rows else dataset.train()
    if paired_ratio < 1.0:
        train = make_semi_paired(train, paired_ratio, random_state=seed)
    click.echo(train.summary())
    model = klass(n_bits=bits, random_state=seed, verbose=True, **mparams) if "verbose" in klass().get_params() \
        else klass(n_bits=bits, random_state=seed, **mparams)
    model.fit(train)
    model.save(out)
    click.echo(f"Saved {type(model).__name__} ({bits} bits) to {out}")


@cli.command()
@click.argument("data")
def info(data):
    """Describe a data file or built-in dataset."""
    from .datasets import load_dataset

    click.echo(load_dataset(data).summary())


def _register_optional_commands():
    """Commands that live in their own modules (search, data preparation, experiments)."""
    import importlib

    for module, names in (("dmh.cli_search", ("encode", "index", "search")),
                          ("dmh.cli_data", ("featurize", "datasets")),
                          ("dmh.cli_experiments", ("reproduce",)),
                          ("dmh.cli_tune", ("tune",))):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name == module:
                continue
            raise
        for name in names:
            cmd = getattr(mod, name, None)
            if isinstance(cmd, click.Command):
                cli.add_command(cmd, name)


_register_optional_commands()


def main(argv=None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 bad input or usage, 1 unexpected failure)."""
    args = list(sys.argv[1:] if argv is None else argv)
    try:
        rv = cli.main(args=args, prog_name="dmh", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except click.exceptions.Abort:
        click.echo("Aborted.", err=True)
        return 1
    except click.ClickException as exc:
        exc.show()
        return 2
    except USER_ERRORS as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
        click.echo(f"Error: {msg}", err=True)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
