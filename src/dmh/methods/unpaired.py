"""Options for the unpaired objects of a semi-paired training set (measured in docs/quality.md).

An image-only object's missing text is complemented by Eq. 5 from its ``k`` nearest *paired*
neighbours in image space (and a text-only object's image from text space). Where one view's
neighbours say little about the other view (Wikipedia's SIFT histograms), the complemented
descriptions, hence the CLE features Y and the GBE codes of those objects, are poor, and they enter
GBE's S^Y beside the paired objects. The remedy, an option of :class:`dmh.DMH`
(``unpaired_complement="ridge"``, the default preset's):

* :func:`ridge_complement`: a cross-modal map learned on the paired objects (ridge regression from
  the observed view to the missing one, its penalty chosen by efficient leave-one-out error over
  the paired objects: pairs, no labels) gives the missing description instead of Eq. 5.

It acts on unpaired objects only: on fully paired data it changes nothing (bit for bit).
"""

from __future__ import annotations

import numpy as np

from ..errors import ParameterError

#: ridge penalties tried, in units of the mean squared row norm of the predicting view (paired objects)
RIDGE_ALPHAS = tuple(10.0 ** np.arange(-3, 4))


#: how ridge_complement solves: scikit-learn's RidgeCV (this function's default) or the dual form
#: (same model, other rounding; much less work where the paired objects are fewer than the features;
#: DMH's default)
RIDGE_SOLVERS = ("sklearn", "dual")


def ridge_complement(views, masks, alphas=RIDGE_ALPHAS, solver: str = "sklearn") -> list:
    """For each view ``v``, its rows that are missing but whose other view is observed, predicted
    from the other view by a ridge regression fitted on the paired objects; every other row is
    ``nan``. Returns one (n x d_v) array per view (``None`` when nothing is missing there).

    The penalty is chosen per direction by leave-one-out squared error over the paired objects
    (sklearn's ``RidgeCV``, generalised cross-validation), from ``alphas`` times the mean squared
    row norm of the predictor (so the grid means the same for every feature scale).

    ``solver="dual"`` (:func:`ridge_predict_dual`) predicts the same model without forming its
    coefficients, where the paired objects are fewer than the predictor's features (the refreshed
    4,096-d features of a set of a few thousand objects); elsewhere it is RidgeCV as by default.
    The predictions agree with RidgeCV's up to rounding (about 1e-12 relative), not bit for bit."""
    from sklearn.linear_model import RidgeCV

    if solver not in RIDGE_SOLVERS:
        raise ParameterError(f"solver must be one of {RIDGE_SOLVERS}, got {solver!r}")
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
        grid = [a * scale for a in alphas]
        if solver == "dual":
            rows = ridge_predict_dual(Xp, Tp, grid, views[u][need])
            if rows is not None:
                pred = np.full(views[v].shape, np.nan)
                pred[need] = rows
                out.append(pred)
                continue
        best = gcv_alpha(Xp, Tp, grid)
        # with the penalty known, RidgeCV over that one value gives the very model (coefficients bit for
        # bit) that it picks from the whole grid, without computing every candidate's coefficients (the
        # feature refresh makes the views 4,096-d: seconds per candidate; about half the cost in all)
        model = RidgeCV(alphas=grid if best is None else [best], fit_intercept=True).fit(Xp, Tp)
        pred = np.full(views[v].shape, np.nan)
        pred[need] = model.predict(views[u][need])
        out.append(pred)
    return out


#: gcv_alpha leaves the choice to RidgeCV when the two best scores are closer than this (relative)
GCV_TIE = 1e-8
#: below this many multiply-adds (objects x features x targets) gcv_alpha leaves the choice to RidgeCV
GCV_MIN_WORK = 10**9


def gcv_alpha(X, Y, alphas) -> float | None:
    """The penalty of ``alphas`` that scikit-learn's ``RidgeCV(alphas, fit_intercept=True)`` chooses
    for ``(X, Y)`` (mean squared leave-one-out error over all targets, generalised cross-validation),
    computed without the candidates' coefficients, or ``None`` where the shortcut does not pay (more
    objects than features, a small problem) or where two candidates score within :data:`GCV_TIE`
    (rounding could order them otherwise than RidgeCV's own arithmetic: the caller then lets RidgeCV
    choose).

    The same mathematics as RidgeCV's "gram" mode: with the centred Gram matrix
    ``X_c X_c' = Q diag(s) Q'``, ``D = 1 / (s + alpha)`` and ``M = Q' Y_c``, the dual coefficients are
    ``C = Q D M`` and the leave-one-out residuals ``C_i / g_i`` with ``g_i = (Q D Q')_ii - (Q D Q' 1)_i / n``
    (the intercept is not penalised); ``||C_i||^2`` is the diagonal of ``(Q D) (M M') (Q D)'``, n^3 per
    candidate instead of RidgeCV's n^2 t + n p t (coefficients of every candidate)."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    n, p = X.shape
    t = Y.shape[1] if Y.ndim == 2 else 1
    if n > p or n < 3 or len(alphas) < 2 or n * p * t < GCV_MIN_WORK:
        return None
    _Xm, Xc, _Ym, s, Q, M = _gram_eigen(X, Y)
    scores = _gcv_scores(s, Q, M, alphas)
    order = np.argsort(scores, kind="stable")[::-1]
    first, second = scores[order[0]], scores[order[1]]
    if abs(first - second) <= GCV_TIE * max(abs(first), np.finfo(float).tiny):
        return None
    # RidgeCV keeps the first of equal scores: the ties it could see are excluded above
    return float(alphas[int(order[0])])


def _gram_eigen(X, Y):
    """Means, centred X, the centred Gram matrix's eigenpairs ``(s, Q)`` and ``M = Q' Y_c``."""
    n = X.shape[0]
    Xm, Ym = X.mean(0), Y.mean(0)
    Xc = X - Xm
    s, Q = np.linalg.eigh(Xc @ Xc.T)
    M = Q.T @ (Y - Ym).reshape(n, -1)
    return Xm, Xc, Ym, s, Q, M


def _gcv_scores(s, Q, M, alphas) -> list[float]:
    """RidgeCV's score (minus the mean squared leave-one-out error) of each penalty (see
    :func:`gcv_alpha` for the algebra)."""
    n, t = M.shape
    MMt = M @ M.T
    q1 = Q.sum(0)  # Q' 1
    scores = []
    for alpha in alphas:
        D = 1.0 / (s + float(alpha))
        A = Q * D
        c2 = np.einsum("ij,ij->i", A @ MMt, A)  # ||C_i||^2
        g = np.einsum("ij,ij->i", A, Q) - (A @ q1) / n
        scores.append(-float(np.sum(c2 / g**2)) / (n * t))
    return scores


def ridge_predict_dual(X, Y, alphas, X_new) -> np.ndarray | None:
    """Predictions at ``X_new`` of the ridge regression (intercept unpenalised) of ``Y`` on ``X``
    whose penalty RidgeCV would choose from ``alphas`` (the first of equal best scores, as RidgeCV),
    in the dual form: with ``X_c X_c' = Q diag(s) Q'``, ``D = 1 / (s + alpha)`` and ``M = Q' Y_c``,
    ``(X_new - mean) X_c' Q D M + mean(Y)``. About ``n^3`` per candidate penalty plus
    ``m n (n + p + t)`` for ``m`` new rows, instead of RidgeCV's coefficients (``n p t`` and more),
    whose every column the complement never needs. ``None`` where X has no more features than
    objects (there the primal form, RidgeCV's own, is the cheaper one) or fewer than 3 objects."""
    X = np.asarray(X, dtype=np.float64)
    Y = np.asarray(Y, dtype=np.float64)
    n, p = X.shape
    if n > p or n < 3:
        return None
    Xm, Xc, Ym, s, Q, M = _gram_eigen(X, Y)
    alpha = alphas[0] if len(alphas) == 1 else alphas[int(np.argmax(_gcv_scores(s, Q, M, alphas)))]
    D = 1.0 / (s + float(alpha))
    K_new = (np.asarray(X_new, dtype=np.float64) - Xm) @ Xc.T  # m x n
    pred = ((K_new @ Q) * D) @ M + Ym
    return pred.reshape(len(K_new), *Y.shape[1:])
