"""dmh: cross-modal retrieval with binary hash codes learned from unlabeled, semi-paired data.

Deep Manifold Hashing (Shi et al.) and the baselines of its experiments behind one interface.
Importing :mod:`dmh` does not import PyTorch; :class:`dmh.DMH` imports it when first used.
"""

from ._threads import get_threads, set_threads, thread_limit
from .base import BaseHasher, load_model, sign_codes
from .blocks import BlockHasher
from .data import CrossModalData, make_semi_paired, random_split
from .datasets import load_dataset
from .io import load_data, save_data
from .metrics import mean_average_precision
from .registry import register_method

__version__ = "0.1.0"

__all__ = [
    "BaseHasher",
    "BlockHasher",
    "CrossModalData",
    "DMH",
    "load_data",
    "load_dataset",
    "load_model",
    "make_semi_paired",
    "mean_average_precision",
    "random_split",
    "register_method",
    "save_data",
    "sign_codes",
    "get_threads",
    "set_threads",
    "thread_limit",
]


def __getattr__(name):  # lazy: keep torch out of `import dmh`
    if name == "DMH":
        from .methods.dmh import DMH

        return DMH
    raise AttributeError(f"module 'dmh' has no attribute {name!r}")
