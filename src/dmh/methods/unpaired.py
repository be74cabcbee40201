"""Options for the unpaired objects of a semi-paired training set (docs/quality.md, "Unpaired
objects at 50% pairing").

An image-only object's missing text is complemented by Eq. 5 from its ``k`` nearest *paired*
neighbours in image space (and a text-only object's image from text space). Where one view's
neighbours say little about the other view (Wikipedia's SIFT histograms), the complemented
descriptions, hence the CLE features Y and the GBE codes of those objects, are poor, and they enter
GBE's S^Y beside the paired objects. Two remedies, each an option of :class:`dmh.DMH`:

* :func:`ridge_complement`: a cross-modal map learned on the paired objects (ridge regression from
  the observed view to the missing one, its penalty chosen by efficient leave-one-out error over
  the paired objects: pairs, no labels) gives the missing description instead of Eq. 5.
* :func:`object_weights`: unpaired objects' rows and columns of S^Y scaled by ``w`` (``P_ij``
  multiplied by ``a_i a_j``, ``a = 1`` for paired objects and ``w`` for unpaired ones, then
  renormalised), so that they count less in where the paired objects' codes go.

Both act on unpaired objects only: on fully paired data they change nothing (bit for bit).
"""

from __future__ import annotations

import numpy as np

#: ridge penalties tried, in units of the mean squared row norm of the predicting view (paired objects)
RIDGE_ALPHAS = tuple(10.0 ** np.arange(-3, 4))


def object_weights(masks, weight: float) -> np.ndarray | None:
    """Per-object weights for S^Y: 1 for paired objects, ``weight`` for unpaired ones; ``None``
    (no weighting) when ``weight == 1`` or every object is paired."""
    paired = masks[0] & masks[1]
    if weight == 1.0 or paired.all():
        return None
    return np.where(paired, 1.0, float(weight))


def ridge_complement(views, masks, alphas=RIDGE_ALPHAS) -> list:
    """For each view ``v``, its rows that are missing but whose other view is observed, predicted
    from the other view by a ridge regression fitted on the paired objects; every other row is
    ``nan``. Returns one (n x d_v) array per view (``None`` when nothing is missing there).

    The penalty is chosen per direction by leave-one-out squared error over the paired objects
    (sklearn's ``RidgeCV``, generalised cross-validation), from ``alphas`` times the mean squared
    row norm of the predictor (so the grid means the same for every feature scale)."""
    from sklearn.linear_model import RidgeCV

    paired = masks[0] & masks[1]
    out = []
    for v in (0, 1):
        u = 1 - v
        need = masks[u] & ~masks[v]
        if not need.any():
            out.append(None)
            continue
        Xp, Tp = views[u][paired], views[v][paired]
        scale = max(float(np.mean(np.sum(Xp * Xp, axis=1))), np.finfo(float).tiny)
        model = RidgeCV(alphas=[a * scale for a in alphas], fit_intercept=True).fit(Xp, Tp)
        pred = np.full(views[v].shape, np.nan)
        pred[need] = model.predict(views[u][need])
        out.append(pred)
    return out
