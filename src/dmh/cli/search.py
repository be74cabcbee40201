"""Command line search: ``dmh encode``, ``dmh index``, ``dmh search``.

::

    dmh encode MODEL DATA --modality image|text [--rows all|query|database|train] --out codes.npz
    dmh index CODES --out index.dmhidx [--backend auto|numpy|faiss]
    dmh search INDEX (--codes CODES | --model MODEL --data DATA --modality M [--rows query])
               (--k K | --radius R) [--format json|csv] [--out FILE]

A code file is an ``.npz`` with ``codes`` (int8, {-1,+1}, n x n_bits) and ``ids`` (int64: the data
rows the codes came from). Search results are ordered by (Hamming distance, id); ``--k`` larger than
the index returns only the codes there are (the ``-1`` padding of :meth:`HammingIndex.search` is
dropped from the output). Every bad input is reported as one line naming the problem.
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sys
from pathlib import Path

import click
import numpy as np

from .._atomic import atomic_write_text

__all__ = ["encode", "index", "search"]

_ROWS = ("all", "query", "database", "train")
_USER_ERRORS = (ValueError, TypeError, KeyError, FileNotFoundError, ImportError)


@contextlib.contextmanager
def _user_errors():
    """Library errors about the user's input -> one-line click errors (no traceback)."""
    try:
        yield
    except click.ClickException:
        raise
    except _USER_ERRORS as exc:
        msg = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        raise click.UsageError(str(msg)) from None


def _encode_rows(model_path, data_ref, modality, rows) -> tuple[np.ndarray, np.ndarray, int]:
    """Encode one modality of some rows of a data file; returns (codes, row ids, rows skipped)."""
    from ..base import load_model
    from ..datasets import load_dataset

    model = load_model(model_path)
    data = load_dataset(data_ref)
    if rows == "all":
        idx = np.arange(data.n_objects)
    else:
        idx = getattr(data, f"{rows}_idx")
        if idx is None:
            raise ValueError(f"the data {data_ref!r} have no {rows} split; use --rows all")
    observed = data.mask(modality)[idx]
    skipped = int((~observed).sum())
    idx = idx[observed]
    if idx.size == 0:
        raise ValueError(f"none of the selected rows ({rows}) of {data_ref!r} has a {modality}")
    features = data.image if modality == "image" else data.text
    codes = model.encode(features[idx], modality=modality)
    return codes, idx.astype(np.int64), skipped


@click.command()
@click.argument("model", type=click.Path(exists=True, dir_okay=False))
@click.argument("data")
@click.option(
    "--modality", type=click.Choice(["image", "text"]), required=True, help="Which view to encode."
)
@click.option(
    "--rows",
    type=click.Choice(_ROWS),
    default="all",
    show_default=True,
    help="Which objects: all of them, or the query / database / training split.",
)
@click.option(
    "--out", type=click.Path(dir_okay=False), required=True, help="Code file to write (.npz)."
)
def encode(model, data, modality, rows, out):
    """Encode the MODALITY of DATA (a data file or built-in dataset name) with a fitted MODEL.

    Objects that lack the modality are skipped; the ``ids`` of the code file say which rows were
    encoded.
    """
    from ..index import save_codes

    with _user_errors():
        codes, ids, skipped = _encode_rows(model, data, modality, rows)
        save_codes(out, codes, ids, modality=modality)
    note = f" ({skipped} rows without a {modality} skipped)" if skipped else ""
    click.echo(
        f"wrote {codes.shape[0]} {modality} codes of {codes.shape[1]} bits to {out}{note}", err=True
    )


@click.command()
@click.argument("codes", type=click.Path(exists=True, dir_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="Index file to write.")
@click.option(
    "--backend",
    type=click.Choice(["auto", "numpy", "faiss"]),
    default="auto",
    show_default=True,
    help="Search backend (both give identical results; auto = faiss when installed).",
)
def index(codes, out, backend):
    """Build a Hamming index from a code file (n_bits must be a multiple of 8)."""
    from ..index import HammingIndex, load_codes

    with _user_errors():
        arr, ids = load_codes(codes)
        if arr.shape[0] == 0:
            raise ValueError(f"{codes} holds no codes: cannot index an empty database")
        idx = HammingIndex(arr.shape[1], backend=backend).add(arr, ids)
        idx.save(out)
    click.echo(
        f"indexed {idx.ntotal} codes of {idx.n_bits} bits ({idx.backend} backend) into {out}",
        err=True,
    )


@click.command()
@click.argument("index_path", metavar="INDEX", type=click.Path(exists=True, dir_okay=False))
@click.option(
    "--codes",
    "codes_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Query code file (from dmh encode).",
)
@click.option(
    "--model",
    type=click.Path(exists=True, dir_okay=False),
    help="Encode queries with this model...",
)
@click.option("--data", help="...from this data file or built-in dataset...")
@click.option("--modality", type=click.Choice(["image", "text"]), help="...in this modality.")
@click.option(
    "--rows",
    type=click.Choice(_ROWS),
    default="query",
    show_default=True,
    help="With --model: which objects are the queries.",
)
@click.option("--k", type=int, help="Return the K nearest codes of each query.")
@click.option("--radius", type=int, help="Return every code within Hamming distance <= RADIUS.")
@click.option(
    "--format", "fmt", type=click.Choice(["json", "csv"]), default="json", show_default=True
)
@click.option(
    "--out", type=click.Path(dir_okay=False), help="Write here (default: standard output)."
)
@click.option(
    "--backend",
    type=click.Choice(["auto", "numpy", "faiss"]),
    default=None,
    help="Override the backend saved with the index.",
)
def search(index_path, codes_path, model, data, modality, rows, k, radius, fmt, out, backend):
    """Search INDEX with query codes (--codes) or objects encoded on the fly (--model/--data)."""
    from ..index import HammingIndex, load_codes

    if (k is None) == (radius is None):
        raise click.UsageError("give exactly one of --k and --radius")
    if k is not None and k <= 0:
        raise click.UsageError(f"--k must be a positive integer, got {k}")
    by_model = (model, data, modality)
    if codes_path is not None and any(v is not None for v in by_model):
        raise click.UsageError("give either --codes or --model/--data/--modality, not both")
    if codes_path is None and any(v is None for v in by_model):
        missing = [
            f"--{n}"
            for n, v in zip(("model", "data", "modality"), by_model, strict=True)
            if v is None
        ]
        raise click.UsageError(
            "give the queries: --codes CODES, or --model, --data and --modality "
            f"(missing {', '.join(missing)})"
        )
    with _user_errors():
        idx = HammingIndex.load(index_path, backend=backend)
        if radius is not None and not 0 <= radius <= idx.n_bits:
            raise ValueError(f"--radius must be between 0 and n_bits={idx.n_bits}, got {radius}")
        if codes_path is not None:
            queries, qids = load_codes(codes_path)
        else:
            queries, qids, _ = _encode_rows(model, data, modality, rows)
        if queries.shape[0] == 0:
            raise ValueError("there are no query codes")
        if queries.shape[1] != idx.n_bits:
            raise ValueError(
                f"the query codes have {queries.shape[1]} bits, the index holds "
                f"{idx.n_bits}-bit codes"
            )
        if k is not None:
            dist, ids = idx.search(queries, k)
            hits = [(d[i >= 0], i[i >= 0]) for d, i in zip(dist, ids, strict=True)]
        else:
            lims, dist, ids = idx.range_search(queries, radius)
            hits = [(dist[a:b], ids[a:b]) for a, b in zip(lims[:-1], lims[1:], strict=True)]
        text = _format_hits(qids, hits, fmt, {"index": str(index_path), "k": k, "radius": radius})
        if out is None:
            sys.stdout.write(text)
        else:
            atomic_write_text(Path(out), text)
    if out is not None:
        n_hits = sum(len(h[1]) for h in hits)
        click.echo(f"wrote {n_hits} hits of {len(hits)} queries to {out}", err=True)


def _format_hits(qids, hits, fmt, header) -> str:
    if fmt == "json":
        results = [
            {"query_id": int(q), "ids": i.tolist(), "distances": d.tolist()}
            for q, (d, i) in zip(qids, hits, strict=True)
        ]
        return json.dumps({**header, "results": results}, indent=1) + "\n"
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(["query_id", "rank", "id", "distance"])
    for q, (d, i) in zip(qids, hits, strict=True):
        for r, (hit, dist) in enumerate(zip(i.tolist(), d.tolist(), strict=True), start=1):
            writer.writerow([int(q), r, hit, dist])
    return buf.getvalue()
