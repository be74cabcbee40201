"""Inter-Media Hashing (IMH): J. Song, Y. Yang, Y. Yang, Z. Huang and H. T. Shen, "Inter-media
hashing for large-scale retrieval from heterogeneous data sources", SIGMOD 2013.

(Not "Inductive Manifold Hashing", which shares the acronym.)

IMH learns codes ``Y^(g)`` for the observed objects of each medium ``g`` (image = 1, text = 2) and
linear hash functions ``W^(g)`` from

    min   sum_g [ ||X^(g) W^(g) - Y^(g)||^2 + beta ||W^(g)||^2 ]    (hash functions fit the codes)
        + lambda sum_g sum_ij A^(g)_ij ||y_i^(g) - y_j^(g)||^2 / 2  (intra-media consistency)
        + sum_{paired i} U_ii ||y_i^(1) - y_i^(2)||^2               (inter-media consistency)
    s.t.  Y^(1)T Y^(1) = I

where ``A^(g)`` is a k-NN heat-kernel graph over **all observed objects of medium g** (paired and
unpaired alike) and the inter-media term couples the paired objects only, so IMH uses unpaired data
(``uses_unpaired = True``). Eliminating ``W^(g)`` (ridge regression) leaves
``Tr(Y^(g)T B^(g) Y^(g))`` with ``B = I - X (X^T X + beta I)^{-1} X^T``; minimising over ``Y^(2)``
for fixed ``Y^(1)`` gives ``Y^(2) = E Y^(1)``; what remains is ``min Tr(Y^(1)T C Y^(1))`` with
``Y^(1)T Y^(1) = I``: the ``n_bits`` smallest eigenvectors of ``C``. Codes of new objects are
``sign((x - mean^(g)) W^(g))``.

Implementation notes (see ``docs/baselines.md``):

* ``U = mu I`` on the paired objects. The inter-media block of ``C`` is computed in a form that is
  stable for large ``mu`` (``mu = inf`` is the hard constraint ``y_i^(1) = y_i^(2)``):
  with ``G = B^(2) + lambda L^(2)`` and ``H`` its Schur complement onto the paired text rows,
  the block is ``H (I + H / mu)^{-1}``; unpaired texts get the harmonic extension
  ``Y_T = -G_TT^{-1} G_TP Y_P``.
* Each medium is centred with its training mean (over its observed objects), and ``Y^(1)`` is kept
  orthogonal to the all-ones vector (balanced bits), so that ``sign`` at 0 is the right threshold.
  (The paper's own code, as circulated, thresholds at the median instead; I could not check which
  the paper prescribes.)
* Cost: dense ``N x N`` matrices (``N`` observed objects of a medium), ``O(N^3)`` time: the paper's
  method is an eigenproblem over the training set.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from .._validation import NON_NEGATIVE, POSITIVE, POSITIVE_INT
from ..base import BaseHasher, store_init_args
from ..data import CrossModalData
from ..errors import DataError
from .fitting import EigenHashMixin, centre
from .spectral import fix_column_signs, knn_heat_affinity, laplacian

__all__ = ["IMH", "regression_residual_matrix", "imh_solve", "imh_objective"]


def regression_residual_matrix(X: np.ndarray, beta: float) -> np.ndarray:
    """``B = I - X (X^T X + beta I)^{-1} X^T``, so that
    ``Tr(Y^T B Y) = min_W ||X W - Y||^2 + beta ||W||^2``."""
    n, d = X.shape
    K = X @ linalg.solve(X.T @ X + beta * np.eye(d), X.T, assume_a="pos")
    B = -K
    B[np.diag_indices(n)] += 1.0
    return (B + B.T) / 2.0


def ridge_weights(X: np.ndarray, Y: np.ndarray, beta: float) -> np.ndarray:
    """``W = (X^T X + beta I)^{-1} X^T Y``, the hash functions fitted to the codes."""
    return linalg.solve(X.T @ X + beta * np.eye(X.shape[1]), X.T @ Y, assume_a="pos")


def imh_objective(Xs, Ys, Ls, paired_pos, beta: float, lambda_: float, mu: float) -> float:
    """The IMH objective evaluated from its definition (with ``W`` at its ridge optimum).

    ``Xs``, ``Ys``, ``Ls``: per medium (image, text) the centred features, codes and Laplacians;
    ``paired_pos = (pi, pt)``: rows of the paired objects in each medium. ``mu = inf`` drops the
    inter-media term (it is a constraint then).
    """
    total = 0.0
    for X, Y, L in zip(Xs, Ys, Ls, strict=True):
        W = ridge_weights(X, Y, beta)
        total += np.sum((X @ W - Y) ** 2) + beta * np.sum(W**2)
        total += lambda_ * float(np.sum(Y * (L @ Y)))
    if np.isfinite(mu):
        pi, pt = paired_pos
        total += mu * np.sum((Ys[0][pi] - Ys[1][pt]) ** 2)
    return float(total)


def imh_solve(Xi, Xt, Li, Lt, pi, pt, n_bits: int, beta: float, lambda_: float, mu: float):
    """Solve IMH in closed form; returns ``(Y_image, Y_text, eigenvalues)``.

    ``Xi`` (N1 x d1), ``Xt`` (N2 x d2): centred features of all observed images / texts; ``Li``,
    ``Lt``: their graph Laplacians; ``pi``, ``pt``: the rows of the paired objects in each (same
    order). ``Y_image`` is orthonormal and orthogonal to the all-ones vector.
    """
    n1, n2 = Xi.shape[0], Xt.shape[0]
    G = regression_residual_matrix(Xt, beta) + lambda_ * _dense(Lt)
    unpaired_t = np.setdiff1d(np.arange(n2), pt)
    G_PP = G[np.ix_(pt, pt)]
    if unpaired_t.size:
        G_TT = G[np.ix_(unpaired_t, unpaired_t)]
        G_TP = G[np.ix_(unpaired_t, pt)]
        cho_T = linalg.cho_factor(G_TT)
        H = G_PP - G_TP.T @ linalg.cho_solve(cho_T, G_TP)
    else:
        H = G_PP
    H = (H + H.T) / 2.0
    eye_p = np.eye(pt.size)
    shrink = eye_p + H / mu if np.isfinite(mu) else eye_p  # (I + H/mu)
    inter = linalg.solve(shrink, H)
    inter = (inter + inter.T) / 2.0

    C = regression_residual_matrix(Xi, beta) + lambda_ * _dense(Li)
    C[np.ix_(pi, pi)] += inter
    # keep Y_image orthogonal to 1: project C onto the complement of u = 1/sqrt(N1), then push u to
    # the top of the spectrum (u is an exact eigenvector of the result)
    u = np.full(n1, 1.0 / np.sqrt(n1))
    Cu = C @ u
    uCu = float(u @ Cu)
    Cp = C - np.outer(u, Cu) - np.outer(Cu, u) + uCu * np.outer(u, u)
    Cp += (np.trace(C) + 1.0) * np.outer(u, u)
    Cp = (Cp + Cp.T) / 2.0
    evals, Y1 = linalg.eigh(Cp, subset_by_index=[0, n_bits - 1])
    Y1 = fix_column_signs(Y1)

    Z = linalg.solve(shrink, Y1[pi])  # optimal paired text codes
    Y2 = np.empty((n2, n_bits))
    Y2[pt] = Z
    if unpaired_t.size:
        Y2[unpaired_t] = -linalg.cho_solve(cho_T, G_TP @ Z)
    return Y1, Y2, evals


def _dense(L):
    return L.toarray() if hasattr(L, "toarray") else np.asarray(L)


class IMH(EigenHashMixin, BaseHasher):
    """Inter-Media Hashing (Song et al., SIGMOD 2013) for semi-paired image-text data.

    Uses **all** observed objects: the k-NN graph of each medium spans its paired and unpaired
    objects, the inter-media term the paired ones. Needs at least one paired object (without one
    the media are not linked) and more observed images than bits (``Y^(1)`` has ``n_bits``
    orthonormal columns orthogonal to the all-ones vector); otherwise ``fit`` raises ``ValueError``.

    Parameters
    ----------
    n_bits : int
        Code length.
    lambda_ : float [1.0]
        The paper's lambda: weight of the intra-media consistency (k-NN graph) terms.
    beta : float [1.0]
        The paper's beta: ridge of the linear hash functions ``W^(g)``.
    mu : float [1e10]
        The diagonal of the paper's ``U``: weight of the inter-media consistency on paired objects.
        Large by default (paired codes all but equal); ``float("inf")`` is the hard constraint.
    n_neighbors : int [5]
        ``k`` of the k-NN graphs.
    sigma : float or None [None]
        Heat-kernel width of the graphs; ``None``: the mean k-NN distance of the medium.
    random_state : int, Generator or None
        Accepted for the common interface; IMH is closed-form with no random step.

    Attributes
    ----------
    projections_ : dict modality -> array (d, n_bits)
        The hash functions ``W^(g)``; codes are ``sign((x - means_[g]) @ W^(g))``.
    means_ : dict modality -> array (d,)
        Training means of each medium's observed objects.
    eigenvalues_ : array (n_bits,)
        The smallest eigenvalues of ``C`` (each bit's share of the objective).
    objective_ : float
        The objective at the solution (``sum(eigenvalues_)``).
    n_iter_ : int
        1 (closed form).
    """

    _parameter_constraints = {
        **BaseHasher._parameter_constraints,
        "lambda_": [NON_NEGATIVE], "beta": [POSITIVE], "mu": [POSITIVE], "n_neighbors": [POSITIVE_INT],
        "sigma": [None, POSITIVE],
    }

    method_name = "imh"
    uses_unpaired = True
    min_paired = 1

    def __init__(self, n_bits=64, *, lambda_=1.0, beta=1.0, mu=1e10, n_neighbors=5, sigma=None,
                 random_state=None):
        store_init_args(self, locals())

    def _fit(self, data: CrossModalData) -> None:
        name = type(self).__name__
        lambda_, beta, mu, k_nn = float(self.lambda_), float(self.beta), float(self.mu), int(self.n_neighbors)
        sigma = None if self.sigma is None else float(self.sigma)  # random_state: unused (no random step)
        k = self.n_bits_
        idx_i = np.flatnonzero(data.image_mask)
        idx_t = np.flatnonzero(data.text_mask)
        if idx_i.size <= k:
            raise DataError(
                f"{name} needs more observed images than bits: {k} orthonormal balanced codes need "
                f"at least {k + 1} images, the training data hold {idx_i.size}"
            )
        paired = np.flatnonzero(data.paired_mask)
        pi = np.searchsorted(idx_i, paired)
        pt = np.searchsorted(idx_t, paired)
        Xi, mean_i = centre(data.image[idx_i])
        Xt, mean_t = centre(data.text[idx_t])
        Li = laplacian(knn_heat_affinity(Xi, k_nn, sigma))
        Lt = laplacian(knn_heat_affinity(Xt, k_nn, sigma))
        Y1, Y2, evals = imh_solve(Xi, Xt, Li, Lt, pi, pt, k, beta, lambda_, mu)
        self.projections_ = {"image": ridge_weights(Xi, Y1, beta),
                             "text": ridge_weights(Xt, Y2, beta)}
        self.means_ = {"image": mean_i, "text": mean_t}
        self._set_eigenvalues(evals)
