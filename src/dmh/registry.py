"""Every hashing method by name: the ones dmh ships, those registered at run time
(:func:`register_method`) and those of installed packages (the ``dmh.methods`` entry-point group).
Wherever a method name is taken (``--method``, a config's ``"method"``, :func:`make_method`), a
class given as ``package.module:Class`` is taken too.

Entries are import strings, resolved only when a method is asked for, so that importing :mod:`dmh`
never pulls in PyTorch (only DMH and the deep peers need it) and the registry imports no method
module: :mod:`dmh.base` uses it to load any saved model.

A saved model and a result cell name their method by :func:`method_key`: the registered name of its
class, else its import path (``package.module:Class``), so that a file made with a class of one's
own loads wherever that class can be imported.
"""

from __future__ import annotations

import functools
import importlib
import re
import sys
import warnings

from .errors import MissingDependencyError, ParameterError, ParameterTypeError, UnknownNameError

__all__ = [
    "BUILTIN_METHODS",
    "ENTRY_POINT_GROUP",
    "METHODS",
    "PAPER_METHODS",
    "get_method_class",
    "make_method",
    "method_key",
    "method_names",
    "register_method",
    "resolve_method",
]

#: the entry-point group through which an installed package offers its methods, e.g. in its
#: pyproject.toml: ``[project.entry-points."dmh.methods"]`` / ``my-hash = "my_package.hashing:MyHasher"``
ENTRY_POINT_GROUP = "dmh.methods"

#: the methods dmh ships: name -> (module, class)
BUILTIN_METHODS: dict[str, tuple[str, str]] = {
    "dmh": ("dmh.methods.dmh", "DMH"),
    "cvh": ("dmh.baselines.cvh", "CVH"),
    "imh": ("dmh.baselines.imh", "IMH"),
    "cmfh": ("dmh.baselines.cmfh", "CMFH"),
    "lssh": ("dmh.baselines.lssh", "LSSH"),
    "stmh": ("dmh.baselines.stmh", "STMH"),
    "fsh": ("dmh.baselines.fsh", "FSH"),
    "cca-itq": ("dmh.peers.cca_itq", "CCAITQ"),
    "spdh": ("dmh.peers.spdh", "SPDH"),
    "djsrh": ("dmh.peers.djsrh", "DJSRH"),
    "jdsh": ("dmh.peers.jdsh", "JDSH"),
    "dgcpn": ("dmh.peers.dgcpn", "DGCPN"),
    "ucch": ("dmh.peers.ucch", "UCCH"),
    "sadch": ("dmh.peers.sadch", "SADCH"),
}

#: the methods of the DMH paper's experiments: DMH and its six baselines (the other built-ins are
#: the peers compared beyond the paper)
PAPER_METHODS = ("dmh", "cvh", "imh", "lssh", "stmh", "cmfh", "fsh")

#: every method registered in this process: the built-ins, then those of :func:`register_method`;
#: name -> (module, class) or the class itself. Installed packages' entry points are looked up
#: besides (:func:`method_names` lists them all).
METHODS: dict[str, tuple[str, str] | type] = dict(BUILTIN_METHODS)

#: a method's name: lower-case letters, digits, ``-`` and ``_``, from a letter (no ``.``: ``--param
#: METHOD.KEY=VALUE`` splits there; no ``:``: it marks a ``package.module:Class``; no ``,``: lists)
_NAME = re.compile(r"[a-z][a-z0-9_-]*\Z")
#: names that mean something else where methods are named (``dmh build --method auto``)
_RESERVED = ("auto",)
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_PATH = re.compile(rf"({_IDENT}(?:\.{_IDENT})*):({_IDENT}(?:\.{_IDENT})*)\Z")


# ------------------------------------------------------------------------------------ lookup
def method_names() -> list[str]:
    """Every method name that can be asked for: the built-ins, those registered in this process and
    those of installed packages (entry points of :data:`ENTRY_POINT_GROUP`), in that order."""
    return list(METHODS) + [n for n in _entry_points() if n not in METHODS]


def get_method_class(name) -> type:
    """The class of a method given by name (any case), as ``package.module:Class``, or as the class.

    An unknown name, a path that does not import or a class that is not a :class:`dmh.BaseHasher`
    raises :class:`dmh.errors.UnknownNameError` (a ``KeyError`` too) in one line."""
    if isinstance(name, type):
        return _checked(name, f"{name.__module__}:{name.__qualname__}")
    if not isinstance(name, str):
        raise ParameterTypeError(f"a method is a name or a package.module:Class, got {type(name).__name__}")
    spec = name.strip()
    if ":" in spec:
        module, attr = _split_path(spec)
        return _checked(_import(module, attr, spec), spec)
    key = spec.lower()
    entry = METHODS.get(key)
    if entry is None:
        entry = _entry_points().get(key)
    if entry is None:
        raise UnknownNameError(f"unknown method {name!r}; available: {', '.join(method_names())} "
                               "(or a class of your own as package.module:Class)")
    if isinstance(entry, type):
        return entry
    return _checked(_import(*entry, key), key)


def make_method(name, **params):
    """An instance of the method ``name`` (see :func:`get_method_class`) with ``params``."""
    return get_method_class(name)(**params)


def resolve_method(name) -> str:
    """How a method is named in result cells and saved models: a registered name in lower case, or,
    for a class or ``package.module:Class``, :func:`method_key` of the class (its registered name
    where it has one, else the module it is defined in and its name). Fails as
    :func:`get_method_class` does."""
    klass = get_method_class(name)
    if isinstance(name, str) and ":" not in name:
        return name.strip().lower()
    return method_key(klass)


def method_key(klass: type) -> str:
    """The name a model of ``klass`` is saved under: its registered name (built-in, registered or
    an installed entry point), else its import path ``module:Class``. Nothing is imported to find it."""
    for name, entry in [*METHODS.items(), *_entry_points().items()]:
        if _is_entry_of(entry, klass):
            return name
    return f"{klass.__module__}:{klass.__qualname__}"


def _is_entry_of(entry, klass) -> bool:
    if isinstance(entry, type):
        return entry is klass
    module, attr = entry
    if (module, attr) == (klass.__module__, klass.__qualname__):
        return True
    loaded = sys.modules.get(module)  # a re-exported class, where its module is imported already
    return loaded is not None and _getattr_path(loaded, attr) is klass


# ------------------------------------------------------------------------------- registering
def register_method(name: str, method, *, overwrite: bool = False):
    """Make ``method`` (a :class:`dmh.BaseHasher` subclass, or its ``"package.module:Class"``
    import path, imported when first used) available as ``name`` to every command and function
    that takes a method name: ``dmh.register_method("my-hash", MyHasher)``. Returns ``method``.

    ``name``: lower-case letters, digits, ``-`` and ``_``, starting with a letter. A built-in name
    cannot be taken; another registered name only with ``overwrite=True``. An installed package
    registers its methods through the ``dmh.methods`` entry-point group instead (see
    docs/extending.md).
    """
    if not isinstance(name, str) or not _NAME.match(name) or name in _RESERVED:
        raise ParameterError(f"method name {name!r} is not valid: use lower-case letters, digits, '-' and '_', "
                             "starting with a letter (and not 'auto')")
    if isinstance(method, str):
        entry = _split_path(method.strip())
    elif isinstance(method, type):
        entry = _checked(method, f"{method.__module__}:{method.__qualname__}")
    else:
        raise ParameterTypeError(f"register_method({name!r}, ...) takes a dmh.BaseHasher subclass or its "
                                 f"'package.module:Class' path, got {type(method).__name__}")
    if name in BUILTIN_METHODS:
        raise ParameterError(f"method name {name!r} is a built-in method of dmh; choose another name")
    if name in METHODS and not overwrite and METHODS[name] != entry:
        raise ParameterError(f"a method named {name!r} is registered already; pass overwrite=True to replace it")
    METHODS[name] = entry
    return method


def registered_methods() -> dict:
    """The methods registered in this process beyond the built-ins (for worker processes, which
    start with the built-ins only: :mod:`dmh._workers` registers these in each)."""
    return {k: v for k, v in METHODS.items() if BUILTIN_METHODS.get(k) != v}


# ----------------------------------------------------------------------------------- helpers
def _split_path(spec: str) -> tuple[str, str]:
    match = _PATH.match(spec)
    if match is None:
        raise UnknownNameError(f"method {spec!r} is neither a method name nor a class as package.module:Class")
    return match.group(1), match.group(2)


def _import(module: str, attr: str, spec: str):
    try:
        mod = importlib.import_module(module)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if module == missing or module.startswith(missing + "."):
            raise UnknownNameError(f"method {spec!r}: there is no module {missing!r} to import") from None
        raise MissingDependencyError(f"method {spec!r}: importing {module} needs the package {missing!r}, "
                                     "which is not installed") from None
    found = _getattr_path(mod, attr)
    if found is None:
        raise UnknownNameError(f"method {spec!r}: module {module} has no {attr!r}")
    return found


def _getattr_path(obj, dotted: str):
    for part in dotted.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            return None
    return obj


def _checked(klass, spec: str) -> type:
    """``klass`` if it is a concrete :class:`dmh.base.BaseHasher` subclass (read from the loaded
    module: a subclass exists only once ``dmh.base`` has run, and the registry must not import it):
    a class, not the base class itself nor an abstract one, that implements fitting (``_fit`` or
    ``fit``) and encoding (``_project``, ``project`` or ``encode``), and whose ``__init__`` takes
    ``n_bits`` and gives every parameter a default (:meth:`~sklearn.base.BaseEstimator.get_params`
    and the commands make it by keywords alone). Checked when a method is named, before any data
    are read."""
    base = sys.modules.get("dmh.base")
    if not (isinstance(klass, type) and base is not None and issubclass(klass, base.BaseHasher)):
        what = "not a subclass of dmh.BaseHasher" if isinstance(klass, type) else \
            f"a {type(klass).__name__}, not a dmh.BaseHasher subclass"
        raise UnknownNameError(f"method {spec!r} is not a hashing method: {getattr(klass, '__name__', klass)!r} is "
                               f"{what}")
    problem = _not_concrete(klass, base.BaseHasher)
    if problem:
        raise UnknownNameError(f"method {spec!r} is not a hashing method one can fit: {klass.__name__} {problem}")
    return klass


def _not_concrete(klass: type, root: type) -> str | None:
    """Why ``klass`` (a ``root`` subclass) cannot be made and fitted as a method, or None."""
    import inspect

    if klass is root:
        return "is the base class every method derives from; name a subclass that implements _fit and _project"
    if inspect.isabstract(klass):
        return f"is abstract (it leaves {', '.join(sorted(klass.__abstractmethods__))} unimplemented)"
    missing = [need for need, ways in (("_fit", ("_fit", "fit")), ("_project", ("_project", "project", "encode")))
               if all(getattr(klass, way) is getattr(root, way) for way in ways)]
    if missing:
        return f"does not implement {' and '.join(missing)} (it inherits dmh.BaseHasher's, which only raise)"
    try:
        signature = inspect.signature(klass)
    except (TypeError, ValueError):  # pragma: no cover - a builtin signature
        return None
    required = [p.name for p in signature.parameters.values()
                if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    if required:
        return f"needs {', '.join(required)} to be made: every parameter of its __init__ needs a default"
    if "n_bits" not in signature.parameters:
        return "has no n_bits parameter in its __init__ (the bit length is set through it)"
    return None


@functools.lru_cache(maxsize=8)
def _entry_points_on(path: tuple) -> dict[str, tuple[str, str]]:
    from importlib.metadata import entry_points

    out: dict[str, tuple[str, str]] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        name = ep.name.strip().lower()
        where = f"entry point {name!r} of group {ENTRY_POINT_GROUP!r} ({ep.value})"
        match = _PATH.match(ep.value.strip())
        if not _NAME.match(name) or name in _RESERVED or match is None:
            warnings.warn(f"{where} is not a valid method name and package.module:Class; ignored", stacklevel=3)
        elif name in BUILTIN_METHODS:
            warnings.warn(f"{where} takes the name of a built-in method; ignored", stacklevel=3)
        elif name in out and out[name] != (match.group(1), match.group(2)):
            warnings.warn(f"{where}: two installed packages offer this name; the first found is used", stacklevel=3)
        else:
            out.setdefault(name, (match.group(1), match.group(2)))
    return out


def _entry_points() -> dict[str, tuple[str, str]]:
    """The methods installed packages offer (read from their metadata, nothing imported)."""
    return _entry_points_on(tuple(sys.path))
