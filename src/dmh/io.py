"""Reading and writing data files.

Two layouts are understood, in ``.npz`` and ``.mat`` (MATLAB v5 and v7.3/HDF5) files:

**Generic layout** (what :func:`save_data` writes)

========================  ================================================================
key                       content
========================  ================================================================
``image``                 (n, d_img) image features
``text``                  (n, d_txt) text features
``labels``                (n, L) multi-hot, or (n,) class ids; optional (needed to evaluate)
``image_mask``            (n,) bool, optional: which objects have an image (default: all)
``text_mask``             (n,) bool, optional: which objects have a text (default: all)
``train_idx``             0-based row indices of the training set, optional
``query_idx``             0-based row indices of the queries, optional
``database_idx``          0-based row indices of the retrieval set, optional
========================  ================================================================

When the split is absent, :func:`load_data` makes a seeded one (see
:func:`dmh.data.random_split`): 20% of the objects are queries, the rest the database, and up to
10,000 database objects the training set. A file of fewer than 3 objects (too few for a split) is
loaded without one: it can be described, encoded and searched (``--rows all``), not evaluated. When
only some of the three index arrays are given, the others are derived from them, never drawn
independently (see :meth:`dmh.CrossModalData.with_split`).

Every problem with a file (unreadable, damaged, truncated, wrong keys, inconsistent shapes, NaN
features, indices out of range) is a :class:`dmh.errors.DataFileError` naming the file.

**MATLAB toolkit layout** (the Wikipedia file and many others): ``I_tr, T_tr, L_tr, I_te, T_te,
L_te`` and optionally ``I_db, T_db, L_db``; label keys may also be ``L_train`` / ``L_test`` /
``L_db``. Rows are stacked as ``[tr; te; db]``. The test rows are the queries; the training rows
are the training set; the ``db`` rows are the database when present, else the training rows are
(the Wikipedia protocol: 693 queries, the 2173 training pairs are also the database).

In MATLAB v7.3 files arrays are stored column-major; they are transposed back on reading so that
rows are objects in both formats. MATLAB's 1-based index arrays must be converted by the user;
indices in these files are always 0-based.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np

from ._archive import check_readable_file, read_npz
from ._atomic import atomic_path
from ._validation import check_feature_dtype
from .data import CrossModalData
from .errors import DataError, DataFileError, DmhError, OutputError, check_finite_memory

__all__ = ["load_data", "save_data", "read_arrays"]

GENERIC_KEYS = ("image", "text", "labels", "image_mask", "text_mask", "train_idx", "query_idx", "database_idx")
_LABEL_KEYS = {"tr": ("L_tr", "L_train"), "te": ("L_te", "L_test"), "db": ("L_db", "L_database")}
#: every key a layout reads: a MATLAB variable of that name that is not numeric is an error, not skipped
_KNOWN_KEYS = frozenset(GENERIC_KEYS) | {f"{v}_{p}" for v in "IT" for p in ("tr", "te", "db")} | {
    k for keys in _LABEL_KEYS.values() for k in keys}


def _not_numeric(path, key, what) -> DataFileError:
    return DataFileError(path, f"variable {key!r} holds {what}, not a numeric array")


def read_arrays(path) -> dict[str, np.ndarray]:
    """All named arrays of an ``.npz`` or ``.mat`` (v5 or v7.3) file, rows as objects for v7.3.

    Raises :class:`DataFileError` for a damaged, truncated, empty or unsupported file, and the usual
    :class:`OSError` (``FileNotFoundError``, ``PermissionError``, ``IsADirectoryError``) when it
    cannot be opened.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".npz", ".mat"):
        if path.is_dir():
            raise IsADirectoryError(21, "expected a data file (.npz or .mat), got a directory", str(path))
        raise DataFileError(path, f"unsupported data file type {suffix or '(no extension)'!r}: use .npz or .mat")
    if suffix == ".npz":
        return read_npz(path, DataFileError, "data file")
    check_readable_file(path, DataFileError, "data file")
    return _read_mat(path)


#: exceptions scipy.io and h5py raise on damaged input
_MAT_ERRORS = (ValueError, TypeError, IndexError, KeyError, EOFError, struct.error, zlib.error,
               NotImplementedError, UnicodeDecodeError, OverflowError, AttributeError, RuntimeError)


def _read_mat(path: Path) -> dict[str, np.ndarray]:
    import h5py
    import scipy.io as sio

    try:
        with open(path, "rb") as fh:  # PermissionError surfaces here, as itself
            fh.read(1)
        if h5py.is_hdf5(path):
            return _read_mat73(path)
        raw = sio.loadmat(path)
    except DmhError:  # already names the file
        raise
    except (PermissionError, IsADirectoryError, FileNotFoundError):
        raise
    except MemoryError:
        raise DataFileError(path, "is damaged: it declares arrays too large to allocate") from None
    except (*_MAT_ERRORS, OSError) as exc:
        text = str(exc).split("\n")[0].strip()
        raise DataFileError(path, f"is not a readable MATLAB file, or is damaged or truncated ({type(exc).__name__}: "
                                  f"{text})") from None
    out = {}
    for key, value in raw.items():
        if key.startswith("__"):
            continue
        if hasattr(value, "toarray"):
            value = value.toarray()
        if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
            out[key] = value
        elif key in _KNOWN_KEYS:
            raise _not_numeric(path, key, f"{getattr(value, 'dtype', type(value).__name__)} data")
    return out


def _read_mat73(path: Path) -> dict[str, np.ndarray]:
    import h5py
    import scipy.sparse as sp

    out = {}
    with h5py.File(path, "r") as f:
        for key, item in f.items():
            if key.startswith("#"):
                continue
            if isinstance(item, h5py.Dataset):
                if item.dtype.kind not in "biuf":  # cells, strings and references are not features
                    if key in _KNOWN_KEYS:
                        raise _not_numeric(path, key, f"{item.dtype} data")
                    continue
                check_finite_memory(item.size * item.dtype.itemsize, f"array {key!r} of {path}")
                arr = item[()]
                out[key] = arr.T if arr.ndim >= 2 else arr
            elif key in _KNOWN_KEYS and not (isinstance(item, h5py.Group) and {"data", "ir", "jc"} <= set(item)):
                raise _not_numeric(path, key, "a MATLAB struct or cell")
            elif isinstance(item, h5py.Group) and {"data", "ir", "jc"} <= set(item.keys()):
                n_rows = int(item.attrs.get("MATLAB_sparse", 0))
                jc = item["jc"][()]
                mat = sp.csc_matrix((item["data"][()], item["ir"][()], jc), shape=(n_rows, jc.size - 1))
                check_finite_memory(mat.shape[0] * mat.shape[1] * 8.0, f"sparse array {key!r} of {path}")
                out[key] = mat.toarray()
    return out


def load_data(path, *, query_size=0.2, train_size=10_000, random_state=0, name: str | None = None,
              dtype="float64") -> CrossModalData:
    """Load a data file in the generic or the MATLAB toolkit layout (see the module docstring).
    ``dtype``: the precision the features are kept in (see :class:`~dmh.data.CrossModalData`)."""
    dtype = check_feature_dtype(dtype).name
    path = Path(path)
    arrays = read_arrays(path)
    name = name if name is not None else path.stem
    try:
        if "image" in arrays or "text" in arrays:
            data = _from_generic(arrays, path, name, dtype)
        elif "I_tr" in arrays or "T_tr" in arrays:
            data = _from_toolkit(arrays, path, name, dtype)
        else:
            raise DataFileError(
                path,
                "has neither the generic layout (keys 'image', 'text', ...) nor the MATLAB toolkit "
                f"layout (keys 'I_tr', 'T_tr', 'L_tr', 'I_te', ...); it holds {sorted(arrays)}",
            )
        if data.train_idx is None and data.query_idx is None and data.database_idx is None and data.n_objects < 3:
            return data  # too few objects for a split: usable where no split is needed (--rows all)
        return data.with_split(query_size=query_size, train_size=train_size, random_state=random_state)
    except DataFileError:
        raise
    except DataError as exc:  # the arrays are inconsistent: name the file
        raise DataFileError(path, str(exc)) from None


def _from_generic(arrays, path, name, dtype="float64") -> CrossModalData:
    for key in ("image", "text"):
        if key not in arrays:
            what = "n x d_img image" if key == "image" else "n x d_txt text"
            raise DataFileError(path, f"lacks the key {key!r} ({what} features)")
    unknown = sorted(k for k in set(arrays) - set(GENERIC_KEYS) if not k.startswith("__"))
    if unknown:
        raise DataFileError(path, f"has unknown keys {unknown}; the generic layout knows {list(GENERIC_KEYS)}")
    kwargs = {k: arrays[k] for k in GENERIC_KEYS if k in arrays}
    for k in ("image_mask", "text_mask", "train_idx", "query_idx", "database_idx"):
        if k in kwargs:
            kwargs[k] = np.asarray(kwargs[k]).reshape(-1)
    lab = kwargs.get("labels")
    n = np.asarray(kwargs["image"]).shape[0]
    if lab is not None and lab.ndim == 2 and lab.shape[0] == 1 and n != 1:  # MATLAB row vector
        kwargs["labels"] = lab.reshape(-1)
    return CrossModalData(**kwargs, name=name, dtype=dtype)


def _toolkit_labels(arrays, part, path):
    for key in _LABEL_KEYS[part]:
        if key in arrays:
            return arrays[key]
    return None


def _from_toolkit(arrays, path, name, dtype="float64") -> CrossModalData:
    parts = []
    for part in ("tr", "te", "db"):
        img, txt = arrays.get(f"I_{part}"), arrays.get(f"T_{part}")
        if img is None and txt is None:
            if part == "db":
                continue
            what = "training" if part == "tr" else "test"
            raise DataFileError(path, f"lacks I_{part} and T_{part} (the {what} image and text features)")
        if img is None or txt is None:
            missing = f"I_{part}" if img is None else f"T_{part}"
            raise DataFileError(path, f"lacks {missing}: the toolkit layout needs both I_{part} and T_{part}")
        for key, arr in ((f"I_{part}", img), (f"T_{part}", txt)):
            if arr.ndim != 2:
                raise DataFileError(path, f"{key} must be a 2-D array (objects x features), got shape {arr.shape}")
        if img.shape[0] != txt.shape[0]:
            raise DataFileError(path, f"I_{part} has {img.shape[0]} rows but T_{part} has {txt.shape[0]}")
        parts.append((part, img, txt, _toolkit_labels(arrays, part, path)))
    have_labels = [p[3] is not None for p in parts]
    if any(have_labels) and not all(have_labels):
        missing = [f"L_{p[0]}" for p in parts if p[3] is None]
        raise DataFileError(path, f"has labels for some parts but lacks {missing}")
    labels = None
    if all(have_labels):
        labs = []
        for part, img, _, lab in parts:
            lab = np.asarray(lab)
            if lab.ndim == 2 and lab.shape[1] == 1:
                lab = lab.reshape(-1)
            if lab.shape[0] != img.shape[0]:
                raise DataFileError(path, f"labels of part {part!r} have {lab.shape[0]} rows, features {img.shape[0]}")
            labs.append(lab)
        if len({lab.ndim for lab in labs}) != 1 or len({lab.shape[1:] for lab in labs}) != 1:
            raise DataFileError(path, "label parts mix class ids and multi-hot matrices")
        labels = np.concatenate(labs)
    for key, i in (("I", 1), ("T", 2)):
        dims = {p[i].shape[1] for p in parts}
        if len(dims) != 1:
            raise DataFileError(path, f"the {key}_* parts have different numbers of features: {sorted(dims)}")
    image = np.concatenate([p[1] for p in parts])
    text = np.concatenate([p[2] for p in parts])
    offsets = np.cumsum([0] + [p[1].shape[0] for p in parts])
    ranges = {p[0]: np.arange(offsets[i], offsets[i + 1]) for i, p in enumerate(parts)}
    return CrossModalData(
        image=image,
        text=text,
        labels=labels,
        train_idx=ranges["tr"],
        query_idx=ranges["te"],
        database_idx=ranges.get("db", ranges["tr"]),
        name=name,
        dtype=dtype,
    )


def save_data(data: CrossModalData, path, *, extra: dict | None = None) -> Path:
    """Write ``data`` in the generic layout, atomically. ``.npz`` (compressed) or ``.mat`` (v5).

    ``extra``: more arrays for an ``.npz`` file, named ``__*__`` (e.g. ``__featurizer__``); readers
    of the generic layout ignore such keys."""
    path = Path(path)
    arrays = {"image": data.image, "text": data.text, "image_mask": data.image_mask, "text_mask": data.text_mask}
    if extra and path.suffix.lower() == ".npz":
        arrays.update({k: v for k, v in extra.items() if k.startswith("__")})
    if data.labels is not None:
        arrays["labels"] = data.labels
    for key in ("train_idx", "query_idx", "database_idx"):
        if getattr(data, key) is not None:
            arrays[key] = getattr(data, key)
    suffix = path.suffix.lower()
    with atomic_path(path) as tmp:
        if suffix == ".npz":
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, **arrays)
        elif suffix == ".mat":
            import scipy.io as sio

            arrays = {k: (v.astype(np.uint8) if v.dtype == bool else v) for k, v in arrays.items()}
            # 1-D index arrays are stored as row vectors by MATLAB; read_arrays reshapes them back.
            sio.savemat(tmp, arrays, do_compression=True)
        else:
            raise OutputError(path, f"unsupported output type {suffix!r}: use .npz or .mat")
    return path
