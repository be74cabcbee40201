"""The community's benchmarks as data: which files each expects (names, keys, content), its split
and its aliases. Adding a benchmark touches this table only; :mod:`dmh.datasets.benchmarks` reads
the files it names."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..data import random_split
from ..errors import ParameterError, UnknownNameError

__all__ = ["ALIASES", "BENCHMARKS", "Benchmark", "FileSpec", "benchmark_split", "describe_benchmark"]


@dataclass(frozen=True)
class FileSpec:
    """One array of a benchmark: the accepted file names (canonical first), its key, its content."""

    names: tuple[str, ...]
    key: str
    content: str

    def describe(self) -> str:
        also = f" (also accepted: {', '.join(self.names[1:])})" if len(self.names) > 1 else ""
        return f"{self.names[0]}{also}: key {self.key!r}, {self.content}"


@dataclass(frozen=True)
class Benchmark:
    """What a benchmark folder holds and how the paper splits it.

    ``images`` maps an image-file choice (``"vgg"``, ...) to its file; ``raw_images`` lists files of
    raw pixels, which need a CNN before they are features. ``bundle`` is a single file holding text
    and labels (and raw images) under ``bundle_keys``. ``toolkit`` lists files in the MATLAB toolkit
    layout (``I_tr, T_tr, L_tr, I_te, ...``) whose split is stored in the file; ``data_files``
    lists files in dmh's generic layout (:mod:`dmh.io`: ``image``, ``text``, ``labels`` and the
    split), for sets dmh builds from raw images and texts.
    """

    name: str
    title: str
    description: str
    images: dict[str, FileSpec] = field(default_factory=dict)
    text: FileSpec | None = None
    labels: FileSpec | None = None
    raw_images: tuple[FileSpec, ...] = ()
    bundle: FileSpec | None = None
    bundle_keys: dict[str, str] = field(default_factory=dict)
    toolkit: tuple[str, ...] = ()
    data_files: tuple[str, ...] = ()
    n_query: int | None = None
    n_train: int | None = None
    random_state: int = 0

    @property
    def default_image(self) -> str | None:
        return next(iter(self.images), None)

    def known_files(self) -> list[str]:
        specs = [*self.images.values(), self.text, self.labels, *self.raw_images, self.bundle]
        names = [n for s in specs if s is not None for n in s.names]
        return names + list(self.toolkit) + list(self.data_files)


def _community(prefix: str, image_key_content: str, text_content: str, labels_content: str, alt=()):
    """The one-file-per-array layout: ``{prefix}-xall-vgg.mat`` etc. (``alt``: other prefixes)."""
    prefixes = (prefix, *alt)
    return dict(
        images={
            "vgg": FileSpec(tuple(f"{p}-xall-vgg.mat" for p in prefixes), "XAll", image_key_content)
        },
        text=FileSpec(tuple(f"{p}-yall.mat" for p in prefixes), "YAll", text_content),
        labels=FileSpec(tuple(f"{p}-lall.mat" for p in prefixes), "LAll", labels_content),
    )


_ROW_ORDER = "one row per pair, rows in the same order in every file"

BENCHMARKS: dict[str, Benchmark] = {
    b.name: b
    for b in (
        Benchmark(
            name="mirflickr25k",
            title="MIRFLICKR-25K",
            description="20,015 image-tag pairs (Flickr photos with >= 20 tag occurrences), "
            "1386-d binary "
            "tag vectors, 24 labels (multi-label); the DCMH subset used by the DMH paper",
            images={
                "vgg": FileSpec(
                    ("mirflickr25k-iall-vgg.mat",),
                    "XAll",
                    f"(20015, 4096) float VGG fc7 image features, {_ROW_ORDER}",
                ),
            },
            text=FileSpec(
                ("mirflickr25k-yall.mat",),
                "YAll",
                f"(20015, 1386) binary tag vectors, {_ROW_ORDER}",
            ),
            labels=FileSpec(
                ("mirflickr25k-lall.mat",), "LAll", f"(20015, 24) multi-hot labels, {_ROW_ORDER}"
            ),
            raw_images=(
                FileSpec(
                    ("mirflickr25k-iall.mat",),
                    "IAll",
                    "(20015, 3, 224, 224) uint8 raw images (v7.3)",
                ),
            ),
            bundle=FileSpec(
                ("FLICKR-25K.mat",),
                "images, YAll, LAll",
                "the DCMH file (HDF5/v7.3): 'images' (20015, 3, 224, 224) uint8 raw pixels, "
                "'YAll' (20015, 1386) tags, 'LAll' (20015, 24) labels",
            ),
            bundle_keys={"text": "YAll", "labels": "LAll", "raw_images": "images"},
            toolkit=("mir_cnn.mat",),
            n_query=2000,
            n_train=10_000,
        ),
        Benchmark(
            name="nus-wide-tc21",
            title="NUS-WIDE (21 most frequent labels)",
            description="Flickr image-tag pairs restricted to the 21 most frequent concepts "
            "(about 195,000 "
            "pairs in the DCMH release), 1000-d binary tag vectors, 21 labels (multi-label)",
            **_community(
                "nus-wide-tc21",
                f"(n, 4096) float VGG fc7 image features, {_ROW_ORDER}",
                f"(n, 1000) binary tag vectors, {_ROW_ORDER}",
                f"(n, 21) multi-hot labels, {_ROW_ORDER}",
            ),
            n_query=2100,
            n_train=10_500,
        ),
        Benchmark(
            name="nus-wide-tc10",
            title="NUS-WIDE TC-10 (10 most frequent labels)",
            description="the 10-label variant (about 186,600 pairs in the common release), "
            "1000-d binary tag "
            "vectors, 10 labels (multi-label)",
            **_community(
                "nus-wide-tc10",
                f"(n, 4096) float VGG fc7 image features, {_ROW_ORDER}",
                f"(n, 1000) binary tag vectors, {_ROW_ORDER}",
                f"(n, 10) multi-hot labels, {_ROW_ORDER}",
            ),
            n_query=2100,
            n_train=10_500,
        ),
        Benchmark(
            name="mscoco",
            title="MS-COCO",
            description="COCO images with their captions as 2000-d bag-of-words vectors, "
            "80 (or 81) labels (multi-label); no single community release, so dmh names the files "
            "in the community style",
            **_community(
                "mscoco",
                f"(n, 4096) float CNN (VGG fc7) image features, {_ROW_ORDER}",
                f"(n, 2000) bag-of-words caption vectors, {_ROW_ORDER}",
                f"(n, 80) or (n, 81) multi-hot labels, {_ROW_ORDER}",
                alt=("coco",),
            ),
            toolkit=("mscoco_cnn.mat", "coco_cnn.mat"),
            n_query=5000,
            n_train=10_000,
        ),
        Benchmark(
            name="wiki",
            title="Wikipedia",
            description="2866 image-text pairs, 128-d SIFT bag of visual words, 10-d LDA topics, "
            "10 classes; "
            "the file's split: 693 queries, the 2173 training pairs are also the database",
            toolkit=("wiki_data.mat",),
        ),
        Benchmark(
            name="uci-digits",
            title="UCI two-view digits",
            description="UCI Multiple Features digits as two views (76-d Fourier, "
            "64-d Karhunen-Loeve), 10 classes; the file's split (FSH): 500 queries, the 1500 "
            "training objects are also the database",
            toolkit=("uci_all.mat",),
        ),
        Benchmark(
            name="medpix",
            title="MedPix 2.0 CT and MR images with their case texts",
            description="2050 CT and MR images of 671 clinical cases (github CHILab1/MedPix-2.0), "
            "each with its caption and its case's history, findings, diagnosis and disease discussion "
            "(median 397 words), 1280-d EfficientNet-Lite0 image features, 2000-d binary bag of words, "
            "5 body-region classes; the file's split (the repository's, by case): 397 queries, the 1653 "
            "others are the database and the training set",
            data_files=("medpix_effl0.npz",),
        ),
    )
}

ALIASES = {
    "flickr25k": "mirflickr25k",
    "mirflickr": "mirflickr25k",
    "nus-wide": "nus-wide-tc21",
    "nuswide": "nus-wide-tc21",
    "coco": "mscoco",
    "ms-coco": "mscoco",
    "wikipedia": "wiki",
}


# ---------------------------------------------------------------------------------------- lookup
def _benchmark(name: str) -> Benchmark:
    if isinstance(name, Benchmark):
        return name
    key = ALIASES.get(str(name).lower(), str(name).lower())
    if key not in BENCHMARKS:
        raise UnknownNameError(
            f"unknown benchmark {name!r}; known: {', '.join(BENCHMARKS)} "
            f"(aliases: {', '.join(f'{a}={b}' for a, b in ALIASES.items())})"
        )
    return BENCHMARKS[key]


def describe_benchmark(name: str) -> str:
    """A human-readable description of a benchmark: its files, keys, shapes and split."""
    b = _benchmark(name)
    lines = [f"{b.name} - {b.title}: {b.description}"]
    if b.images:
        for choice, spec in b.images.items():
            lines.append(f"  image ({choice!r}): {spec.describe()}")
        lines.append(f"  text: {b.text.describe()}")
        lines.append(f"  labels: {b.labels.describe()}")
    for spec in b.raw_images:
        lines.append(f"  raw images (need a CNN first, see dmh.featurize): {spec.describe()}")
    if b.bundle is not None:
        lines.append(f"  or text and labels from {b.bundle.names[0]}: {b.bundle.content}")
    if b.toolkit:
        lines.append(
            f"  or a MATLAB toolkit file ({' / '.join(b.toolkit)}): "
            "I_tr, T_tr, L_tr, I_te, T_te, L_te "
            "[, I_db, T_db, L_db]; the split is the file's"
        )
    if b.data_files:
        lines.append(
            f"  one data file in dmh's generic layout ({' / '.join(b.data_files)}): image, text, labels, "
            "train_idx, query_idx, database_idx; the split is the file's"
        )
    if b.n_query is not None:
        lines.append(
            f"  split: {b.n_query} random queries, all other objects the database, "
            f"{b.n_train} of them "
            f"the training set (dmh.data.random_split, random_state={b.random_state})"
        )
    return "\n".join(lines)


def benchmark_split(
    name: str, n_objects: int, *, query_size=None, train_size=None, random_state=None
):
    """The paper's split of a benchmark with ``n_objects`` rows.

    Returns ``(train_idx, query_idx, database_idx)``.

    ``None`` takes the benchmark's own size / seed. Only for benchmarks with a random split.
    """
    b = _benchmark(name)
    if b.n_query is None:
        raise ParameterError(
            f"{b.name} has no random split: its split is stored in its file "
            f"({', '.join((*b.toolkit, *b.data_files))})"
        )
    return random_split(
        n_objects,
        query_size=b.n_query if query_size is None else query_size,
        train_size=b.n_train if train_size is None else train_size,
        random_state=b.random_state if random_state is None else random_state,
    )
