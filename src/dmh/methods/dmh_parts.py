"""The small parts DMH's stages are made of, each chosen by name or given as an object (pykeen's
resolver pattern): how GBE's target S^Y is built (a :class:`Similarity`), how CLE complements a
missing description (a :class:`Complement`) and what encodes new objects (an :class:`Encoder`).

Each part is a typed dataclass that validates its own settings (:meth:`Component.check`); a new
choice is a new class registered in its family's table, not a new keyword of :class:`~dmh.DMH`.
Every setting also has the flat name DMH has always taken (``similarity="perplexity",
perplexity=30``): :meth:`Component.flat` gives those, and ``from_flat`` builds the part back from
them, so cell keys and saved models written with the flat names stay valid.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import ClassVar

from .._validation import Interval, Options, validate_params
from ..errors import ParameterError

__all__ = ["LLE", "Clip", "Complement", "Component", "Encoder", "Network", "Perplexity", "Raw", "Ridge",
           "Shift", "Similarity", "SparseRidge", "Zero", "resolve"]


class Component:
    """A part of a DMH fit: a dataclass whose fields are its settings.

    ``name`` is what selects the class (``similarity="perplexity"``); ``_fields`` maps each field to
    its flat DMH parameter name and the values it may take (:mod:`dmh._validation` constraints,
    ``None`` in the list where ``None`` means "the preset's value")."""

    name: ClassVar[str] = ""
    #: the flat DMH parameter that names this family's choice (``"similarity"``), if any
    _kind: ClassVar[str | None] = None
    #: field -> (flat DMH parameter name, constraints)
    _fields: ClassVar[dict[str, tuple[str, list]]] = {}
    #: field -> (its family's base class, its registry), for a field that holds another component
    _parts: ClassVar[dict[str, tuple[type, dict]]] = {}

    def part(self, field: str):
        """The component in ``field``, resolved from its name where given as one (``None`` stays)."""
        base, registry = self._parts[field]
        value = getattr(self, field)
        return None if value is None else resolve(value, registry, base, f"{type(self).__name__}.{field}")

    def check(self) -> None:
        """Validate every setting (:class:`~dmh.errors.ParameterError` naming the class and field)."""
        validate_params({f: getattr(self, f) for f in self._fields},
                        {f: allowed for f, (_, allowed) in self._fields.items()}, type(self).__name__)
        for field in self._parts:
            sub = self.part(field)
            if sub is not None:
                sub.check()

    def flat(self) -> dict:
        """These settings under DMH's flat parameter names (a part's as well)."""
        out = {self._kind: self.name} if self._kind else {}
        out.update({flat: getattr(self, f) for f, (flat, _) in self._fields.items()})
        for field in self._parts:
            sub = self.part(field)
            if sub is not None:
                out.update(sub.flat())
            else:  # the preset's choice: the family's flat name left as None
                out[self._parts[field][0]._kind] = None
        return out

    @classmethod
    def from_flat(cls, flat: dict):
        """This class with its settings read from DMH's flat parameters (presets resolved)."""
        kw = {f: flat[name] for f, (name, _) in cls._fields.items()}
        for field, (base, registry) in cls._parts.items():
            kw[field] = _family_from_flat(base, registry, flat)
        return cls(**kw)

    @classmethod
    def flat_constraints(cls) -> dict:
        """The constraints of every flat parameter this class (and its parts' families) reads."""
        out = {flat: allowed for flat, allowed in cls._fields.values()}
        for field, (base, registry) in cls._parts.items():
            nullable = cls.__dataclass_fields__[field].default is None
            out[base._kind] = [Options(*registry)] + ([None] if nullable else [])
            for klass in registry.values():
                out.update(klass.flat_constraints())
        return out


def resolve(value, registry: dict[str, type], base: type, what: str):
    """``value`` as a component of family ``base``: the object itself, or the class ``registry``
    names, with its defaults; anything else is a one-line :class:`ParameterError` naming ``what``
    (a class of one's own too: the fit, the saved models and the cell keys know the registered ones)."""
    if isinstance(value, base) and type(value) in registry.values():
        return value
    if isinstance(value, str) and value in registry:
        return registry[value]()
    raise ParameterError(f"{what} must be one of {tuple(registry)} or an object of one of their classes "
                         f"({', '.join(k.__name__ for k in registry.values())}), got {value!r}")


def _family_from_flat(base: type, registry: dict, flat: dict):
    name = flat.get(base._kind)
    return None if name is None else registry[name].from_flat(flat)


# -------------------------------------------------------------------------------- S^Y (GBE)
class Similarity(Component):
    """How GBE's target S^Y (Eq. 7) is made from the CLE features ``Y``."""

    _kind = "similarity"

    def gbe_args(self) -> dict:
        """What :func:`dmh.methods.gbe.fit_gbe` takes for this similarity."""
        return {"similarity": self.name, "perplexity": 30.0}


@dataclass
class Clip(Similarity):
    """The paper's: inner products of ``Y``, the negative ones clipped to zero, normalised."""

    name: ClassVar[str] = "clip"


@dataclass
class Shift(Similarity):
    """Inner products of ``Y`` shifted to be non-negative, normalised."""

    name: ClassVar[str] = "shift"


@dataclass
class Raw(Similarity):
    """Inner products of ``Y`` as they are, normalised."""

    name: ClassVar[str] = "raw"


@dataclass
class Perplexity(Similarity):
    """t-SNE's sparse, neighbour-calibrated P over Euclidean distances of ``Y``, at ``perplexity``
    (``None``: the preset's)."""

    name: ClassVar[str] = "perplexity"
    _fields = {"perplexity": ("perplexity", [Interval(numbers.Real, 1, None, closed="right"), None])}
    perplexity: float | None = None

    def gbe_args(self) -> dict:
        return {"similarity": self.name, "perplexity": self.perplexity}


SIMILARITIES = {c.name: c for c in (Clip, Shift, Raw, Perplexity)}


# -------------------------------------------------------------------------------- complement (CLE)
class Complement(Component):
    """How CLE fills in an object's missing description."""

    _kind = "complement"

    @property
    def predicts(self) -> bool:
        """Whether the missing descriptions are predicted before CLE (:meth:`given`)."""
        return False

    def given(self, views, masks, paired):
        """Descriptions of the unpaired objects predicted before CLE (``None``: CLE's own)."""
        return None


@dataclass
class LLE(Complement):
    """Eq. 5: from the object's nearest paired neighbours in its own view (``unpaired="neighbours"``),
    or by a ridge regression from the observed view to the missing one, fitted on the paired objects
    each round (``"ridge"``, solved by ``ridge_solver``: scikit-learn's ``RidgeCV`` or its dual
    form). ``unpaired=None``: the preset's."""

    name: ClassVar[str] = "lle"
    _fields = {"unpaired": ("unpaired_complement", [Options("neighbours", "ridge"), None]),
               "ridge_solver": ("ridge_solver", [Options("sklearn", "dual")])}
    unpaired: str | None = None
    ridge_solver: str = "dual"

    @property
    def predicts(self) -> bool:
        return self.unpaired == "ridge"

    def given(self, views, masks, paired):
        from . import unpaired

        return unpaired.ridge_complement(views, masks, solver=self.ridge_solver)


@dataclass
class Zero(Complement):
    """Zeros (the DMH-ZERO ablation)."""

    name: ClassVar[str] = "zero"


COMPLEMENTS = {c.name: c for c in (LLE, Zero)}


# -------------------------------------------------------------------------------- encoder (DAM)
class Encoder(Component):
    """What encodes new objects of each view."""

    _kind = "encoder"

    def views(self, raws: dict, masks) -> dict:
        """``{"image": "network"|"ridge", "text": ...}`` for these views (checked before the fit)."""
        return {m: self.name for m in raws}


@dataclass
class Network(Encoder):
    """DAM's network (the paper)."""

    name: ClassVar[str] = "network"


_WEIGHT = ("ridge_weight", [Interval(numbers.Real, 0, 1, closed="right")])


@dataclass
class Ridge(Encoder):
    """A ridge regression from the view's inputs as the networks see them to the last round's codes, its
    penalty chosen by generalised cross-validation (:mod:`dmh.methods.ridge_encoder`); ``weight``:
    the map's share of the outputs, the rest the network's (1: the ridge map alone)."""

    name: ClassVar[str] = "ridge"
    _fields = {"weight": _WEIGHT}
    weight: float = 1.0

    def views(self, raws: dict, masks) -> dict:
        from .ridge_encoder import MAX_FEATURES

        for m, Z in raws.items():
            if Z.shape[1] > MAX_FEATURES:
                raise ParameterError(
                    f"encoder='ridge': the {m} view has {Z.shape[1]} features, more than the "
                    f"{MAX_FEATURES} whose Gram matrix the ridge map decomposes; use encoder='network' or 'auto'")
        return {m: "ridge" for m in raws}


@dataclass
class SparseRidge(Encoder):
    """:class:`Ridge` for a sparse view of at most :data:`~dmh.methods.ridge_encoder.MAX_FEATURES`
    features (sparse as :func:`dmh.methods.dmh_options.sparse_view` finds it), the network for the
    others."""

    name: ClassVar[str] = "auto"
    _fields = {"weight": _WEIGHT}
    weight: float = 1.0

    def views(self, raws: dict, masks) -> dict:
        from .dmh_options import sparse_view
        from .ridge_encoder import MAX_FEATURES

        return {m: "ridge" if Z.shape[1] <= MAX_FEATURES and sparse_view(Z, mask) else "network"
                for (m, Z), mask in zip(raws.items(), masks, strict=True)}


ENCODERS = {c.name: c for c in (Network, Ridge, SparseRidge)}

#: each family's flat parameters at their defaults, for a member that lacks one (``Clip`` has no
#: ``perplexity``: the flat ``perplexity`` is then the preset's)
FAMILY_DEFAULTS = {"perplexity": None, "unpaired_complement": None, "ridge_solver": "dual", "ridge_weight": 1.0}
