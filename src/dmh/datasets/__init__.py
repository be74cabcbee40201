"""Built-in datasets (shipped inside the package) and lookup of data by name or path."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import numpy as np

from .._validation import check_feature_dtype
from ..data import CrossModalData, random_split
from ..errors import ParameterTypeError, UnknownNameError

__all__ = ["BUILTIN", "load_builtin", "load_dataset"]

BUILTIN = {
    "uci-digits": "UCI Multiple Features digits (CC BY 4.0): 2000 objects, 10 classes, "
    "'image' = 76-d Fourier coefficients, 'text' = 64-d Karhunen-Loeve coefficients; "
    "seeded split: 500 queries, the other 1500 are database and training set (the FSH protocol sizes)",
}


def load_builtin(name: str, dtype="float64") -> CrossModalData:
    if name not in BUILTIN:
        raise UnknownNameError(f"unknown built-in dataset {name!r}; available: {sorted(BUILTIN)}")
    ref = resources.files(__package__).joinpath("uci_digits.npz")
    with resources.as_file(ref) as path, np.load(path, allow_pickle=False) as f:
        image, text, labels = f["image"], f["text"], f["labels"]
    train, query, database = random_split(image.shape[0], query_size=500, train_size=1500, random_state=0)
    return CrossModalData(
        image=image, text=text, labels=labels, train_idx=train, query_idx=query, database_idx=database,
        name=name, dtype=dtype,
    )


def load_dataset(name_or_path, *, query_size=None, train_size=None, random_state=None, name: str | None = None,
                 image: str | None = None, dtype="float64") -> CrossModalData:
    """A built-in dataset by name, a benchmark (``"wiki:/data/wiki"``, see :mod:`dmh.datasets.benchmarks`)
    or a data file (see :func:`dmh.io.load_data`). ``query_size``, ``train_size``, ``random_state``:
    the random split made where the data hold none (None: the benchmark's or the loader's default);
    ``name``: the data's name; ``image``: which image features of a benchmark; ``dtype``: the
    precision the features are kept in (``"float64"``, the default, or ``"float32"``: see
    :class:`~dmh.data.CrossModalData`)."""
    dtype = check_feature_dtype(dtype).name  # a bad value is an error before anything is read
    if isinstance(name_or_path, str) and name_or_path in BUILTIN:
        return load_builtin(name_or_path, dtype=dtype)
    from .benchmarks import try_load_benchmark  # "name:folder", a benchmark folder (docs/datasets.md)

    split = {"query_size": query_size, "train_size": train_size, "random_state": random_state}
    if (data := try_load_benchmark(name_or_path, image=image, name=name, **split)) is not None:
        return data.astype(dtype)
    path = Path(name_or_path)
    if not path.exists():
        raise FileNotFoundError(
            f"{name_or_path!r} is neither a built-in dataset ({', '.join(sorted(BUILTIN))}) nor an existing file"
        )
    from ..io import load_data

    if image is not None:
        raise ParameterTypeError(f"image={image!r} chooses a benchmark's image features; {path} is a data file")
    return load_data(path, name=name, dtype=dtype, **{k: v for k, v in split.items() if v is not None})
