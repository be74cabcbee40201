"""``dmh compare``: does a candidate setting replace a default? The rule of
:mod:`dmh.experiments.defaults`, applied to results files of ``dmh evaluate`` or ``dmh reproduce``."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ._options import split_param

__all__ = ["compare"]


@click.command(
    help="""Compare two settings on the results in RESULTS (files of dmh evaluate or metrics.json of dmh
reproduce, pooled) and say whether the candidate changes the default.

A setting is METHOD alone (the method at its defaults) or METHOD.KEY=VALUE (repeat the option for
more parameters): e.g. --baseline dmh --against dmh.block_bits=32. --both METHOD.KEY=VALUE sets a
parameter of both settings: records made before a default changed name its older value there
(--both dmh.dam_agree_target=0.995). Per dataset and figure (MAP and
MAP@50) the two are compared by the leaderboard's paired test over seeds, on each seed's mean over
the cells both have; the candidate changes the default when it wins or ties on both figures on every
dataset and loses on none (docs/defaults.md). Run each setting with
dmh evaluate DATA --split validation --seeds 0,1,2,3,4 (into its own --out)."""
)
@click.argument("results", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--baseline", multiple=True, required=True, help="METHOD or METHOD.KEY=VALUE: the default setting")
@click.option("--against", multiple=True, required=True, help="METHOD or METHOD.KEY=VALUE: the candidate")
@click.option("--both", multiple=True, help="METHOD.KEY=VALUE: a parameter of both settings (e.g. the value "
              "of a default at the time the records were made)")
@click.option("--split", type=click.Choice(["validation", "test"]), default="validation", show_default=True,
              help="the records compared (defaults are chosen on the validation split)")
def compare(results, baseline, against, both, split):
    from ..experiments.defaults import (
        check_settings_differ,
        compare_settings,
        comparison_markdown,
        setting_records,
    )

    for item in both:  # a bare METHOD would name no parameter for both sides
        if "=" not in item:
            raise click.BadParameter(f"{item!r} sets no parameter (expects METHOD.KEY=VALUE)", param_hint="--both")
    hints = {side: side + (" and --both" if both else "") for side in ("--baseline", "--against")}
    base = parse_setting(baseline + both, hints["--baseline"])
    cand = parse_setting(against + both, hints["--against"])
    check_settings_differ(base, cand)
    records = [r for path in results for r in read_records(Path(path))]
    chosen = {}
    for option, (method, params) in ((hints["--baseline"], base), (hints["--against"], cand)):
        chosen[option] = setting_records(records, method, params, split=split)
        if not chosen[option]:
            splits = sorted({r.get("split", "test") for r in records})
            raise click.UsageError(f"no record of {setting_text(method, params)} on the {split} split in "
                                   f"{', '.join(results)} ({option}; the files hold the "
                                   f"{' and '.join(splits)} split)")
    rows = compare_settings(chosen[hints["--baseline"]], chosen[hints["--against"]])
    click.echo(comparison_markdown(rows, setting_text(*base), setting_text(*cand), split=split))


def parse_setting(items, option: str) -> tuple[str, dict]:
    """``("dmh",)`` or ``("dmh.block_bits=32", "dmh.gamma=0.1")`` -> ``(method, params)``; every item
    names the same method."""
    from ..evaluation import full_params
    from ..registry import resolve_method

    methods, params = set(), {}
    for item in items:
        if "=" not in item:
            methods.add(item.strip().lower())
            continue
        key, value = split_param(item, "METHOD or METHOD.KEY=VALUE", option)
        method, dot, name = key.rpartition(".")
        if not dot or not method or ":" in name:
            raise click.BadParameter(f"{item!r} names no method (expects METHOD.KEY=VALUE)", param_hint=option)
        methods.add(method.strip().lower())
        if name.strip() in params:
            raise click.BadParameter(f"sets {name.strip()} twice", param_hint=option)
        params[name.strip()] = value
    if len(methods) != 1:
        raise click.BadParameter(f"names {len(methods)} methods ({', '.join(sorted(methods))}); a setting is one "
                                 "method with its parameters", param_hint=option)
    method = resolve_method(methods.pop())
    full_params(method, params)  # unknown parameter names fail here, naming the method
    return method, params


def setting_text(method: str, params: dict) -> str:
    return method + "".join(f" {k}={v!r}" if isinstance(v, str) else f" {k}={v}" for k, v in sorted(params.items()))


def read_records(path: Path) -> list[dict]:
    """The records of a results file: ``{"results": [...]}`` (dmh evaluate) or ``{"records": [...]}``
    (a ``metrics.json`` of dmh reproduce), checked."""
    from ..errors import DmhError, ResultsFileError
    from ..records import check_records

    if not path.is_file():
        raise ResultsFileError(path, "does not exist (RESULTS)")
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsFileError(path, f"is not valid JSON ({exc})") from None
    records = None
    if isinstance(payload, dict):
        records = payload.get("results", payload.get("records"))
    if isinstance(payload, dict) and isinstance(payload.get("config"), dict) and "grid" in payload["config"]:
        raise ResultsFileError(path, "holds a dmh tune's held-out pair scores, not labelled results (dmh evaluate, "
                                     "dmh reproduce): leave it out of RESULTS")
    if not isinstance(records, list):
        raise ResultsFileError(path, "is not a results file: expected an object with a 'results' list (dmh evaluate) "
                                     "or a 'records' list (metrics.json of dmh reproduce)")
    try:
        return check_records(records)
    except DmhError as exc:
        raise ResultsFileError(path, f"holds damaged records ({exc})") from None
