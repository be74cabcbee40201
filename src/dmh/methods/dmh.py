"""Deep Manifold Hashing (Shi et al.): CLE -> GBE -> DAM, alternated for ``n_rounds`` rounds.

See ``docs/method.md`` for every choice made where the paper is silent, and the module docstrings
of :mod:`dmh.methods.cle`, :mod:`dmh.methods.gbe` and :mod:`dmh.methods.dam` for the details. The
options a fit runs with (presets resolved) are :class:`dmh.methods.dmh_options.DMHOptions`.
"""

from __future__ import annotations

import numbers
from functools import partial
from types import SimpleNamespace

import numpy as np

from .._memory import release_free_memory
from .._threads import MAX_THREADS
from .._validation import (
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    UNIT_INTERVAL,
    Boolean,
    Interval,
    Options,
    check_random_state,
    validate_params,
)
from ..base import BaseHasher, store_init_args
from ..data import CrossModalData
from ..errors import ParameterError
from . import cle as cle_mod
from . import unpaired
from .dam_inputs import Standardised, column_mean_std, hidden_features
from .dmh_options import (  # noqa: F401 - importable from dmh.methods.dmh
    FIT_MEMORY_BASE,
    GAMMA_REFERENCE_BITS,
    GBE_WARM_LR,
    GBE_WARM_STEPS,
    PRESETS,
    SPARSE_ZERO_SHARE,
    DMHOptions,
    fit_memory_bytes,
    native_bf16,
    preset_options,
    resolve_device,
    sparse_view,
)
from .pca_embedding import align_bits, pca_codes
from .stage_clock import StageClock

__all__ = ["DMH", "PRESETS"]

MODALITIES = ("image", "text")


class DMH(BaseHasher):
    """Deep Manifold Hashing for semi-paired, unlabeled image-text data.

    Complemented Local Embedding (CLE) embeds both modalities in one space ``Y``; Global Binary
    Embedding (GBE) turns ``Y`` into codes; Deep Adaptive Mapping (DAM) trains one network per
    modality to produce them. The three alternate for ``n_rounds`` rounds.

    The parameters come in five groups, in this order: the paper's (its symbols, and the solver
    settings it leaves open); speed (the same model with less work, or a cheaper approximation);
    ablations and variants; the ``preset`` and the options it fills in (each ``None`` by default:
    the preset's value, see :data:`PRESETS`; an explicit value wins); and the run's (device,
    threads, seed, output). Every default below is the code's; where it departs from the paper,
    docs/method.md says why, and docs/quality.md and docs/speed.md give the measurements.

    Parameters
    ----------
    n_bits : int, default=64
        Code length ``c``.
    d : int, default=512
        Dimension of the modality-invariant features ``Y`` (CLE).
    k : int, default=3
        Neighbours per object in CLE.
    lambda_ : float, default=0.1
        Weight of the local-consistency term of Eq. 6.
    eta : float, default=0.01
        Weight of the ``||Y||^2`` regulariser of Eq. 6.
    gamma : float, default=0.01
        Weight of the quantisation loss of Eq. 11 (see ``quantization`` and ``gamma_scaling``).
    n_rounds : int, default=3
        Outer rounds of CLE -> GBE -> DAM (the paper reports stability after 3).
    hidden_size : int, default=4096
        Width of the hidden layer of imgNet and txtNet; it becomes ``z^v`` for the next CLE round.
    image_lr, text_lr : float, default=1e-3
        Adam learning rates of imgNet and txtNet (the paper's are ``10**-4.5`` and ``10**-3.5``:
        docs/method.md).
    batch_size : int, default=128
        Mini-batch size of DAM.
    dam_epochs : int, default=10
        Passes over the data per network and round (the paper gives no number); the most passes
        under ``dam_stop="agreement"`` or an agreement target.
    quantization : {"mean", "sum"}, default="mean"
        Scale of the quantisation term: per object, or summed as printed in Eq. 11.
    q_update : {"procrustes", "paper"}, default="procrustes"
        CLE's update of its rotations (:mod:`dmh.methods.cle`).
    y_update : {"exact", "jacobi"}, default="exact"
        CLE's update of ``Y`` (:mod:`dmh.methods.cle`).
    gbe_init : {"pca", "projection", "random"}, default="projection"
        Initial relaxed codes of the first round; later rounds warm-start from the previous one
        (:func:`dmh.methods.gbe.init_codes`).
    cle_max_iter : int, default=30
        CLE's most iterations per round.
    cle_tol : float, default=1e-4
        Relative change of CLE's objective at which it stops.
    neighbour_pool : int, default=30
        Candidates per object from which CLE picks its neighbours.
    w_reg : float, default=0.1
        Regulariser of CLE's reconstruction weights.
    gbe_solver : {"auto", "exact", "approx"}, default="auto"
        GBE's gradient over all n^2 pairs (``"exact"``) or its O(n k) estimate from each object's
        nearest neighbours of S^Y plus sampled pairs (``"approx"``); ``"auto"`` switches to
        ``"approx"`` from :data:`dmh.methods.gbe.APPROX_MIN_N` training objects on.
    chunk_size : int, default=256
        Rows per block of the exact GBE gradient.
    dam_precision : {"float32", "bfloat16", "auto"}, default="float32"
        Precision of the first hidden layer's products in DAM's training (weights, Adam and every
        output after training stay float32). ``"bfloat16"`` is faster where the device multiplies
        it natively and gives different codes; ``"auto"``: ``"bfloat16"`` where
        :func:`native_bf16` says so, else ``"float32"``; ``dam_precision_`` says which ran.
    ridge_solver : {"sklearn", "dual"}, default="dual"
        How ``unpaired_complement="ridge"`` solves its regressions: scikit-learn's ``RidgeCV``, or
        its model and penalty choice predicted in the dual form without the regression's
        coefficients where the paired objects are fewer than the features
        (:func:`dmh.methods.unpaired.ridge_predict_dual`); equal up to rounding, so codes can
        differ in a few bits.
    dam_agree_tol : float, default=1e-3
        Tolerance of ``dam_stop="agreement"``, as a fraction of the target bits.
    dam_first_target : float or None, default=None
        The first round's agreement target (networks trained from scratch) where it should differ
        from ``dam_agree_target``.
    dam_last_epochs : int or None, default=None
        The most passes of the last round's networks (the ones that encode) where they should
        differ from ``dam_epochs``.
    complement : {"lle", "zero"}, default="lle"
        Complement missing descriptions by Eq. 5 (DMH) or with zeros (the DMH-ZERO ablation).
    binary_embedding : {"gbe", "pca"}, default="gbe"
        GBE (DMH) or the sign of the top principal components of ``Y`` (DMH-PCA).
    refresh_features : bool, default=True
        Refresh ``z^v`` from the DAM hidden layers after each round (DMH); ``False`` keeps the
        input features (DMH-FIX).
    ridge_weight : float in (0, 1], default=1.0
        For a view that ``encoder`` gives the ridge map: the map's share of the view's outputs, the
        rest the network's (``1``: the ridge map alone; ``0.5``: the mean of the two).
    block_bits : int or None, default=None
        Codes made of independent fits side by side, each of at most ``block_bits`` bits: a code of
        ``n_bits`` is ``ceil(n_bits / block_bits)`` blocks of as even a length as possible (the
        first blocks one bit longer), each block a DMH with its own seed drawn from
        ``random_state``, fitted on the same data. The Hamming distance is then the sum of the
        blocks' distances, which averages out what one fit gets wrong: on dense CNN features
        (fashion, 5 seeds) category MAP rose by 0.013 at 64 bits and 0.026-0.029 at 128 with
        ``block_bits=32`` (UCI digits +0.012 to +0.038; Wikipedia's text->image +0.03, its
        image->text level), while the held-out pairs found their own partners less well on
        fashion (docs/quality.md). The fit takes about as many times longer as there are blocks; ``None``
        (or ``block_bits >= n_bits``) is the paper's one fit.
    dam_contrastive : float, default=0.0
        Weight of a cross-modal contrastive term in DAM: each network is also trained to pick each
        paired object's partner among its batch's partners by the cosine similarity of its outputs
        to the other network's (InfoNCE at :data:`dmh.methods.dam.CONTRASTIVE_TEMPERATURE`).
    preset : {"default", "paper"}, default="default"
        Where the options below take their value when left as ``None`` (:data:`PRESETS`):
        ``"paper"`` is the paper's method, ``"default"`` the label-free choice of docs/quality.md.
    similarity : {"clip", "shift", "raw", "perplexity"} or None
        How S^Y (Eq. 7) stays a distribution when inner products are negative (``"clip"``: the
        paper), or ``"perplexity"``: t-SNE's sparse, neighbour-calibrated P over Euclidean
        distances of ``Y``.
    perplexity : float or None
        Perplexity of S^Y under ``similarity="perplexity"``.
    gamma_scaling : {"none", "bits"} or None
        ``"bits"`` weighs GBE's quantisation loss by ``gamma * 16 / n_bits``, keeping the balance
        the paper's ``gamma`` has at 16 bits at every code length; ``"none"``: ``gamma``.
    unpaired_complement : {"neighbours", "ridge"} or None
        How CLE complements an unpaired object's missing description (``complement="lle"``): from
        its nearest paired neighbours in its own view (Eq. 5), or by a ridge regression from the
        observed view to the missing one fitted on the paired objects each round.
    unpaired_dam : bool or None
        Whether the unpaired objects also train the hash networks (``True``: the paper).
    use_unpaired : bool, "auto" or None
        Whether a semi-paired set's unpaired objects enter the fit: ``True`` (the paper), ``False``
        (the paired objects alone: what ``dmh evaluate --training pairs-only`` does to the data),
        or ``"auto"``: the side under which held-out pairs find their partners better, from two
        candidate fits on the rest of the data (:mod:`dmh.methods.unpaired_choice`; a semi-paired
        fit then costs about two fits more, a fully paired one nothing). The side taken is in
        ``use_unpaired_``, the candidates' scores in ``unpaired_choice_``.
    unpaired_margin : float or None
        Under ``use_unpaired="auto"``: by how many standard errors of the held-out pairs' paired
        difference the fit on every object must score above the pairs alone to be used (within it,
        the pairs alone: the simpler model, as the one-standard-error rule takes). ``0``: the higher
        score wins, a tie goes to every object. Inert for any other ``use_unpaired``.
    cle_scaling : {"feature", "view", "auto"} or None
        How the input descriptions enter CLE's first round: every feature standardised
        (``"feature"``: the paper), each view only centred and scaled as a whole (``"view"``), or
        ``"view"`` for a sparse view (at least :data:`SPARSE_ZERO_SHARE` of its entries zero) and
        ``"feature"`` for a dense one (``"auto"``); the choice is kept in ``cle_scaling_``.
    encoder : {"network", "ridge", "auto"} or None
        What encodes new objects of each view: DAM's network (``"network"``: the paper), a ridge
        regression from the view's standardised features to the last round's codes, its penalty
        chosen by generalised cross-validation on those codes (``"ridge"``,
        :mod:`dmh.methods.ridge_encoder`; views of at most 8,192 features), or ``"ridge"`` for a
        sparse view of at most that many features (sparse as ``cle_scaling`` decides it) and
        ``"network"`` for the others (``"auto"``). The networks are trained either
        way (their hidden layers are CLE's features in the next round); the choice is kept in
        ``encoders_``.
    dam_stop : {"fixed", "agreement"} or None
        ``"fixed"``: ``dam_epochs`` passes in every round. ``"agreement"``: from the second round
        on, a network stops after the first pass that raises its bit agreement with GBE's codes by
        less than ``dam_agree_tol``, or that brings it within ``dam_agree_tol`` of the agreement
        it reached in the previous round.
    dam_agree_target : float or None
        A network's training in a round also stops after the first pass whose bit agreement with
        GBE's codes reaches this level (``None``: no such stop).
    dam_lean : bool or None
        Train the same networks with cheaper kernels (:attr:`dmh.methods.dam.HashNet.lean`, and
        the sparse path of a sparse input): the same model and saved state, results equal up to
        rounding.
    cle_dtype : {"auto", "float64", "float32"} or None
        Precision of CLE's n x d arrays; ``"auto"``: float32 from
        :data:`dmh.methods.gbe.APPROX_MIN_N` training objects on.
    cle_gram : bool or None
        Hold a CLE view with more features than objects by its Gram matrix: the same iterates up
        to rounding (:mod:`dmh.methods.cle_gram`).
    gbe_lr, gbe_max_iter, gbe_tol : float, int, float or None
        GBE's Adam step on the relaxed codes, its most steps, and the relative change of the loss
        (checked every 10 steps) at which it stops.
    gbe_schedule : {"constant", "cosine"} or None
        GBE's step: ``gbe_lr`` throughout, or decaying from ``gbe_lr`` to zero over
        ``gbe_max_iter`` steps along a half cosine, the warm-started rounds from
        :data:`GBE_WARM_LR` of the step with :data:`GBE_WARM_STEPS` of the budget.
    gbe_exaggeration : float or None
        GBE's attraction weight ``rho`` (t-SNE's exaggeration, for the whole fit):
        ``rho * KL(S^Y || S^H) + (1 - rho) log Z`` in place of the KL term, so each object's
        neighbours in Y pull harder against the repulsion of all pairs and the codes form fewer,
        tighter groups; ``1`` is the paper's loss (:mod:`dmh.methods.gbe`).
    device : {"auto", "cpu", "cuda"}, default="auto"
        Where GBE and DAM run (``"auto"``: CUDA when available). CLE and all randomness stay on the
        CPU; the fitted networks are moved back to the CPU, so encoding and saving need no GPU.
    n_threads : int or None, default=None
        Threads for torch, BLAS/OpenMP and faiss during ``fit`` and ``encode``; ``None``: the
        process setting (:func:`dmh.set_threads`, ``dmh --threads``, ``DMH_THREADS``,
        ``OMP_NUM_THREADS``, else the physical cores available to this process).
    random_state : int, Generator or None, default=None
        Same seed, same codes (on the same machine and thread count).
    verbose : bool, default=False
        Show progress bars and per-stage timings.
    record_diagnostics : bool, default=False
        Keep each round's CLE features, GBE codes and network weights in ``rounds_`` (for
        :mod:`dmh.diagnostics`; memory grows with the networks' size times ``n_rounds``).

    Attributes
    ----------
    options_ : DMHOptions
        Every parameter as the fit ran with it, the options left as ``None`` filled in by the
        preset (``options_.similarity`` is never ``None``); also in a saved model's header.
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
        loss)`` pairs), ``"dam_image"`` / ``"dam_text"`` (mean loss per epoch, and their
        ``"_agreement"``) and ``"time"`` (seconds per stage and round: ``"cle"``, ``"gbe"``,
        ``"dam"`` and their parts, e.g. ``"cle_ridge"`` for the ridge complement of a semi-paired
        set). Not saved with the model.
    scalers_ : dict of str to (ndarray, ndarray)
        Per-modality feature mean and scale used to standardise inputs.
    cle_scaling_ : dict of str to str
        How each view entered CLE's first round, ``"feature"`` or ``"view"`` (``cle_scaling``
        resolved; ``"auto"`` chooses per view). Not saved with the model.
    dam_precision_ : str
        The precision DAM's training ran in (``dam_precision`` resolved).
    use_unpaired_ : bool
        Whether the fit used the unpaired objects (``use_unpaired`` resolved; ``True`` for a fully
        paired set).
    unpaired_choice_ : dict or None
        Under ``use_unpaired="auto"``, what :func:`dmh.methods.unpaired_choice.choose` found (the
        held-out pairs' score of each candidate, their number, the seconds and the reason);
        ``None`` when nothing was chosen.
    encoders_ : dict of str to str
        What encodes each view, ``"network"`` or ``"ridge"`` (``encoder`` resolved).
    ridge_encoders_ : dict of str to RidgeEncoder
        The ridge maps of the views ``encoders_`` names ``"ridge"`` (their ``alpha``: the chosen
        penalty, a multiple of the mean eigenvalue of the inputs' Gram matrix).
    n_iter_ : int
        Outer rounds run (``n_rounds``).
    blocks_ : list of DMH
        With more than one block (``block_bits``): the fitted blocks, in the order their codes are
        concatenated (their ``codes_``, ``history_`` and ``rounds_`` are theirs; the model's
        ``codes_`` is the concatenation, and ``nets_``, ``features_``, ``history_`` and ``rounds_``
        are ``None``). ``None`` for one fit.

    Examples
    --------
    A small fit, half of its objects paired (``make_semi_paired``), and its codes:

    >>> import numpy as np
    >>> import dmh
    >>> from dmh import DMH
    >>> digits = dmh.load_dataset("uci-digits").train().subset(np.arange(300))
    >>> data = dmh.make_semi_paired(digits, 0.5, random_state=0)
    >>> model = DMH(16, n_rounds=1, hidden_size=64, d=32, dam_epochs=2, random_state=0).fit(data)
    >>> model.encode(data.image[:3], modality="image").shape
    (3, 16)
    >>> model.similarity is None, model.options_.similarity  # the parameter as given, the preset's value
    (True, 'perplexity')
    """

    method_name = "dmh"
    uses_unpaired = True
    min_paired = 2
    uses_torch = True
    preset_options = staticmethod(preset_options)
    _parameter_constraints = {
        **BaseHasher._parameter_constraints,
        # the paper's
        "d": [POSITIVE_INT], "k": [POSITIVE_INT], "lambda_": [NON_NEGATIVE], "eta": [NON_NEGATIVE],
        "gamma": [NON_NEGATIVE], "n_rounds": [POSITIVE_INT], "hidden_size": [POSITIVE_INT], "image_lr": [POSITIVE],
        "text_lr": [POSITIVE], "batch_size": [POSITIVE_INT], "dam_epochs": [NON_NEGATIVE_INT],
        "quantization": [Options("mean", "sum")], "q_update": [Options("procrustes", "paper")],
        "y_update": [Options("exact", "jacobi")], "gbe_init": [Options("pca", "projection", "random")],
        "cle_max_iter": [POSITIVE_INT], "cle_tol": [NON_NEGATIVE], "neighbour_pool": [POSITIVE_INT],
        "w_reg": [NON_NEGATIVE],
        # speed
        "gbe_solver": [Options("auto", "exact", "approx")], "chunk_size": [POSITIVE_INT],
        "dam_precision": [Options("float32", "bfloat16", "auto")], "ridge_solver": [Options("sklearn", "dual")],
        "dam_agree_tol": [NON_NEGATIVE], "dam_first_target": [UNIT_INTERVAL, None],
        "dam_last_epochs": [NON_NEGATIVE_INT, None],
        # ablations and variants
        "complement": [Options("lle", "zero")], "binary_embedding": [Options("gbe", "pca")],
        "refresh_features": [Boolean()], "dam_contrastive": [NON_NEGATIVE],
        "block_bits": [POSITIVE_INT, None],
        "ridge_weight": [Interval(numbers.Real, 0, 1, closed="right")],
        # the preset and the options it fills in (None: the preset's value)
        "preset": [Options(*PRESETS)], "similarity": [Options("clip", "shift", "raw", "perplexity"), None],
        "perplexity": [Interval(numbers.Real, 1, None, closed="right"), None],
        "gamma_scaling": [Options("none", "bits"), None], "unpaired_complement": [Options("neighbours", "ridge"), None],
        "unpaired_dam": [Boolean(), None], "use_unpaired": [Boolean(), Options("auto"), None],
        "unpaired_margin": [NON_NEGATIVE, None],
        "cle_scaling": [Options("feature", "view", "auto"), None],
        "encoder": [Options("network", "ridge", "auto"), None],
        "dam_stop": [Options("fixed", "agreement"), None], "dam_agree_target": [UNIT_INTERVAL, None],
        "dam_lean": [Boolean(), None], "cle_dtype": [Options("auto", "float64", "float32"), None],
        "cle_gram": [Boolean(), None], "gbe_lr": [POSITIVE, None], "gbe_max_iter": [POSITIVE_INT, None],
        "gbe_tol": [NON_NEGATIVE, None], "gbe_schedule": [Options("constant", "cosine"), None],
        "gbe_exaggeration": [Interval(numbers.Real, 0, None, closed="neither"), None],
        # the run's
        "device": [Options("auto", "cpu", "cuda")], "n_threads": [Interval(numbers.Integral, 1, MAX_THREADS), None],
        "verbose": [Boolean()], "record_diagnostics": [Boolean()],
    }

    def __init__(self, n_bits=64, *,
                 d=512, k=3, lambda_=0.1, eta=0.01, gamma=0.01, n_rounds=3, hidden_size=4096, image_lr=1e-3,
                 text_lr=1e-3, batch_size=128, dam_epochs=10, quantization="mean", q_update="procrustes",
                 y_update="exact", gbe_init="projection", cle_max_iter=30, cle_tol=1e-4, neighbour_pool=30,
                 w_reg=0.1,
                 gbe_solver="auto", chunk_size=256, dam_precision="float32", ridge_solver="dual", dam_agree_tol=1e-3,
                 dam_first_target=None, dam_last_epochs=None,
                 complement="lle", binary_embedding="gbe", refresh_features=True,
                 dam_contrastive=0.0, ridge_weight=1.0, block_bits=None,
                 preset="default", similarity=None, perplexity=None, gamma_scaling=None, unpaired_complement=None,
                 unpaired_dam=None, use_unpaired=None, unpaired_margin=None, cle_scaling=None, encoder=None,
                 dam_stop=None,
                 dam_agree_target=None, dam_lean=None,
                 cle_dtype=None, cle_gram=None, gbe_lr=None, gbe_max_iter=None, gbe_tol=None, gbe_schedule=None,
                 gbe_exaggeration=None,
                 device="auto", n_threads=None, random_state=None, verbose=False, record_diagnostics=False):
        store_init_args(self, locals())

    def _block_sizes(self) -> list[int]:
        """The bits of each block of the code (``block_bits``; one block: ``[n_bits]``)."""
        n_bits = int(self.n_bits_)
        per = n_bits if self.block_bits is None else min(int(self.block_bits), n_bits)
        return block_sizes(n_bits, -(-n_bits // per))

    # ------------------------------------------------------------------ fitting
    def _fit(self, data: CrossModalData) -> None:
        opts = self.options_ = DMHOptions.of(self)  # the presets resolved, once
        self.unpaired_choice_ = None
        use = opts.use_unpaired
        if use == "auto" and not data.is_fully_paired:
            from .unpaired_choice import choose

            opts.check_memory(data)  # the fit on every object, refused before the candidates' work

            choice = choose(self, data, margin=opts.unpaired_margin)
            self.unpaired_choice_ = choice.as_dict()
            use = choice.use
            if self.verbose:
                print(f"use_unpaired='auto': {choice.reason} ({choice.seconds:.0f} s)")
        self.use_unpaired_ = bool(use) or data.is_fully_paired
        if not self.use_unpaired_:
            data = data.subset(np.flatnonzero(data.paired_mask), name=data.name)  # the pairs alone
        self.blocks_ = None
        if len(self._block_sizes()) > 1:
            self._fit_blocks(data)
            return
        opts.check_memory(data)
        run = self._start(data, opts)
        self.rounds_ = [] if self.record_diagnostics else None
        try:
            for r in range(int(opts.n_rounds)):
                run.clock.new_round()
                if r == 0 or self.refresh_features:
                    self._cle_stage(run, r)
                    self._embedding_stage(run)
                else:
                    run.history["cle"].append([])
                    run.history["gbe"].append([])
                    run.clock.advance(2)
                self._dam_stage(run, r)
                run.clock.end_round()
        finally:
            run.clock.close()
        for net in run.nets.values():
            net.use_sparse_input(None)  # the plain layer again (the same weights)
            net.to("cpu")  # encoding and saving need no GPU
        self.nets_ = run.nets
        self._fit_ridge_encoders(run)
        self.codes_ = run.H
        self.features_ = run.Y
        self.history_ = run.history
        self.n_iter_ = int(opts.n_rounds)

    def _fit_blocks(self, data: CrossModalData) -> None:
        """The blocks' independent fits on ``data`` (already the pairs alone where the fit does not
        use the unpaired objects), their seeds drawn from ``random_state``; the blocks hold the
        networks, the model the concatenated codes."""
        sizes = self._block_sizes()
        seeds = check_random_state(self.random_state).integers(2**31, size=len(sizes))
        params = {**self.get_params(deep=False), "block_bits": None, "use_unpaired": True}
        self.blocks_ = []
        for j, (n_bits, seed) in enumerate(zip(sizes, seeds, strict=True)):
            if self.verbose:
                print(f"block {j + 1} of {len(sizes)}: {n_bits} bits")
            self.blocks_.append(type(self)(**{**params, "n_bits": n_bits, "random_state": int(seed)}).fit(data))
        first = self.blocks_[0]
        self.scalers_ = first.scalers_  # the training data's statistics: the same in every block
        self.cle_scaling_, self.dam_precision_ = first.cle_scaling_, first.dam_precision_
        self.encoders_ = first.encoders_
        self.ridge_encoders_ = {}
        self.codes_ = np.concatenate([b.codes_ for b in self.blocks_], axis=1)
        self.nets_ = self.features_ = self.history_ = self.rounds_ = None
        self.n_iter_ = int(self.options_.n_rounds)

    def _start(self, data: CrossModalData, opts: DMHOptions) -> SimpleNamespace:
        """What the stages share over a fit (``run``): the seeded generators, the masks, the inputs
        standardised (``scalers_``), the two networks, and the state each round hands the next."""
        import torch

        from . import dam

        run = SimpleNamespace(opts=opts, device=resolve_device(self.device), rng=check_random_state(self.random_state))
        torch_seed = int(run.rng.integers(2**62))
        run.gen = torch.Generator().manual_seed(torch_seed)
        run.masks = [data.image_mask, data.text_mask]
        run.paired = run.masks[0] & run.masks[1]
        # objects each hash network is trained on (unpaired_dam=False: the paired objects only)
        run.train_masks = run.masks if opts.unpaired_dam else [run.paired, run.paired]
        run.raws = {"image": data.image, "text": data.text}
        self.scalers_ = {}
        for m, mask in zip(MODALITIES, run.masks, strict=True):
            mu, sd = column_mean_std(run.raws[m], mask)
            sd[sd < 1e-12] = 1.0
            self.scalers_[m] = (mu, sd)
        run.X = Standardised(run.raws, self.scalers_)  # recomputed when used: one n x d_v copy at a time
        self.cle_scaling_ = opts.view_scalings(run.raws, run.masks)
        run.encoders = opts.view_encoders(run.raws, run.train_masks)  # checked before any work
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(torch_seed)
            run.nets = {m: dam.make_net(m, run.raws[m].shape[1], opts.n_bits, (opts.hidden_size,)) for m in MODALITIES}
        self.dam_precision_ = opts.dam_precision
        if opts.dam_precision == "auto":
            self.dam_precision_ = "bfloat16" if native_bf16(run.device) else "float32"
        for net in run.nets.values():
            net.to(run.device)
            net.lean = bool(opts.dam_lean)
            net.precision = self.dam_precision_
        run.cle_dtype = opts.cle_precision(data.n_objects)
        run.Zs = [None, None]  # refreshed features (the inputs, standardised, in the first round)
        run.history = {"cle": [], "gbe": [], "dam_image": [], "dam_text": [], "time": []}
        run.adam = {"image": None, "text": None}  # each network's optimizer, kept across rounds
        run.trained = set()  # the networks trained so far (a contrastive partner must be one)
        run.agree_last = {"image": None, "text": None}  # bit agreement of each network's last epoch
        run.Y = run.H = run.H_relaxed = None
        run.clock = StageClock(run.history["time"], 3 * int(opts.n_rounds), self.verbose)
        return run

    def _cle_stage(self, run, r: int) -> None:
        """CLE of round ``r``: ``run.Y`` from the views (the inputs in the first round, the
        refreshed features after), the missing descriptions complemented."""
        opts, clock = run.opts, run.clock
        with clock.stage("cle", step=True):
            with clock.stage("cle_scale"):
                if r == 0:
                    views = [self._first_view(m, run, mask) for m, mask in zip(MODALITIES, run.masks, strict=True)]
                else:  # refreshed features are this fit's own: scaled in place where the dtype allows
                    views = [cle_mod.scale_view(Z, mask, run.cle_dtype, inplace=True)
                             for Z, mask in zip(run.Zs, run.masks, strict=True)]
                    run.Y = None  # the last round's Y is not read again: free it before CLE makes the next
                run.Zs = [None, None]
            given = None
            if opts.unpaired_complement == "ridge" and opts.complement == "lle" and not run.paired.all():
                with clock.stage("cle_ridge"):
                    given = unpaired.ridge_complement(views, run.masks, solver=opts.ridge_solver)
            parts = {}
            res = cle_mod.fit_cle(
                views, run.masks, d=opts.d, k=opts.k, lam=opts.lambda_, eta=opts.eta, max_iter=opts.cle_max_iter,
                tol=opts.cle_tol, complement_how=opts.complement, q_method=opts.q_update, y_method=opts.y_update,
                w_reg=opts.w_reg, neighbour_pool=opts.neighbour_pool, rng=run.rng, timings=parts, dtype=run.cle_dtype,
                complement_given=given, device=run.device, gram=None if opts.cle_gram else False,
            )
            clock.add("cle_", parts)
            run.Y = res.Y
            run.history["cle"].append(res.objective)
            del views, res, given  # the scaled views are the largest arrays of a fit: free them now
            release_free_memory()

    def _embedding_stage(self, run) -> None:
        """GBE (or, for DMH-PCA, the signed principal components) of ``run.Y``: the codes ``run.H``."""
        from . import gbe

        opts = run.opts
        with run.clock.stage("gbe", step=True):
            if opts.binary_embedding == "gbe":
                parts = {}
                lr, max_iter = opts.gbe_budget(warm=run.H_relaxed is not None)
                g = gbe.fit_gbe(
                    run.Y, opts.n_bits, gamma=opts.quantization_weight(), similarity=opts.similarity,
                    quantization=opts.quantization, init=opts.gbe_init, H_init=run.H_relaxed, lr=lr,
                    max_iter=max_iter, tol=opts.gbe_tol, schedule=opts.gbe_schedule,
                    exaggeration=float(opts.gbe_exaggeration), chunk_size=opts.chunk_size,
                    rng=run.rng, perplexity=opts.perplexity, solver=opts.gbe_solver, device=run.device, timings=parts,
                )
                run.clock.add("gbe_", parts)
                run.H, run.H_relaxed = g.codes, g.relaxed
                run.history["gbe"].append(g.loss)
                del g
                release_free_memory()
            else:
                # a principal direction's sign (and, for close eigenvalues, its rank) is arbitrary:
                # keep bit identities from round to round, as GBE's warm start does, since the
                # networks carry over between rounds
                H_pca = pca_codes(run.Y, opts.n_bits)
                run.H = H_pca if run.H is None else align_bits(H_pca, run.H)
                run.history["gbe"].append([])

    def _dam_stage(self, run, r: int) -> None:
        """DAM of round ``r``: each network trained to copy ``run.H``, then (before another round)
        the refreshed features ``run.Zs`` from their hidden layers."""
        from . import dam

        opts, clock, history = run.opts, run.clock, run.history
        with clock.stage("dam", step=True):
            for m, mask in zip(MODALITIES, run.train_masks, strict=True):
                with clock.stage(f"dam_{m}"):
                    agreement = []
                    warm_stop = opts.dam_stop == "agreement" and r > 0
                    partner = self._partner_outputs(run, m, mask) if opts.dam_contrastive else None
                    losses, run.adam[m] = dam.train_net(
                        run.nets[m], run.X.float32(m, mask), run.H[mask].astype(np.float32),
                        epochs=opts.epochs_of_round(r), lr=getattr(opts, f"{m}_lr"), batch_size=opts.batch_size,
                        generator=run.gen, optimizer=run.adam[m], device=run.device, agreement=agreement,
                        agree_tol=opts.dam_agree_tol if warm_stop else None, agree_ref=run.agree_last[m],
                        agree_target=opts.agreement_target(r), partner=partner,
                        contrastive=float(opts.dam_contrastive),
                    )
                    run.trained.add(m)
                    if agreement:
                        run.agree_last[m] = agreement[-1]
                    history.setdefault(f"dam_{m}_agreement", []).append(agreement)
                    history[f"dam_{m}"].append(losses)
                    release_free_memory()  # after one modality's float32 inputs, before the next
            if self.record_diagnostics:
                self._record_round(run)
            with clock.stage("refresh"):
                if self.refresh_features and r + 1 < opts.n_rounds:
                    for i, (m, mask) in enumerate(zip(MODALITIES, run.masks, strict=True)):
                        run.Zs[i] = hidden_features(run.nets[m], partial(run.X.float32, m, mask), mask,
                                                    opts.hidden_size)
                        release_free_memory()

    def _record_round(self, run) -> None:
        """This round's Y, codes, losses and network weights, for :mod:`dmh.diagnostics`."""
        history = run.history
        self.rounds_.append({
            "Y": np.asarray(run.Y, dtype=np.float32).copy(), "codes": run.H.copy(),
            "gbe_loss": history["gbe"][-1][-1][1] if history["gbe"][-1] else None,
            "nets": {m: {k: v.detach().cpu().clone() for k, v in run.nets[m].state_dict().items()}
                     for m in MODALITIES},
            "dam_loss": {m: history[f"dam_{m}"][-1][-1] if history[f"dam_{m}"][-1] else None for m in MODALITIES},
        })

    @staticmethod
    def _partner_outputs(run, m, mask):
        """For ``dam_contrastive``: the other network's outputs for the paired objects among the
        rows ``mask`` (NaN rows for the others), or ``None`` while that network is untrained (the
        image network's first round)."""
        from . import dam

        other = "text" if m == "image" else "image"
        if other not in run.trained:
            return None
        rows = run.paired[mask]
        out = np.full((int(mask.sum()), run.nets[other].head.out_features), np.nan, dtype=np.float32)
        out[rows] = dam.net_outputs(run.nets[other], run.X.float32(other, run.paired))
        return out

    def _first_view(self, m, run, mask):
        """View ``m`` as CLE's first round sees it, per :attr:`cle_scaling_`."""
        if self.cle_scaling_[m] == "view":  # the inputs as given, the view scaled as a whole (a copy)
            return cle_mod.scale_view(run.raws[m], mask, run.cle_dtype)
        if run.cle_dtype == np.float64:  # every feature standardised
            return cle_mod.scale_view(run.X[m], mask)
        return cle_mod.scale_view(run.X.float32(m), mask, run.cle_dtype, inplace=True)  # a float32 copy, in place

    def _fit_ridge_encoders(self, run) -> None:
        """``encoders_`` (``encoder`` resolved per view) and the ridge map of each view it names
        ``"ridge"``, fitted on the objects that view's network was trained on."""
        from .ridge_encoder import fit_ridge_encoder

        self.encoders_ = run.encoders
        self.ridge_encoders_ = {}
        for m, mask in zip(MODALITIES, run.train_masks, strict=True):
            if self.encoders_[m] == "ridge":
                self.ridge_encoders_[m] = fit_ridge_encoder(partial(_row_blocks, run.X, m, mask), run.H[mask])

    # ------------------------------------------------------------------ encoding
    def _project(self, X, modality):
        from . import dam

        if getattr(self, "blocks_", None):
            return np.concatenate([b._project(X, modality) for b in self.blocks_], axis=1)
        mu, sd = self.scalers_[modality]
        ridge = getattr(self, "ridge_encoders_", {}).get(modality)
        Z = (X - mu) / sd
        if ridge is None:
            return dam.net_outputs(self.nets_[modality], Z)
        w = float(self.ridge_weight)
        out = ridge.outputs(Z)
        return out if w == 1.0 else w * out + (1.0 - w) * dam.net_outputs(self.nets_[modality], Z)

    # ------------------------------------------------------------------ persistence
    def _extra_meta(self):
        options = getattr(self, "options_", None) or DMHOptions.of(self)
        meta = {"options": {k: getattr(options, k) for k in PRESETS[options.preset]}}
        ridges = getattr(self, "ridge_encoders_", {})
        if ridges:  # files without it encode every view by its network
            meta["ridge_alpha"] = {m: r.alpha for m, r in ridges.items()}
        blocks = getattr(self, "blocks_", None)
        if blocks:  # each block's ridge maps, where it has any
            meta["block_ridge_alpha"] = [{m: r.alpha for m, r in b.ridge_encoders_.items()} for b in blocks]
        if hasattr(self, "use_unpaired_"):  # what the fit used, and under "auto" why
            meta["use_unpaired"] = self.use_unpaired_
            meta["unpaired_choice"] = self.unpaired_choice_
        return meta

    def _set_extra_meta(self, meta):
        """The options the fit ran with: the header's where it names them, else the preset's."""
        saved = meta.get("options") or {}
        if not isinstance(saved, dict):
            raise ParameterError(f"'options' must be an object, got {saved!r}")
        self.options_ = DMHOptions.of(self)
        for name, value in saved.items():
            if name in PRESETS[self.options_.preset] and getattr(self, name) is None:
                setattr(self.options_, name, tuple(value) if isinstance(value, list) else value)
        options = vars(self.options_)
        validate_params(options, {k: self._parameter_constraints[k] for k in saved if k in options}, "DMH options")
        self._ridge_alpha = _ridge_alphas(meta.get("ridge_alpha") or {}, "ridge_alpha")
        n_blocks = len(self._block_sizes())
        block_alphas = meta.get("block_ridge_alpha") or [{}] * n_blocks
        if not isinstance(block_alphas, list) or len(block_alphas) != n_blocks:
            raise ParameterError(f"'block_ridge_alpha' must list one object per block ({n_blocks}), "
                                 f"got {block_alphas!r}")
        self._block_ridge_alpha = [_ridge_alphas(a, "block_ridge_alpha") for a in block_alphas]
        if "use_unpaired" in meta:  # files written before "auto" existed do not say
            used, choice = meta["use_unpaired"], meta.get("unpaired_choice")
            if not isinstance(used, bool) or not (choice is None or isinstance(choice, dict)):
                raise ParameterError(f"'use_unpaired' must be true or false and 'unpaired_choice' an object or null, "
                                     f"got {used!r} and {choice!r}")
            self.use_unpaired_, self.unpaired_choice_ = used, choice

    def _block_shells(self) -> list:
        """The blocks of a model read from a file, before their weights: each a DMH of its bits with
        the model's parameters and options, its features and its ridge penalties."""
        params = {**self.get_params(deep=False), "block_bits": None}
        sizes = self._block_sizes()
        alphas = getattr(self, "_block_ridge_alpha", None) or [{}] * len(sizes)
        shells = []
        for n_bits, alpha in zip(sizes, alphas, strict=True):
            b = type(self)(**{**params, "n_bits": n_bits})
            b.n_bits_, b.n_features_, b._ridge_alpha = n_bits, dict(self.n_features_), alpha
            b.options_ = DMHOptions(**{**vars(self.options_), "n_bits": n_bits})  # the header's, set before
            shells.append(b)
        return shells

    def _get_state(self):
        if getattr(self, "blocks_", None):
            return {f"block{j}.{k}": v for j, b in enumerate(self.blocks_) for k, v in b._get_state().items()}
        state = {}
        for m, net in self.nets_.items():
            for key, value in net.state_dict().items():
                state[f"{m}_net.{key}"] = value.detach().cpu().numpy()
            state[f"{m}_mean"], state[f"{m}_scale"] = self.scalers_[m]
        for m, ridge in getattr(self, "ridge_encoders_", {}).items():
            state[f"{m}_ridge_coef"], state[f"{m}_ridge_intercept"] = ridge.coef, ridge.intercept
        return state

    def _state_spec(self):
        import torch

        from . import dam

        if len(self._block_sizes()) > 1:
            return {f"block{j}.{k}": tuple(b.n_bits_ if want == "B" else want for want in shape)
                    for j, b in enumerate(self._block_shells()) for k, shape in b._state_spec().items()}
        spec = {}
        for m, dim in (("image", "I"), ("text", "T")):
            spec[f"{m}_mean"] = (dim,)
            spec[f"{m}_scale"] = (dim,)
            if m in getattr(self, "_ridge_alpha", {}):
                spec[f"{m}_ridge_coef"] = (dim, "B")
                spec[f"{m}_ridge_intercept"] = ("B",)
            with torch.device("meta"):  # shapes only: nothing is allocated
                net = dam.make_net(m, self.n_features_[m], self.n_bits_, (self.hidden_size,))
            for key, value in net.state_dict().items():
                spec[f"{m}_net.{key}"] = tuple(value.shape)
        return spec

    def _set_state(self, state):
        import torch

        from . import dam

        self.blocks_ = None
        if len(self._block_sizes()) > 1:
            self.blocks_ = self._block_shells()
            for j, b in enumerate(self.blocks_):
                prefix = f"block{j}."
                b._set_state({k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)})
            first = self.blocks_[0]
            self.scalers_, self.encoders_, self.ridge_encoders_ = first.scalers_, first.encoders_, {}
            self.nets_ = None
            return
        self.scalers_ = {m: (state[f"{m}_mean"], state[f"{m}_scale"]) for m in ("image", "text")}
        self.nets_ = {}
        for m in ("image", "text"):
            net = dam.make_net(m, self.n_features_[m], self.n_bits_, (self.hidden_size,))
            prefix = f"{m}_net."
            sd = {k[len(prefix):]: torch.as_tensor(v) for k, v in state.items() if k.startswith(prefix)}
            net.load_state_dict(sd)
            net.eval()
            self.nets_[m] = net
        from .ridge_encoder import RidgeEncoder

        alphas = getattr(self, "_ridge_alpha", {})
        self.ridge_encoders_ = {m: RidgeEncoder(state[f"{m}_ridge_coef"], state[f"{m}_ridge_intercept"], a)
                                for m, a in alphas.items()}
        self.encoders_ = {m: "ridge" if m in alphas else "network" for m in MODALITIES}


def block_sizes(n_bits: int, n_blocks: int) -> list[int]:
    """The bits of each of ``n_blocks`` blocks of an ``n_bits`` code: as even as possible, the first
    ``n_bits % n_blocks`` blocks one bit longer."""
    q, r = divmod(int(n_bits), int(n_blocks))
    return [q + (j < r) for j in range(int(n_blocks))]


def _ridge_alphas(alphas, name: str) -> dict:
    """A header's ridge penalties per view, checked: ``{"image"/"text": positive number}``."""
    if not isinstance(alphas, dict) or not set(alphas) <= set(MODALITIES) or \
            not all(isinstance(a, (int, float)) and not isinstance(a, bool) and a > 0 for a in alphas.values()):
        raise ParameterError(f"'{name}' must map 'image'/'text' to positive numbers, got {alphas!r}")
    return {m: float(a) for m, a in alphas.items()}


def _row_blocks(X, m, mask, step: int = 8192):
    """The standardised rows of view ``m`` where ``mask`` holds, block by block (float32)."""
    n = int(mask.sum())
    return (X.float32(m, mask, s, min(s + step, n)) for s in range(0, n, step))
