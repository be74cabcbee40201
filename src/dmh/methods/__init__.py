"""DMH and its building blocks (CLE, GBE, DAM). DMH's stages and their parts are importable from
here (``from dmh.methods import GBE, Perplexity``; ``DMH(gbe=GBE(similarity=Perplexity(50)))``). The
registry of every method by name lives in :mod:`dmh.registry`; its names are re-exported here for
code that imports them from this package."""

from ..registry import METHODS, get_method_class, make_method, method_names
from .dmh_parts import LLE, Clip, Network, Perplexity, Raw, Ridge, Shift, SparseRidge, Zero
from .dmh_stages import CLE, DAM, GBE, PCA

__all__ = ["CLE", "DAM", "GBE", "LLE", "METHODS", "PCA", "Clip", "Network", "Perplexity", "Raw", "Ridge", "Shift",
           "SparseRidge", "Zero", "get_method_class", "make_method", "method_names"]
