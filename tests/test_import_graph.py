"""The package's modules import one another without a circle, and only downward through the layers
of :data:`LAYERS` (the module map of docs/development.md).

The graph is read from the source with :mod:`ast`: every import statement counts, at module level or
inside a function (a lazy import is still an edge: it runs as soon as the function does), except those
under ``if TYPE_CHECKING:``. Importing ``dmh.a.b`` also runs the ``__init__`` of ``dmh.a``, so a module
depends on every package above what it imports, except the packages above itself (those ran before it).
"""
from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_files(root: Path = SRC, package: str = "dmh") -> dict[str, Path]:
    """Dotted module name -> file, packages under their own name (their ``__init__.py``)."""
    out = {}
    for path in sorted((root / package).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.AST):
    """Import nodes of ``tree``, skipping ``if TYPE_CHECKING:`` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def import_graph(root: Path = SRC, package: str = "dmh") -> dict[str, set[str]]:
    """Module -> the package's modules its execution may import (see the module docstring)."""
    files = module_files(root, package)
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        is_pkg = path.name == "__init__.py"
        here = name.split(".") if is_pkg else name.split(".")[:-1]  # the package a relative import starts in
        targets: set[str] = set()
        for node in _imports(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
                continue
            base = here[: len(here) - node.level + 1] if node.level else []
            mod = ".".join(base + ([node.module] if node.module else []))
            targets.add(mod)
            targets.update(f"{mod}.{a.name}" for a in node.names if f"{mod}.{a.name}" in files)
        own_parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
        if is_pkg:
            own_parents.add(name)
        edges = set()
        for t in targets:
            if t.split(".")[0] != package:
                continue
            parts = t.split(".")
            for i in range(1, len(parts) + 1):
                m = ".".join(parts[:i])
                if m in files and m not in own_parents and m != name:
                    edges.add(m)
        graph[name] = edges
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out = []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


#: circles being taken apart on another branch: each entry must still be a circle (delete it once it
#: is not), and no other circle may appear
KNOWN: list[list[str]] = []


def test_the_package_has_no_import_circle():
    found = cycles(import_graph())
    new = [c for c in found if c not in KNOWN]
    assert new == [], "import circles: " + "; ".join(" <-> ".join(c) for c in new)
    gone = [c for c in KNOWN if c not in found]
    assert gone == [], "no longer a circle, delete it from KNOWN: " + "; ".join(" <-> ".join(c) for c in gone)


def test_the_checker_sees_a_circle_through_a_package_init(tmp_path):
    pkg = tmp_path / "dmh"
    (pkg / "feat").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "feat" / "__init__.py").write_text("from ._folder import scan\n")
    (pkg / "feat" / "_folder.py").write_text("def scan():\n    from ..spec import Spec\n")
    (pkg / "spec.py").write_text("from dmh.feat import other\n")
    (pkg / "plain.py").write_text("from . import spec\nfrom typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from .feat import _folder\n")
    graph = import_graph(tmp_path)
    assert cycles(graph) == [["dmh.feat", "dmh.feat._folder", "dmh.spec"]]
    assert graph["dmh.plain"] == {"dmh.spec"}  # TYPE_CHECKING imports are not run
    assert graph["dmh.feat._folder"] == {"dmh.spec"}  # its own package ran before it


#: the layers of the package, lowest first, each a list of module prefixes (``"methods"`` is
#: ``dmh.methods`` and every module under it): a module imports only from its own layer and those
#: before it. docs/development.md draws the same list. The package's own ``__init__`` (``dmh``: the
#: public names, gathered from every layer) is in none.
LAYERS: list[list[str]] = [
    ["errors", "_json", "_atomic", "_archive", "_validation", "_literal", "_memory", "_topk", "_torch_nn"],
    ["constraints"],
    ["_threads"],
    ["data", "io", "datasets", "_featurizers", "featurizer_spec", "featurize"],
    ["_keys", "registry", "base"],
    ["hamming", "_ranking", "metrics"],
    ["heldout"],
    ["methods", "baselines", "peers", "blocks"],
    ["testing"],
    ["code_files", "index"],
    ["_workers", "records", "_scoring", "_cell_keys", "_cell_loop", "evaluation"],
    ["selection", "diagnostics"],
    ["report", "plots"],
    ["experiments"],
    ["app"],
    ["cli"],
]


def layer_of(module: str, layers=LAYERS, package: str = "dmh") -> int | None:
    """The index in ``layers`` of ``module``'s longest matching prefix; ``None`` for the package itself
    or a module no prefix names."""
    best, length = None, -1
    for i, prefixes in enumerate(layers):
        for p in prefixes:
            full = f"{package}.{p}"
            if (module == full or module.startswith(full + ".")) and len(full) > length:
                best, length = i, len(full)
    return best


def upward_imports(graph: dict[str, set[str]], layers=LAYERS, package: str = "dmh") -> list[str]:
    """Each import of a module from a higher layer than its own, as ``"low -> high"``."""
    out = []
    for name in sorted(graph):
        here = layer_of(name, layers, package)
        if here is None:
            continue
        for target in sorted(graph[name]):
            there = layer_of(target, layers, package)
            if there is not None and there > here:
                out.append(f"{name} -> {target}")
    return out


def test_every_module_has_a_layer():
    unplaced = [m for m in sorted(import_graph()) if m != "dmh" and layer_of(m) is None]
    assert unplaced == [], "modules in no layer of LAYERS (and docs/development.md): " + ", ".join(unplaced)


def test_no_module_imports_from_a_higher_layer():
    up = upward_imports(import_graph())
    assert up == [], "imports from a higher layer: " + "; ".join(up)


def test_the_layer_check_sees_an_upward_import(tmp_path):
    pkg = tmp_path / "dmh"
    (pkg / "methods").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import evaluation\n")
    (pkg / "methods" / "__init__.py").write_text("")
    (pkg / "methods" / "choice.py").write_text("def f():\n    from ..evaluation import run\n")
    (pkg / "evaluation.py").write_text("from .methods import choice\n")
    layers = [["methods"], ["evaluation"]]
    graph = import_graph(tmp_path)
    assert upward_imports(graph, layers) == ["dmh.methods.choice -> dmh.evaluation"]  # a lazy import counts
    assert layer_of("dmh", layers) is None and layer_of("dmh.methods.choice", layers) == 0


def test_the_docs_draw_the_layers():
    """docs/development.md's module map lists the layers of :data:`LAYERS`, in their order."""
    text = (SRC.parent / "docs" / "development.md").read_text(encoding="utf-8")
    block = text.split("Data flows downward", 1)[1].split("```", 2)[1]
    drawn = [line.split("   ")[0].split() for line in block.strip().splitlines() if line and not line.startswith(" ")]
    assert [[p.rstrip("/") for p in layer] for layer in drawn] == LAYERS
