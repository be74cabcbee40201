"""LSSH: norm constraints, its objective against the definition, paired codes."""

from __future__ import annotations

import numpy as np
import pytest

from dmh.baselines.lssh import lssh_objective

from .paired_toys import N_BITS, _fit, _toy


def test_lssh_norm_constraints_and_objective(fitted):
    m = fitted["lssh"]
    for name in ("dictionary_", "text_basis_", "latent_map_"):
        assert np.linalg.norm(getattr(m, name), axis=1).max() <= 1.0 + 1e-9, name
    # PCA basis is orthonormal, and its size is capped by the number of bits
    P = m.image_components_
    assert P.shape == (10, N_BITS)
    np.testing.assert_allclose(P.T @ P, np.eye(N_BITS), atol=1e-10)


def test_lssh_objective_matches_definition():
    rng = np.random.default_rng(0)
    X, Y = rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    S, B = rng.normal(size=(6, 5)), rng.normal(size=(5, 4))
    U, A, R = rng.normal(size=(2, 3)), rng.normal(size=(6, 2)), rng.normal(size=(5, 2))
    naive = 0.0
    for i in range(6):
        naive += np.sum((X[i] - S[i] @ B) ** 2) + 0.3 * np.abs(S[i]).sum()
        naive += 0.5 * np.sum((Y[i] - A[i] @ U) ** 2) + 2.0 * np.sum((A[i] - S[i] @ R) ** 2)
    got = lssh_objective(X, Y, S, B, U, A, R, lambda_=0.3, mu=0.5, gamma=2.0)
    assert got == pytest.approx(naive)


def test_lssh_paired_codes():
    m = _fit("lssh")
    data = _toy(seed=5, n=12)
    codes = m.encode_paired(data.image, data.text)
    assert codes.shape == (12, N_BITS) and set(np.unique(codes)) <= {-1, 1}
    with pytest.raises(ValueError, match="pairs"):
        m.encode_paired(data.image[:5], data.text)
