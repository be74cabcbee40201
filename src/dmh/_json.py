"""One conversion of results, configs and hyperparameters to plain JSON values."""

from __future__ import annotations

import math
import numbers

import numpy as np


def jsonable(obj):
    """Dicts, sequences and arrays become dicts and lists; numpy scalars become Python numbers;
    NaN and infinities become ``None`` (strict JSON has no NaN); a random generator becomes
    ``None`` (the seed is what matters); anything else unknown becomes its ``str``."""
    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple | np.ndarray):
        return [jsonable(v) for v in (obj.tolist() if isinstance(obj, np.ndarray) else obj)]
    if isinstance(obj, bool | np.bool_):
        return bool(obj)
    if isinstance(obj, numbers.Integral):
        return int(obj)
    if isinstance(obj, numbers.Real):
        value = float(obj)
        return value if math.isfinite(value) else None
    if obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, np.random.Generator | np.random.RandomState):
        return None
    return str(obj)
