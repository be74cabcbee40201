"""Deep Manifold Hashing (Shi et al.): CLE -> GBE -> DAM, alternated for ``n_rounds`` rounds.

:class:`DMH` holds the paper's settings, the run's settings and one slot per stage; each stage is a
component of :mod:`dmh.methods.dmh_stages` with its own settings. docs/method.md gives every
choice made where the paper is silent, and docs/quality.md how the defaults were chosen.
"""

from __future__ import annotations

import numbers

import numpy as np

from .._threads import MAX_THREADS
from .._validation import (
    NON_NEGATIVE,
    NON_NEGATIVE_INT,
    POSITIVE,
    POSITIVE_INT,
    Boolean,
    Interval,
    Options,
)
from ..base import BaseHasher, store_init_args
from ..data import CrossModalData
from ..errors import ParameterError, ParameterTypeError
from .dam_inputs import column_mean_std  # noqa: F401 - importable from dmh.methods.dmh
from .dmh_blocks import BlockEnsemble, block_sizes  # noqa: F401 - importable from dmh.methods.dmh
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
    never_sparse,
    preset_options,
    resolve_device,
    sparse_view,
)
from .dmh_parts import FAMILY_DEFAULTS, resolve
from .dmh_persist import DMHPersistence
from .dmh_stages import CLE, DAM, GBE, SLOTS, Stages
from .pca_embedding import align_bits, pca_codes  # noqa: F401 - importable from dmh.methods.dmh

__all__ = ["DMH", "PRESETS"]

#: every flat parameter a stage's settings also go by (``similarity``, ``gbe_lr``, ...), at its default
FLAT_DEFAULTS = {**FAMILY_DEFAULTS, **CLE().flat(), **GBE().flat(), **DAM().flat()}


def _nested_names() -> dict:
    """``"stage__field"`` (and ``"stage__part__field"``) -> the flat parameter it sets."""
    out = {}
    for slot, (_, registry) in SLOTS.items():
        for klass in registry.values():
            for field, (flat, _) in klass._fields.items():
                out[f"{slot}__{field}"] = flat
            for field, (base, members) in klass._parts.items():
                out[f"{slot}__{field}"] = base._kind
                for member in members.values():
                    out.update({f"{slot}__{field}__{f}": flat for f, (flat, _) in member._fields.items()})
    return out


NESTED = _nested_names()


class DMH(DMHPersistence, BlockEnsemble, BaseHasher):
    """Deep Manifold Hashing for semi-paired, unlabeled image-text data.

    Complemented Local Embedding (CLE) embeds both modalities in one space ``Y``; Global Binary
    Embedding (GBE) turns ``Y`` into codes; Deep Adaptive Mapping (DAM) trains one network per
    modality to produce them. The three alternate for ``n_rounds`` rounds.

    Parameters
    ----------
    n_bits : int, default=64
        Code length ``c``.
    d, k, lambda_, eta, gamma : default=512, 3, 0.1, 0.01, 0.01
        The paper's: dimension of ``Y``, neighbours per object in CLE, weights of the
        local-consistency term and of the ``||Y||^2`` regulariser (Eq. 6), weight of the
        quantisation loss (Eq. 11).
    n_rounds : int, default=3
        Rounds of CLE -> GBE -> DAM.
    hidden_size, image_lr, text_lr, batch_size, dam_epochs : default=4096, 1e-3, 1e-3, 128, 10
        DAM's networks: width of the hidden layer (``z^v`` of the next CLE round), Adam's learning
        rates, mini-batch size and passes over the data per network and round.
    cle, gbe, dam : str, component or None
        One slot per stage: :class:`~dmh.methods.dmh_stages.CLE`,
        :class:`~dmh.methods.dmh_stages.GBE` (or ``"pca"``: :class:`~dmh.methods.dmh_stages.PCA`,
        DMH-PCA) and :class:`~dmh.methods.dmh_stages.DAM`, by name or as an object with its own
        settings; ``None``: the stage's defaults.
    preset : {"default", "paper"}, default="default"
        Where a stage's settings left as ``None`` take their value (:data:`PRESETS`): ``"paper"``
        is the paper's method, ``"default"`` the design defaults of docs/defaults.md (among
        them GBE solved as 16-bit problems side by side, ``gbe_block_bits=16``).
        ``DMH.paper()`` is ``DMH(preset="paper")``.
    use_unpaired : bool, "auto" or None
        Whether a semi-paired set's unpaired objects enter the fit: ``True`` (the paper),
        ``False`` (the pairs alone), or ``"auto"``: the side under which held-out pairs find their
        partners better (:mod:`dmh.methods.unpaired_choice`); ``None``: the preset's.
    unpaired_margin : float or None
        Under ``"auto"``: by how many standard errors the fit on every object must score above the
        pairs alone to be used; ``None``: the preset's.
    block_bits : int or None, default=None
        Codes made of independent fits of at most ``block_bits`` bits side by side, each with its
        own seed drawn from ``random_state`` (:mod:`dmh.methods.dmh_blocks`); ``None``: one fit.
    device : {"auto", "cpu", "cuda"}, default="auto"
        Where GBE and DAM run; CLE and all randomness stay on the CPU, and the networks end there.
    n_threads : int or None, default=None
        Threads for torch, BLAS/OpenMP and faiss; ``None``: the process setting.
    random_state : int, Generator or None, default=None
        Same seed, same codes (on the same machine and thread count).
    verbose, record_diagnostics : bool, default=False
        Progress bars and timings; each round's features, codes and weights in ``rounds_``.
    **options
        A stage's settings under their flat names (``similarity="clip"``, ``perplexity=30``,
        ``gbe_lr=0.1``, ...: :data:`FLAT_DEFAULTS`), applied over the slots' components; these are
        the names ``get_params`` gives, saved models hold and result cells are keyed by.

    Attributes
    ----------
    options_ : DMHOptions
        Every parameter as the fit ran with it, under its flat name, the preset's values filled in.
    stages_ : Stages
        The stages' components the fit ran with, every setting filled in.
    nets_, scalers_ : dict
        The two hash networks and each modality's standardisation.
    codes_, features_, history_ : the training codes, CLE's last ``Y`` and the losses and seconds
        per round (not saved with the model).
    cle_scaling_, dam_scaling_, dam_precision_, encoders_, ridge_encoders_ : what ``"auto"`` settings
        resolved to.
    use_unpaired_, unpaired_choice_ : whether the unpaired objects were used, and under ``"auto"`` why.
    blocks_ : list of DMH or None
        The fitted blocks where ``block_bits`` makes more than one.
    n_iter_ : int
        Rounds run.

    Examples
    --------
    >>> import numpy as np
    >>> import dmh
    >>> from dmh import DMH
    >>> from dmh.methods.dmh_stages import GBE
    >>> digits = dmh.load_dataset("uci-digits").train().subset(np.arange(300))
    >>> data = dmh.make_semi_paired(digits, 0.5, random_state=0)
    >>> model = DMH(16, n_rounds=1, hidden_size=64, d=32, dam_epochs=2, random_state=0).fit(data)
    >>> model.encode(data.image[:3], modality="image").shape
    (3, 16)
    >>> model.similarity is None, model.options_.similarity  # the parameter as given, the preset's value
    (True, 'perplexity')
    >>> DMH(gbe=GBE(similarity="clip")).get_params()["similarity"]
    'clip'
    """

    method_name = "dmh"
    uses_unpaired = True
    min_paired = 2
    uses_torch = True
    preset_options = staticmethod(preset_options)
    _parameter_constraints = {
        **BaseHasher._parameter_constraints,
        "d": [POSITIVE_INT], "k": [POSITIVE_INT], "lambda_": [NON_NEGATIVE], "eta": [NON_NEGATIVE],
        "gamma": [NON_NEGATIVE], "n_rounds": [POSITIVE_INT], "hidden_size": [POSITIVE_INT], "image_lr": [POSITIVE],
        "text_lr": [POSITIVE], "batch_size": [POSITIVE_INT], "dam_epochs": [NON_NEGATIVE_INT],
        "preset": [Options(*PRESETS)], "use_unpaired": [Boolean(), Options("auto"), None],
        "unpaired_margin": [NON_NEGATIVE, None], "block_bits": [POSITIVE_INT, None],
        "device": [Options("auto", "cpu", "cuda")], "n_threads": [Interval(numbers.Integral, 1, MAX_THREADS), None],
        "verbose": [Boolean()], "record_diagnostics": [Boolean()],
        **CLE.flat_constraints(), **GBE.flat_constraints(), **DAM.flat_constraints(),
        "binary_embedding": [Options("gbe", "pca")],
    }

    def __init__(self, n_bits=64, *, d=512, k=3, lambda_=0.1, eta=0.01, gamma=0.01, n_rounds=3, hidden_size=4096,
                 image_lr=1e-3, text_lr=1e-3, batch_size=128, dam_epochs=10, cle=None, gbe=None, dam=None,
                 preset="default", use_unpaired=None, unpaired_margin=None, block_bits=None, device="auto",
                 n_threads=None, random_state=None, verbose=False, record_diagnostics=False, **options):
        unknown = sorted(set(options) - set(FLAT_DEFAULTS))
        if unknown:  # what Python says of an unknown keyword, as one line
            raise ParameterTypeError(f"DMH got unexpected keyword argument(s) {unknown}")
        store_init_args(self, {k: v for k, v in locals().items() if k not in ("options", "unknown")})
        store_init_args(self, options)

    @staticmethod
    def data_inert_options(params: dict, train) -> dict:
        """The options that change nothing on any part of the training set ``train``, at the values
        that say so (``params``: every parameter, presets resolved): ``dam_scaling="auto"`` is
        ``"feature"`` where no view can be sparse (:func:`never_sparse`: dense features such as
        UCI digits' and Wikipedia's). A cell key holds them there (:func:`dmh.evaluation.make_cell`),
        so a default that changes only sparse views keeps the keys of every other result."""
        if params.get("dam_scaling") == "auto" and all(
                never_sparse(Z, mask) for Z, mask in ((train.image, train.image_mask), (train.text, train.text_mask))):
            return {"dam_scaling": "feature"}
        return {}

    @classmethod
    def paper(cls, n_bits=64, **params) -> DMH:
        """The paper's method: ``DMH(n_bits, preset="paper", **params)``."""
        return cls(n_bits, preset="paper", **params)

    # ------------------------------------------------------------------ parameters
    def __getattr__(self, name):
        """A stage's setting under its flat name (``model.similarity``), as :meth:`get_params` gives it."""
        if name in FLAT_DEFAULTS and "n_bits" in self.__dict__:
            return self._flat_options()[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _flat_options(self) -> dict:
        """The stages' settings under their flat names: the defaults, then each slot's component,
        then the flat keywords given."""
        flat = dict(FLAT_DEFAULTS)
        for slot, (base, registry) in SLOTS.items():
            value = self.__dict__.get(slot)
            if value is not None:
                try:
                    flat.update(resolve(value, registry, base, slot).flat())
                except ParameterError:  # reported by fit (_check_param_combinations)
                    pass
        flat.update({k: v for k, v in self.__dict__.items() if k in FLAT_DEFAULTS})
        return flat

    def get_params(self, deep=True) -> dict:
        """Every parameter under its flat name (a slot's component spread over its settings'
        names), the form cell keys, saved models and ``clone`` read; a slot holding a component of
        another class than the built-in ones (or a bad value) is given as well."""
        out = {name: self.__dict__[name] for name in _TOP}
        for slot, (_, registry) in SLOTS.items():
            value = self.__dict__.get(slot)
            if value is not None and not (value in registry if isinstance(value, str) else type(value) in registry.values()):
                out[slot] = value
        out.update(self._flat_options())
        return out

    def set_params(self, **params) -> DMH:
        """Set parameters by their flat names, a slot, or ``stage__setting`` (scikit-learn's nested
        form: ``gbe__lr=0.1`` is ``gbe_lr=0.1``, ``gbe__similarity__perplexity=50`` is ``perplexity=50``)."""
        for key, value in params.items():
            name = NESTED.get(key, key)
            if name not in _TOP and name not in FLAT_DEFAULTS and name not in SLOTS:
                raise ParameterError(f"DMH has no parameter {key!r}")
            setattr(self, name, value)
        return self

    def __repr__(self, N_CHAR_MAX=700) -> str:
        defaults = type(self)().get_params()
        changed = [f"{k}={v!r}" for k, v in self.get_params().items() if k == "n_bits" or k not in defaults
                   or not (v is defaults[k] or (type(v) is type(defaults[k]) and v == defaults[k]))]
        return f"{type(self).__name__}({', '.join(changed)})"

    def stages(self) -> Stages:
        """The stages' components a fit runs with, every setting filled in (the preset's values)."""
        return Stages.from_flat(vars(DMHOptions.of(self)))

    def _validate_params(self, n_bits: int) -> None:
        """Each slot's component by its own settings' names (``GBE: lr must be ...``), then every
        parameter under its flat name."""
        for slot, (base, registry) in SLOTS.items():
            value = self.__dict__.get(slot)
            if value is not None:
                resolve(value, registry, base, slot).check()
        super()._validate_params(n_bits)

    # ------------------------------------------------------------------ fitting
    def _fit(self, data: CrossModalData) -> None:
        from .dmh_fit import ridge_encoders, run_rounds, start

        opts = self.options_ = DMHOptions.of(self)  # the presets resolved, once
        self.stages_ = Stages.from_flat(vars(opts))
        self.unpaired_choice_ = None
        use = opts.use_unpaired
        if use == "auto" and not data.is_fully_paired:
            from .unpaired_choice import choose_unpaired

            opts.check_memory(data)  # the fit on every object, refused before the candidates' work
            choice = choose_unpaired(self, data, margin=opts.unpaired_margin)
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
        state = start(data, opts, self.stages_, device=self.device, random_state=self.random_state,
                      verbose=self.verbose, record=self.record_diagnostics)
        self.scalers_, self.cle_scaling_, self.dam_precision_ = state.scalers, state.scalings, state.precision
        self.dam_scaling_ = state.input_scalings
        self.rounds_ = state.rounds
        run_rounds(state)
        self.nets_, self.encoders_ = state.nets, state.encoders
        self.ridge_encoders_ = ridge_encoders(state)
        self.codes_, self.features_, self.history_ = state.H, state.Y, state.history
        self.n_iter_ = int(opts.n_rounds)

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


#: the parameters of DMH itself (not a stage's): the paper's and the run's
_TOP = ("n_bits", "d", "k", "lambda_", "eta", "gamma", "n_rounds", "hidden_size", "image_lr", "text_lr",
        "batch_size", "dam_epochs", "preset", "use_unpaired", "unpaired_margin", "block_bits", "device",
        "n_threads", "random_state", "verbose", "record_diagnostics")
