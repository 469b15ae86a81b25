"""The package's structure, read from its import graph: the layout is the architecture.

No import cycles, no module over 450 lines, at most 12 modules at the package root, and
no private name (`_name`) imported from another module: what one module keeps to itself
stays there, and what several share is public in the module that owns it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "turnbon_graph"
MAX_LINES = 450
MAX_ROOT_MODULES = 12


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Each `turnbon_graph` module the file imports (anywhere in it, type-only imports
    too), with the names it takes from it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("turnbon_graph"):
                    yield alias.name, []
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not node.module.startswith("turnbon_graph"):
                continue
            plain = []
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                if submodule in MODULES:
                    yield submodule, []
                else:
                    plain.append(alias.name)
            if plain:
                yield node.module, plain


def graph() -> dict[str, set[str]]:
    return {
        name: {target for target, _ in imports(path) if target in MODULES and target != name}
        for name, path in MODULES.items()
    }


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for target in sorted(edges[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_no_import_cycles() -> None:
    assert cycles(graph()) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    # the check itself, on a graph with one: a -> b -> c -> a, and d apart
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [["a", "b", "c"]]


def test_no_module_over_the_line_limit() -> None:
    long = {
        name: lines
        for name, path in MODULES.items()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_no_integration_module_over_the_line_limit() -> None:
    # the integrations' own modules; their tasks' files are data
    long = {
        str(path.relative_to(ROOT)): lines
        for path in sorted((ROOT / "integrations").rglob("*.py"))
        if "tasks" not in path.relative_to(ROOT).parts
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_the_package_root_holds_few_modules() -> None:
    root = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(root) <= MAX_ROOT_MODULES, root


def test_no_private_name_is_imported_from_another_module() -> None:
    crossing = sorted(
        f"{name} takes {taken} from {source}"
        for name, path in MODULES.items()
        for source, names in imports(path)
        for taken in names
        if taken.startswith("_") and not taken.startswith("__")
    )
    assert crossing == []
