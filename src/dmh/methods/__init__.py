"""DMH and its building blocks (CLE, GBE, DAM). The registry of every method by name lives in
:mod:`dmh.registry`; its names are re-exported here for code that imports them from this package."""

from ..registry import METHODS, get_method_class, make_method, method_names

__all__ = ["METHODS", "get_method_class", "make_method", "method_names"]
