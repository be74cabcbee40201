"""Loaders for the community's benchmark files, by name, with the paper's splits.

Every cross-modal hashing codebase since DCMH reads the same handful of MATLAB files: one file per
array (``mirflickr25k-iall-vgg.mat`` holding ``XAll``, ``mirflickr25k-yall.mat`` holding ``YAll``,
``mirflickr25k-lall.mat`` holding ``LAll``, ...), rows = objects in the same order in every file.
:func:`load_benchmark` reads such a folder by benchmark name and returns a
:class:`~dmh.data.CrossModalData` with the split of the DMH paper:

==================  =========  ==========================================  =============
benchmark           queries    database                                    training set
==================  =========  ==========================================  =============
``mirflickr25k``    2000       the other 18,015 pairs                      10,000 of the database
``nus-wide-tc21``   2100       all other pairs                             10,500 of the database
``nus-wide-tc10``   2100       all other pairs                             10,500 of the database
``mscoco``          5000       all other pairs                             10,000 of the database
``wiki``            693        the 2173 training pairs (from the file)     the same 2173
``uci-digits``      500        the 1500 training objects (from the file)   the same 1500
``medpix``          397        the 1653 other images (from the file)       the same 1653
==================  =========  ==========================================  =============

The random splits are drawn by :func:`dmh.data.random_split` with ``random_state=0`` unless told
otherwise: the sizes are the paper's, the permutation is ours (no paper published its indices).
Wikipedia and UCI digits come in the MATLAB toolkit layout, whose split is stored in the file;
MedPix comes as one data file in dmh's generic layout, which stores its split too.

Which files each benchmark expects (names, keys, shapes) is data, in
:data:`dmh.datasets.catalog.BENCHMARKS`, and is what the error names when a folder lacks one; this
module reads the files that table names. See ``docs/datasets.md``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..data import CrossModalData
from ..errors import DataError, DataFileError, ParameterError
from ..io import load_data, read_arrays
from .catalog import ALIASES, BENCHMARKS, Benchmark, FileSpec, _benchmark, benchmark_split, describe_benchmark

__all__ = [
    "ALIASES",
    "BENCHMARKS",
    "Benchmark",
    "FileSpec",
    "benchmark_split",
    "describe_benchmark",
    "detect_benchmark",
    "load_benchmark",
    "load_text_labels",
    "parse_benchmark_spec",
    "try_load_benchmark",
]




def _find(folder: Path, spec: FileSpec) -> Path | None:
    for name in spec.names:
        if (folder / name).is_file():
            return folder / name
    return None


def _folder_listing(folder: Path) -> str:
    names = sorted(p.name for p in folder.iterdir() if not p.name.startswith("."))
    shown = ", ".join(names[:20]) + (f", ... ({len(names)} in all)" if len(names) > 20 else "")
    return f"The folder holds: {shown}." if names else "The folder is empty."


def _missing(
    b: Benchmark, folder: Path, spec: FileSpec, what: str, hint: str = ""
) -> FileNotFoundError:
    return FileNotFoundError(
        f"{b.title} folder {folder} lacks {spec.names[0]}, the {what}: "
        f"it should hold {spec.describe()}. "
        f"{hint}{_folder_listing(folder)}"
    )


def _check_folder(folder) -> Path:
    folder = Path(folder)
    if not folder.exists():
        raise FileNotFoundError(f"benchmark folder not found: {folder}")
    if not folder.is_dir():
        raise NotADirectoryError(
            f"{folder} is a file; a benchmark loader needs the folder holding its files"
        )
    return folder


# ---------------------------------------------------------------------------------------- reading
def _read_key(path: Path, key: str) -> np.ndarray:
    arrays = read_arrays(path)
    if key not in arrays:
        raise DataError(f"{path} has no array {key!r}; it holds {sorted(arrays)}")
    return np.asarray(arrays[key])


def _read_hdf5_keys(path: Path, keys) -> dict[str, np.ndarray]:
    """Selected arrays of a v7.3 (HDF5) file, transposed as :func:`dmh.io.read_arrays` does.

    Only for bundles such as ``FLICKR-25K.mat`` whose raw-image array (3 GB) must not be read.
    """
    import h5py

    if not h5py.is_hdf5(path):
        arrays = read_arrays(path)
        missing = [k for k in keys if k not in arrays]
        if missing:
            raise DataError(f"{path} lacks {missing}; it holds {sorted(arrays)}")
        return {k: arrays[k] for k in keys}
    out = {}
    try:
        with h5py.File(path, "r") as f:
            missing = [k for k in keys if k not in f or not isinstance(f[k], h5py.Dataset)]
            if missing:
                raise DataFileError(
                    path, f"lacks {missing}; it holds {sorted(k for k in f if not k.startswith('#'))}"
                )
            for k in keys:
                if f[k].dtype.kind not in "biuf":
                    raise DataFileError(path, f"variable {k!r} holds {f[k].dtype} data, not a numeric array")
                arr = f[k][()]
                out[k] = arr.T if arr.ndim >= 2 else arr
    except (PermissionError, IsADirectoryError, FileNotFoundError):
        raise
    except (OSError, KeyError, RuntimeError) as exc:  # h5py on a damaged or truncated file
        raise DataFileError(path, f"is not a readable MATLAB v7.3 file, or is damaged or truncated ({exc})") from None
    return out


def _orient(arrays: dict[str, np.ndarray], sources: dict[str, Path]) -> dict[str, np.ndarray]:
    """Make rows the objects in every array.

    MATLAB files differ in whether objects are rows or columns (and v7.3 files come transposed), so
    the object count is the dimension that every array shares; arrays whose rows differ from it
    are transposed. Raises when no such dimension exists.
    """
    arrays = {k: (a.reshape(-1, 1) if a.ndim == 1 else a) for k, a in arrays.items()}
    for k, a in arrays.items():
        if a.ndim != 2:
            raise DataError(f"{sources[k]}: {k} must be a 2-D matrix, got shape {a.shape}")
    rows = {a.shape[0] for a in arrays.values()}
    if len(rows) == 1:
        return arrays
    common = set.intersection(*({*a.shape} for a in arrays.values()))
    if len(common) != 1:
        shapes = ", ".join(f"{k} {a.shape} in {sources[k].name}" for k, a in arrays.items())
        raise DataError(f"the files disagree on the number of objects: {shapes}")
    n = common.pop()
    return {k: (a if a.shape[0] == n else a.T) for k, a in arrays.items()}


def _text_labels_sources(b: Benchmark, folder: Path):
    """Where text and labels come from: the per-array files, else the bundle. None if neither."""
    if b.text is None:
        return None
    text, labels = _find(folder, b.text), _find(folder, b.labels)
    if text is not None and labels is not None:
        return "files", text, labels
    if b.bundle is not None and (bundle := _find(folder, b.bundle)) is not None:
        return "bundle", bundle, bundle
    if text is None and labels is None:
        return None
    spec, what = (b.text, "text file") if text is None else (b.labels, "label file")
    raise _missing(b, folder, spec, what)


def _read_text_labels(b: Benchmark, folder: Path, src) -> tuple[np.ndarray, np.ndarray, dict]:
    kind, text_path, labels_path = src
    if kind == "files":
        text, labels = _read_key(text_path, b.text.key), _read_key(labels_path, b.labels.key)
    else:
        got = _read_hdf5_keys(text_path, [b.bundle_keys["text"], b.bundle_keys["labels"]])
        text, labels = got[b.bundle_keys["text"]], got[b.bundle_keys["labels"]]
    return text, labels, {"text": text_path, "labels": labels_path}


def load_text_labels(name: str, folder) -> tuple[np.ndarray, np.ndarray]:
    """Only the text features and labels of a benchmark folder, rows in file order.

    For text-only inspection, or where the image features are not available (they are the large
    file). Returns ``(text, labels)`` as stored (e.g. uint8), each with one row per object.
    """
    b = _benchmark(name)
    folder = _check_folder(folder)
    if b.text is None:
        raise ParameterError(
            f"{b.name} comes as one data file ({', '.join((*b.toolkit, *b.data_files))}); "
            "load it with load_benchmark"
        )
    src = _text_labels_sources(b, folder)
    if src is None:
        raise _missing(b, folder, b.text, "text file")
    text, labels, sources = _read_text_labels(b, folder, src)
    oriented = _orient({"text": text, "labels": labels}, sources)
    return oriented["text"], oriented["labels"]


def _image_source(b: Benchmark, folder: Path, image) -> tuple[Path, str | None]:
    """The image-features file and key for the ``image`` argument (a choice or a path)."""
    if image is None:
        image = b.default_image
    if isinstance(image, str) and image in b.images:
        spec = b.images[image]
        path = _find(folder, spec)
        if path is None:
            raw = [s for s in b.raw_images if _find(folder, s)]
            if b.bundle is not None and _find(folder, b.bundle):
                raw.append(b.bundle)
            hint = (
                f"The folder holds raw images ({', '.join(s.names[0] for s in raw)}), "
                "which need a CNN before they are features: extract them "
                "(e.g. dmh.featurize.image_array_features), save them as an "
                "array file and pass its path as image=. "
                if raw
                else ""
            )
            if b.text is not None and _find(folder, b.text):
                hint += (
                    "The text and labels are there: "
                    f"dmh.datasets.benchmarks.load_text_labels({b.name!r}, folder) "
                    "loads them alone. "
                )
            raise _missing(b, folder, spec, "image features", hint)
        return path, spec.key
    if isinstance(image, str) and any(image in s.names or image == "raw" for s in b.raw_images):
        raise ParameterError(
            f"{b.title}: raw images are pixels, not features; they need a CNN first "
            "(e.g. dmh.featurize.image_array_features, or VGG fc7 features as in the paper). "
            f"Use image='vgg' ({b.images['vgg'].names[0]}) or a path to an image-features file."
        )
    path = Path(image)
    if not path.is_absolute() and not path.exists():
        path = folder / path
    if not path.is_file():
        choices = ", ".join(repr(c) for c in b.images) or "none"
        raise FileNotFoundError(
            f"image={image!r} is neither an image-file choice of {b.name} ({choices}) "
            "nor an existing file"
        )
    return path, None


def _read_image_file(path: Path, key: str | None) -> np.ndarray:
    if key is not None:
        return _read_key(path, key)
    arrays = read_arrays(path)
    for k in ("XAll", "image", "IAll"):
        if k in arrays:
            return np.asarray(arrays[k])
    matrices = [k for k, a in arrays.items() if np.asarray(a).ndim == 2]
    if len(matrices) != 1:
        raise DataError(
            f"{path}: cannot tell which array holds the image features (keys {sorted(arrays)}); "
            "store them under 'XAll' or 'image', or alone in the file"
        )
    return np.asarray(arrays[matrices[0]])


def load_benchmark(
    name: str,
    folder,
    *,
    image=None,
    query_size=None,
    train_size=None,
    random_state=None,
    data_name: str | None = None,
) -> CrossModalData:
    """Load a benchmark folder by name, with the paper's split.

    Parameters
    ----------
    name : str
        A key of :data:`BENCHMARKS` (or an alias, e.g. ``"nus-wide"`` = ``"nus-wide-tc21"``).
    folder : path
        The folder holding the benchmark's files (see :func:`describe_benchmark`). A path to a
        single data file (toolkit layout or dmh's generic layout) is also accepted.
    image : str or path, optional
        Which image features: a choice of the benchmark (``"vgg"``, the default, preferring the CNN
        features) or a path to a features file (``.mat``/``.npz`` holding ``XAll``, ``image``, or a
        single matrix) with one row per object in the order of the text file.
    query_size, train_size, random_state : optional
        Override the paper's split sizes / seed (see :func:`dmh.data.random_split`). Ignored for
        files that store their split (toolkit layout).
    data_name : str, optional
        The ``name`` of the returned data (default: the benchmark's name).

    Raises ``FileNotFoundError`` naming the missing file and what it should contain.
    """
    b = _benchmark(name)
    folder = Path(folder)
    label = b.name if data_name is None else data_name
    if folder.is_file():
        return _load_file(b, folder, label, query_size, train_size, random_state)
    folder = _check_folder(folder)
    src = _text_labels_sources(b, folder)
    if src is None:
        for stored in (*b.toolkit, *b.data_files):
            if (folder / stored).is_file():
                return _load_file(b, folder / stored, label, query_size, train_size, random_state)
        if b.text is None and not b.toolkit:
            raise FileNotFoundError(
                f"{b.title} folder {folder} lacks {b.data_files[0]}: it should hold dmh's generic layout "
                "(image, text, labels, train_idx, query_idx, database_idx; see dmh.io). "
                f"{_folder_listing(folder)}"
            )
        if b.text is None:
            raise FileNotFoundError(
                f"{b.title} folder {folder} lacks {b.toolkit[0]}: it should hold the MATLAB "
                "toolkit layout (I_tr, T_tr, L_tr, I_te, T_te, L_te [, I_db, T_db, L_db]). "
                f"{_folder_listing(folder)}"
            )
        hint = f"(or a toolkit file: {', '.join(b.toolkit)}) " if b.toolkit else ""
        raise _missing(b, folder, b.text, "text file", hint)
    image_path, image_key = _image_source(b, folder, image)
    text, labels, sources = _read_text_labels(b, folder, src)
    arrays = _orient(
        {"image": _read_image_file(image_path, image_key), "text": text, "labels": labels},
        {**sources, "image": image_path},
    )
    n = arrays["image"].shape[0]
    train, query, database = benchmark_split(
        b, n, query_size=query_size, train_size=train_size, random_state=random_state
    )
    return CrossModalData(
        image=arrays["image"],
        text=arrays["text"],
        labels=arrays["labels"],
        train_idx=train,
        query_idx=query,
        database_idx=database,
        name=label,
    )


def _load_file(
    b: Benchmark, path: Path, label, query_size, train_size, random_state
) -> CrossModalData:
    """A single data file (toolkit or generic layout); a random split uses the benchmark's sizes."""
    kwargs = {"name": label}
    if b.n_query is not None:
        kwargs.update(
            query_size=b.n_query if query_size is None else query_size,
            train_size=b.n_train if train_size is None else train_size,
            random_state=b.random_state if random_state is None else random_state,
        )
    else:
        kwargs.update(
            {
                k: v
                for k, v in (
                    ("query_size", query_size),
                    ("train_size", train_size),
                    ("random_state", random_state),
                )
                if v is not None
            }
        )
    return load_data(path, **kwargs)


# ---------------------------------------------------------------------------------------- dispatch
def detect_benchmark(folder) -> str:
    """The benchmark whose files a folder holds. Raises when none or several match."""
    folder = _check_folder(folder)
    present = {p.name for p in folder.iterdir()}
    matches = [b.name for b in BENCHMARKS.values() if present & set(b.known_files())]
    if len(matches) == 1:
        return matches[0]
    if not matches:
        expected = "; ".join(
            f"{b.name}: {', '.join(b.known_files()[:3])}" for b in BENCHMARKS.values()
        )
        raise FileNotFoundError(
            f"{folder} holds no benchmark file dmh knows ({expected}); {_folder_listing(folder)}"
        )
    raise ParameterError(
        f"{folder} holds files of several benchmarks ({', '.join(matches)}); "
        f"name one: 'NAME:{folder}'"
    )


def parse_benchmark_spec(spec) -> tuple[str, Path] | None:
    """``"name:path"`` -> ``(name, path)`` when ``name`` is a benchmark (or alias), else None."""
    if not isinstance(spec, str) or ":" not in spec:
        return None
    name, _, rest = spec.partition(":")
    if not rest or ALIASES.get(name.lower(), name.lower()) not in BENCHMARKS:
        return None
    return name, Path(rest)


def try_load_benchmark(name_or_path, *, image: str | None = None, query_size=None, train_size=None,
                       random_state=None, name: str | None = None) -> CrossModalData | None:
    """What :func:`dmh.datasets.load_dataset` asks first: a benchmark spec, name or folder.

    ``"mirflickr25k:/data/mir"`` loads that folder (or file) as the benchmark; a folder without a
    name is recognised by its files; a bare benchmark name raises an error asking for the folder.
    Anything else (a data file, a built-in name) gives ``None``. ``query_size``, ``train_size``,
    ``random_state`` and ``name`` are those of :func:`dmh.io.load_data`; ``image`` chooses the
    image features.
    """
    options = {"image": image, "query_size": query_size, "train_size": train_size, "random_state": random_state,
               "data_name": name}
    parsed = parse_benchmark_spec(name_or_path)
    if parsed is not None:
        return load_benchmark(parsed[0], parsed[1], **options)
    if (
        isinstance(name_or_path, str)
        and ALIASES.get(name_or_path.lower(), name_or_path.lower()) in BENCHMARKS
    ):
        if not Path(name_or_path).exists():
            raise FileNotFoundError(
                f"{name_or_path!r} is a benchmark whose files dmh does not ship; "
                "give the folder holding them, "
                f"as '{name_or_path}:/path/to/folder'.\n{describe_benchmark(name_or_path)}"
            )
    path = Path(name_or_path)
    if path.is_dir():
        return load_benchmark(detect_benchmark(path), path, **options)
    return None
