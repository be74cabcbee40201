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
10,000 database objects the training set.

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

from pathlib import Path

import numpy as np

from ._atomic import atomic_path
from .data import CrossModalData

__all__ = ["load_data", "save_data", "read_arrays"]

GENERIC_KEYS = ("image", "text", "labels", "image_mask", "text_mask", "train_idx", "query_idx", "database_idx")
_LABEL_KEYS = {"tr": ("L_tr", "L_train"), "te": ("L_te", "L_test"), "db": ("L_db", "L_database")}


def read_arrays(path) -> dict[str, np.ndarray]:
    """All named arrays of an ``.npz`` or ``.mat`` (v5 or v7.3) file, rows as objects for v7.3."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"data file not found: {path}")
    suffix = path.suffix.lower()
    if suffix == ".npz":
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    if suffix == ".mat":
        return _read_mat(path)
    raise ValueError(f"unsupported data file type {suffix!r} for {path}: use .npz or .mat")


def _read_mat(path: Path) -> dict[str, np.ndarray]:
    import h5py
    import scipy.io as sio

    if h5py.is_hdf5(path):
        out = {}
        with h5py.File(path, "r") as f:
            for key, item in f.items():
                if key.startswith("#"):
                    continue
                if isinstance(item, h5py.Dataset):
                    arr = item[()]
                    out[key] = arr.T if arr.ndim >= 2 else arr
                elif isinstance(item, h5py.Group) and {"data", "ir", "jc"} <= set(item.keys()):
                    import scipy.sparse as sp

                    n_rows = int(item.attrs.get("MATLAB_sparse", 0))
                    jc = item["jc"][()]
                    mat = sp.csc_matrix((item["data"][()], item["ir"][()], jc), shape=(n_rows, jc.size - 1))
                    out[key] = mat.toarray()
        return out
    try:
        raw = sio.loadmat(path)
    except NotImplementedError as exc:  # pragma: no cover - v7.3 without HDF5 signature
        raise ValueError(f"cannot read {path}: {exc}") from exc
    out = {}
    for key, value in raw.items():
        if key.startswith("__"):
            continue
        if hasattr(value, "toarray"):
            value = value.toarray()
        if isinstance(value, np.ndarray) and value.dtype != object and value.dtype.names is None:
            out[key] = value
    return out


def load_data(path, *, query_size=0.2, train_size=10_000, random_state=0, name: str | None = None) -> CrossModalData:
    """Load a data file in the generic or the MATLAB toolkit layout (see the module docstring)."""
    path = Path(path)
    arrays = read_arrays(path)
    name = name if name is not None else path.stem
    if "image" in arrays or "text" in arrays:
        data = _from_generic(arrays, path, name)
    elif "I_tr" in arrays or "T_tr" in arrays:
        data = _from_toolkit(arrays, path, name)
    else:
        raise KeyError(
            f"{path} has neither the generic layout (keys 'image', 'text', ...) nor the MATLAB toolkit "
            f"layout (keys 'I_tr', 'T_tr', 'L_tr', 'I_te', ...); it holds {sorted(arrays)}"
        )
    return data.with_split(query_size=query_size, train_size=train_size, random_state=random_state)


def _from_generic(arrays, path, name) -> CrossModalData:
    for key in ("image", "text"):
        if key not in arrays:
            what = "n x d_img image" if key == "image" else "n x d_txt text"
            raise KeyError(f"{path} lacks the key {key!r} ({what} features)")
    unknown = sorted(k for k in set(arrays) - set(GENERIC_KEYS) if not k.startswith("__"))
    if unknown:
        raise KeyError(f"{path} has unknown keys {unknown}; the generic layout knows {list(GENERIC_KEYS)}")
    kwargs = {k: arrays[k] for k in GENERIC_KEYS if k in arrays}
    for k in ("image_mask", "text_mask", "train_idx", "query_idx", "database_idx"):
        if k in kwargs:
            kwargs[k] = np.asarray(kwargs[k]).reshape(-1)
    lab = kwargs.get("labels")
    n = np.asarray(kwargs["image"]).shape[0]
    if lab is not None and lab.ndim == 2 and lab.shape[0] == 1 and n != 1:  # MATLAB row vector
        kwargs["labels"] = lab.reshape(-1)
    return CrossModalData(**kwargs, name=name)


def _toolkit_labels(arrays, part, path):
    for key in _LABEL_KEYS[part]:
        if key in arrays:
            return arrays[key]
    return None


def _from_toolkit(arrays, path, name) -> CrossModalData:
    parts = []
    for part in ("tr", "te", "db"):
        img, txt = arrays.get(f"I_{part}"), arrays.get(f"T_{part}")
        if img is None and txt is None:
            if part == "db":
                continue
            what = "training" if part == "tr" else "test"
            raise KeyError(f"{path} lacks I_{part} and T_{part} (the {what} image and text features)")
        if img is None or txt is None:
            missing = f"I_{part}" if img is None else f"T_{part}"
            raise KeyError(f"{path} lacks {missing}: the toolkit layout needs both I_{part} and T_{part}")
        if img.shape[0] != txt.shape[0]:
            raise ValueError(f"{path}: I_{part} has {img.shape[0]} rows but T_{part} has {txt.shape[0]}")
        parts.append((part, img, txt, _toolkit_labels(arrays, part, path)))
    have_labels = [p[3] is not None for p in parts]
    if any(have_labels) and not all(have_labels):
        missing = [f"L_{p[0]}" for p in parts if p[3] is None]
        raise KeyError(f"{path} has labels for some parts but lacks {missing}")
    labels = None
    if all(have_labels):
        labs = []
        for part, img, _, lab in parts:
            lab = np.asarray(lab)
            if lab.ndim == 2 and lab.shape[1] == 1:
                lab = lab.reshape(-1)
            if lab.shape[0] != img.shape[0]:
                raise ValueError(f"{path}: labels of part {part!r} have {lab.shape[0]} rows, features {img.shape[0]}")
            labs.append(lab)
        if len({lab.ndim for lab in labs}) != 1:
            raise ValueError(f"{path}: label parts mix class ids and multi-hot matrices")
        labels = np.concatenate(labs)
    image = np.concatenate([np.asarray(p[1], dtype=np.float64) for p in parts])
    text = np.concatenate([np.asarray(p[2], dtype=np.float64) for p in parts])
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
            raise ValueError(f"unsupported output type {suffix!r}: use .npz or .mat")
    return path
