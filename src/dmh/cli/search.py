"""Command line search: ``dmh encode``, ``dmh index``, ``dmh search``.

::

    dmh encode MODEL DATA --modality image|text [--rows all|query|database|train] --out codes.npz
               [--ray [ADDRESS] [--ray-batch-size B --ray-cpus C --ray-gpus G --ray-concurrency A]]
    dmh index CODES --out index.dmhidx [--backend auto|numpy|faiss]
    dmh index CODES --store milvus[:URI] [--collection NAME] [--milvus-index flat|ivf] [--replace]
    dmh search INDEX (--codes CODES | --model MODEL --data DATA --modality M [--rows query])
               (--k K | --radius R) [--format json|csv] [--out FILE]
    dmh search COLLECTION (--text "two dogs" | --image query.jpg | --like ID) [--k 10] [--target ...]

A code file is an ``.npz`` with ``codes`` (int8, {-1,+1}, n x n_bits) and ``ids`` (int64: the data
rows the codes came from). With ``--ray`` the codes are computed by Ray actors
(:mod:`dmh.app.distributed`) and ``--out`` is a folder of Parquet shards, which ``dmh index`` and
``dmh search --codes`` read like a code file. ``dmh index --store milvus`` puts the codes in Milvus
(:mod:`dmh.app.store.milvus`): ``milvus:codes.db`` a milvus-lite file, ``milvus:http://host:19530`` a
server (``milvus`` alone: the ``--out`` file, which must end in ``.db``); ``dmh search`` then takes
``milvus:URI`` as its INDEX. Search results are ordered by (Hamming distance, id); ``--k`` larger than
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
from ..errors import DataError, OutputError, ParameterError
from ._options import RAY_TUNING, given_options, ray_options, ray_settings, refuse_unused

__all__ = ["encode", "index", "search"]

_ROWS = ("all", "query", "database", "train")


@contextlib.contextmanager
def _milvus_errors():
    """A request Milvus refused -> one line (pymilvus's exceptions are not dmh's family)."""
    try:
        yield
    except Exception as exc:
        if type(exc).__module__.startswith("pymilvus"):
            raise DataError(f"Milvus: {getattr(exc, 'message', exc)}") from None
        raise


def _select_rows(model, data_ref, modality, rows, model_path) -> tuple[np.ndarray, np.ndarray, int]:
    """The features of one modality of some rows of a data file: (features, row ids, rows skipped)."""
    from ..datasets import load_dataset

    data = load_dataset(data_ref)
    if rows == "all":
        idx = np.arange(data.n_objects)
    else:
        idx = getattr(data, f"{rows}_idx")
        if idx is None:
            raise DataError(f"the data {data_ref!r} ({data.n_objects} objects) have no {rows} split; use --rows all")
    observed = data.mask(modality)[idx]
    skipped = int((~observed).sum())
    idx = idx[observed]
    if idx.size == 0:
        raise DataError(f"none of the selected rows ({rows}) of {data_ref!r} has a {modality}")
    features = data.image if modality == "image" else data.text
    if features.shape[1] != model.n_features_[modality]:
        raise DataError(
            f"the {modality} features of {data_ref!r} have {features.shape[1]} columns, but the model "
            f"{model_path} was fitted on {model.n_features_[modality]}"
        )
    return features[idx], idx.astype(np.int64), skipped


def _encode_rows(model_path, data_ref, modality, rows) -> tuple[np.ndarray, np.ndarray, int]:
    """Encode one modality of some rows of a data file; returns (codes, row ids, rows skipped)."""
    from ..base import encode_checked, load_model

    model = load_model(model_path)
    features, idx, skipped = _select_rows(model, data_ref, modality, rows, model_path)
    return encode_checked(model, features, modality), idx, skipped


def _read_codes(path) -> tuple[np.ndarray, np.ndarray, int]:
    """A code file or a folder of code shards: (codes, ids, n_bits); codes {-1,+1} or packed uint8."""
    from ..app.distributed import is_code_shards, read_code_shards
    from ..index import load_codes

    if Path(path).is_dir():
        if not is_code_shards(path):
            raise DataError(f"{path} is a folder but not one of code shards (from dmh encode --ray)")
        packed, ids, meta, _ = read_code_shards(path)
        return packed, ids, int(meta["n_bits"])
    codes, ids = load_codes(path)
    return codes, ids, codes.shape[1]


def _open_store(spec: str, collection: str, *, n_bits=None, index="flat", out=None):
    """``milvus[:URI]`` -> a MilvusCodeStore (``milvus`` alone: the file ``out``)."""
    from ..app.store import parse_store
    from ..app.store.milvus import MilvusCodeStore

    parsed = parse_store(spec)
    uri = parsed.uri
    if uri is None:
        if out is None or not str(out).endswith(".db"):
            raise ParameterError("--store milvus needs a milvus-lite file: give --out FILE.db or --store milvus:URI")
        uri = out
    return MilvusCodeStore(uri, collection, n_bits=n_bits, index=index)


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
    "--out", type=click.Path(), required=True,
    help="Code file to write (.npz); with --ray a new folder of Parquet shards.",
)
@ray_options(batch_default=4096)
def encode(model, data, modality, rows, out, ray_address, ray_batch_size, ray_cpus, ray_gpus, ray_concurrency):
    """Encode the MODALITY of DATA (a data file or built-in dataset name) with a fitted MODEL.

    Objects that lack the modality are skipped; the ``ids`` of the code file say which rows were
    encoded.
    """
    from .._atomic import check_writable
    from ..index import save_codes

    if ray_address is not None:
        from ..app.distributed import encode_to_shards, require_ray
        from ..base import load_model

        require_ray()  # before any work: a missing extra is named first
        options = ray_settings(ray_address, ray_batch_size, ray_cpus, ray_gpus, ray_concurrency)
        features, ids, skipped = _select_rows(load_model(model), data, modality, rows, model)
        meta = encode_to_shards(model, out, modality=modality, features=features, ids=ids, options=options)
        note = f" ({skipped} rows without a {modality} skipped)" if skipped else ""
        where = options.address or "a local Ray runtime"
        click.echo(
            f"wrote {meta['n_codes']} {modality} codes of {meta['n_bits']} bits to the shards in {out} "
            f"(on {where}, {meta['seconds']:.1f} s){note}",
            err=True,
        )
        return
    refuse_unused(RAY_TUNING, "without --ray")
    if Path(out).is_dir():
        raise OutputError(out, "is a folder: give a code file (.npz), or use --ray for shards")
    check_writable(out, "--out")
    codes, ids, skipped = _encode_rows(model, data, modality, rows)
    save_codes(out, codes, ids, modality=modality)
    note = f" ({skipped} rows without a {modality} skipped)" if skipped else ""
    click.echo(
        f"wrote {codes.shape[0]} {modality} codes of {codes.shape[1]} bits to {out}{note}", err=True
    )


@click.command()
@click.argument("codes", type=click.Path(exists=True))
@click.option("--out", type=click.Path(dir_okay=False), help="Index file to write (local store).")
@click.option(
    "--backend",
    type=click.Choice(["auto", "numpy", "faiss"]),
    default="auto",
    show_default=True,
    help="Search backend (both give identical results; auto = faiss when installed).",
)
@click.option(
    "--store", "store", default="local", show_default=True, metavar="local|milvus[:URI]",
    help="Where the codes go: a local index file (--out), or Milvus (pip install 'dmh[milvus]'): "
    "milvus:FILE.db (milvus-lite), milvus:http://host:19530 (a server), milvus alone (the --out .db file).",
)
@click.option("--collection", default="dmh_codes", show_default=True, help="Milvus collection name.")
@click.option(
    "--milvus-index", type=click.Choice(["flat", "ivf"]), default="flat", show_default=True,
    help="Milvus index: exact BIN_FLAT, or BIN_IVF_FLAT (approximate; servers only).",
)
@click.option("--replace", is_flag=True, help="Milvus: drop an existing collection of that name first.")
def index(codes, out, backend, store, collection, milvus_index, replace):
    """Build a Hamming index from a code file or a folder of code shards (n_bits a multiple of 8)."""
    from .._atomic import check_writable
    from ..app.store import parse_store
    from ..index import HammingIndex

    kind = parse_store(store).kind
    if kind == "local":
        refuse_unused(["collection", "milvus_index", "replace"], "on a local index (they are Milvus options)")
        if out is None:
            raise ParameterError("give --out INDEX_FILE (or --store milvus[:URI])")
        check_writable(out, "--out")
    arr, ids, n_bits = _read_codes(codes)
    if arr.shape[0] == 0:
        raise DataError(f"{codes} holds no codes: cannot index an empty database")
    if n_bits % 8:
        raise DataError(f"{codes} holds {n_bits}-bit codes; an index needs a multiple of 8 bits")
    if kind == "local":
        idx = HammingIndex(n_bits, backend=backend).add(arr, ids)
        idx.save(out)
        where = f"({idx.backend} backend) into {out}"
    else:
        with _milvus_errors():
            idx = _open_store(store, collection, n_bits=n_bits, index=milvus_index, out=out)
            if len(idx) and not replace:
                raise DataError(
                    f"the Milvus collection {collection!r} at {idx.uri} already holds {len(idx)} codes: "
                    "give --replace to drop it first, or another --collection"
                )
            if replace and len(idx):
                idx.drop()
                idx.close()
                idx = _open_store(store, collection, n_bits=n_bits, index=milvus_index, out=out)
            idx.add(arr, ids)
            where = f"into the Milvus collection {collection!r} at {idx.uri} ({idx.index} index)"
            idx.close()
    click.echo(f"indexed {arr.shape[0]} codes of {n_bits} bits {where}", err=True)


@click.command("search")
@click.argument("index_path", metavar="COLLECTION|INDEX")
@click.option("--text", help="Collection: find what matches this text.")
@click.option("--image", type=click.Path(dir_okay=False), help="Collection: find what looks like this image.")
@click.option("--like", type=int, help="Collection: more like the item with this id.")
@click.option("--target", type=click.Choice(["images", "texts"]), default="images", show_default=True,
              help="Collection: return photos or captions.")
@click.option("--codes", "codes_path", type=click.Path(exists=True),
              help="Index: query code file or folder of code shards (from dmh encode).")
@click.option("--model", type=click.Path(exists=True, dir_okay=False), help="Index: encode queries with this model...")
@click.option("--data", help="...from this data file or built-in dataset...")
@click.option("--modality", type=click.Choice(["image", "text"]), help="...in this modality.")
@click.option("--rows", type=click.Choice(_ROWS), default="query", show_default=True,
              help="Index, with --model: which objects are the queries.")
@click.option("--k", type=int, help="Return the K nearest (a collection: 10 when neither --k nor --radius).")
@click.option("--radius", type=int, help="Index: return every code within Hamming distance <= RADIUS.")
@click.option("--format", "fmt", type=click.Choice(["table", "json", "csv"]), default=None,
              help="Output format (collection default: table; index default: json; table is for a collection).")
@click.option("--out", type=click.Path(dir_okay=False), help="Write here (default: standard output).")
@click.option("--backend", type=click.Choice(["auto", "numpy", "faiss"]), default=None,
              help="Index: override the backend saved with the index.")
@click.option("--collection", default="dmh_codes", show_default=True, help="Milvus collection (INDEX milvus:URI).")
@click.option("--rerank/--no-rerank", default=None,
              help="Collection: re-rank the Hamming candidates by the stored real values, or not "
                   "[default: as the build decided, docs/collection.md#re-ranking].")
def search(index_path, text, image, like, target, codes_path, model, data, modality, rows, k, radius, fmt, out,
           backend, collection, rerank):
    """Search a COLLECTION (a folder from dmh build) by --text, --image or --like ID; or an INDEX
    (an index file, or milvus:URI for codes kept in Milvus) with query codes (--codes) or objects
    encoded on the fly (--model/--data/--modality), with --k or --radius."""
    from ..app.collection import is_collection

    if not index_path.startswith("milvus:") and not Path(index_path).exists():
        raise click.UsageError(f"{index_path} does not exist (a collection folder, an index file or milvus:URI)")
    if Path(index_path).is_dir():
        from .collection import search_collection

        if not is_collection(index_path):
            raise click.UsageError(
                f"{index_path} is a folder but not a collection (no manifest.json); build one with dmh build"
            )
        extra = [flag for flag, value in (("--codes", codes_path), ("--model", model), ("--data", data),
                                          ("--modality", modality), ("--radius", radius), ("--backend", backend))
                 if value is not None] + given_options("rows", "collection")
        if extra:
            raise click.UsageError(f"{', '.join(extra)} apply to an index file, not to a collection")
        return search_collection(index_path, text, image, like, k, target, fmt, out, rerank)
    if rerank is not None:
        raise click.UsageError("--rerank/--no-rerank apply to a collection")
    refuse_unused(["target"], f"on an index ({index_path} is not a collection folder)")
    if codes_path is not None:
        refuse_unused(["rows"], "with --codes (it picks the rows of --data that --model encodes)")
    if index_path.startswith("milvus:"):
        refuse_unused(["backend"], "on codes kept in Milvus (Milvus searches them)")
    else:
        refuse_unused(["collection"], "on an index file (it names a Milvus collection)")
    if any(v is not None for v in (text, image, like)):
        raise click.UsageError(f"--text/--image/--like need a collection folder; {index_path} is not one")
    if fmt == "table":
        raise click.UsageError("--format table applies to a collection; use json or csv with an index")
    with _milvus_errors():
        _search(index_path, codes_path, model, data, modality, rows, k, radius, fmt or "json", out, backend, collection)


def _search(index_path, codes_path, model, data, modality, rows, k, radius, fmt, out, backend, collection):
    from .._atomic import check_writable
    from ..index import HammingIndex, unpack_codes

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
    if out is not None:
        check_writable(out, "--out")
    if index_path.startswith("milvus:"):
        idx = _open_store(index_path, collection)
    elif not Path(index_path).is_file():
        raise FileNotFoundError(f"index file {index_path} does not exist (for codes in Milvus give milvus:URI)")
    else:
        idx = HammingIndex.load(index_path, backend=backend)
    if radius is not None and not 0 <= radius <= idx.n_bits:
        raise ParameterError(f"--radius must be between 0 and n_bits={idx.n_bits}, got {radius}")
    if codes_path is not None:
        queries, qids, n_bits = _read_codes(codes_path)
        if queries.dtype == np.uint8:
            queries = unpack_codes(queries, n_bits)
    else:
        queries, qids, _ = _encode_rows(model, data, modality, rows)
    if queries.shape[0] == 0:
        raise DataError("there are no query codes")
    if queries.shape[1] != idx.n_bits:
        raise DataError(
            f"the query codes have {queries.shape[1]} bits, the index holds "
            f"{idx.n_bits}-bit codes"
        )
    if k is not None:  # more than the index holds: every code (no -1 padding to allocate)
        dist, ids = idx.search(queries, max(1, min(k, len(idx))))
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
