"""The training loop of the deep peers that learn from paired objects: DJSRH, JDSH, DGCPN and UCCH.

:class:`PairedNetsPeer` fits one network per modality on the **paired** objects (image-only and
text-only objects of semi-paired data are ignored, as in the papers, which assume full pairing):
epochs of shuffled minibatches (the last incomplete batch dropped where the authors' loaders drop
it), the epoch's mean training loss recorded in ``loss_history_``, and an optional label-free stop on
it (``tol``, ``patience``). A method declares its hyperparameters (``_parameter_constraints``) and
gives its optimisers and other training state (``_begin``) and one minibatch's update (``_train_batch``).

:class:`SimilarityPeer` is DJSRH, JDSH and DGCPN, whose codes reconstruct a similarity matrix ``S``
built from the raw features: two SGD optimisers (momentum, weight decay) stepped on each batch,
outputs ``tanh(alpha h)`` with DJSRH's continuation ``alpha = sqrt(epoch + 1)`` (``_alpha``; DGCPN
keeps ``alpha = 1``), per batch ``S`` (``_batch_similarity``) and a loss (``_loss``); ``_update`` (one
joint step) is where DGCPN puts its three steps.

This module does not import PyTorch at import time.
"""

from __future__ import annotations

import math
import numbers
import time
import warnings
from types import SimpleNamespace

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from .._validation import NON_NEGATIVE, POSITIVE, POSITIVE_INT, Interval, check_random_state
from ..data import CrossModalData
from ._nets import ScaledNetsHasher

__all__ = ["PairedNetsPeer", "SimilarityPeer"]


class PairedNetsPeer(ScaledNetsHasher):
    """Fitting of two networks on the paired objects; subclasses give the update (see the module)."""

    _parameter_constraints = {
        **ScaledNetsHasher._parameter_constraints,
        "epochs": [POSITIVE_INT], "batch_size": [Interval(numbers.Integral, 2, None)],
    }

    uses_unpaired = False
    min_paired = 2
    #: drop the last incomplete minibatch of an epoch (DJSRH's, JDSH's and UCCH's loaders do)
    _drop_last = True

    # ------------------------------------------------------------------ to override
    def _setup(self, Fi: np.ndarray, Ft: np.ndarray, rng: np.random.Generator) -> None:
        """Once per fit, with the raw paired features (e.g. a graph over all training objects)."""

    def _hash_init_std(self) -> dict | None:
        """``{modality: std}`` of a hash layer drawn from ``N(0, std^2)`` (DGCPN's text network)."""
        return None

    def _begin(self, run: SimpleNamespace) -> None:
        """Optimisers and other training state, kept on ``run``."""

    def _begin_epoch(self, run: SimpleNamespace) -> None:
        """Before the epoch ``run.epoch`` (0-based)."""

    def _train_batch(self, run: SimpleNamespace, idx) -> float:  # pragma: no cover - abstract
        """One minibatch (``idx``: a CPU tensor of row numbers); returns its training loss."""
        raise NotImplementedError

    def _end_epoch(self, run: SimpleNamespace) -> None:
        """After the epoch ``run.epoch``."""

    def _end(self) -> None:
        """After the fit, also when it fails (drop what is not part of the model)."""

    # ------------------------------------------------------------------ common
    def _fit(self, data: CrossModalData) -> None:
        import torch

        from . import _deep

        rng = check_random_state(self.random_state)
        device = _deep.resolve_device(self.device)
        paired = data.paired_mask
        Fi = np.asarray(data.image[paired], dtype=np.float64)
        Ft = np.asarray(data.text[paired], dtype=np.float64)
        n = Fi.shape[0]
        self.n_train_ = n
        self.scalers_ = _deep.fit_scalers({"image": Fi, "text": Ft}, self.input_scaling)
        X = {m: torch.as_tensor(_deep.apply_scaler(F_, self.scalers_[m]), dtype=torch.float32, device=device)
             for m, F_ in (("image", Fi), ("text", Ft))}
        try:
            self._setup(Fi, Ft, rng)
            seed = _deep.torch_seed(rng)
            nets = _deep.make_nets(
                {"image": Fi.shape[1], "text": Ft.shape[1]}, self._hidden(), self.n_bits_, seed, device,
                normalise=self._normalised_nets, dropout=float(getattr(self, "dropout", 0.0)),
                hash_init_std=self._hash_init_std(),
            )
            for m, net in nets.items():
                net.use_sparse_input(_deep.is_sparse(X[m]))
            run = SimpleNamespace(nets=nets, X=X, Fi=Fi, Ft=Ft, device=device,
                                  gen=torch.Generator().manual_seed(seed + 1), epoch=0)
            self._begin(run)
            # dropout draws from torch's global generator: seeded here, the caller's state restored after
            cuda = [device.index or 0] if device.type == "cuda" else []
            with torch.random.fork_rng(devices=cuda):
                torch.manual_seed(seed + 2)
                history, converged = self._train(run, n)
        finally:
            self._end()
        tol = self._stop_rule()[0]
        if tol > 0 and not converged:
            warnings.warn(
                f"{type(self).__name__} reached epochs={self.epochs} before its training loss stopped "
                f"improving by tol={tol} over {self.patience} epochs",
                ConvergenceWarning, stacklevel=4,
            )
        for net in nets.values():
            net.use_sparse_input(False)
            net.eval()
        self.nets_ = {m: net.to("cpu") for m, net in nets.items()}
        self.loss_history_ = np.asarray(history)
        self.n_iter_ = len(history)

    def _stop_rule(self) -> tuple[float, int]:
        """``(tol, patience)`` of the label-free stop on the training loss (``tol=0``: none)."""
        return float(getattr(self, "tol", 0.0)), int(getattr(self, "patience", 1))

    def _train(self, run: SimpleNamespace, n: int) -> tuple[list, bool]:
        from . import _deep

        tol, patience = self._stop_rule()
        history: list[float] = []
        best, stale = math.inf, 0
        t0 = time.perf_counter()
        for epoch in range(int(self.epochs)):
            run.epoch = epoch
            self._begin_epoch(run)
            for net in run.nets.values():
                net.train()
            total, count = 0.0, 0
            for idx in _deep.minibatches(n, int(self.batch_size), run.gen, drop_last=self._drop_last):
                total += self._train_batch(run, idx) * len(idx)
                count += len(idx)
            self._end_epoch(run)
            epoch_loss = _deep.check_loss(total / count, type(self).__name__, epoch)
            history.append(epoch_loss)
            # label-free stopping rule on the training objective
            if epoch_loss < best * (1.0 - tol):
                best, stale = epoch_loss, 0
            else:
                stale += 1
            if tol > 0 and stale >= patience:
                self.fit_time_ = time.perf_counter() - t0
                return history, True
        self.fit_time_ = time.perf_counter() - t0
        return history, False


class SimilarityPeer(PairedNetsPeer):
    """DJSRH, JDSH and DGCPN: SGD on the reconstruction of a batch similarity ``S`` (see the module)."""

    _parameter_constraints = {
        **PairedNetsPeer._parameter_constraints,
        "image_lr": [POSITIVE], "text_lr": [POSITIVE], "momentum": [Interval(numbers.Real, 0, 1, closed="left")],
        "weight_decay": [NON_NEGATIVE], "tol": [NON_NEGATIVE], "patience": [POSITIVE_INT],
    }

    # ------------------------------------------------------------------ to override
    def _batch_similarity(self, Fi: np.ndarray, Ft: np.ndarray, idx: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - abstract

    def _loss(self, hi, ht, S):
        raise NotImplementedError  # pragma: no cover - abstract

    def _alpha(self, epoch: int) -> float:
        """Scale of the ``tanh`` outputs in the (0-based) ``epoch``: DJSRH's ``sqrt(epoch + 1)``."""
        return math.sqrt(epoch + 1.0)

    def _update(self, run: SimpleNamespace, xi, xt, S) -> float:
        """One joint step of both networks on ``_loss``; returns the loss."""
        loss = self._loss(run.nets["image"](xi), run.nets["text"](xt), S)
        for opt in run.opts.values():
            opt.zero_grad()
        loss.backward()
        for opt in run.opts.values():
            opt.step()
        return float(loss.detach())

    # ------------------------------------------------------------------ common
    def _begin(self, run):
        import torch

        run.opts = {
            m: torch.optim.SGD(run.nets[m].parameters(), lr=float(getattr(self, f"{m}_lr")),
                               momentum=float(self.momentum), weight_decay=float(self.weight_decay), fused=True)
            for m in ("image", "text")
        }

    def _begin_epoch(self, run):
        alpha = self._alpha(run.epoch)
        for net in run.nets.values():
            net.alpha = alpha

    def _train_batch(self, run, idx):
        import torch

        S = torch.as_tensor(self._batch_similarity(run.Fi, run.Ft, idx.numpy()), dtype=torch.float32,
                            device=run.device)
        idx_d = idx.to(run.device)
        return self._update(run, run.X["image"][idx_d], run.X["text"][idx_d], S)
