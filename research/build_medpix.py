"""Build the ``medpix`` development set (CT and MR images with their clinical case texts) from a
checkout of the MedPix 2.0 repository, with dmh's own featurizers.

Source: github CHILab1/MedPix-2.0 (Siragusa et al., "MedPix 2.0: a comprehensive multimodal
biomedical data set"), folder ``MedPix-2-0``: ``images/<image>.png`` (2050 CT/MR slices),
``Descriptions.json`` (one entry per image: its caption, modality, body location and location
category), ``Case_topic.json`` (one entry per clinical case: history, exam, findings, diagnoses,
and the disease's discussion) and ``splitted_dataset/uid_list.json`` (the repository's split of
the cases into train / dev / test, balanced by modality and location category, a case never split).

One row per image. Its text is the page a reader of MedPix sees for it: the image's caption, then
the case's title, history, exam, findings, differential and case diagnosis, and the disease
discussion (fields that are empty or "N/A" are left out). ``--text caption`` keeps the caption
alone (images without one are left out): the same images with short texts, for checking a rule
that depends on how long the texts are. Its label is the image's location
category (5 classes). The split is the repository's: the cases of ``dev`` and ``test`` are the
queries (about 19%), those of ``train`` the training set and the database, so no case has images on
both sides.

    git clone https://github.com/CHILab1/MedPix-2.0 && git -C MedPix-2.0 checkout d3bc431576ec8041114806ec3eb58d75adf45029
    python research/build_medpix.py --checkout MedPix-2.0/MedPix-2-0 --out ../shared/data/medpix \\
        --commit d3bc431576ec8041114806ec3eb58d75adf45029
"""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from build_listed_set import LayoutError, Pair, write_set  # noqa: E402

CASE_FIELDS = ("Title", "History", "Exam", "Findings", "Differential Diagnosis", "Case Diagnosis")
QUERY_SPLITS = ("dev", "test")
NOTES = (
    "MedPix is the U.S. National Library of Medicine's public teaching database of radiology cases;",
    "the repository states no licence of its own, and MedPix's terms of use were not checked here.",
    "Checkout: git --git-dir=<snapshot of the repository> archive <commit> MedPix-2-0 | tar -x -C <dir>",
)
#: what a row's text is, per ``--text``
TEXT_NOTES = {
    "page": ("Text of a row: the image's caption, then its case's title, history, exam, findings, differential",
             "and case diagnosis and the disease discussion ('N/A' and empty fields left out). Images of the",
             "same case share all but the caption. Label: the image's 'Location Category'."),
    "caption": ("Text of a row: the image's caption alone (--text caption; images without one left out).",
                "Label: the image's 'Location Category'."),
}


def _clean(value) -> str:
    text = " ".join(str(value or "").split())
    return "" if text.upper() in {"N/A", "NA", "NONE", "NULL"} else text


def _load_json(path: Path):
    if not path.is_file():
        raise LayoutError(f"{path}: missing")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LayoutError(f"{path}: not JSON ({exc.msg}, line {exc.lineno})") from None


def case_text(case: dict) -> str:
    parts = [_clean((case.get("Case") or {}).get(f)) for f in CASE_FIELDS]
    parts.append(_clean((case.get("Topic") or {}).get("Disease Discussion")))
    return " ".join(p for p in parts if p)


TEXTS = ("page", "caption")


def read_medpix(root: Path, text: str = "page") -> tuple[list[Pair], list[str], list[str]]:
    """The rows (one per image, in Descriptions.json order), the category names (largest first)
    and the images left out (no file, no case, no category; under ``text="caption"`` no caption).
    ``text``: ``"page"``, the caption and the case's texts, or ``"caption"``, the caption alone."""
    if text not in TEXTS:
        raise ValueError(f"text must be one of {TEXTS}, got {text!r}")
    descriptions = _load_json(root / "Descriptions.json")
    cases = {c["U_id"]: c for c in _load_json(root / "Case_topic.json")}
    uid_lists = _load_json(root / "splitted_dataset" / "uid_list.json")
    missing = [s for s in ("train", *QUERY_SPLITS) if s not in uid_lists]
    if missing:
        raise LayoutError(f"{root / 'splitted_dataset' / 'uid_list.json'}: no {', '.join(missing)} list")
    split_of = {uid: s for s in ("train", *QUERY_SPLITS) for uid in uid_lists[s]}
    pairs, skipped, counts = [], [], {}
    for d in descriptions:
        uid, image = d.get("U_id"), d.get("image")
        category = _clean(d.get("Location Category"))
        path = root / "images" / f"{image}.png"
        caption = _clean((d.get("Description") or {}).get("Caption"))
        why = ("no image file" if not path.is_file() else "no case" if uid not in cases
               else "no location category" if not category else "in no split" if uid not in split_of
               else "no caption" if text == "caption" and not caption else "")
        if why:
            skipped.append(f"{image} ({why})")
            continue
        row_text = caption if text == "caption" else " ".join(t for t in (caption, case_text(cases[uid])) if t)
        split = "query" if split_of[uid] in QUERY_SPLITS else "train"
        pairs.append(Pair(uid, image, category, split, path, row_text))
        counts[category] = counts.get(category, 0) + 1
    if not pairs:
        raise LayoutError(f"{root}: no image has its file, its case and a location category")
    categories = sorted(counts, key=lambda c: (-counts[c], c))
    return pairs, categories, skipped


def build(root, out, *, name="medpix", source="github:CHILab1/MedPix-2.0", commit="", vocabulary_size=2000,
          image_encoder=None, progress=True, command="", text="page"):
    pairs, categories, skipped = read_medpix(Path(root), text)
    return write_set(pairs, categories, out, name=name, skipped=skipped, source=source, commit=commit,
                     vocabulary_size=vocabulary_size, image_encoder=image_encoder, progress=progress,
                     command=command, notes=NOTES + TEXT_NOTES[text],
                     split_note="the repository's splitted_dataset/uid_list.json: dev + test cases are the "
                     "queries, train cases the database")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkout", required=True, type=Path, help="the repository's MedPix-2-0 folder")
    ap.add_argument("--out", required=True, type=Path, help="folder to write (outside the repository)")
    ap.add_argument("--name", default="medpix")
    ap.add_argument("--commit", default="", help="the source commit, for the README")
    ap.add_argument("--vocabulary-size", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--text", choices=TEXTS, default="page",
                    help="a row's text: the caption and its case's page (default), or the caption alone")
    args = ap.parse_args(argv)
    if not args.checkout.is_dir():
        ap.error(f"--checkout {args.checkout}: not a folder")
    from dmh._threads import thread_limit

    command = "python research/build_medpix.py " + " ".join(shlex.quote(a) for a in (argv or sys.argv[1:]))
    try:
        with thread_limit(args.threads):
            data, npz = build(args.checkout, args.out, name=args.name, commit=args.commit,
                              vocabulary_size=args.vocabulary_size, command=command, text=args.text)
    except LayoutError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(data.summary())
    print(f"wrote {npz} and {args.out / 'README.txt'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
