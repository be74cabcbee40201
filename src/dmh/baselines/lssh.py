"""LSSH: Latent Semantic Sparse Hashing (Zhou, Ding & Guo, SIGIR 2014).

Images are sparse-coded over a learned dictionary, texts are factorised into latent concepts, and
a linear map ties the two: the paper's objective (samples as columns there, as rows here)::

    min_{B, S, U, A, R}  ||X - B S||^2 + lambda sum_i |s_i|_1          (sparse coding of images)
                         + mu ||Y - U A||^2                            (factorisation of texts)
                         + gamma ||A - R S||^2                         (sparse codes -> latent space)
    s.t.  ||b_j|| <= 1,  ||u_j|| <= 1,  ||r_j|| <= 1                   (columns of B, U, R)

solved by alternating: ``A`` in closed form, ``S`` by a lasso over the stacked dictionary
``[B; sqrt(gamma) R]``, ``B``, ``U``, ``R`` under their norm constraints. The latent space has one
dimension per bit. Hashing: an image is sparse-coded over ``B`` alone and mapped to ``R s``; a text
is mapped to ``(U'U + gamma/mu I)^-1 U' y``; the code is the sign of the latent vector.

Preprocessing (as in the authors' released MATLAB code): both modalities are centred with the
training mean, images are projected on their top principal components (``pca_dim``, by default as
many as bits), and every sample is scaled to unit Euclidean norm. Everything is stored in the
model and applied again when encoding.

Where the description above leaves freedom (the lasso solver, the dictionary solver, the scale of
``lambda``), see ``docs/baselines.md``.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve
from sklearn.utils.validation import check_is_fitted

from .._validation import NON_NEGATIVE, POSITIVE, POSITIVE_INT, check_features, check_random_state
from ..base import BaseHasher, sign_codes, store_init_args
from ..data import CrossModalData
from ..errors import DataError
from .fitting import l2_normalize_rows, paired_views, settled, warn_not_converged
from .sparse_coding import lasso_fista, project_rows_to_ball, update_dictionary_rows

__all__ = ["LSSH", "lssh_objective"]


def lssh_objective(X, Y, S, B, U, A, R, *, lambda_, mu, gamma) -> float:
    """The LSSH objective (row form: ``X ~ S B``, ``Y ~ A U``, ``A ~ S R``)."""
    return float(
        np.sum((X - S @ B) ** 2)
        + lambda_ * np.abs(S).sum()
        + mu * np.sum((Y - A @ U) ** 2)
        + gamma * np.sum((A - S @ R) ** 2)
    )


class LSSH(BaseHasher):
    """Latent Semantic Sparse Hashing (Zhou, Ding & Guo, SIGIR 2014), fully paired.

    Parameters (paper symbol; default and its source in brackets)
    ----------
    n_bits : int
        Code length = dimension of the latent semantic space.
    lambda_ : float (lambda) [0.3]
        Weight of the l1 penalty on the image sparse codes, in the objective above. The authors'
        code passes ``rho = 0.2`` to SLEP's ``LeastR`` as a *fraction of each sample's
        lambda_max* (and LeastR halves the squared error); on Wikipedia that rule amounts to
        ``2 * 0.2 * lambda_max`` = 0.26-0.33 in this objective's scale, hence 0.3. A fixed weight
        keeps the objective fixed, which the monotone alternation needs; see the docs.
    mu : float (mu) [0.5]
        Weight of the text factorisation term (authors' demo: ``mu = 0.5``).
    gamma : float (gamma) [1.0]
        Weight of the sparse-code-to-latent map (the authors' code calls it ``lambda``, = 1).
    n_atoms : int [512]
        Size of the image dictionary ``B`` (authors' code: 512).
    pca_dim : int or None [None = n_bits]
        Principal components kept of the images before sparse coding (authors' code: as many as
        bits); capped by the image dimension and the number of paired objects.
    max_iter : int [20]
        Outer alternating iterations (the authors' code runs exactly 20; reaching them without
        meeting the ``tol`` criterion raises a ConvergenceWarning).
    tol : float [1e-3]
        Stop when the objective decreases by less than ``tol`` times its value.
    lasso_max_iter : int [30]
        Iterations of the FISTA lasso solver per sparse-coding step and per encoding (the authors'
        code runs SLEP's accelerated solver for a fixed 30 iterations).
    lasso_tol : float [1e-4]
        Early stop of the lasso when no code moves by more than this fraction of the largest.
    dict_sweeps : int [3]
        Block-coordinate sweeps of each dictionary update per outer iteration.
    random_state : int, Generator or None
        Seed of the random initial dictionaries; same seed, same codes.

    Attributes
    ----------
    image_mean_, text_mean_ : training means. image_components_ : (d_img, pca_dim) PCA basis.
    dictionary_ : (n_atoms, pca_dim) image dictionary ``B`` (one atom per row).
    text_basis_ : (n_bits, d_txt) text basis ``U``. latent_map_ : (n_atoms, n_bits) ``R``.
    objective_ : list of the objective after every iteration. n_iter_ : iterations run.
    """

    _parameter_constraints = {
        **BaseHasher._parameter_constraints,
        "lambda_": [POSITIVE], "mu": [POSITIVE], "gamma": [POSITIVE], "tol": [NON_NEGATIVE],
        "lasso_tol": [NON_NEGATIVE], "n_atoms": [POSITIVE_INT], "max_iter": [POSITIVE_INT],
        "lasso_max_iter": [POSITIVE_INT], "dict_sweeps": [POSITIVE_INT], "pca_dim": [None, POSITIVE_INT],
    }

    method_name = "lssh"
    uses_unpaired = False
    min_paired = 2

    def __init__(self, n_bits=32, *, lambda_=0.3, mu=0.5, gamma=1.0, n_atoms=512, pca_dim=None,
                 max_iter=20, tol=1e-3, lasso_max_iter=30, lasso_tol=1e-4, dict_sweeps=3,
                 random_state=None):
        store_init_args(self, locals())

    # ------------------------------------------------------------------ fitting
    def _fit(self, data: CrossModalData) -> None:
        k = self.n_bits_
        X_raw, Y_raw = paired_views(
            data, "LSSH", max(k, 2), f"its {k}-dimensional latent space is fitted to them"
        )
        rng = check_random_state(self.random_state)
        n = X_raw.shape[0]

        # preprocessing: centre, PCA of the images, unit-norm samples
        self.image_mean_ = X_raw.mean(axis=0)
        self.text_mean_ = Y_raw.mean(axis=0)
        Xc = X_raw - self.image_mean_
        p = min(k if self.pca_dim is None else int(self.pca_dim), Xc.shape[1], n - 1)
        p = max(p, 1)
        cov = Xc.T @ Xc / max(n - 1, 1)
        evals, evecs = np.linalg.eigh(cov)
        order = np.argsort(evals)[::-1][:p]
        comps = evecs[:, order]
        # fix the sign of each component (eigenvectors are defined up to sign)
        signs = np.sign(comps[np.argmax(np.abs(comps), axis=0), np.arange(p)])
        self.image_components_ = comps * np.where(signs == 0, 1.0, signs)
        X = l2_normalize_rows(Xc @ self.image_components_)
        Y = l2_normalize_rows(Y_raw - self.text_mean_)

        lam, mu, gamma = float(self.lambda_), float(self.mu), float(self.gamma)
        K = int(self.n_atoms)
        # random initial bases (as the authors' code), projected onto the constraint set
        B = project_rows_to_ball(rng.standard_normal((K, p)))
        U = project_rows_to_ball(rng.standard_normal((k, Y.shape[1])))
        R = project_rows_to_ball(rng.standard_normal((K, k)))
        S = lasso_fista(X, B, lam, max_iter=self.lasso_max_iter, tol=self.lasso_tol)
        sg = np.sqrt(gamma)
        history = []
        eye = np.eye(k)
        for _ in range(int(self.max_iter)):
            # A: closed form of  mu ||Y - A U||^2 + gamma ||A - S R||^2
            A = solve(mu * U @ U.T + gamma * eye, (mu * U @ Y.T + gamma * (S @ R).T),
                      assume_a="pos").T
            U = update_dictionary_rows(Y, A, U, n_sweeps=self.dict_sweeps)
            S = lasso_fista(np.hstack([X, sg * A]), np.hstack([B, sg * R]), lam, S0=S,
                            max_iter=self.lasso_max_iter, tol=self.lasso_tol)
            B = update_dictionary_rows(X, S, B, n_sweeps=self.dict_sweeps)
            R = update_dictionary_rows(A, S, R, n_sweeps=self.dict_sweeps)
            history.append(lssh_objective(X, Y, S, B, U, A, R, lambda_=lam, mu=mu, gamma=gamma))
            if len(history) > 1 and settled(history, self.tol):
                break
        else:
            warn_not_converged("LSSH", int(self.max_iter))
        self.objective_, self.n_iter_ = history, len(history)
        self.dictionary_, self.text_basis_, self.latent_map_ = B, U, R
        self.pca_dim_ = p

    # ------------------------------------------------------------------ encoding
    def _project(self, X: np.ndarray, modality: str) -> np.ndarray:
        if modality == "image":
            Z = l2_normalize_rows((X - self.image_mean_) @ self.image_components_)
            S = lasso_fista(Z, self.dictionary_, float(self.lambda_), max_iter=self.lasso_max_iter,
                            tol=self.lasso_tol)
            return S @ self.latent_map_
        Z = l2_normalize_rows(X - self.text_mean_)
        U = self.text_basis_
        gm = float(self.gamma) / float(self.mu)
        return solve(U @ U.T + gm * np.eye(U.shape[0]), U @ Z.T, assume_a="pos").T

    def project_paired(self, image, text) -> np.ndarray:
        """Latent vectors of objects that have *both* modalities (not part of the shared interface).

        The closed form of ``A`` given both: ``(mu U U' + gamma I)^-1 (mu U y + gamma R' s)``. The
        authors' evaluation code hashes the retrieval set (the training pairs) this way, so its
        database codes carry both modalities; ``research/studies/check_lssh_stmh_fsh.py`` uses it to
        reproduce the published protocol. Cross-modal retrieval in :mod:`dmh` encodes one modality.
        """
        image = self._check_X(image, "image")
        text = self._check_X(text, "text")
        if image.shape[0] != text.shape[0]:
            raise DataError(f"image has {image.shape[0]} rows, text {text.shape[0]}: they must be pairs")
        Zi = l2_normalize_rows((image - self.image_mean_) @ self.image_components_)
        S = lasso_fista(Zi, self.dictionary_, float(self.lambda_), max_iter=self.lasso_max_iter,
                        tol=self.lasso_tol)
        Zt = l2_normalize_rows(text - self.text_mean_)
        U = self.text_basis_
        mu, gamma = float(self.mu), float(self.gamma)
        rhs = mu * U @ Zt.T + gamma * (S @ self.latent_map_).T
        return solve(mu * U @ U.T + gamma * np.eye(U.shape[0]), rhs, assume_a="pos").T

    def encode_paired(self, image, text) -> np.ndarray:
        """Codes in {-1, +1} of image-text pairs from both modalities (see :meth:`project_paired`)."""
        return sign_codes(self.project_paired(image, text))

    def _check_X(self, X, modality):
        check_is_fitted(self, "n_bits_")
        return check_features(X, f"{modality} features", n_cols=self.n_features_[modality])

    # ------------------------------------------------------------------ persistence
    _STATE = ("image_mean_", "text_mean_", "image_components_", "dictionary_", "text_basis_",
              "latent_map_")

    def _get_state(self):
        state = {name.rstrip("_"): getattr(self, name) for name in self._STATE}
        state["objective"] = np.asarray(self.objective_, dtype=np.float64)
        return state

    def _state_spec(self):
        return {"image_mean": ("I",), "text_mean": ("T",), "image_components": ("I", "P"),
                "dictionary": ("K", "P"), "text_basis": ("B", "T"), "latent_map": ("K", "B"),
                "objective": (None,)}

    def _set_state(self, state):
        for name in self._STATE:
            setattr(self, name, np.asarray(state[name.rstrip("_")], dtype=np.float64))
        self.objective_ = [float(v) for v in state["objective"]]
        self.pca_dim_ = self.image_components_.shape[1]

    def _extra_meta(self):
        return {"n_iter": self.n_iter_}

    def _set_extra_meta(self, meta):
        self.n_iter_ = int(meta.get("n_iter", 0))
