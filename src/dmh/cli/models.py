"""``dmh fit``: fit one model and save it (encoding and search with it are in :mod:`.search`)."""

from __future__ import annotations

import click

from ._options import check_params, methods_help, parse_params

__all__ = ["fit"]


@click.command()
@click.argument("data")
@click.option("--method", default="dmh", show_default=True, help=methods_help("the method"))
@click.option("--bits", default=64, show_default=True, type=int)
@click.option("--paired-ratio", "paired_ratio", default=1.0, show_default=True, type=float)
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--param", "params", multiple=True, help="KEY=VALUE hyperparameters")
@click.option("--all-rows", is_flag=True, help="train on every object of DATA instead of its training split")
@click.option("--dtype", type=click.Choice(["float64", "float32"]), default="float64", show_default=True,
              help="precision the features are kept in; float32 halves their memory (large training sets)")
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="model file (.npz)")
def fit(data, method, bits, paired_ratio, seed, params, all_rows, dtype, out):
    """Fit one model on DATA's training set (made semi-paired when --paired-ratio < 1) and save it."""
    from .._atomic import check_writable
    from .._validation import check_n_bits, check_paired_ratio, check_seed
    from ..data import make_semi_paired
    from ..datasets import load_dataset
    from ..registry import get_method_class, resolve_method

    method = resolve_method(method)
    klass = get_method_class(method)
    check_n_bits(bits)
    paired_ratio = check_paired_ratio(paired_ratio, "--paired-ratio")
    check_seed(seed, "--seed")
    mparams = parse_params(params, [method])[method]
    check_params([method], {method: mparams}, [bits])
    check_writable(out, "--out")  # before any work: a typo in the folder must not cost a fit
    dataset = load_dataset(data, dtype=dtype)
    train = dataset if all_rows else dataset.train()
    if paired_ratio < 1.0:
        train = make_semi_paired(train, paired_ratio, random_state=seed)
    click.echo(train.summary())
    kwargs = dict(mparams)
    if "verbose" in klass().get_params():
        kwargs.setdefault("verbose", True)
    model = klass(n_bits=bits, random_state=seed, **kwargs)
    model.fit(train)
    from pathlib import Path

    from ..base import encode_checked

    for m in ("image", "text"):  # the codes the saved model gives, checked before it is saved
        encode_checked(model, train.view(m)[:8], m)

    from ..featurizer_spec import read_featurizer_spec

    if Path(data).is_file():  # remember how the features were made (dmh featurize), if known
        model.featurizer_ = read_featurizer_spec(data)
    model.save(out)
    click.echo(f"Saved {type(model).__name__} ({bits} bits) to {out}")


