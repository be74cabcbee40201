"""DMH's options: the presets that fill in the options left as ``None``, the options one fit runs
with (:class:`DMHOptions`, every preset resolved once, at the start of ``fit``, under DMH's flat
parameter names), the memory a fit needs (:func:`fit_memory_bytes`) and where it runs. The stages
that read them are in :mod:`dmh.methods.dmh_stages`."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from ..data import CrossModalData
from ..errors import ParameterError, check_finite_memory

#: the code length at which ``gamma`` keeps its value under ``gamma_scaling="bits"``: the paper sets
#: gamma = 0.01 and studies its sensitivity at 16 bits (its Fig. 5)
GAMMA_REFERENCE_BITS = 16

#: a ``gbe_block_bits`` of at least every code length (``n_bits`` is at most 4096): GBE as one
#: problem of the whole code, as the paper solves it
ONE_PROBLEM = 4096

#: Values of the options beyond the paper that a ``preset`` gives when they are left as ``None``.
#: ``"paper"`` is the paper's method, each of these options at the value that leaves it as printed
#: (``research/studies/quality_paper_exact.py`` checks its codes); ``"default"`` is the design default
#: chosen by the rule of docs/defaults.md (validation splits of the development sets' training
#: objects; docs/quality.md gives the evidence per option). Every preset names the same options,
#: each a parameter of DMH whose default is ``None``.
PRESETS = {
    "paper": dict(similarity="clip", perplexity=30.0, dam_stop="fixed", dam_lean=False, cle_dtype="float64",
                  unpaired_complement="neighbours", unpaired_dam=True, use_unpaired=True, unpaired_margin=0.0,
                  cle_scaling="feature",
                  encoder="network", gamma_scaling="none",
                  gbe_lr=0.05, gbe_max_iter=150, gbe_tol=1e-5, gbe_schedule="constant", cle_gram=False,
                  dam_agree_target=None, gbe_exaggeration=1.0, gbe_block_bits=ONE_PROBLEM, dam_scaling="feature"),
    "default": dict(similarity="perplexity", perplexity=30.0, dam_stop="agreement", dam_lean=True, cle_dtype="auto",
                    unpaired_complement="ridge", unpaired_dam=True, use_unpaired="auto", unpaired_margin=1.0,
                    cle_scaling="auto",
                    encoder="network", gamma_scaling="none",
                    gbe_lr=0.5, gbe_max_iter=80, gbe_tol=5e-4, gbe_schedule="cosine", cle_gram=True,
                    dam_agree_target=0.98, gbe_exaggeration=1.0, gbe_block_bits=16, dam_scaling="auto"),
}

#: GBE's later rounds under ``gbe_schedule="cosine"`` start from the previous round's relaxed codes,
#: near a solution: their first step is this share of ``gbe_lr`` and their budget this share of
#: ``gbe_max_iter`` (docs/speed.md: the loss the constant schedule reached in 150 steps, with as few
#: bits changed from the previous round's codes)
GBE_WARM_LR = 0.4
GBE_WARM_STEPS = 0.75


def preset_options(params: dict) -> dict:
    """The options that ``params`` (a ``get_params`` dict) leaves as ``None``, with the values its
    ``preset`` gives them; ``{}`` for an unknown preset (``fit`` reports it)."""
    name = params.get("preset", "default")
    preset = PRESETS.get(name) if isinstance(name, str) else None
    if preset is None:
        return {}
    return {k: v for k, v in preset.items() if params.get(k) is None}


class DMHOptions(SimpleNamespace):
    """Every parameter of a :class:`~dmh.methods.dmh.DMH` as one fit runs with it: the options left
    as ``None`` filled in by the preset (``options.similarity`` is never ``None``), read as
    attributes. ``fit`` resolves them once (``model.options_``, also written in a saved model's
    header), under DMH's flat parameter names; the model's own parameters stay as given
    (scikit-learn's ``get_params`` / ``clone``, and the keys of recorded results, read those). The
    stages read the same values as typed components (``model.stages_``,
    :class:`dmh.methods.dmh_stages.Stages`)."""

    @classmethod
    def of(cls, model) -> DMHOptions:
        """The options a fit of ``model`` (fitted or not) runs with, at its ``n_bits``."""
        params = model.get_params(deep=False)
        return cls(**{**params, **preset_options(params), "n_bits": int(getattr(model, "n_bits_", params["n_bits"]))})

    def check_memory(self, data: CrossModalData) -> None:
        """Refuse sizes that cannot be allocated before allocating them (hidden_size, d, n_bits):
        :func:`fit_memory_bytes`, the estimated peak of the fit, against the machine's memory."""
        n = data.n_objects
        n_bytes = fit_memory_bytes(
            n, data.image.shape[1], data.text.shape[1], hidden=self.hidden_size, d=self.d, n_bits=self.n_bits,
            cle_bytes=cle_precision(self.cle_dtype, n).itemsize, refresh=self.refresh_features and self.n_rounds > 1,
            exact_gbe=self.gbe_solver == "exact" or (self.gbe_solver == "auto" and n < _approx_min_n()),
            input_bytes=data.image.itemsize, fully_paired=data.is_fully_paired,
        )
        check_finite_memory(n_bytes, "DMH", f"hidden_size={self.hidden_size}, d={self.d}, n_bits={self.n_bits}")


def cle_precision(value: str, n: int) -> np.dtype:
    """CLE's precision for ``n`` objects: ``value`` (``cle_dtype``), with ``"auto"`` float32 from
    :data:`dmh.methods.gbe.APPROX_MIN_N` objects on."""
    if value == "auto":
        value = "float32" if n >= _approx_min_n() else "float64"
    return np.dtype(value)


def resolve_device(device: str) -> str:
    """``"auto"`` -> ``"cuda"`` when torch sees a GPU, else ``"cpu"``; ``"cuda"`` without one is an error."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise ParameterError("device='cuda' but torch sees no CUDA GPU; use device='cpu' or 'auto'")
    return device


def native_bf16(device: str) -> bool:
    """Whether ``device`` multiplies bfloat16 natively: a CUDA GPU that torch says supports it, or
    a CPU whose flags (Linux ``/proc/cpuinfo``) list AVX512-BF16 or AMX-BF16. Elsewhere ``False``
    (bfloat16 would be emulated, slower than float32)."""
    import torch

    if device == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


#: a view is *sparse* (bag of words, tags) when at least this share of its observed entries is zero
SPARSE_ZERO_SHARE = 0.9


def never_sparse(Z: np.ndarray, observed: np.ndarray, threshold: float = SPARSE_ZERO_SHARE) -> bool:
    """Whether :func:`sparse_view` is false for every subset of ``Z``'s observed rows: each of them
    has fewer than ``threshold`` of its entries zero (the share of any rows is the mean of theirs;
    a margin covers the rounding of that mean). Dense features such as UCI digits' and
    Wikipedia's are; a bag of words is not."""
    rows = np.flatnonzero(observed)
    if rows.size == 0 or Z.shape[1] == 0:
        return False
    least = min(int(np.count_nonzero(Z[rows[s : s + 8192]], axis=1).min()) for s in range(0, rows.size, 8192))
    return 1.0 - least / Z.shape[1] < threshold - 1e-9


def sparse_view(Z: np.ndarray, observed: np.ndarray, threshold: float = SPARSE_ZERO_SHARE) -> bool:
    """Whether at least ``threshold`` of the entries of ``Z``'s observed rows are exactly zero
    (counted by blocks of rows: no copy of the view)."""
    rows = np.flatnonzero(observed)
    if rows.size == 0 or Z.shape[1] == 0:
        return False
    nonzero = 0
    for s in range(0, rows.size, 8192):
        nonzero += int(np.count_nonzero(Z[rows[s : s + 8192]]))
    return 1.0 - nonzero / (rows.size * Z.shape[1]) >= threshold


def _approx_min_n() -> int:
    from . import gbe

    return gbe.APPROX_MIN_N


def fit_memory_bytes(n: int, d_image: int, d_text: int, *, hidden: int = 4096, d: int = 512, n_bits: int = 64,
                     cle_bytes: int = 8, refresh: bool = True, exact_gbe: bool = False, input_bytes: int = 8,
                     fully_paired: bool = False) -> float:
    """Estimated peak resident memory (bytes) of a DMH fit on ``n`` objects, the inputs included.

    The terms, from the arrays the fit holds at its fullest moment (see docs/scaling.md for the
    peaks measured against it): the inputs as :class:`~dmh.data.CrossModalData` keeps them
    (``input_bytes`` per value: 8 for its default float64, 4 for ``dtype="float32"``); the largest
    stage of a round among CLE, GBE (Y in float64 and float32, the neighbour search's 1 GiB
    blocks, the exact solver's n x n cache) and DAM (one modality's float32 inputs beside the
    refreshed features); the networks with their gradients and Adam moments; and about
    ``FIT_MEMORY_BASE`` of interpreter, libraries and allocator slack. CLE holds its scaled views
    (``cle_bytes`` per value; with ``fully_paired=False`` also the neighbour search's copies of
    their paired rows) and, in float32, at most 5 n x d arrays of its conjugate gradients or the
    neighbour search's blocks of distances; in float64 (small n) about 12 n x d arrays and the
    float64 temporaries of the standardisation.
    Against measured peaks (paper shape, 64 bits, float32 CLE, 2 rounds, fully paired, float32
    inputs): see docs/scaling.md, "Fitting 10^5 objects in 8 GB".
    """
    n, d_in, d_max = float(n), float(d_image + d_text), float(max(d_image, d_text))
    b = float(cle_bytes)
    inputs = float(input_bytes) * n * d_in
    knn = min(2**28, 12.0 * n * min(n, 2048))
    if b == 8:
        views1 = b * n * d_in + 8.0 * 3 * n * d_max
        views2 = (b * 2 * n * hidden + 4.0 * 2 * n * hidden + 8.0 * 2 * n * hidden) if refresh else 0.0
        cle_work = 12.0 * b * n * d + knn
    else:
        copies = 1.0 if fully_paired else 2.0  # the views, and without full pairing their paired rows' copies
        views1 = copies * b * n * d_in
        views2 = copies * b * 2 * n * hidden if refresh else 0.0
        cle_work = max(5.0 * b * n * d, knn)
    gbe = 12.0 * n * d + min(2.0**30, 8.0 * n * n) + (min(4.0 * n * n, 2.0**31) if exact_gbe else 200.0 * n * 8)
    # DAM: one modality's float32 inputs; the refresh: both views' features and a block of inputs
    dam = max(4.0 * n * d_max, (4.0 * 2 * n * hidden + 4.0 * min(n, 16384) * d_max) if refresh else 0.0)
    nets = 4.0 * 4 * hidden * (d_in + 2 * n_bits + 4)
    return inputs + max(max(views1, views2) + cle_work, gbe, dam) + nets + FIT_MEMORY_BASE


#: the part of :func:`fit_memory_bytes` that does not grow with the data: interpreter, numpy, torch,
#: allocator slack (bytes)
FIT_MEMORY_BASE = 1.1 * 2.0**30
