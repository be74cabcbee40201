"""Semi-paired asymmetric deep cross-modal hashing (SADCH), **reconstructed**: Y. Wang, X. Shen, Z.
Tang, T. Zhang and J. Lv, "Semi-Paired Asymmetric Deep Cross-Modal Hashing Learning", IEEE Access 8,
2020.

What the paper states (its abstract; the full text and any code were not available to us): SADCH is
an unsupervised, asymmetric, end-to-end deep model for semi-paired data; it trains the deep networks
on *query points* sampled from the data and *directly learns the hash codes of the database*; its
similarity matrix comes from a *cross-view graph* built so that the similarities of paired and
unpaired points are both preserved; deep features and the graph similarity are used jointly.

What we implemented, and why:

* **Asymmetric objective** from ADSH (Q.-Y. Jiang and W.-J. Li, "Asymmetric Deep Supervised Hashing",
  AAAI 2018), the asymmetric deep hashing framework that trains networks on sampled query points and
  learns database codes directly, which is what the abstract describes. With one code ``b_j`` per
  training object (paired, image-only or text-only), query sets ``Omega_v`` sampled per view ``v``
  from the objects that have it, and ``u_i = tanh(f_v(x_i))``::

      min_{B, f_I, f_T}  sum_v sum_{i in Omega_v} [ sum_j (u_i^T b_j - c S_ij)^2 + gamma ||b_i - u_i||^2 ]

  alternating ``T_in`` epochs of the networks on their query points with a closed-form discrete
  cyclic coordinate descent of ``B`` (column ``k``: ``B_k = -sign(2 B_~k V_~k,k + Q_k)``, ``V = sum_v
  U_v^T U_v``, ``Q = -2c sum_v S_v^T U_v - 2 gamma sum_v U_v-bar``; :func:`update_codes`).
* **Cross-view graph** (:func:`cross_view_similarity`, our choice): each view's ``k``-nearest-neighbour
  graph (cosine on the raw features) over the objects that have that view; a paired object is one
  node in both graphs, so it joins them. ``A`` = the union of both graphs' symmetrised edges plus
  self-loops, and ``S = cos(A_i, A_j)`` in [0, 1] (shared-neighbour coherence): two objects are
  similar when their neighbourhoods overlap, which links an image-only and a text-only object through
  paired objects in both of their neighbourhoods; objects with disjoint neighbourhoods get target 0
  (orthogonal codes). ADSH's supervised ``S`` is in {-1, +1}; mapping ours to ``2 S - 1`` made almost
  every target -1 and the codes collapsed (MAP at chance on Wikipedia), so the [0, 1] form is kept.
* Defaults: ``gamma`` 200, 2000 query points per view, ``T_in`` 3 epochs, batch 64 (ADSH's values);
  ``T_out`` 10 outer iterations (ADSH: 50; reduced for CPU time); ``k`` 10 neighbours, Adam lr 1e-3,
  MLPs with one hidden layer of 512 (our choices).

The MAP of this class measures this reconstruction, not the published SADCH. ``encode`` uses the
networks for every object (the learned training codes are kept as ``codes_``), so queries and
databases are encoded alike, as for every method of the package.
"""

from __future__ import annotations

import time

import numpy as np
from scipy import sparse

from .._validation import NON_NEGATIVE, POSITIVE, POSITIVE_INT, check_random_state
from ..base import sign_codes, store_init_args
from ..data import CrossModalData
from ._nets import ScaledNetsHasher
from .djsrh import cosine_similarity

__all__ = ["SADCH", "cross_view_similarity", "knn_adjacency", "update_codes"]


def knn_adjacency(F: np.ndarray, k: int) -> sparse.csr_matrix:
    """Symmetrised 0/1 ``k``-nearest-neighbour graph (cosine, self excluded) of the rows of ``F``."""
    n = F.shape[0]
    k = min(k, n - 1)
    if k < 1:
        return sparse.csr_matrix((n, n))
    S = cosine_similarity(F)
    np.fill_diagonal(S, -np.inf)
    nbrs = np.argsort(-S, axis=1, kind="stable")[:, :k]
    rows = np.repeat(np.arange(n), k)
    A = sparse.csr_matrix((np.ones(n * k), (rows, nbrs.ravel())), shape=(n, n))
    return ((A + A.T) > 0).astype(np.float64).tocsr()


def cross_view_similarity(image: np.ndarray, text: np.ndarray, image_mask: np.ndarray,
                          text_mask: np.ndarray, k: int) -> np.ndarray:
    """The cross-view graph similarity ``S = cos(A_i, A_j)`` over all objects (see the module docstring)."""
    n = len(image_mask)
    A = sparse.identity(n, format="csr")
    for F, mask in ((image, image_mask), (text, text_mask)):
        idx = np.flatnonzero(mask)
        G = knn_adjacency(np.asarray(F)[idx], k).tocoo()
        A = A + sparse.csr_matrix((G.data, (idx[G.row], idx[G.col])), shape=(n, n))
    A = (A > 0).astype(np.float64).toarray()
    return cosine_similarity(A)


def update_codes(B: np.ndarray, U_list, S_list, idx_list, gamma: float) -> np.ndarray:
    """ADSH's discrete cyclic coordinate descent over the columns of ``B`` (n x c, in {-1, +1})."""
    n, c = B.shape
    V = np.zeros((c, c))
    Q = np.zeros((n, c))
    for U, S, idx in zip(U_list, S_list, idx_list, strict=True):
        V += U.T @ U
        Q += -2.0 * c * (S.T @ U)
        Q[idx] += -2.0 * gamma * U
    B = B.astype(np.float64).copy()
    for k in range(c):
        rest = np.arange(c) != k
        B[:, k] = np.where(-(2.0 * B[:, rest] @ V[rest, k] + Q[:, k]) > 0, 1.0, -1.0)
    return B


def asymmetric_objective(B, U_list, S_list, idx_list, gamma: float) -> float:
    """The objective (summed over views) for given outputs and codes."""
    c = B.shape[1]
    total = 0.0
    for U, S, idx in zip(U_list, S_list, idx_list, strict=True):
        total += float(((U @ B.T - c * S) ** 2).sum() + gamma * ((B[idx] - U) ** 2).sum())
    return total


class SADCH(ScaledNetsHasher):
    """SADCH (Wang et al., IEEE Access 2020) as reconstructed here (see the module docstring);
    uses the unpaired objects of semi-paired data.

    Parameters
    ----------
    n_bits : int
    n_neighbours : int [10; our choice]
        ``k`` of each view's nearest-neighbour graph.
    gamma : float [200; ADSH]
    n_query : int [2000; ADSH]
        Query points sampled per view and outer iteration (all of them when fewer).
    outer_iter : int [10; ADSH: 50]
    inner_epochs : int [3; ADSH]
    batch_size : int [64; ADSH]
    lr : float [1e-3; our choice]
        Adam learning rate of both networks.
    image_hidden, text_hidden : tuple of int [(512,), (512,)]
    input_scaling : {"none", "feature"} ["feature": the reconstruction was developed on z-scored inputs]
        How the networks see their inputs: z-scored per feature with the training statistics, or as given.
    device : {"cpu", "cuda", "auto"}
    random_state : int, Generator or None

    Attributes
    ----------
    codes_ : int8 array (n_train, n_bits)
        The learned codes of the training objects.
    objective_history_ : array (n_iter_,)
        The objective after each outer iteration's code update (sampled query points).
    loss_history_ : array
        Mean network loss per inner epoch.
    nets_, scalers_, n_iter_
    """

    _parameter_constraints = {
        **ScaledNetsHasher._parameter_constraints,
        **dict.fromkeys(("n_neighbours", "n_query", "outer_iter", "inner_epochs", "batch_size"), [POSITIVE_INT]),
        "gamma": [NON_NEGATIVE], "lr": [POSITIVE],
    }

    method_name = "sadch"
    #: a cell key without ``input_scaling`` is one that ran with per-feature z-scoring: left out at that value

    uses_unpaired = True
    min_paired = 2

    def __init__(self, n_bits=64, *, n_neighbours=10, gamma=200.0, n_query=2000, outer_iter=10, inner_epochs=3,
                 batch_size=64, lr=1e-3, image_hidden=(512,), text_hidden=(512,), input_scaling="feature",
                 device="cpu", random_state=None):
        store_init_args(self, locals())

    def _fit(self, data: CrossModalData) -> None:
        import torch

        from . import _deep

        rng = check_random_state(self.random_state)
        device = _deep.resolve_device(self.device)
        gamma, n_query, batch_size = float(self.gamma), int(self.n_query), int(self.batch_size)
        masks = {"image": data.image_mask, "text": data.text_mask}
        raw = {"image": np.asarray(data.image, dtype=np.float64), "text": np.asarray(data.text, dtype=np.float64)}
        n = data.n_objects
        c = self.n_bits_
        self.scalers_ = _deep.fit_scalers({m: raw[m][masks[m]] for m in masks}, self.input_scaling)
        X = {m: torch.as_tensor(_deep.apply_scaler(raw[m], self.scalers_[m]), dtype=torch.float32, device=device)
             for m in masks}
        S = cross_view_similarity(raw["image"], raw["text"], masks["image"], masks["text"], int(self.n_neighbours))
        seed = _deep.torch_seed(rng)
        nets = _deep.make_nets({m: raw[m].shape[1] for m in masks}, self._hidden(), c, seed, device)
        opts = {m: torch.optim.Adam(nets[m].parameters(), lr=float(self.lr)) for m in masks}
        gen = torch.Generator().manual_seed(seed + 1)
        B = np.where(rng.standard_normal((n, c)) > 0, 1.0, -1.0)
        S_t = torch.as_tensor(S, dtype=torch.float32, device=device)
        objective, losses = [], []
        t0 = time.perf_counter()
        for _ in range(int(self.outer_iter)):
            B_t = torch.as_tensor(B, dtype=torch.float32, device=device)
            U_list, S_list, idx_list = [], [], []
            for m in ("image", "text"):
                have = np.flatnonzero(masks[m])
                omega = np.sort(rng.choice(have, size=min(n_query, have.size), replace=False))
                omega_t = torch.as_tensor(omega, device=device)
                nets[m].train()
                for _epoch in range(int(self.inner_epochs)):
                    total = 0.0
                    for b in _deep.minibatches(omega.size, batch_size, gen, drop_last=False):
                        rows = omega_t[b.to(device)]
                        u = nets[m](X[m][rows])
                        loss = (((u @ B_t.T - c * S_t[rows]) ** 2).sum()
                                + gamma * ((B_t[rows] - u) ** 2).sum()) / (n * omega.size)
                        opts[m].zero_grad()
                        loss.backward()
                        opts[m].step()
                        total += float(loss.detach())
                    losses.append(_deep.check_loss(total, "SADCH", len(losses)))
                nets[m].eval()
                with torch.no_grad():
                    U_list.append(nets[m](X[m][omega_t]).cpu().numpy().astype(np.float64))
                S_list.append(S[omega])
                idx_list.append(omega)
            B = update_codes(B, U_list, S_list, idx_list, gamma)
            objective.append(asymmetric_objective(B, U_list, S_list, idx_list, gamma))
        self.nets_ = {m: net.to("cpu") for m, net in nets.items()}
        self.codes_ = sign_codes(B)
        self.objective_history_ = np.asarray(objective)
        self.loss_history_ = np.asarray(losses)
        self.n_iter_ = int(self.outer_iter)
        self.fit_time_ = time.perf_counter() - t0

    def _get_state(self):
        state = super()._get_state()
        state["codes"] = self.codes_
        state["objective_history"] = self.objective_history_
        return state

    def _set_state(self, state):
        super()._set_state(state)
        self.codes_ = np.asarray(state["codes"]).astype(np.int8)
        self.objective_history_ = np.asarray(state["objective_history"])
        self.n_iter_ = len(self.objective_history_)
