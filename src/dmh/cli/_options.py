"""Option parsing shared by the commands: comma-separated lists and ``--param`` hyperparameters,
and the library errors that are the user's input (reported in one line, exit code 2)."""

from __future__ import annotations

import ast

import click

__all__ = ["USER_ERRORS", "check_params", "float_list", "int_list", "parse_params"]

USER_ERRORS = (ValueError, KeyError, TypeError, FileNotFoundError)


def _number_list(text: str, what: str, kind, kind_name: str) -> list:
    try:
        out = [kind(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise click.BadParameter(f"{what} must be comma-separated {kind_name}, got {text!r}") from None
    if not out:
        raise click.BadParameter(f"{what} is empty")
    return out


def int_list(text: str, what: str) -> list[int]:
    return _number_list(text, what, int, "integers")


def float_list(text: str, what: str) -> list[float]:
    return _number_list(text, what, float, "numbers")


def parse_params(items, methods) -> dict[str, dict]:
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


def check_params(methods, params):
    """Every ``--param`` names a hyperparameter of its method (before any work)."""
    from ..evaluation import full_params

    for m in methods:
        try:
            full_params(m, {k: v for k, v in params.get(m, {}).items() if k not in ("n_bits", "random_state")})
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
