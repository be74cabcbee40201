"""Command line interface: ``dmh demo``, ``dmh evaluate``, ``dmh fit``, ``dmh info`` (and more).

``main(argv)`` is a plain function returning an exit code, so tests call the CLI in-process.
Errors in the user's input are reported in one line naming the problem (exit code 2), never as a
traceback. One module per group of commands: :mod:`.evaluate` (demo, evaluate), :mod:`.models`
(fit), :mod:`.data` (info, featurize, datasets), :mod:`.search` (encode, index, search),
:mod:`.experiments` (reproduce), :mod:`.tune` (tune), :mod:`.compare` (compare), :mod:`.collection` (build,
add, remove, caption, serve, and search on a collection folder); :mod:`._options` parses what they share.
"""

from __future__ import annotations

import sys

import click

from ..errors import DmhError, os_error_message
from ._options import refuse_blank_values, word_flags
from .collection import add, build, caption, remove, serve
from .compare import compare
from .data import datasets, featurize, info
from .evaluate import demo, evaluate
from .experiments import reproduce
from .models import fit
from .search import encode, index, search
from .tune import tune

__all__ = ["cli", "main"]


def _set_threads(ctx, param, value):
    if value is not None:
        from .._threads import set_threads
        from ..errors import ParameterError

        try:  # the one check of a thread count (dmh._threads), named after the option
            set_threads(value)
        except ParameterError as exc:
            # click names the option already; the message names the Python argument
            raise click.BadParameter(str(exc).removeprefix("n_threads ")) from None
    return value


@click.group(help=__doc__.split("\n\n")[0])
@click.version_option(package_name="dmh")
@click.option("--threads", type=int, default=None, expose_value=False, callback=_set_threads,
              help="threads for torch, BLAS/OpenMP and faiss (default: $DMH_THREADS, else $OMP_NUM_THREADS, "
                   "else the physical cores available)")
def cli():
    pass


for _command in (demo, evaluate, fit, info, encode, index, search, featurize, datasets, reproduce, build, add, remove,
                 caption, serve, tune, compare):
    refuse_blank_values(_command)
    word_flags(_command)
    cli.add_command(_command)


def main(argv=None) -> int:
    """Run the CLI; returns the exit code (0 ok, 2 bad input or usage, 1 unexpected failure).

    Bad input is one line ``Error: ...`` on standard error and exit code 2: usage errors, every
    :class:`dmh.errors.DmhError` (raised where the problem is known, naming the file or argument),
    the OS errors about the user's files (permission denied, a directory where a file is expected, a
    read-only or full disk; :func:`dmh.errors.os_error_message`) and running out of memory. Nothing
    else is caught: any other exception is a bug of dmh and keeps its traceback.
    """
    args = list(sys.argv[1:] if argv is None else argv)
    _import_from_here()
    try:
        rv = cli.main(args=args, prog_name="dmh", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except click.exceptions.Abort:  # Ctrl-C
        click.echo("Aborted.", err=True)
        return 1
    except BrokenPipeError:  # the reader of our output went away (dmh search ... | head): nothing to report
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 1
    except click.ClickException as exc:
        if type(exc).__name__ == "NoArgsIsHelpError":  # `dmh` alone: the help, as it is
            exc.show()
            return exc.exit_code
        return _fail(exc.format_message())
    except DmhError as exc:
        return _fail(str(exc))
    except OSError as exc:
        message = os_error_message(exc)
        if message is None:
            raise
        return _fail(message)
    except MemoryError as exc:
        return _fail(f"out of memory ({exc or 'an allocation failed'}); use smaller sizes or fewer objects")


def _import_from_here() -> None:
    """A method given as ``package.module:Class`` is found in the current folder too, as ``python -m``
    would find it (the ``dmh`` script's own folder is the first entry of its path, not the current
    one); appended, so that it never hides an installed package."""
    import os

    here = os.getcwd()
    if "" not in sys.path and here not in sys.path:
        sys.path.append(here)


def _fail(message: str) -> int:
    """One line on standard error, exit code 2."""
    click.echo("Error: " + " ".join(str(message).split()), err=True)
    return 2
