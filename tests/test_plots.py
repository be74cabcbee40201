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
    for p in (*paths.values(), path):
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not list(tmp_path.glob(".*tmp"))
