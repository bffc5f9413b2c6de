"""The layout ARCHITECTURE.md describes, held: every room imports only rooms below it in
LAYERS (type-checking and function-local imports count too), no module imports itself round
a circle, and no module outgrows about 500 lines."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import conformance

PACKAGE = Path(conformance.__file__).parent

#: the rooms from the bottom up: each may import only those before it (and itself)
LAYERS = [
    "spec", "codec", "files", "profiles", "wire", "scenario", "probes", "runner", "broker",
    "clients", "report", "selftest", "fuzz.parsing", "fuzz.inputs", "fuzz.network", "fuzz.stateful",
    "pipeline", "pytest_plugin", "cli",
]
MAX_LINES = 520


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imports(path: Path, known: set[str]) -> Iterator[str]:
    """The project's modules `path` imports, wherever the import statement is."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name in known:
                yield name


def room(module: str) -> str | None:
    rest = module.removeprefix("conformance").removeprefix(".")
    for layer in sorted(LAYERS, key=len, reverse=True):
        if rest == layer or rest.startswith(layer + "."):
            return layer
    return None


def graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: set(imports(path, known)) - {name} for name, path in found.items()}


def test_every_module_is_in_a_room() -> None:
    homeless = [m for m in modules() if room(m) is None and m not in
                {"conformance", "conformance.__main__", "conformance.fuzz"}]
    assert homeless == []


def test_rooms_import_only_rooms_below_them() -> None:
    upward = []
    for module, targets in graph().items():
        here = room(module)
        if here is None:
            continue
        for target in targets:
            there = room(target)
            if there is not None and LAYERS.index(there) > LAYERS.index(here):
                upward.append(f"{module} -> {target}")
    assert sorted(upward) == []


def test_no_module_imports_itself_round_a_circle() -> None:
    edges = graph()
    # a package's __init__ re-exporting its modules is not a circle through them
    for name in edges:
        edges[name] = {t for t in edges[name] if not name.startswith(t + ".")}
    circles: list[list[str]] = []
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for target in sorted(edges[node]):
            if state.get(target) == 1:
                circles.append(stack[stack.index(target):] + [target])
            elif target not in state:
                visit(target)
        stack.pop()
        state[node] = 2

    for node in sorted(edges):
        if node not in state:
            visit(node)
    assert circles == []


def test_no_module_is_over_about_500_lines() -> None:
    long = {name: n for name, path in modules().items()
            if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}
