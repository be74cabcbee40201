"""The package's modules import one another without a circle.

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
