"""CCA-ITQ: canonical correlation analysis followed by an iterative-quantization rotation.

Y. Gong, S. Lazebnik, A. Gordo and F. Perronnin, "Iterative quantization: a Procrustean approach to
learning binary codes for large-scale image retrieval", IEEE TPAMI 35(12), 2013 (CVPR 2011 version
by Gong & Lazebnik). The paper applies CCA between image features and a second view (labels or
text tags) and then learns an orthogonal rotation of the projected data that minimises the
quantization loss; the cross-modal hashing literature uses the same recipe with the image and the
text features as CCA's two views, one code per modality.

Steps (paired objects only, ``uses_unpaired = False``):

1. Centre each view with its training mean.
2. Regularised CCA: the leading ``n_bits`` canonical directions ``W_i, W_t`` of

       [[0, C_it], [C_ti, 0]] w = rho [[C_ii + r_i I, 0], [0, C_tt + r_t I]] w,

   computed by whitening each view in its covariance eigenbasis and one SVD of the whitened
   cross-covariance (:func:`cca_directions`). ``r_v = reg * trace(C_vv) / d_v``: a ridge relative
   to the view's mean variance (as CVH in this package), so it does not depend on feature scale.
3. Scale each direction by its canonical correlation to the power ``corr_power`` (the paper scales
   CCA directions by their eigenvalues before ITQ, so that a rotation mixing directions weights the
   better-correlated ones more; ``corr_power=0`` turns this off).
4. ITQ (:func:`itq_rotation`): starting from a random orthogonal ``R``, alternate
   ``B = sgn(V R)`` and the orthogonal Procrustes update of ``R`` for ``n_iter`` iterations (50, the
   paper's setting), where ``V`` stacks **both** modalities' projected paired objects: one rotation
   is shared, so that an object's image and text codes come from the same rotated CCA space (a
   rotation per modality would let the two code spaces drift apart bit by bit).

The regulariser (``reg="auto"``, the default): on high-dimensional views with few pairs (2,000-d
bag-of-words plus 1,280-d CNN features against ~2,000 pairs) CCA with a vanishing ridge finds
canonical correlations near 1 that are pure over-fitting. Gong et al.'s released code uses a fixed
``1e-4`` on its features; a fixed value is not scale-free and does not adapt to ``n / d``. ``"auto"``
picks the ridge from the grid ``AUTO_REG_GRID`` (relative ridges 1e-4 .. 1) that maximises the
mean canonical correlation, over the ``n_bits`` directions, of **held-out training pairs** (a
seeded 80/20 split of the paired objects; no labels are used), then refits on all pairs (with too few pairs to hold
out 20% and still fit ``n_bits`` directions, ``1e-4``). A number fixes the relative ridge instead
(``reg=1e-4`` is the released code's value).
"""

from __future__ import annotations

import numpy as np
from scipy import linalg

from .._validation import NON_NEGATIVE, NON_NEGATIVE_INT, check_random_state
from ..base import BaseHasher, store_init_args
from ..baselines.cca import AUTO_REG_GRID, REG, cca_directions, centred_pairs, select_cca_ridge
from ..baselines.fitting import LinearHashMixin
from ..data import CrossModalData
from ..errors import DataError

__all__ = [
    "AUTO_REG_GRID", "CCAITQ", "cca_directions", "itq_rotation", "quantization_loss", "select_cca_ridge",
]

def quantization_loss(V: np.ndarray, R: np.ndarray) -> float:
    """ITQ's loss ``||sgn(V R) - V R||_F^2`` (with the package's sign: sgn(0) = -1)."""
    Z = V @ R
    B = np.where(Z > 0, 1.0, -1.0)
    return float(((B - Z) ** 2).sum())


def itq_rotation(V: np.ndarray, n_iter: int, rng: np.random.Generator):
    """ITQ's orthogonal rotation of the zero-centred projected data ``V`` (n, k).

    Starts from a random orthogonal matrix (QR of a Gaussian matrix), then ``n_iter`` times: codes
    ``B = sgn(V R)`` (optimal for fixed ``R``) and ``R = S Q^T`` from the SVD ``V^T B = S Omega Q^T``
    (orthogonal Procrustes, optimal for fixed ``B``). Each half-step can only lower the loss.
    Returns ``(R, losses)`` with the loss before the first and after every iteration.
    """
    k = V.shape[1]
    Q, Rq = np.linalg.qr(rng.standard_normal((k, k)))
    R = Q * np.where(np.diag(Rq) < 0, -1.0, 1.0)
    losses = [quantization_loss(V, R)]
    for _ in range(n_iter):
        B = np.where(V @ R > 0, 1.0, -1.0)
        S, _, Qt = linalg.svd(V.T @ B)
        R = S @ Qt
        losses.append(quantization_loss(V, R))
    return R, np.asarray(losses)


class CCAITQ(LinearHashMixin, BaseHasher):
    """CCA-ITQ (Gong et al., TPAMI 2013) for two modalities.

    Trains on the **paired** objects only (image-only and text-only objects of semi-paired data are
    ignored). Needs more paired objects than bits (otherwise ``fit`` raises ``ValueError``). CCA
    gives at most ``min(d_image, d_text)`` canonical pairs; for longer codes (Wikipedia's text is
    10-d) the projected data are padded with zero columns before ITQ, so the rotation spreads the
    available directions over all ``n_bits`` bits (the rows of ``R`` that act are orthonormal).

    Parameters
    ----------
    n_bits : int
        Code length.
    reg : "auto" or float ["auto"]
        Relative ridge ``r_v = reg * trace(C_vv) / d_v`` added to each view's covariance, or
        ``"auto"``: chosen from :data:`AUTO_REG_GRID` by the mean canonical correlation of held-out
        training pairs (see the module docstring). Gong et al.'s code uses ``1e-4``.
    corr_power : float [1.0]
        Each canonical direction is scaled by its canonical correlation to this power before ITQ
        (the paper scales directions by their eigenvalues); ``0`` leaves them unscaled.
    n_iter : int [50]
        ITQ iterations (the paper's 50).
    random_state : int, Generator or None
        Seeds the initial rotation and the held-out split of ``reg="auto"``.

    Attributes
    ----------
    projections_ : dict modality -> array (d, n_bits)
        ``W_v diag(rho^corr_power) R``: codes are ``sign((x - mean_) @ projections_[v])``.
    means_ : dict modality -> array (d,)
        Training means of the paired objects.
    correlations_ : array (min(n_bits, d_image, d_text),)
        Canonical correlations of the chosen directions (training pairs), descending.
    rotation_ : array (n_bits, n_bits)
        The ITQ rotation.
    reg_ : float
        The relative ridge used; ``ridge_`` the absolute ridges ``(r_image, r_text)``.
    reg_scores_ : array (len(AUTO_REG_GRID),)
        With ``reg="auto"``: held-out mean canonical correlation per grid value (else empty).
    quantization_losses_ : array (n_iter + 1,)
        ITQ loss before the first and after each iteration (non-increasing).
    n_iter_ : int
        ITQ iterations run.
    """

    _parameter_constraints = {**BaseHasher._parameter_constraints, "reg": REG, "corr_power": [NON_NEGATIVE],
                              "n_iter": [NON_NEGATIVE_INT]}
    _saved_arrays = {"correlations": (None,), "rotation": (None, None), "ridge": (None,), "reg_scores": (None,),
                     "quantization_losses": (None,)}

    method_name = "cca-itq"
    uses_unpaired = False
    min_paired = 2

    def __init__(self, n_bits=64, *, reg="auto", corr_power=1.0, n_iter=50, random_state=None):
        store_init_args(self, locals())

    def _fit(self, data: CrossModalData) -> None:
        name = type(self).__name__
        reg = "auto" if isinstance(self.reg, str) else float(self.reg)
        power, n_iter = float(self.corr_power), int(self.n_iter)
        rng = check_random_state(self.random_state)
        k = self.n_bits_
        di, dt = data.image.shape[1], data.text.shape[1]
        r = min(k, di, dt)  # canonical pairs available; bits beyond them come from ITQ (see below)
        Xi, Xt, means, reg, scores = centred_pairs(data, k, reg, rng, name, n_directions=r)
        try:
            Wi, Wt, rho, ridge = cca_directions(Xi, Xt, reg, r)
        except np.linalg.LinAlgError as exc:
            raise DataError(f"{name}: a view's covariance is singular (reg={reg}); use reg > 0") from exc
        scale = np.maximum(rho, 0.0) ** power if power else np.ones(r)
        Wi, Wt = Wi * scale, Wt * scale
        if r < k:  # more bits than canonical pairs: zero columns, so that R mixes the r directions
            Wi = np.hstack([Wi, np.zeros((di, k - r))])
            Wt = np.hstack([Wt, np.zeros((dt, k - r))])
        V = np.vstack([Xi @ Wi, Xt @ Wt])
        R, losses = itq_rotation(V, n_iter, rng)
        self.projections_ = {"image": Wi @ R, "text": Wt @ R}
        self.means_ = means
        self.correlations_, self.rotation_, self.quantization_losses_ = rho, R, losses
        self.reg_, self.ridge_, self.reg_scores_ = reg, ridge, scores
        self.n_iter_ = n_iter

    def _extra_meta(self):
        return {"reg": self.reg_, "n_iter": self.n_iter_}

    def _set_extra_meta(self, meta):
        self.reg_ = float(meta.get("reg", np.nan))
        self.n_iter_ = int(meta.get("n_iter", 0))
