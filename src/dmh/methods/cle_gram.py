"""CLE's updates for a wide view through its Gram matrix (``G = Zbar Zbar'``, n x n).

When a view has more features than objects (``d_v > n``: the 4096-d hidden features of the hash
networks that CLE sees from the second round on, for a few thousand objects), every quantity of
Eq. 6 that involves the view depends on it only through ``G``:

* the Q-update's Procrustes solution is ``Q = M N`` with ``M = Zbar'X`` and
  ``N = (M'M)^-1/2``, and ``M'M = X'G X`` (``X`` is the ``Y`` the update reads);
* the Y-update needs ``Zbar Q = G X N`` and ``Q'Q = I`` (the projector onto the range of ``M'M``
  where that is rank deficient);
* the objective needs ``||Zbar||^2 = tr G`` and ``tr(Q' Zbar' Y) = tr(N (G X)' Y)``;
* the neighbour search needs the distances ``G_ii + G_jj - 2 G_ij``.

So an iteration costs one n x n x d product (``G Y``) and a few n x d x d ones instead of two
n x d_v x d products and the d_v x d x d products of the polar decomposition, and ``G`` (n^2 d_v,
once per round) replaces the view. In exact arithmetic the iterates are those of
:func:`dmh.methods.cle.fit_cle` on the view itself; in floating point they agree up to rounding
(tests compare both ways). It needs ``Zbar`` fixed for the round: every missing row either given
(the ridge complement), zero, or none missing; Eq. 5's neighbour complement changes rows each
iteration and keeps the direct form.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits


def worth_it(d_v: int, n: int, d: int) -> bool:
    """Whether a view of ``d_v`` features for ``n`` objects is cheaper through its Gram matrix:
    more features than objects, and at least ``d`` objects (so ``M'M`` can have full rank)."""
    return d_v > n >= d


class GramView:
    """One view of CLE held as ``G = Zbar Zbar'`` (float64), with the state of its Q-update.

    ``begin(X)`` sets the matrix ``X`` that defines ``M = Zbar'X`` (the Y the next Q-update reads,
    or it with the missing rows zeroed for CLE's first update, which sees the zero complement);
    ``q_update()`` then forms ``N = (M'M)^-1/2`` and ``Q'Q``; ``rhs()`` is ``Zbar Q`` for the
    Y-update; ``advance(Y)`` gives ``tr(Q' Zbar' Y)`` for the objective and begins the next
    iteration from ``Y``."""

    def __init__(self, Zbar: np.ndarray):
        Zbar = np.asarray(Zbar, dtype=np.float64)
        self.G = Zbar @ Zbar.T
        self.trace = float(np.trace(self.G))
        self.GX = None
        self.MtM = None
        self.N = None
        self.QtQ = None

    def begin(self, X: np.ndarray) -> None:
        self.GX = self.G @ X
        self.MtM = X.T @ self.GX

    def q_update(self) -> None:
        """``N`` with ``Q = M N`` the polar factor of ``M`` (:func:`dmh.methods.cle.polar`'s rule: its
        inverse square root where ``M'M`` has full rank; else the pseudo-inverse one, and ``Q'Q``
        the projector onto ``M``'s row space)."""
        C = (self.MtM + self.MtM.T) * 0.5
        with threadpool_limits(1):  # a small eigenproblem: threads only add synchronisation cost
            lam, V = np.linalg.eigh(C)
        d = lam.size
        if lam[0] > 1e-10 * max(lam[-1], np.finfo(float).tiny):
            self.N = (V / np.sqrt(lam)) @ V.T
            self.QtQ = np.eye(d)
            return
        keep = lam > 1e-10 * max(lam[-1], np.finfo(float).tiny)
        Vk = V[:, keep]
        self.N = (Vk / np.sqrt(lam[keep])) @ Vk.T
        self.QtQ = Vk @ Vk.T

    def rhs(self) -> np.ndarray:
        """``Zbar Q`` (n x d)."""
        return self.GX @ self.N

    def advance(self, Y: np.ndarray) -> float:
        """``tr(Q' Zbar' Y)`` for the current ``Q``; then begins the next iteration from ``Y``."""
        tr_qm = float(np.sum(self.N * (self.GX.T @ Y)))
        self.begin(Y)
        return tr_qm

    def sq_distances(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """Squared Euclidean distances between the view's rows ``rows`` and ``cols``, up to each
        row's own norm (``G_jj - 2 G_ij``: the order within a row is the distances' order)."""
        diag = np.diagonal(self.G)[cols]
        return diag[None, :] - 2.0 * self.G[np.ix_(rows, cols)]
