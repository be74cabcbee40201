"""Figures drawn from records: seed-averaged curves and the PNG files."""

import numpy as np

from dmh.plots import mean_curves, new_figure, plot_curves, save_figure


def _records():
    out = []
    for seed, shift in ((0, 0.0), (1, 0.2)):
        for task in ("image->text", "text->image"):
            out.append({"method": "dmh", "n_bits": 8, "paired_ratio": 0.5, "seed": seed, "task": task, "map": 0.5,
                        "topn": {"n": [1, 10], "precision": [0.4 + shift, 0.3 + shift]},
                        "pr_radius": {"recall": [0.1, None], "precision": [0.9, None]}})
    return out


def test_mean_curves_average_over_seeds_and_drop_undefined_points():
    curves = mean_curves(_records(), "topn", 8)
    (label, x, y), = curves["image->text"]
    assert label == "DMH (50%)" and x.tolist() == [1, 10]
    np.testing.assert_allclose(y, [0.5, 0.4])
    (_, x, y), = mean_curves(_records(), "pr_radius", 8)["text->image"]
    assert x.tolist() == [0.1] and y.tolist() == [0.9]


def test_figures_are_png_files(tmp_path):
    paths = plot_curves(_records(), tmp_path)
    assert set(paths) == {"topn_8bits", "pr_8bits"}
    fig, axes = new_figure(3, rows=2)
    assert len(axes) == 4
    path = save_figure(fig, tmp_path / "empty.png")
    from PIL import Image

    for p in (*paths.values(), path):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with Image.open(p) as image:
            assert image.mode == "P" and len(image.getcolors(256)) <= 256  # a palette: a third of the bytes
    assert not list(tmp_path.glob(".*tmp"))


def test_many_curves_share_one_legend_beside_the_panels(tmp_path):
    """A run of 14 methods at two ratios (29 curves): one legend beside the panels, no layout warning."""
    import warnings

    from dmh.plots import _figure

    recs = []
    for i in range(29):
        for r in _records():
            recs.append({**r, "method": f"m{i:02d}"})
    curves = mean_curves(recs, "topn", 8)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = _figure(curves, "N", "Precision", "8 bits")
        save_figure(fig, tmp_path / "many.png")
    assert len(fig.legends) == 1 and all(ax.get_legend() is None for ax in fig.axes)
    assert len(fig.legends[0].get_texts()) == 29
    few = _figure(mean_curves(_records(), "topn", 8), "N", "Precision", "8 bits")
    assert not few.legends and all(ax.get_legend() is not None for ax in few.axes)
