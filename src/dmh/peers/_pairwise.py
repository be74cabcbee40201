"""The training procedure DJSRH, JDSH and DGCPN share: two hash networks trained jointly with SGD
(momentum 0.9, weight decay 5e-4) on minibatches of paired objects, each batch's codes made to
reconstruct a batch similarity matrix ``S`` built from the raw features, and the ``tanh(alpha * h)``
continuation with ``alpha = sqrt(epoch + 1)`` (DJSRH's ``set_alpha``, kept by JDSH and DGCPN).

Subclasses give the similarity (``_setup`` once per fit, ``_batch_similarity`` per batch) and the
loss (``_loss``). This module does not import PyTorch at import time.
"""

from __future__ import annotations

import math
import time
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning

from ..data import CrossModalData
from ._nets import ScaledNetsHasher

__all__ = ["PairwiseDeepPeer"]


class PairwiseDeepPeer(ScaledNetsHasher):
    """Common fitting, encoding and saving of the similarity-reconstruction peers.

    Trains on the **paired** objects only (``uses_unpaired = False``): image-only and text-only
    objects of semi-paired data are ignored, as in the papers, which assume full pairing.
    """

    uses_unpaired = False
    min_paired = 2

    # ------------------------------------------------------------------ to override
    def _check_method_params(self) -> None:
        """Validate the method's own hyperparameters (raise ParameterError)."""

    def _setup(self, Fi: np.ndarray, Ft: np.ndarray, rng: np.random.Generator) -> None:
        """Once per fit, with the raw paired features (e.g. a graph over all training objects)."""

    def _batch_similarity(self, Fi: np.ndarray, Ft: np.ndarray, idx: np.ndarray) -> np.ndarray:
        raise NotImplementedError  # pragma: no cover - abstract

    def _loss(self, hi, ht, S):
        raise NotImplementedError  # pragma: no cover - abstract

    # ------------------------------------------------------------------ common
    def _check_common_params(self) -> dict:
        from . import _deep

        return {
            "epochs": _deep.check_int(self, "epochs", 1),
            "batch_size": _deep.check_int(self, "batch_size", 2),
            "image_lr": _deep.check_float(self, "image_lr", 0.0, low_open=True),
            "text_lr": _deep.check_float(self, "text_lr", 0.0, low_open=True),
            "momentum": _deep.check_float(self, "momentum", 0.0, 1.0, high_open=True),
            "weight_decay": _deep.check_float(self, "weight_decay", 0.0),
            "image_hidden": _deep.check_hidden(self, "image_hidden"),
            "text_hidden": _deep.check_hidden(self, "text_hidden"),
            "tol": _deep.check_float(self, "tol", 0.0),
            "patience": _deep.check_int(self, "patience", 1),
            "input_scaling": _deep.check_input_scaling(self),
            "device": _deep.check_device(self),
        }

    def _check_params(self) -> dict:
        """Every hyperparameter (the shared ones, returned, and the method's own)."""
        p = self._check_common_params()
        self._check_method_params()
        return p

    def _fit(self, data: CrossModalData) -> None:
        import torch

        from . import _deep

        p = self._check_params()
        rng = np.random.default_rng(self.random_state)
        device = _deep.resolve_device(p["device"])
        paired = data.paired_mask
        Fi = np.asarray(data.image[paired], dtype=np.float64)
        Ft = np.asarray(data.text[paired], dtype=np.float64)
        n = Fi.shape[0]
        self.n_train_ = n
        self.scalers_ = _deep.fit_scalers({"image": Fi, "text": Ft}, p["input_scaling"])
        Xi = torch.as_tensor(_deep.apply_scaler(Fi, self.scalers_["image"]), dtype=torch.float32, device=device)
        Xt = torch.as_tensor(_deep.apply_scaler(Ft, self.scalers_["text"]), dtype=torch.float32, device=device)
        self._setup(Fi, Ft, rng)
        seed = _deep.torch_seed(rng)
        hidden = {"image": p["image_hidden"], "text": p["text_hidden"]}
        nets = _deep.make_nets({"image": Fi.shape[1], "text": Ft.shape[1]}, hidden, self.n_bits_, seed, device)
        opts = {
            m: torch.optim.SGD(nets[m].parameters(), lr=p[f"{m}_lr"], momentum=p["momentum"],
                               weight_decay=p["weight_decay"])
            for m in ("image", "text")
        }
        gen = torch.Generator().manual_seed(seed + 1)
        history = []
        best = math.inf
        stale = 0
        t0 = time.perf_counter()
        converged = False
        for epoch in range(p["epochs"]):
            alpha = math.sqrt(epoch + 1.0)
            for net in nets.values():
                net.train()
                net.alpha = alpha
            total, count = 0.0, 0
            for idx_t in _deep.minibatches(n, p["batch_size"], gen):
                idx = idx_t.numpy()
                S = torch.as_tensor(self._batch_similarity(Fi, Ft, idx), dtype=torch.float32, device=device)
                idx_d = idx_t.to(device)
                hi = nets["image"](Xi[idx_d])
                ht = nets["text"](Xt[idx_d])
                loss = self._loss(hi, ht, S)
                for opt in opts.values():
                    opt.zero_grad()
                loss.backward()
                for opt in opts.values():
                    opt.step()
                total += float(loss.detach()) * len(idx)
                count += len(idx)
            epoch_loss = _deep.check_loss(total / count, type(self).__name__, epoch)
            history.append(epoch_loss)
            # label-free stopping rule on the training objective
            if epoch_loss < best * (1.0 - p["tol"]):
                best = epoch_loss
                stale = 0
            else:
                stale += 1
            if p["tol"] > 0 and stale >= p["patience"]:
                converged = True
                break
        if p["tol"] > 0 and not converged:
            warnings.warn(
                f"{type(self).__name__} reached epochs={p['epochs']} before its training loss stopped "
                f"improving by tol={p['tol']} over {p['patience']} epochs",
                ConvergenceWarning, stacklevel=3,
            )
        for net in nets.values():
            net.eval()
        self.nets_ = {m: net.to("cpu") for m, net in nets.items()}
        self.loss_history_ = np.asarray(history)
        self.n_iter_ = len(history)
        self.fit_time_ = time.perf_counter() - t0

