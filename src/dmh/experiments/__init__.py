"""Experiments as data: one JSON config per table or figure of the DMH paper, and the runner that
fits every cell of a config, resumes after an interruption and writes the results.

``dmh reproduce NAME`` runs a config from the command line; :func:`run_experiment` does the same from
Python. The configs ship in ``dmh/experiments/configs`` (see ``docs/experiments.md``).

Modules: :mod:`.config` (load, validate, resolve a config), :mod:`.runner` (plan the cells and run
them through :func:`dmh.evaluation.run_cells`), :mod:`.outputs` (``metrics.json``, ``report.md``),
:mod:`.figures` (the PNG figures) and :mod:`.summary` (records over seeds, loss histories by round).
"""

from .config import (
    DOCUMENTED_METHODS,
    KINDS,
    PEER_METHODS,
    config_names,
    load_config,
    resolve_config,
    validate_config,
)
from .outputs import write_outputs
from .runner import cell_key, load_cells, plan_cells, run_experiment
from .summary import summarize_records

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
