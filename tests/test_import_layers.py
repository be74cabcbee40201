"""The featurizing modules import one way: no import circle among dmh.featurize,
dmh.featurizer_spec and dmh._featurizers, counting lazy imports inside functions and the package
``__init__`` that importing a submodule runs."""

from __future__ import annotations

import ast
from pathlib import Path

import dmh

ROOT = Path(dmh.__file__).parent
WATCHED = ("dmh.featurize", "dmh.featurizer_spec", "dmh._featurizers")


def _modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = ("dmh", *path.relative_to(ROOT).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _is_package(name: str, modules: dict[str, Path]) -> bool:
    return modules[name].name == "__init__.py"


def import_graph() -> dict[str, set[str]]:
    """Module -> the dmh modules it imports anywhere in its text. Importing ``a.b.c`` from outside
    the package ``a.b`` also counts as importing ``a.b`` (its ``__init__`` runs first)."""
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for name, path in modules.items():
        package = name if _is_package(name, modules) else name.rpartition(".")[0]
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                targets.add(mod)
                targets.update(f"{mod}.{a.name}" for a in node.names)  # `from pkg import submodule`
        for target in targets:
            if target not in modules:
                continue
            parts = target.split(".")
            for k in range(2, len(parts) + 1):  # the target and each package above it, below dmh
                above = ".".join(parts[:k])
                if above != name and not (name + ".").startswith(above + "."):
                    graph[name].add(above)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
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

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_the_checker_sees_a_circle_through_a_package_init():
    graph = {
        "dmh.a": {"dmh.a._x"},
        "dmh.a._x": {"dmh.b"},
        "dmh.b": {"dmh.a"},  # what `from .a._y import f` in dmh.b adds: dmh.a's __init__ runs
        "dmh.a._y": set(),
    }
    assert cycles(graph) == [["dmh.a", "dmh.a._x", "dmh.b"]]


def test_no_import_circle_through_the_featurizing_modules():
    graph = import_graph()
    assert "dmh._featurizers" in graph["dmh.featurizer_spec"]  # the graph sees lazy and package imports
    bad = [c for c in cycles(graph) if any(m.startswith(WATCHED) for m in c)]
    assert not bad, f"import circles: {bad}"
