"""Cross-View Hashing (CVH): S. Kumar and R. Udupa, "Learning hash functions for cross-view
similarity search", IJCAI 2011.

Objective (the paper's notation, ``K`` views, ``n`` objects, similarity ``W``): minimise

    d = sum_k sum_k' sum_ij W_ij ||y_i^(k) - y_j^(k')||^2

over codes ``y_i^(k) = sgn(A^(k)T x_i^(k))`` subject to zero-mean, uncorrelated bits. Relaxing
``sgn`` gives ``min Tr(A^T X L' X^T A)`` subject to ``A^T X X^T A = I`` (``A`` stacks the views'
projections, ``X`` is block-diagonal), i.e. the generalized eigenproblem

    X L' X^T a = lambda X X^T a,

whose ``n_bits`` smallest eigenvectors are the hash functions. With two views and ``W = I`` (the
only similarity unsupervised cross-modal data give: object ``i``'s image and text describe the same
thing) the problem is, per object,

    [[ C_ii, -C_it], [-C_ti, C_tt]] a = (lambda / 2) [[C_ii, 0], [0, C_tt]] a,

with ``C`` the covariances of the centred views: the eigenvalues are ``2 (1 - rho)`` for the
canonical correlations ``rho``; CVH for two views is CCA (as the paper notes).

Choices where the paper is silent, or that I could not check against it (see
``docs/baselines.md``):

* ``reg``: a ridge ``r_k I`` added to each view's covariance ``C_kk`` *wherever it appears* (both
  sides of the eigenproblem: regularised CCA). ``r_k = reg * trace(C_kk) / d_k`` is relative to the
  view's mean variance. Features whose rows sum to one (bag-of-words histograms, topic proportions)
  have singular covariances; with the ridge on the right-hand side only, their null directions would
  score a spurious ``lambda = 0`` and come first.
* The views are centred with the training means (the zero-mean constraint), stored for encoding.
* Eigenvector signs are fixed (largest-magnitude entry of each stacked eigenvector positive).

CVH trains on the **paired objects only** (``uses_unpaired = False``): on semi-paired data the
image-only and text-only objects are ignored.
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from .._validation import check_random_state
from ..base import BaseHasher, store_init_args
from ..data import CrossModalData
from ..errors import ParameterError
from .cca import REG, centred_pairs
from .fitting import EigenHashMixin
from .spectral import fix_column_signs

__all__ = ["CVH", "cvh_eigenproblem"]


def cvh_eigenproblem(Xi: np.ndarray, Xt: np.ndarray, reg: float):
    """The two matrices of CVH's generalized eigenproblem for centred, paired views.

    Returns ``(P, Q, ridge)``: ``P = 2 [[C_ii + r_i I, -C_it], [-C_ti, C_tt + r_t I]]`` (the
    objective per object, ``d / n``), ``Q = blockdiag(C_ii + r_i I, C_tt + r_t I)`` (the constraint)
    and ``ridge = (r_i, r_t)``, with covariances normalised by ``n``.
    """
    n = Xi.shape[0]
    Cii = Xi.T @ Xi / n
    Ctt = Xt.T @ Xt / n
    Cit = Xi.T @ Xt / n
    di, dt = Cii.shape[0], Ctt.shape[0]
    ridge = np.array([reg * np.trace(Cii) / di, reg * np.trace(Ctt) / dt])
    Cii[np.diag_indices(di)] += ridge[0]
    Ctt[np.diag_indices(dt)] += ridge[1]
    Q = linalg.block_diag(Cii, Ctt)
    P = 2.0 * np.block([[Cii, -Cit], [-Cit.T, Ctt]])
    return P, Q, ridge


class CVH(EigenHashMixin, BaseHasher):
    """Cross-View Hashing (Kumar & Udupa, IJCAI 2011) for two modalities.

    Trains on the **paired** objects of the data only (the image-only and text-only objects of
    semi-paired data are ignored), with the cross-view similarity ``W = I``. Needs more paired
    objects than bits (``n_bits`` uncorrelated zero-mean projections of ``n`` centred objects need
    ``n > n_bits``) and at most ``d_image + d_text`` bits; otherwise ``fit`` raises ``ValueError``.

    Parameters
    ----------
    n_bits : int
        Code length.
    reg : "auto" or float ["auto"]
        Relative ridge added to each view's covariance (not in the paper, which assumes ``X X^T``
        invertible; see the module docstring). ``"auto"`` picks it from
        :data:`dmh.baselines.cca.AUTO_REG_GRID` by the mean canonical correlation of held-out
        training *pairs* (no labels), as CCA-ITQ does (``docs/baselines.md``: a fixed ``1e-4``
        over-fits on dense CNN features); ``0`` solves the paper's problem exactly and fails when
        a covariance is singular.
    random_state : int, Generator or None
        Seeds the held-out split of ``reg="auto"``; a fixed ``reg`` has no random step.

    Attributes
    ----------
    projections_ : dict modality -> array (d, n_bits)
        The hash functions ``A^(k)``: codes are ``sign((x - mean_) @ A)``.
    means_ : dict modality -> array (d,)
        Training means of the paired objects, subtracted at encode time.
    eigenvalues_ : array (n_bits,)
        The ``n_bits`` smallest generalized eigenvalues, ``2 (1 - rho)`` ascending.
    ridge_ : array (2,)
        The absolute ridges ``(r_image, r_text)`` that were used.
    reg_ : float
        The relative ridge used; ``reg_scores_`` the held-out correlations of ``reg="auto"``.
    objective_ : float
        The relaxed objective at the solution, ``Tr(A^T P A) = sum(eigenvalues_)``.
    n_iter_ : int
        1 (closed form).
    """

    _parameter_constraints = {**BaseHasher._parameter_constraints, "reg": REG}
    _saved_arrays = {**EigenHashMixin._saved_arrays, "ridge": (None,)}
    _optional_arrays = {"reg_scores": ()}

    method_name = "cvh"
    uses_unpaired = False
    min_paired = 2

    def __init__(self, n_bits=64, *, reg="auto", random_state=None):
        store_init_args(self, locals())

    def _fit(self, data: CrossModalData) -> None:
        name = type(self).__name__
        reg = "auto" if isinstance(self.reg, str) else float(self.reg)
        rng = check_random_state(self.random_state)  # only reg="auto" draws from it (its held-out split)
        k = self.n_bits_
        di, dt = data.image.shape[1], data.text.shape[1]
        if k > di + dt:
            raise ParameterError(
                f"{name} gives at most d_image + d_text = {di + dt} bits (one per generalized "
                f"eigenvector), n_bits={k} requested"
            )
        Xi, Xt, means, reg, scores = centred_pairs(data, k, reg, rng, name)
        P, Q, ridge = cvh_eigenproblem(Xi, Xt, reg)
        try:
            evals, evecs = linalg.eigh(P, Q, subset_by_index=[0, k - 1])
        except linalg.LinAlgError as exc:
            raise ParameterError(
                f"{name}: a view's covariance is singular (reg={reg}); use reg > 0"
            ) from exc
        evecs = fix_column_signs(evecs)
        self.projections_ = {"image": evecs[:di], "text": evecs[di:]}
        self.means_ = means
        self._set_eigenvalues(evals)
        self.ridge_, self.reg_, self.reg_scores_ = ridge, reg, scores

    def _extra_meta(self):
        return {"reg": self.reg_}

    def _set_extra_meta(self, meta):
        self.reg_ = float(meta.get("reg", np.nan))
