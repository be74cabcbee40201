"""Command line interface: ``dmh demo``, ``dmh evaluate``, ``dmh fit``, ``dmh info`` (and more).

``main(argv)`` is a plain function returning an exit code, so tests call the CLI in-process.
Errors in the user's input are reported in one line naming the problem (exit code 2), never as a
traceback. One module per group of commands: :mod:`.evaluate` (demo, evaluate), :mod:`.models`
(fit), :mod:`.data` (info, featurize, datasets), :mod:`.search` (encode, index, search),
:mod:`.experiments` (reproduce), :mod:`.tune` (tune), :mod:`.collection` (build, add, serve, and search on a collection
folder); :mod:`._options` parses what they share.
"""

from __future__ import annotations

import sys

import click

from ._options import USER_ERRORS
from .collection import add, build, search, serve
from .data import datasets, featurize, info
from .evaluate import demo, evaluate
from .experiments import reproduce
from .models import fit
from .search import encode, index
from .tune import tune

__all__ = ["cli", "main"]


@click.group(help=__doc__.split("\n\n")[0])
@click.version_option(package_name="dmh")
def cli():
    pass


for _command in (demo, evaluate, fit, info, encode, index, search, featurize, datasets, reproduce, build, add, serve,
                 tune):
    cli.add_command(_command)


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
