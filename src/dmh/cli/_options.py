"""Option parsing shared by the commands: comma-separated lists (repeats refused: a seed counted
twice would enter a mean twice) and ``--param`` hyperparameters. Errors are reported by
:func:`dmh.cli.main` in one line (exit code 2)."""

from __future__ import annotations

import functools
import re

import click

from .._literal import literal_value

__all__ = ["check_params", "flag_of", "float_list", "int_list", "jobs_option", "method_list", "method_of",
           "methods_help", "name_list", "parse_params", "paired_ratio_list", "ray_options", "ray_settings",
           "refuse_blank_values", "refuse_unused", "seed_list", "split_param", "word_flags"]


def _number_list(text: str, what: str, kind, kind_name: str) -> list:
    from .._validation import check_unique

    try:
        out = [kind(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise click.BadParameter(f"{what} must be comma-separated {kind_name}, got {text!r}") from None
    if not out:
        raise click.BadParameter(f"{what} is empty")
    return check_unique(out, what)


def int_list(text: str, what: str) -> list[int]:
    """Comma-separated integers, each once."""
    return _number_list(text, what, int, "integers")


def float_list(text: str, what: str) -> list[float]:
    """Comma-separated numbers, each once."""
    return _number_list(text, what, float, "numbers")


def paired_ratio_list(text: str, what: str = "--paired-ratio") -> list[float]:
    """Comma-separated paired ratios, each once and in (0, 1] (one check for fit, evaluate and
    reproduce: :func:`dmh._validation.check_paired_ratio`)."""
    from .._validation import check_paired_ratio

    return [check_paired_ratio(r, what) for r in float_list(text, what)]


def seed_list(text: str, what: str = "--seeds") -> list[int]:
    """Comma-separated seeds, each once and non-negative."""
    from .._validation import check_seed

    return [check_seed(s, what) for s in int_list(text, what)]


def name_list(text: str, what: str) -> list[str]:
    """Comma-separated names (lower-cased, but a class path ``package.module:Class``), each once."""
    from .._validation import check_unique

    out = [t.strip() if ":" in t else t.strip().lower() for t in text.split(",") if t.strip()]
    if not out:
        raise click.BadParameter(f"{what} is empty")
    return check_unique(out, what)


def methods_help(what: str) -> str:
    """Help text of a method option: ``what``, then every method the registry knows."""
    from ..registry import method_names

    return f"{what}: {', '.join(method_names())}, or a class of your own as package.module:Class"


def method_list(text: str, what: str = "--method") -> list[str]:
    """Comma-separated methods, each once: registered names (any case) or classes as
    ``package.module:Class``, each as results name it (:func:`dmh.registry.resolve_method`)."""
    from .._validation import check_unique
    from ..registry import resolve_method

    out = [resolve_method(t) for t in text.split(",") if t.strip()]
    if not out:
        raise click.BadParameter(f"{what} is empty")
    return check_unique(out, what)


def method_of(key: str, methods) -> tuple[str | None, str]:
    """``METHOD.KEY`` -> (the method of ``methods`` it names, KEY); ``KEY`` -> (None, KEY). A
    parameter name has no dot, so the method is everything before the last one (a class path
    ``package.module:Class`` included); a registered name matches in any case."""
    from ..registry import resolve_method

    prefix, dot, name = key.rpartition(".")
    if not dot:
        return None, key
    for m in methods:
        if prefix == m or prefix.lower() == m or (":" in prefix and resolve_method(prefix) == m):
            return m, name
    raise click.BadParameter(f"{key!r} names method {prefix!r}, which is not being run ({', '.join(methods)})",
                             param_hint="--param")


def parse_params(items, methods) -> dict[str, dict]:
    """``method.key=value`` (or ``key=value`` for every method) -> {method: {key: value}}."""
    out: dict[str, dict] = {m: {} for m in methods}
    for item in items:
        key, value = split_param(item, "KEY=VALUE or METHOD.KEY=VALUE")
        m, key = method_of(key, methods)
        for target in methods if m is None else [m]:
            out[target][key] = value
    return out


def split_param(item: str, form: str = "KEY=VALUE", option: str = "--param") -> tuple[str, object]:
    """One ``--param`` item -> (key, value): the value read as a Python literal where it is one
    (``3``, ``0.5``, ``"float32"``, ``[1, 2]``; JSON's ``true``, ``false``, ``null`` too), else the
    plain string. A missing ``=``, an empty key
    or a blank value (``gamma_scaling=``, ``gamma_scaling=' '``) is refused naming ``option``: a
    blank string is never a hyperparameter's meaning, and passing it on reached the method's own
    check (or, for a free-form string, the fit) instead of this one line."""
    if "=" not in item:
        raise click.BadParameter(f"expects {form}, got {item!r}", param_hint=option)
    key, text = item.split("=", 1)
    key = key.strip()
    if not key or key.endswith(".") or key.startswith("."):
        raise click.BadParameter(f"{item!r} names no parameter (expects {form})", param_hint=option)
    if not text.strip():
        raise click.BadParameter(f"the value of {key!r} must not be empty", param_hint=option)
    return key, literal_value(text)


#: the most --jobs accepted (dmh._workers.MAX_JOBS; not imported here, to keep the CLI's start light)
MAX_JOBS = 1024


def jobs_option(command):
    """``--jobs N``: fits made at once, each in its own worker process (:mod:`dmh._workers`)."""
    return click.option(
        "--jobs", type=click.IntRange(1, MAX_JOBS), default=1, show_default=True,
        help="make this many fits at once, each in its own process with --threads / JOBS threads (at least 1; "
        "a fit's result is that of a serial run at that thread count); memory grows about JOBS-fold",
    )(command)


#: parameters the commands set from their own options (a --param for them would be ignored or clash)
_OWN_OPTIONS = {"n_bits": "--bits", "random_state": "--seed/--seeds"}


def check_params(methods, params, bits=None):
    """Every ``--param`` names a hyperparameter of its method and holds a value its fit accepts at
    every bit length of ``bits`` (before any work), and none of them is one the command sets itself
    (``n_bits``, ``random_state``: their options say which)."""
    from ..evaluation import check_method_params

    for m in methods:
        given = params.get(m, {})
        reject_own_options(given, "--param")
        check_method_params(m, given, bits)


def reject_own_options(names, what: str) -> None:
    """None of ``names`` is a parameter that the commands set from their own options."""
    from ..errors import ParameterError

    for key, option in _OWN_OPTIONS.items():
        if key in names:
            raise ParameterError(f"{what} {key} is set by the command itself; use {option}")


#: parameters where a blank (whitespace) value means something: a space separates labels
_BLANK_ALLOWED = {"label_separator"}


def refuse_blank_values(command: click.Command) -> None:
    """An empty (or, but where a space means something, blank) value given on the command line to
    any option or argument of ``command`` is refused naming it. Left to run on, an empty path
    became the current folder (``dmh fit ""`` reported that ``.`` holds no benchmark file,
    ``--out ""`` that ``.`` is a directory) and an empty name or column was looked up as ''.
    Checked on the text as given, before click turns a path into ``Path("")``, i.e. ``.``."""
    for param in command.params:
        param.type_cast_value = _blank_check(param, param.type_cast_value)


def _blank_check(param: click.Parameter, cast):
    def type_cast_value(ctx, value):
        source = ctx.get_parameter_source(param.name) if param.name else None
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            for v in value if isinstance(value, (tuple, list)) else (value,):
                if isinstance(v, str) and (v == "" or (not v.strip() and param.name not in _BLANK_ALLOWED)):
                    why = "must not be empty" + ("" if v == "" else " (only spaces given)")
                    raise click.BadParameter(why, ctx=ctx, param=param)
        return cast(ctx, value)

    return type_cast_value


#: the options that give a library argument, where its name is not the option's: ``n_bits`` is
#: ``--bits``, ``random_state`` ``--seed`` (or ``--seeds``), ...
_ARGUMENT_OPTIONS = {
    "n_bits": ("bits",), "random_state": ("seed", "seeds"), "seed": ("seeds",), "seeds": ("seed",),
    "paired_ratios": ("ratios", "paired_ratio"), "paired_ratio": ("ratios",), "out_dir": ("out", "output"),
    "output": ("out",), "out": ("output",), "data_dir": ("data",), "fixed_params": ("params",),
    "method_params": ("params",), "runs": ("runs",), "k": ("k",),
}
_LEADING_NAME = re.compile(r"([a-z][a-z0-9_]*)(?=[ :=,]|$)")


def flag_of(command: click.Command, argument: str) -> str | None:
    """The option of ``command`` that gives the library argument ``argument`` (``--bits`` for
    ``n_bits``), or None."""
    options = {p.name: p for p in command.params if isinstance(p, click.Option)}
    for name in (argument, *_ARGUMENT_OPTIONS.get(argument, ())):
        option = options.get(name)
        if option is not None:
            return max((o for o in option.opts if o.startswith("--")), key=len, default=option.opts[0])
    return None


def word_flags(command: click.Command) -> None:
    """The library's errors about an argument start with its Python name (``n_bits must be ...``);
    from ``command`` they name the option that gives it instead (``--bits must be ...``). Errors
    about files name the file and are left as they are."""
    from ..errors import CollectionError, FileFormatError, OutputError, ParameterError

    callback = command.callback
    if callback is None:
        return

    @functools.wraps(callback)
    def run(*args, **kwargs):
        try:
            return callback(*args, **kwargs)
        except (ParameterError, CollectionError) as exc:
            if not isinstance(exc, (FileFormatError, OutputError)) and exc.args and isinstance(exc.args[0], str):
                match = _LEADING_NAME.match(exc.args[0])
                flag = flag_of(command, match.group(1)) if match else None
                if flag is not None:
                    exc.args = (flag + exc.args[0][match.end():], *exc.args[1:])
            raise

    command.callback = run


def given_options(*names: str) -> list[str]:
    """The options of the running command among ``names`` (their parameter names) that the user
    gave (on the command line or through the environment), each by its longest flag."""
    ctx = click.get_current_context()
    params = {p.name: p for p in ctx.command.params}
    out = []
    for name in names:
        source = ctx.get_parameter_source(name)
        if source is not None and source.name in ("COMMANDLINE", "ENVIRONMENT"):
            out.append(max(params[name].opts, key=len))
    return out


def refuse_unused(names, why: str) -> None:
    """A usage error naming the options among ``names`` that were given but cannot take effect
    (``why``: "without --ray"): an option silently ignored reads as one that did its work."""
    given = given_options(*names)
    if given:
        raise click.UsageError(f"{', '.join(given)} {'has' if len(given) == 1 else 'have'} no effect {why}")


#: the tuning options of --ray (:func:`ray_options`), which do nothing without it
RAY_TUNING = ("ray_batch_size", "ray_cpus", "ray_gpus", "ray_concurrency")


def ray_settings(address, batch_size, cpus, gpus, concurrency):
    """The ``--ray`` options as :class:`dmh.app.distributed.RayOptions`."""
    from ..app.distributed import RayOptions

    return RayOptions(
        address=None if address == "local" else address,
        batch_size=batch_size,
        num_cpus=cpus,
        num_gpus=gpus,
        concurrency=concurrency,
    )


def ray_options(batch_default: int):
    """The ``--ray [ADDRESS]`` option and its tuning options, for any command that runs on Ray."""

    def decorate(f):
        for opt in reversed(
            [
                click.option(
                    "--ray",
                    "ray_address",
                    is_flag=False,
                    flag_value="local",
                    default=None,
                    metavar="[ADDRESS]",
                    help="Run the heavy maps on Ray (pip install 'dmh[ray]'): alone, a local Ray runtime on "
                    "this machine; with an address (auto, ray://head:10001), an existing cluster. "
                    "Give it last or as --ray=ADDRESS.",
                ),
                click.option("--ray-batch-size", type=click.IntRange(min=1), default=batch_default,
                             show_default=True, help="Rows per batch handed to a Ray actor."),
                click.option("--ray-cpus", type=click.FloatRange(min=0), default=1.0, show_default=True,
                             help="CPUs reserved per Ray actor."),
                click.option("--ray-gpus", type=click.FloatRange(min=0), default=0.0, show_default=True,
                             help="GPUs reserved per Ray actor (the bundled models still run on the CPU)."),
                click.option("--ray-concurrency", type=click.IntRange(min=1), default=1, show_default=True,
                             help="Ray actors per stage."),
            ]
        ):
            f = opt(f)
        return f

    return decorate
