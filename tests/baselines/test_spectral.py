"""Graph functions of the spectral baselines against naive references."""


import numpy as np

from dmh.baselines import spectral as U


def test_knn_heat_affinity_matches_a_naive_loop():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(25, 3))
    A = U.knn_heat_affinity(X, 3, sigma=0.9).toarray()
    D = np.linalg.norm(X[:, None] - X[None], axis=2)
    naive = np.zeros_like(D)
    for i in range(len(X)):
        for j in np.argsort(D[i])[1:4]:
            naive[i, j] = naive[j, i] = np.exp(-D[i, j] ** 2 / (2 * 0.9**2))
    np.testing.assert_allclose(A, naive, atol=1e-12)
    L = U.laplacian(U.knn_heat_affinity(X, 3)).toarray()
    np.testing.assert_allclose(L.sum(1), 0, atol=1e-12)
    np.testing.assert_allclose(L, L.T)
