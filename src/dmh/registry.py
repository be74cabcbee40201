"""Registry of hashing methods by name (DMH, the baselines and the peers of :mod:`dmh.peers`). Entries
are import strings, resolved only when a method is asked for, so that importing :mod:`dmh` never pulls
in PyTorch (only DMH and the deep peers need it) and the registry imports no method module:
:mod:`dmh.base` uses it to load any saved model."""

from __future__ import annotations

import importlib

from .errors import UnknownNameError

__all__ = ["METHODS", "get_method_class", "make_method", "method_names"]

#: name -> (module, class)
METHODS: dict[str, tuple[str, str]] = {
    "dmh": ("dmh.methods.dmh", "DMH"),
    "cvh": ("dmh.baselines.cvh", "CVH"),
    "imh": ("dmh.baselines.imh", "IMH"),
    "cmfh": ("dmh.baselines.cmfh", "CMFH"),
    "lssh": ("dmh.baselines.lssh", "LSSH"),
    "stmh": ("dmh.baselines.stmh", "STMH"),
    "fsh": ("dmh.baselines.fsh", "FSH"),
    "cca-itq": ("dmh.peers.cca_itq", "CCAITQ"),
    "spdh": ("dmh.peers.spdh", "SPDH"),
    "djsrh": ("dmh.peers.djsrh", "DJSRH"),
    "jdsh": ("dmh.peers.jdsh", "JDSH"),
    "dgcpn": ("dmh.peers.dgcpn", "DGCPN"),
    "ucch": ("dmh.peers.ucch", "UCCH"),
    "sadch": ("dmh.peers.sadch", "SADCH"),
}


def method_names() -> list[str]:
    return list(METHODS)


def get_method_class(name: str):
    key = name.lower()
    if key not in METHODS:
        raise UnknownNameError(f"unknown method {name!r}; available: {', '.join(METHODS)}")
    module, cls = METHODS[key]
    return getattr(importlib.import_module(module), cls)


def make_method(name: str, **params):
    return get_method_class(name)(**params)
