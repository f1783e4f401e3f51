"""The import graph of ``weft`` (read with ``ast``, nothing imported): the stages of
DESIGN.md section 7 call each other one way only.

Every ``import`` and ``from ... import`` anywhere in a module counts, at the top or
inside a function (a deferred import is still a dependency, and a loop through one
is still a loop).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2] / "weft"

FORBIDDEN = {
    # lowering describes *how* as data: it writes no C and knows nothing of how regions are chosen
    "weft.lower": ("weft.codegen", "weft.compose"),
    # composition chooses regions from members: what it must know of lowering (does it fit?)
    # and of prices (the pricer of fusion="priced") is passed in
    "weft.compose": ("weft.lower", "weft.codegen", "weft.cost"),
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def imports_of(name: str) -> set[str]:
    """The weft modules ``name`` imports (``from weft.x import y`` is ``weft.x.y`` when that is a module)."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join(anchor + ([node.module] if node.module else []))
            for alias in node.names:
                found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base)
    return {_owner(target) for target in found if target == "weft" or target.startswith("weft.")} - {name}


def _owner(target: str) -> str:
    """The module that defines ``target`` (a module, or the module a name lives in)."""
    while target not in MODULES:
        target = target.rpartition(".")[0]
    return target


GRAPH = {name: imports_of(name) for name in MODULES}


def package_of(module: str) -> str:
    """``weft.lower.fused`` -> ``weft.lower``; a top-level module (``weft.compile``) is its own."""
    return ".".join(module.split(".")[:2])


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_is_read():
    """The reader sees real edges (a test that finds nothing would pass vacuously)."""
    assert "weft.ir" in GRAPH["weft.lower.nest"]
    assert "weft.lower.nest" in GRAPH["weft.codegen.render"]
    assert "weft.compose" in GRAPH["weft.fuse"] and "weft.lower.fused" in GRAPH["weft.fuse"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_cycle_between_modules():
    assert cycles(GRAPH) == []


def test_no_cycle_between_packages():
    packages: dict[str, set[str]] = {}
    for module, targets in GRAPH.items():
        packages.setdefault(package_of(module), set()).update(
            package_of(target) for target in targets if package_of(target) != package_of(module)
        )
    assert cycles(packages) == []


def test_nothing_imports_the_package_root():
    """``import weft`` from inside the package is a hidden loop through ``weft/__init__``
    (which imports the front end and the compiler)."""
    assert sorted(module for module, targets in GRAPH.items() if "weft" in targets) == []


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_seams_run_one_way(package):
    crossing = sorted(
        (module, target)
        for module, targets in GRAPH.items() if package_of(module) == package
        for target in targets if package_of(target) in FORBIDDEN[package]
    )
    assert crossing == [], f"{package} must not import {FORBIDDEN[package]}"
