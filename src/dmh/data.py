"""The data model: one type for semi-paired image-text data.

:class:`CrossModalData` holds an image view and a text view over the same ``n`` objects. Any
object may lack one modality; which ones do is stated by the boolean ``image_mask`` and
``text_mask`` (``True`` = observed), never by NaN or by zero rows. Rows of a view whose mask is
``False`` are ignored by every method; they are zero-filled on construction so that no stale values
travel with the data.

Labels (class ids ``(n,)`` or multi-hot ``(n, L)``) are used only for evaluation. The split into
training, query and retrieval (database) sets is given as 0-based index arrays; the training set may
overlap the database, as in every protocol of the field.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field, replace

import numpy as np

from ._validation import (
    check_feature_dtype,
    check_features,
    check_index,
    check_int,
    check_labels,
    check_mask,
    check_paired_ratio,
    check_random_state,
)
from .errors import DataError, DataTypeError, ParameterError

__all__ = ["CrossModalData", "make_semi_paired", "random_split"]


@dataclass(frozen=True, eq=False)
class CrossModalData:
    """Semi-paired image-text data with optional labels and split.

    Parameters
    ----------
    image : array (n, d_img)
        Image features. Rows with ``image_mask == False`` are ignored.
    text : array (n, d_txt)
        Text features. Rows with ``text_mask == False`` are ignored.
    labels : array (n,) of class ids or (n, L) multi-hot, optional
        Used only for evaluation (relevance = at least one shared label).
    image_mask, text_mask : bool array (n,), optional
        Which objects have that modality. Default: all observed.
    train_idx, query_idx, database_idx : int arrays, optional
        0-based row indices of the training, query and retrieval sets.
    image_origin, text_origin : int arrays (n,), optional
        Provenance: for data made by :func:`make_semi_paired`, the row of the source data that each
        object's image / text came from (-1 where the object has no such modality).
    name : str
        A label for reports.
    dtype : {"float64", "float32"}
        The precision in which the features are kept. ``"float64"`` (default): every input is
        converted to double precision, as every documented result was made. ``"float32"``: kept in
        single precision (float32 inputs without a copy), half the memory; for large training sets
        (``benchmarks/bench_fit.py --dtype float32``, docs/scaling.md). Inputs that float32 holds exactly
        (float32 arrays, binary or small integer features) give DMH the same codes either way.
    """

    image: np.ndarray
    text: np.ndarray
    labels: np.ndarray | None = None
    image_mask: np.ndarray | None = None
    text_mask: np.ndarray | None = None
    train_idx: np.ndarray | None = None
    query_idx: np.ndarray | None = None
    database_idx: np.ndarray | None = None
    image_origin: np.ndarray | None = field(default=None, repr=False)
    text_origin: np.ndarray | None = field(default=None, repr=False)
    name: str = ""
    dtype: str = "float64"

    def __post_init__(self):
        dtype = check_feature_dtype(self.dtype)
        img = np.asarray(self.image) if self.image is not None else None
        if img is None or img.ndim != 2:
            raise DataError(
                "image must be a 2-D array (n_objects x n_features), got "
                f"{None if img is None else img.shape}"
            )
        n = img.shape[0]
        if n == 0:
            raise DataError("the data hold no objects (image has 0 rows)")
        image_mask = (
            np.ones(n, bool) if self.image_mask is None else check_mask(self.image_mask, "image_mask", n)
        )
        text_mask = (
            np.ones(n, bool) if self.text_mask is None else check_mask(self.text_mask, "text_mask", n)
        )
        image = check_features(img, "image", rows_to_check=image_mask, dtype=dtype)
        text = check_features(self.text, "text", n_rows=n, rows_to_check=text_mask, dtype=dtype)
        if not (image_mask | text_mask).all():
            bad = np.flatnonzero(~(image_mask | text_mask))
            raise DataError(
                f"{bad.size} object(s) have neither an image nor a text (first rows: {bad[:5].tolist()})"
            )
        if (~image_mask).any():
            image = image.copy()
            image[~image_mask] = 0.0
        if (~text_mask).any():
            text = text.copy()
            text[~text_mask] = 0.0
        set_ = object.__setattr__
        set_(self, "dtype", dtype.name)
        set_(self, "image", image)
        set_(self, "text", text)
        set_(self, "image_mask", image_mask)
        set_(self, "text_mask", text_mask)
        if self.labels is not None:
            set_(self, "labels", check_labels(self.labels, n))
        for key in ("train_idx", "query_idx", "database_idx"):
            value = getattr(self, key)
            if value is not None:
                set_(self, key, check_index(value, key, n))
        for key in ("image_origin", "text_origin"):
            value = getattr(self, key)
            if value is not None:
                value = np.asarray(value, dtype=np.int64).reshape(-1)
                if value.shape != (n,):
                    raise DataError(f"{key} must have shape ({n},), got {value.shape}")
                set_(self, key, value)

    # ------------------------------------------------------------------ structure
    @property
    def n_objects(self) -> int:
        return self.image.shape[0]

    @property
    def paired_mask(self) -> np.ndarray:
        return self.image_mask & self.text_mask

    @property
    def n_paired(self) -> int:
        return int(self.paired_mask.sum())

    @property
    def n_image_only(self) -> int:
        return int((self.image_mask & ~self.text_mask).sum())

    @property
    def n_text_only(self) -> int:
        return int((self.text_mask & ~self.image_mask).sum())

    @property
    def is_fully_paired(self) -> bool:
        return bool(self.paired_mask.all())

    @property
    def n_features(self) -> dict[str, int]:
        return {"image": self.image.shape[1], "text": self.text.shape[1]}

    def view(self, modality: str) -> np.ndarray:
        """The observed rows of one modality, shape (n_observed, d)."""
        if modality == "image":
            return self.image[self.image_mask]
        if modality == "text":
            return self.text[self.text_mask]
        raise ParameterError(f"modality must be 'image' or 'text', got {modality!r}")

    def mask(self, modality: str) -> np.ndarray:
        if modality == "image":
            return self.image_mask
        if modality == "text":
            return self.text_mask
        raise ParameterError(f"modality must be 'image' or 'text', got {modality!r}")

    def label_matrix(self) -> np.ndarray:
        """Labels as a multi-hot boolean matrix (class ids are one-hot encoded)."""
        return label_matrix(self.require_labels())

    def require_labels(self) -> np.ndarray:
        if self.labels is None:
            raise DataError(
                f"the data{' ' + repr(self.name) if self.name else ''} hold no labels; "
                "evaluation needs labels (class ids or multi-hot) to decide relevance"
            )
        return self.labels

    def summary(self) -> str:
        parts = [
            f"{self.n_objects} objects ({self.n_paired} paired, {self.n_image_only} image-only, "
            f"{self.n_text_only} text-only)",
            f"image {self.image.shape[1]}-d, text {self.text.shape[1]}-d",
        ]
        if self.labels is not None:
            kind = "multi-hot" if self.labels.ndim == 2 else "class ids"
            parts.append(f"labels: {kind}, {label_matrix(self.labels).shape[1]} classes")
        for key in ("train_idx", "query_idx", "database_idx"):
            value = getattr(self, key)
            if value is not None:
                parts.append(f"{key.split('_')[0]} {value.size}")
        return (self.name + ": " if self.name else "") + "; ".join(parts)

    # ------------------------------------------------------------------ subsets
    def subset(self, idx, name: str | None = None) -> CrossModalData:
        """The objects ``idx`` (0-based) as new data, without split indices."""
        idx = check_index(idx, "idx", self.n_objects)
        take = lambda a: None if a is None else a[idx]  # noqa: E731
        return CrossModalData(
            image=self.image[idx],
            text=self.text[idx],
            labels=take(self.labels),
            image_mask=self.image_mask[idx],
            text_mask=self.text_mask[idx],
            image_origin=take(self.image_origin),
            text_origin=take(self.text_origin),
            name=self.name if name is None else name,
            dtype=self.dtype,
        )

    def astype(self, dtype) -> CrossModalData:
        """The same data with the features kept in ``dtype`` (``"float64"`` or ``"float32"``);
        ``self`` when they already are."""
        if check_feature_dtype(dtype).name == self.dtype:
            return self
        return replace(self, dtype=dtype)

    def validation(self, fraction=0.2, random_state=0) -> CrossModalData:
        """The validation split of the training objects: a copy whose queries are ``fraction`` of
        them (strictly between 0 and 1; drawn with ``random_state``) and whose training set and
        database are both the other training objects.

        Design defaults are chosen on this split, never on the query set, which stays for reporting.
        The fit sees only the remaining training objects, so the validation queries are unseen, as
        the test queries are in every protocol here; the database is those same objects, as the
        test database holds the training set. Objects outside the training set (the test queries,
        the rest of the database) take no part, and a test query listed in ``train_idx`` is never a
        validation object.
        """
        if self.train_idx is None:
            raise DataError(
                f"the data{' ' + repr(self.name) if self.name else ''} have no train_idx: a validation split "
                "is carved from the training objects (give train_idx or call with_split() first)"
            )
        pool = np.setdiff1d(self.train_idx, self.query_idx if self.query_idx is not None else [])
        ok = isinstance(fraction, numbers.Real) and not isinstance(fraction, bool) and 0 < float(fraction) < 1
        if not ok:  # NaN fails the comparison too
            raise ParameterError(f"fraction must be a number strictly between 0 and 1, got {fraction!r}")
        n_query = int(round(float(fraction) * pool.size))
        if not 1 <= n_query < pool.size:
            raise DataError(
                f"cannot carve a validation split from {pool.size} training object(s): fraction={fraction!r} gives "
                f"{n_query} validation queries (at least one is needed, and one object left for the database)"
            )
        perm = check_random_state(random_state).permutation(pool)
        query, rest = np.sort(perm[:n_query]), np.sort(perm[n_query:])
        return replace(self, train_idx=rest, query_idx=query, database_idx=rest)

    def _split(self, key: str) -> CrossModalData:
        idx = getattr(self, key)
        if idx is None:
            raise DataError(
                f"the data{' ' + repr(self.name) if self.name else ''} have no {key} "
                f"({self.n_objects} object(s)); give train_idx/query_idx/database_idx or call with_split() "
                "for a seeded split"
            )
        return self.subset(idx, name=f"{self.name}[{key.split('_')[0]}]" if self.name else None)

    def train(self) -> CrossModalData:
        return self._split("train_idx")

    def query(self) -> CrossModalData:
        return self._split("query_idx")

    def database(self) -> CrossModalData:
        return self._split("database_idx")

    @property
    def has_split(self) -> bool:
        return self.train_idx is not None and self.query_idx is not None and self.database_idx is not None

    def with_split(self, query_size=0.2, train_size=10_000, random_state=0) -> CrossModalData:
        """Return a copy with a complete split, the missing index arrays derived from those given.

        With none given, a seeded split (see :func:`random_split`). With some given, the others are
        derived *from* them, never drawn independently (which would leak queries into the training
        set and leave objects out of every set). The layout is that of :func:`random_split`: queries
        and database are disjoint, the training set is drawn from the database.

        ==========================  ==============================================================
        given                       derived
        ==========================  ==============================================================
        ``query_idx``               database = every other object; train = up to ``train_size``
                                    of the database (seeded)
        ``database_idx``            queries = every other object (refused if there is none);
                                    train as above
        ``query_idx, database_idx`` train as above
        ``train_idx``               queries = ``query_size`` of the objects outside the training
                                    set (seeded); database = every other object
        ``train_idx, query_idx``    database = every object that is not a query
        ``train_idx, database_idx`` queries = the objects in neither (refused if there is none)
        ==========================  ==============================================================
        """
        if self.has_split:
            return self
        n = self.n_objects
        train, query, database = self.train_idx, self.query_idx, self.database_idx
        if train is None and query is None and database is None:
            train, query, database = random_split(
                n, query_size=query_size, train_size=train_size, random_state=random_state
            )
            return replace(self, train_idx=train, query_idx=query, database_idx=database)
        rng = check_random_state(random_state)
        given = ", ".join(k for k in ("train_idx", "query_idx", "database_idx") if getattr(self, k) is not None)
        everything = np.arange(n)
        if query is None:
            if database is not None:
                query = np.setdiff1d(everything, database if train is None else np.union1d(database, train))
                if query.size == 0:
                    raise DataError(
                        f"the data hold only {given}, which covers every object, so none is left for the "
                        "queries; give query_idx too"
                    )
            else:  # train_idx only
                pool = np.setdiff1d(everything, train)
                n_query = _n_queries(query_size, pool.size) if pool.size else 0
                if n_query < 1:
                    raise DataError(
                        f"the data hold only train_idx ({train.size} of {n} objects), which leaves no object "
                        "for the queries; give query_idx too"
                    )
                query = np.sort(rng.permutation(pool)[:n_query])
        if database is None:
            database = np.setdiff1d(everything, query)
            if database.size == 0:
                raise DataError("query_idx holds every object, so none is left for the database; give database_idx")
        if train is None:
            train = _draw_train(database, train_size, rng)
        return replace(self, train_idx=train, query_idx=query, database_idx=database)


def _split_size(value, name: str, n: int, *, fraction_up_to_one: bool) -> int:
    """A split size given as a fraction of ``n`` (a float below 1, or up to 1 inclusive with
    ``fraction_up_to_one``) or as a whole count: the number of objects. Anything else (zero, a
    negative, a non-whole count such as 2.5, NaN, a string) is refused: ``train_size=-1`` used to
    drop one object silently, ``2.5`` to mean 2."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and bool(np.isfinite(value)) and value > 0
    if ok and isinstance(value, (float, np.floating)) and (value < 1 or (fraction_up_to_one and value == 1)):
        return int(round(float(value) * n))
    if not ok or float(value) != int(value):
        limit = "up to 1" if fraction_up_to_one else "below 1"
        raise ParameterError(f"{name} must be a fraction (a float {limit}) or a whole count >= 1, got {value!r}")
    return int(value)


def _n_queries(query_size, n: int) -> int:
    return _split_size(query_size, "query_size", n, fraction_up_to_one=False)


def _draw_train(database: np.ndarray, train_size, rng) -> np.ndarray:
    n_db = database.size
    n_train = min(_split_size(train_size, "train_size", n_db, fraction_up_to_one=True), n_db)
    return np.sort(rng.permutation(database)[:n_train])


def label_matrix(labels: np.ndarray) -> np.ndarray:
    """Class ids (n,) -> one-hot bool (n, C); multi-hot (n, L) -> bool (n, L)."""
    labels = np.asarray(labels)
    if labels.ndim == 2:
        return labels.astype(bool)
    classes, inverse = np.unique(labels, return_inverse=True)
    out = np.zeros((labels.size, classes.size), dtype=bool)
    out[np.arange(labels.size), inverse] = True
    return out


def random_split(n: int, query_size=0.2, train_size=10_000, random_state=0):
    """A seeded split: ``query_size`` objects (a fraction if a float below 1, else a whole count)
    become queries, all others the database, and up to ``train_size`` database objects (a fraction
    if a float up to 1, else a whole count) the training set; other values raise ParameterError.
    This is the layout of the paper's protocols (MIRFLICKR: 2000 queries, 10,000 training objects
    drawn from the database).

    Returns ``(train_idx, query_idx, database_idx)``, each sorted.
    """
    n = check_int(n, "n")
    _split_size(train_size, "train_size", n, fraction_up_to_one=True)  # before drawing anything
    rng = check_random_state(random_state)
    n_query = _n_queries(query_size, n)
    if not 1 <= n_query < n:
        raise DataError(
            f"cannot split {n} object(s) into queries and a database: query_size={query_size} gives "
            f"{n_query} queries"
        )
    perm = rng.permutation(n)
    query = np.sort(perm[:n_query])
    database = np.sort(perm[n_query:])
    return _draw_train(database, train_size, rng), query, database


def make_semi_paired(data: CrossModalData, paired_ratio: float, random_state=None) -> CrossModalData:
    """Make a semi-paired training set exactly as the paper does.

    A ratio ``paired_ratio`` of the (fully paired) input objects keep their pairing; the images and
    the texts of the others are shuffled independently, so that their correspondence is destroyed,
    and become separate objects: ``n = n_m + n_1 + n_2`` with ``n_1 = n_2 = n - n_m``.

    The result lists the ``n_m`` paired objects first, then the image-only objects, then the
    text-only objects (the paper's order). ``image_origin`` / ``text_origin`` record the source row
    of each image / text. Labels follow their image or text.

    ``n_m = round(paired_ratio * n)``.
    """
    if not isinstance(data, CrossModalData):
        raise DataTypeError(f"data must be a CrossModalData, got {type(data).__name__}")
    paired_ratio = check_paired_ratio(paired_ratio, "paired_ratio", allow_zero=True)
    if not data.is_fully_paired:
        raise DataError(
            "make_semi_paired needs fully paired input (every object with both modalities); "
            f"got {data.n_image_only} image-only and {data.n_text_only} text-only objects"
        )
    rng = check_random_state(random_state)
    n = data.n_objects
    n_m = int(round(float(paired_ratio) * n))
    perm = rng.permutation(n)
    paired = np.sort(perm[:n_m])
    rest = perm[n_m:]
    img_only = rng.permutation(rest)
    txt_only = rng.permutation(rest)
    n_u = rest.size
    d_img, d_txt = data.image.shape[1], data.text.shape[1]
    zeros = lambda d: np.zeros((n_u, d), dtype=data.dtype)  # noqa: E731
    image = np.concatenate([data.image[paired], data.image[img_only], zeros(d_img)])
    text = np.concatenate([data.text[paired], zeros(d_txt), data.text[txt_only]])
    ones_m, ones_u, zeros_u = np.ones(n_m, bool), np.ones(n_u, bool), np.zeros(n_u, bool)
    image_mask = np.concatenate([ones_m, ones_u, zeros_u])
    text_mask = np.concatenate([ones_m, zeros_u, ones_u])
    minus = -np.ones(n_u, np.int64)
    image_origin = np.concatenate([paired, img_only, minus])
    text_origin = np.concatenate([paired, minus, txt_only])
    labels = None
    if data.labels is not None:
        labels = np.concatenate([data.labels[paired], data.labels[img_only], data.labels[txt_only]])
    return CrossModalData(
        image=image,
        text=text,
        labels=labels,
        image_mask=image_mask,
        text_mask=text_mask,
        image_origin=image_origin,
        text_origin=text_origin,
        name=f"{data.name} (paired {paired_ratio:g})" if data.name else "",
        dtype=data.dtype,
    )
