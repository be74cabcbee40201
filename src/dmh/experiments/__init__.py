"""Experiments as data: one JSON config per table or figure of the DMH paper, and the runner that
fits every cell of a config, resumes after an interruption and writes the results.

``dmh reproduce NAME`` runs a config from the command line; :func:`run_experiment` does the same from
Python. The configs ship in ``dmh/experiments/configs`` (see ``docs/experiments.md``).
"""

from .runner import (
    DOCUMENTED_METHODS,
    KINDS,
    PEER_METHODS,
    cell_key,
    config_names,
    load_cells,
    load_config,
    plan_cells,
    resolve_config,
    run_experiment,
    summarize_records,
    validate_config,
    write_outputs,
)

__all__ = [
    "DOCUMENTED_METHODS",
    "PEER_METHODS",
    "KINDS",
    "cell_key",
    "config_names",
    "load_cells",
    "load_config",
    "plan_cells",
    "resolve_config",
    "run_experiment",
    "summarize_records",
    "validate_config",
    "write_outputs",
]
