"""Deep Manifold Hashing (Shi et al.): CLE -> GBE -> DAM, alternated for ``n_rounds`` rounds.

See ``docs/method.md`` for every choice made where the paper is silent, and the module docstrings
of :mod:`dmh.methods.cle`, :mod:`dmh.methods.gbe` and :mod:`dmh.methods.dam` for the details.
"""

from __future__ import annotations

import time
from functools import partial

import numpy as np

from .._memory import release_free_memory
from ..base import BaseHasher, store_init_args
from ..data import CrossModalData
from . import cle as cle_mod
from . import unpaired
from .dmh_options import (  # noqa: F401 - the options' names, as dmh.methods.dmh has always given them
    FIT_MEMORY_BASE,
    GAMMA_REFERENCE_BITS,
    GBE_WARM_LR,
    GBE_WARM_STEPS,
    PRESETS,
    REMOVED_OPTIONS,
    SPARSE_ZERO_SHARE,
    DMHOptions,
    fit_memory_bytes,
    native_bf16,
    resolve_device,
    sparse_view,
)

__all__ = ["DMH", "PRESETS"]


class DMH(DMHOptions, BaseHasher):
    """Deep Manifold Hashing for semi-paired, unlabeled image-text data.

    Parameters (paper defaults in brackets)
    ----------
    n_bits : int
        Code length ``c``.
    d : int [512]
        Dimension of the modality-invariant features Y (CLE).
    k : int [3]
        Neighbours per object in CLE.
    lambda_ : float [0.1]
        Weight of the local-consistency term of Eq. 6.
    eta : float [0.01]
        Weight of the ``||Y||^2`` regulariser of Eq. 6.
    gamma : float [0.01]
        Weight of the quantisation loss of Eq. 11 (see ``quantization``).
    n_rounds : int [3]
        Outer rounds of CLE -> GBE -> DAM (the paper reports stability after 3). ``2`` fits in about
        0.7-0.8 of the time for MAP 0.003 lower on average (docs/quality.md: an option, not the
        default).
    hidden_size : int [4096]
        Width of the hidden layer of imgNet and txtNet; it becomes ``z^v`` for the next CLE round.
    image_lr, text_lr : float [10**-4.5, 10**-3.5]
        Adam learning rates of imgNet and txtNet.
    batch_size : int [128]
        Mini-batch size of DAM.
    dam_epochs : int
        Passes over the data per network and round (the paper gives no number); the most passes
        under ``dam_stop="agreement"`` or ``dam_agree_target``.
    dam_stop : {"fixed", "agreement"} or None
        ``"fixed"`` (the paper preset): ``dam_epochs`` passes in every round. ``"agreement"`` (the
        default preset): the first round (networks trained from scratch) still makes
        ``dam_epochs`` passes; in later rounds, where each network starts from the previous round's
        weights and GBE's new codes barely differ from the old, it stops after the first pass that
        raises its bit agreement with the codes (on its training batches) by less than
        ``dam_agree_tol``, or that already brings it back within ``dam_agree_tol`` of the agreement
        it had reached in the previous round (at most ``dam_epochs`` passes; no labels used).
        ``None``: the preset's.
    dam_agree_tol : float [0.001]
        Tolerance of ``dam_stop="agreement"``, as a fraction of the target bits.
    dam_agree_target : float or None
        A network's training in a round also stops after the first pass whose bit agreement with
        GBE's codes (on its training batches) reaches this level (``None``: no such stop; the paper
        preset's). The default preset's 0.995: the networks copy 99.5% of the codes' bits before the
        agreement rule's 0.001 a pass would stop them (docs/speed.md).
    dam_last_epochs : int or None
        The most passes of the last round's networks, where they should differ from
        ``dam_epochs``: the last round's networks are the ones that encode, the earlier rounds'
        only give the next round its features and start. ``None``: ``dam_epochs``.
    dam_first_target : float or None
        The first round's agreement target (networks trained from scratch), where it should differ
        from ``dam_agree_target``: the first round's networks only give the next round's CLE its
        features and the next round's training its start. ``None``: ``dam_agree_target``.
    dam_lean : bool or None
        Train with cheaper kernels for the same networks: txtNet's first layer skips the gradient
        of the raw text input (only the pooled channels' is needed; autograd computed and dropped a
        batch x hidden x text-dim product per step), and LRN sums its window by shifted copies
        instead of average pooling (see :attr:`dmh.methods.dam.HashNet.lean`); a network whose
        training input is its columns' base values plus a few entries (at most 5% of them differ:
        a standardised bag of words) trains from those entries alone (``HashNet.use_sparse_input``;
        txtNet on the shared fashion set: about 4x fewer seconds a pass). Same model, same
        saved state, results equal up to floating-point rounding. ``None``: the preset's (off in
        ``"paper"``, whose codes stay bit for bit those of before).
    use_unpaired : bool
        ``False``: fit on the paired objects alone, the image-only and text-only ones dropped
        (what ``dmh evaluate --training pairs-only`` does to the data, as a parameter, so that
        ``dmh tune`` can compare the two on held-out pairs). Default ``True``: every object.
    dam_contrastive : float
        Weight of a cross-modal contrastive term in DAM (default 0: none, as in the paper): each
        network, beside copying GBE's codes for every object it trains on, is trained to pick each
        paired object's partner among its batch's partners by cosine similarity of its outputs
        to the other network's (InfoNCE at temperature 0.2, the other network's outputs of its
        last training fixed as targets; the image network's first round has no partner yet).
        The unpaired objects still count through the codes. An option to measure (docs/quality.md),
        not a default.
    dam_precision : {"float32", "bfloat16", "auto"}
        Precision of the hash networks' largest products in training: the first hidden layer's
        forward product and weight gradient (imgNet's 4096 x 4096 layer is most of DAM's time).
        ``"float32"`` (default, and what every documented result ran with). ``"bfloat16"``: those
        products in bfloat16, everything else float32 (weights, Adam, the other layers, and every
        output computed after training: refreshed features, codes, encoding); on a CPU that
        multiplies bfloat16 natively (AVX512-BF16 or AMX) or a GPU about 4x faster products, on
        other CPUs emulated and slower. Different rounding, so different codes (MAP measured in
        docs/speed.md). ``"auto"``: ``"bfloat16"`` where the fitting device multiplies it natively
        (:func:`native_bf16`), else ``"float32"``; ``dam_precision_`` says which ran.
    complement : {"lle", "zero"}
        Complement missing descriptions by Eq. 5 (DMH) or with zeros (DMH-ZERO ablation).
    binary_embedding : {"gbe", "pca"}
        GBE (DMH) or sign of the top principal components of Y (DMH-PCA ablation).
    refresh_features : bool
        Refresh ``z^v`` from the DAM hidden layers after each round (DMH); False keeps the input
        features (DMH-FIX ablation).
    similarity : {"clip", "shift", "raw", "perplexity"} or None
        How S^Y (Eq. 7) stays a distribution when inner products are negative ("clip", the paper
        preset), or ``"perplexity"``: t-SNE's sparse, neighbour-calibrated P over Euclidean
        distances of Y. ``None``: the preset's.
    quantization : {"mean", "sum"}
        Scale of the quantisation term: per object (default) or summed as printed in Eq. 11.
    q_update : {"procrustes", "paper"}; y_update : {"exact", "jacobi"}
        CLE update rules (see :mod:`dmh.methods.cle`).
    gbe_init : {"pca", "projection", "random"}
        Initial relaxed codes of the first round; later rounds warm-start from the previous one
        (see :func:`dmh.methods.gbe.init_codes` and docs/method.md).
    cle_max_iter, cle_tol, neighbour_pool, w_reg, chunk_size
        Solver settings.
    gbe_lr, gbe_max_iter, gbe_tol : float, int, float or None
        GBE's Adam step on the relaxed codes, its most steps and the relative change of the loss
        (checked every 10 steps) at which it stops; ``None``: the preset's (``"paper"``: 0.05, 150,
        1e-5; ``"default"``: 0.5, 80, 5e-4).
    gbe_schedule : {"constant", "cosine"} or None
        GBE's step size: ``gbe_lr`` throughout (the paper preset) or decaying from ``gbe_lr`` to zero
        over ``gbe_max_iter`` steps along a half cosine (the default preset), where the rounds that
        warm-start from the previous round's codes begin at :data:`GBE_WARM_LR` of the step and get
        :data:`GBE_WARM_STEPS` of the budget (docs/method.md). ``None``: the preset's.
    cle_gram : bool or None
        Hold a CLE view with more features than objects (the networks' 4096-d features from the
        second round on) by its Gram matrix: the same iterates up to rounding, a fraction of the
        work (:mod:`dmh.methods.cle_gram`). ``None``: the preset's (off in ``"paper"``, whose codes
        stay bit for bit).
    gbe_solver : {"auto", "exact", "approx"}
        GBE's gradient over all n^2 pairs (``"exact"``) or its O(n k) estimate from each object's
        nearest neighbours of S^Y (for ``similarity="perplexity"`` the nonzeros of P) plus
        sampled pairs (``"approx"``); ``"auto"`` switches to ``"approx"`` from
        :data:`dmh.methods.gbe.APPROX_MIN_N` (10,000) training objects on.
    device : {"auto", "cpu", "cuda"}
        Where GBE and DAM run (``"auto"``: CUDA when available). CLE and all randomness stay on the
        CPU; the fitted networks are moved back to the CPU, so encoding and saving need no GPU.
    preset : {"default", "paper"}
        Where the options below take their value when left as ``None`` (see :data:`PRESETS`):
        ``"paper"`` reproduces the paper's method as implemented before these options (same codes
        for the same seed).
    perplexity : float or None
        Perplexity of S^Y when ``similarity="perplexity"``.
    gamma_scaling : {"none", "bits"} or None
        ``"bits"`` weighs GBE's quantization loss by ``gamma * 16 / n_bits`` instead of ``gamma``.
        The KL term's gradient per code entry shrinks about as ``1 / n_bits`` (the Student-t
        kernel of longer codes' larger distances) while the quantization term's stays the same, so
        at a fixed ``gamma`` the pull towards +-1 outweighs the embedding more the longer the codes
        (at the start of GBE 0.14 of the KL gradient at 16 bits, 0.81 at 128 on UCI digits);
        ``"bits"`` keeps the paper's 16-bit balance at every length. ``"none"``: the paper.
    cle_dtype : {"auto", "float64", "float32"} or None
        Precision of CLE's n x d arrays (the scaled views, Y, the conjugate-gradient vectors; sums
        and small matrices stay float64). ``"float32"`` halves CLE's memory, the largest part of a
        fit beyond 10^5 objects; ``"auto"`` (default preset) uses it from
        :data:`dmh.methods.gbe.APPROX_MIN_N` (10,000) training objects on, where GBE's solver
        also switches; the paper preset keeps ``"float64"`` (its codes are unchanged).
    unpaired_complement : {"neighbours", "ridge"} or None
        How CLE complements an unpaired object's missing description (with ``complement="lle"``):
        Eq. 5 from its nearest paired neighbours in its own view (``"neighbours"``, the paper), or
        a ridge regression from the observed view to the missing one fitted on the paired objects
        each round (``"ridge"``, penalty by leave-one-out error over the pairs; the default preset,
        see docs/quality.md). Fully paired data have nothing to complement: no effect there.
    ridge_solver : {"sklearn", "dual"}
        How ``unpaired_complement="ridge"`` solves its regressions. ``"dual"`` (default): the model
        and penalty choice of scikit-learn's ``RidgeCV``, predicted in the dual form without forming
        the regression's coefficients (:func:`dmh.methods.unpaired.ridge_predict_dual`) where the
        paired objects are fewer than the features (the 4,096-d refreshed features of a few thousand
        objects), ``RidgeCV`` elsewhere; much less work (docs/speed.md). ``"sklearn"``: ``RidgeCV``
        always (the results written before 2026-11-28 ran with it); predictions equal to the dual
        form's up to rounding (~1e-12 relative), so codes can differ in a few bits. No effect on
        fully paired data.
    unpaired_dam : bool or None
        Whether the unpaired objects also train the hash networks (True: the paper); False trains
        each network on the paired objects only (the unpaired objects still shape S^Y and Y).
    cle_scaling : {"feature", "view", "auto"} or None
        How the input descriptions enter the first round of CLE. ``"feature"`` (the paper preset):
        every feature standardised to unit variance, as for the networks' input. ``"view"``: each
        view only centred and scaled as a whole (:func:`dmh.methods.cle.scale_view`), so features
        keep their relative scales: a rare word of a standardised bag of words, or a
        low-variance CNN channel, no longer weighs as much as the dominant directions. The
        networks' input is standardised either way. ``"auto"`` (the default preset): per view,
        ``"view"`` for a sparse view (at least :data:`SPARSE_ZERO_SHARE` of its entries zero: a bag
        of words, tags, where standardising lifts a word seen in a fraction p of the objects by
        about 1/sqrt(p)) and ``"feature"`` for a dense one; the choice is kept in ``cle_scaling_``. ``None``: the
        preset's (docs/log/quality.md, section 8, for the evidence).
    record_diagnostics : bool
        Keep each round's CLE features, GBE codes and network weights in ``rounds_`` (for
        :mod:`dmh.diagnostics`; memory grows with the networks' size times ``n_rounds``).
    random_state : int, Generator or None
        Same seed, same codes (on the same machine and thread count).
    n_threads : int or None
        Threads for torch, BLAS/OpenMP and faiss during ``fit`` and ``encode``; ``None`` (default):
        the process setting (:func:`dmh.set_threads`, ``dmh --threads``, ``DMH_THREADS``,
        ``OMP_NUM_THREADS``, else the physical cores available to this process).
    verbose : bool
        Show progress bars and per-stage timings.

    Attributes
    ----------
    nets_ : dict of str to torch.nn.Module
        The two hash networks of DAM, ``{"image": ..., "text": ...}``; ``sign`` of a network's output
        on standardised features is the code.
    codes_ : ndarray of int8 of shape (n_train, n_bits)
        The training objects' binary codes H in {-1, +1} of the last round (GBE, or signed PCA with
        ``binary_embedding="pca"``), the targets the networks were fitted to. Not saved with the model.
    features_ : ndarray of shape (n_train, d)
        The modality-invariant features Y of the training objects from the last CLE round (both
        modalities, unpaired objects included). Not saved with the model.
    history_ : dict
        Losses per outer round: ``"cle"`` (objective per CLE iteration), ``"gbe"`` (``(iteration,
        loss)`` pairs), ``"dam_image"`` / ``"dam_text"`` (mean loss per epoch) and ``"time"``
        (seconds per stage and round: ``"cle"``, ``"gbe"``, ``"dam"`` and their parts, e.g.
        ``"cle_ridge"`` for the ridge complement of a semi-paired set). Not saved with the model.
    scalers_ : dict of str to (ndarray, ndarray)
        Per-modality feature mean and scale used to standardise inputs.
    cle_scaling_ : dict of str to str
        How each view entered CLE's first round, ``"feature"`` or ``"view"`` (``cle_scaling``
        resolved; ``"auto"`` chooses per view). Not saved with the model.
    n_iter_ : int
        Outer rounds run (``n_rounds``).
    """

    method_name = "dmh"
    uses_unpaired = True
    min_paired = 2
    uses_torch = True
    #: options added after results were written, with the value those results ran with: a cell
    #: leaves them out of its key at that value, so finished runs stay reusable
    #: (:func:`dmh.evaluation.full_params`)
    #: options removed, at the value the fit always uses: kept in cell keys (:data:`REMOVED_OPTIONS`)
    removed_options = REMOVED_OPTIONS
    key_neutral = {"dam_precision": "float32", "gamma_scaling": "none", "ridge_solver": "sklearn",
                   "gbe_schedule": "constant", "cle_gram": False, "dam_agree_target": None,
                   "dam_contrastive": 0.0, "use_unpaired": True, "dam_first_target": None,
                   "dam_last_epochs": None}

    def __init__(self, n_bits=64, *, d=512, k=3, lambda_=0.1, eta=0.01, gamma=0.01, n_rounds=3,
                 hidden_size=4096, image_lr=1e-3, text_lr=1e-3, batch_size=128, dam_epochs=10,
                 complement="lle", binary_embedding="gbe", refresh_features=True, similarity=None,
                 quantization="mean", q_update="procrustes", y_update="exact", gbe_init="projection",
                 cle_max_iter=30, cle_tol=1e-4, gbe_max_iter=None, gbe_tol=None, gbe_lr=None,
                 neighbour_pool=30, w_reg=0.1, chunk_size=256, random_state=None, n_threads=None, verbose=False,
                 gbe_solver="auto", device="auto", preset="default", perplexity=None,
                 dam_stop=None, dam_agree_tol=1e-3, dam_agree_target=None, dam_lean=None, record_diagnostics=False,
                 cle_dtype=None,
                 unpaired_complement=None, unpaired_dam=None, cle_scaling=None,
                 dam_precision="float32", gamma_scaling=None, ridge_solver="dual", gbe_schedule=None,
                 cle_gram=None, dam_contrastive=0.0, use_unpaired=True, dam_first_target=None,
                 dam_last_epochs=None):
        store_init_args(self, locals())

    @staticmethod
    def _partner_outputs(nets, m, mask, paired, X, trained):
        """For ``dam_contrastive``: the other network's outputs for the paired objects among the
        rows ``mask`` (NaN rows for the others), or ``None`` while that network is untrained (the
        image network's first round)."""
        from . import dam

        other = "text" if m == "image" else "image"
        if other not in trained:
            return None
        rows = paired[mask]
        out = np.full((int(mask.sum()), nets[other].head.out_features), np.nan, dtype=np.float32)
        out[rows] = dam.net_outputs(nets[other], X.float32(other, paired))
        return out

    def _first_view(self, m, raws, X, mask, cle_dtype):
        """View ``m`` as CLE's first round sees it, per :attr:`cle_scaling_`."""
        if self.cle_scaling_[m] == "view":  # the inputs as given, the view scaled as a whole (a copy)
            return cle_mod.scale_view(raws[m], mask, cle_dtype)
        if cle_dtype == np.float64:  # every feature standardised
            return cle_mod.scale_view(X[m], mask)
        return cle_mod.scale_view(X.float32(m), mask, cle_dtype, inplace=True)  # a float32 copy, scaled in place

    # ------------------------------------------------------------------ fitting
    def _fit(self, data: CrossModalData) -> None:
        import torch

        from . import dam, gbe

        self._check_params()
        if not self.use_unpaired and not data.is_fully_paired:
            data = data.subset(np.flatnonzero(data.paired_mask), name=data.name)  # the pairs alone
        self._check_memory(data)
        device = resolve_device(self.device)
        rng = np.random.default_rng(self.random_state)
        torch_seed = int(rng.integers(2**62))
        gen = torch.Generator().manual_seed(torch_seed)
        masks = [data.image_mask, data.text_mask]
        paired = masks[0] & masks[1]
        # objects each hash network is trained on (unpaired_dam=False: the paired objects only)
        train_masks = masks if self._opt("unpaired_dam") else [paired, paired]
        modalities = ("image", "text")
        raws = {"image": data.image, "text": data.text}
        self.scalers_ = {}
        for m, mask in zip(modalities, masks, strict=True):
            mu, sd = column_mean_std(raws[m], mask)
            sd[sd < 1e-12] = 1.0
            self.scalers_[m] = (mu, sd)
        X = _Standardised(raws, self.scalers_)  # recomputed when used: one n x d_v copy at a time
        self.cle_scaling_ = self._view_scalings(raws, masks)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(torch_seed)
            nets = {m: dam.make_net(m, raws[m].shape[1], self.n_bits_, (self.hidden_size,)) for m in modalities}
        self.dam_precision_ = self.dam_precision
        if self.dam_precision == "auto":
            self.dam_precision_ = "bfloat16" if native_bf16(device) else "float32"
        for net in nets.values():
            net.to(device)
            net.lean = bool(self._opt("dam_lean"))
            net.precision = self.dam_precision_
        cle_dtype = self._cle_dtype(data.n_objects)
        Zs = [None, None]  # refreshed features (the inputs, standardised, in the first round)
        history = {"cle": [], "gbe": [], "dam_image": [], "dam_text": [], "time": []}
        opts = {"image": None, "text": None}
        trained = set()  # the networks trained so far (a contrastive partner must be one)
        agree_last = {"image": None, "text": None}  # bit agreement of each network's last epoch
        lrs = {"image": self.image_lr, "text": self.text_lr}
        H_relaxed = None
        Y = None
        H = None
        self.rounds_ = [] if self.record_diagnostics else None
        n_rounds = int(self.n_rounds)
        rounds = range(n_rounds)
        bar = None
        if self.verbose:
            from tqdm.auto import tqdm

            bar = tqdm(total=n_rounds * 3, desc="DMH", unit="stage", leave=False, disable=None)
        for r in rounds:
            t = {}
            if r == 0 or self.refresh_features:
                t0 = time.perf_counter()
                if r == 0:
                    views = [self._first_view(m, raws, X, mask, cle_dtype)
                             for m, mask in zip(modalities, masks, strict=True)]
                else:  # refreshed features are this fit's own: scaled in place where the dtype allows
                    views = [cle_mod.scale_view(Z, mask, cle_dtype, inplace=True)
                             for Z, mask in zip(Zs, masks, strict=True)]
                    Y = None  # the last round's Y is not read again: free it before CLE makes the next
                Zs = [None, None]
                given = None
                cle_t = {"scale": time.perf_counter() - t0}
                if self._opt("unpaired_complement") == "ridge" and self.complement == "lle" and not paired.all():
                    t1 = time.perf_counter()
                    given = unpaired.ridge_complement(views, masks, solver=self.ridge_solver)
                    cle_t["ridge"] = time.perf_counter() - t1
                res = cle_mod.fit_cle(
                    views, masks, d=self.d, k=self.k, lam=self.lambda_, eta=self.eta,
                    max_iter=self.cle_max_iter, tol=self.cle_tol, complement_how=self.complement,
                    q_method=self.q_update, y_method=self.y_update, w_reg=self.w_reg,
                    neighbour_pool=self.neighbour_pool, rng=rng, timings=cle_t, dtype=cle_dtype,
                    complement_given=given, device=device, gram=None if self._opt("cle_gram") else False,
                )
                t.update({f"cle_{key}": v for key, v in cle_t.items()})
                Y = res.Y
                history["cle"].append(res.objective)
                views = res = given = None  # the scaled views are the largest arrays of a fit: free them now
                release_free_memory()
                t["cle"] = time.perf_counter() - t0
                if bar:
                    bar.update(1)
                t0 = time.perf_counter()
                if self.binary_embedding == "gbe":
                    gbe_t = {}
                    lr, max_iter = self._gbe_budget(warm=H_relaxed is not None)
                    g = gbe.fit_gbe(
                        Y, self.n_bits_, gamma=self._gamma(), similarity=self._opt("similarity"),
                        quantization=self.quantization, init=self.gbe_init, H_init=H_relaxed,
                        lr=lr, max_iter=max_iter, tol=self._opt("gbe_tol"), schedule=self._opt("gbe_schedule"),
                        chunk_size=self.chunk_size, rng=rng, perplexity=self._opt("perplexity"),
                        solver=self.gbe_solver, device=device, timings=gbe_t,
                    )
                    t.update({f"gbe_{key}": v for key, v in gbe_t.items()})
                    H, H_relaxed = g.codes, g.relaxed
                    history["gbe"].append(g.loss)
                    g = None
                    release_free_memory()
                else:
                    # a principal direction's sign (and, for close eigenvalues, its rank) is arbitrary:
                    # keep bit identities from round to round, as GBE's warm start does, since the
                    # networks carry over between rounds
                    H_pca = pca_codes(Y, self.n_bits_)
                    H = H_pca if H is None else align_bits(H_pca, H)
                    history["gbe"].append([])
                t["gbe"] = time.perf_counter() - t0
                if bar:
                    bar.update(1)
            else:
                history["cle"].append([])
                history["gbe"].append([])
                if bar:
                    bar.update(2)
            t0 = time.perf_counter()
            for m, mask in zip(modalities, train_masks, strict=True):
                t1 = time.perf_counter()
                agreement = []
                warm_stop = self._opt("dam_stop") == "agreement" and r > 0
                partner = self._partner_outputs(nets, m, mask, paired, X, trained) if self.dam_contrastive else None
                losses, opts[m] = dam.train_net(
                    nets[m], X.float32(m, mask), H[mask].astype(np.float32), epochs=self._dam_epochs(r, n_rounds),
                    lr=lrs[m],
                    batch_size=self.batch_size, generator=gen, optimizer=opts[m], device=device,
                    agreement=agreement, agree_tol=self.dam_agree_tol if warm_stop else None,
                    agree_ref=agree_last[m], agree_target=self._agree_target(r),
                    partner=partner, contrastive=float(self.dam_contrastive),
                )
                trained.add(m)
                if agreement:
                    agree_last[m] = agreement[-1]
                history.setdefault(f"dam_{m}_agreement", []).append(agreement)
                history[f"dam_{m}"].append(losses)
                release_free_memory()  # after one modality's float32 inputs, before the next
                t[f"dam_{m}"] = time.perf_counter() - t1
            if self.record_diagnostics:
                self.rounds_.append({
                    "Y": np.asarray(Y, dtype=np.float32).copy(), "codes": H.copy(),
                    "gbe_loss": history["gbe"][-1][-1][1] if history["gbe"][-1] else None,
                    "nets": {m: {k: v.detach().cpu().clone() for k, v in nets[m].state_dict().items()}
                             for m in modalities},
                    "dam_loss": {m: history[f"dam_{m}"][-1][-1] if history[f"dam_{m}"][-1] else None
                                 for m in modalities},
                })
            t1 = time.perf_counter()
            if self.refresh_features and r + 1 < n_rounds:
                for i, (m, mask) in enumerate(zip(modalities, masks, strict=True)):
                    Zs[i] = hidden_features(nets[m], partial(X.float32, m, mask), mask, self.hidden_size)
                    release_free_memory()
            t["refresh"] = time.perf_counter() - t1
            t["dam"] = time.perf_counter() - t0
            history["time"].append(t)
            if bar:
                bar.update(1)
                bar.set_postfix({k: f"{t[k]:.1f}s" for k in ("cle", "gbe", "dam") if k in t})
        if bar:
            bar.close()
        for net in nets.values():
            net.use_sparse_input(None)  # the plain layer again (the same weights)
            net.to("cpu")  # encoding and saving need no GPU
        self.nets_ = nets
        self.codes_ = H
        self.features_ = Y
        self.history_ = history
        self.n_iter_ = n_rounds

    # ------------------------------------------------------------------ encoding
    def _project(self, X, modality):
        from . import dam

        mu, sd = self.scalers_[modality]
        return dam.net_outputs(self.nets_[modality], (X - mu) / sd)

    # ------------------------------------------------------------------ persistence
    def _get_state(self):
        state = {}
        for m, net in self.nets_.items():
            for key, value in net.state_dict().items():
                state[f"{m}_net.{key}"] = value.detach().cpu().numpy()
            state[f"{m}_mean"], state[f"{m}_scale"] = self.scalers_[m]
        return state

    def _state_spec(self):
        import torch

        from . import dam

        spec = {}
        for m, dim in (("image", "I"), ("text", "T")):
            spec[f"{m}_mean"] = (dim,)
            spec[f"{m}_scale"] = (dim,)
            with torch.device("meta"):  # shapes only: nothing is allocated
                net = dam.make_net(m, self.n_features_[m], self.n_bits_, (self.hidden_size,))
            for key, value in net.state_dict().items():
                spec[f"{m}_net.{key}"] = tuple(value.shape)
        return spec

    def _set_state(self, state):
        import torch

        from . import dam

        self.scalers_ = {m: (state[f"{m}_mean"], state[f"{m}_scale"]) for m in ("image", "text")}
        self.nets_ = {}
        for m in ("image", "text"):
            net = dam.make_net(m, self.n_features_[m], self.n_bits_, (self.hidden_size,))
            prefix = f"{m}_net."
            sd = {k[len(prefix):]: torch.as_tensor(v) for k, v in state.items() if k.startswith(prefix)}
            net.load_state_dict(sd)
            net.eval()
            self.nets_[m] = net


def align_bits(H: np.ndarray, H_ref: np.ndarray) -> np.ndarray:
    """Permute and flip the bits (columns) of ``H`` to agree best with ``H_ref``: the assignment
    maximising the total absolute agreement, then each bit's sign to make its agreement positive."""
    from scipy.optimize import linear_sum_assignment

    C = H.astype(np.int64).T @ H_ref.astype(np.int64)  # (bits of H) x (bits of H_ref)
    rows, cols = linear_sum_assignment(-np.abs(C))
    out = np.empty_like(H)
    for r, c in zip(rows, cols, strict=True):
        out[:, c] = H[:, r] if C[r, c] >= 0 else -H[:, r]
    return out


def pca_codes(Y: np.ndarray, n_bits: int) -> np.ndarray:
    """DMH-PCA: sign of the projections of centred Y on its top ``n_bits`` principal directions
    (directions beyond the rank of Y give constant bits)."""
    Yc = Y - Y.mean(0)
    _, _, Vt = np.linalg.svd(Yc, full_matrices=False)
    P = np.zeros((Y.shape[1], n_bits))
    r = min(n_bits, Vt.shape[0])
    P[:, :r] = Vt[:r].T
    return np.where(Yc @ P > 0, 1, -1).astype(np.int8)


def column_mean_std(X: np.ndarray, rows: np.ndarray, step: int = 8192) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (population) standard deviation, in float64, of each column of ``X`` over the rows
    where the boolean ``rows`` is true: the values of ``X[rows].mean(0)`` and ``X[rows].std(0)`` on
    the float64 inputs, bit for bit (numpy sums a column's rows in order, so a running sum over
    blocks of rows adds the same numbers in the same order), but without a copy of ``X`` or an
    n x d float64 temporary, and the same for float32 inputs as for their float64 copy."""
    def blocks():
        idx = None if rows.all() else np.flatnonzero(rows)
        n = X.shape[0] if idx is None else idx.size
        for s in range(0, n, step):
            yield np.asarray(X[s : s + step] if idx is None else X[idx[s : s + step]], dtype=np.float64)

    def running_sum(parts):
        total = None
        for part in parts:  # the running total put first: the same additions, in the same order
            total = part.sum(0) if total is None else np.add.reduce(np.concatenate([total[None], part]), axis=0)
        return total

    count = int(rows.sum())
    mu = running_sum(blocks()) / count
    var = running_sum((b - mu) * (b - mu) for b in blocks()) / count
    return mu, np.sqrt(var)


class _Standardised:
    """The standardised inputs ``(raw - mean) / scale`` of each modality, computed when asked for
    (the same values every time) instead of kept: beyond 10^5 objects a kept copy of the inputs is
    gigabytes that CLE and GBE do not need."""

    def __init__(self, raws: dict, scalers: dict):
        self.raws, self.scalers = raws, scalers

    def __getitem__(self, m: str) -> np.ndarray:
        mu, sd = self.scalers[m]
        return (self.raws[m] - mu) / sd

    def float32(self, m: str, mask: np.ndarray | None = None, start: int = 0, stop: int | None = None,
                step: int = 8192) -> np.ndarray:
        """The rows of ``mask`` (all when None) as float32, computed by blocks of rows: the values the
        networks see (they cast to float32), without a float64 n x d_v temporary. ``start``,
        ``stop``: only those of them (positions among the rows of ``mask``; each row's values are
        the same however the rows are cut)."""
        raw = self.raws[m]
        mu, sd = self.scalers[m]
        rows = None if mask is None or mask.all() else np.flatnonzero(mask)
        total = raw.shape[0] if rows is None else rows.size
        stop = total if stop is None else min(stop, total)
        out = np.empty((max(stop - start, 0), raw.shape[1]), dtype=np.float32)
        for s in range(start, stop, step):
            e = min(s + step, stop)
            block = raw[s:e] if rows is None else raw[rows[s:e]]
            out[s - start : e - start] = (block - mu) / sd
        return out


def hidden_features(net, X_obs, mask: np.ndarray, width: int, rows_per_call: int = 8 * 2048) -> np.ndarray:
    """The hidden-layer features ``z^v`` of the observed objects (``X_obs``: their inputs, one row
    each, in order, or a function ``X_obs(start, stop)`` giving those rows, so that the whole input
    array is never held; zeros for the others), float32, written block by block into one n x width
    array (``dam.net_outputs``'s batches of 2048 rows are those of one call, so the values are too)."""
    from . import dam

    Z = np.zeros((mask.size, width), dtype=np.float32)  # exact: outputs are float32
    rows = np.flatnonzero(mask)
    for s in range(0, rows.size, rows_per_call):
        X_part = X_obs(s, s + rows_per_call) if callable(X_obs) else X_obs[s : s + rows_per_call]
        Z[rows[s : s + rows_per_call]] = dam.net_outputs(net, X_part, features=True)
    return Z
