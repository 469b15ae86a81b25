"""The packages' structure, read from their import graph: the layout is the architecture.

Over the library and its integrations alike: no import cycles, no module over 450 lines,
no private name (`_name`) imported from another module (what one module keeps to itself
stays there, and what several share is public in the module that owns it), no folder of
more than 20 modules, and no three modules of one folder sharing a name prefix (three
`report_*` modules are a `report/` package waiting to be made). At most 12 modules at the
library's root.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "turnbon_graph"
PACKAGES = [PACKAGE, *sorted(p.parent for p in (ROOT / "integrations").glob("*/__init__.py"))]
MAX_LINES = 450
MAX_ROOT_MODULES = 12
MAX_FOLDER_MODULES = 20
MAX_SHARED_PREFIX = 2


def is_code(path: Path, package: Path) -> bool:
    """A module of the package, not a file of its bundled task fixtures (data)."""
    return "tasks" not in path.relative_to(package).parts


def module_name(path: Path, package: Path = PACKAGE) -> str:
    parts = path.relative_to(package.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    module_name(p, package): p
    for package in PACKAGES
    for p in sorted(package.rglob("*.py"))
    if is_code(p, package)
}
FIRST_PARTY = tuple(package.name for package in PACKAGES)


def imports(path: Path) -> Iterator[tuple[str, list[str]]]:
    """Each module of the project the file imports (anywhere in it, type-only imports
    too), with the names it takes from it."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith(FIRST_PARTY):
                    yield alias.name, []
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if not node.module.startswith(FIRST_PARTY):
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


def test_the_integrations_are_read_too() -> None:
    # the rules above hold over the integrations' modules, not their task fixtures
    assert {"turnbon_terminal", "turnbon_harbor", "turnbon_local"} <= set(MODULES)
    assert not any(".tasks." in name for name in MODULES)


def folders() -> dict[Path, list[str]]:
    """Each folder of code, with the names of its modules (`__init__` aside)."""
    found: dict[Path, list[str]] = {}
    for path in MODULES.values():
        if path.stem != "__init__":
            found.setdefault(path.parent, []).append(path.stem)
    return found


def crowded_prefixes(modules: list[str]) -> dict[str, list[str]]:
    """The name prefixes (up to the first `_`, a leading underscore aside) that more than
    `MAX_SHARED_PREFIX` of the modules share."""
    by_prefix: dict[str, list[str]] = {}
    for name in modules:
        by_prefix.setdefault(name.lstrip("_").split("_")[0], []).append(name)
    return {p: sorted(names) for p, names in by_prefix.items() if len(names) > MAX_SHARED_PREFIX}


def test_no_folder_holds_more_than_twenty_modules() -> None:
    crowded = {
        str(folder.relative_to(ROOT)): len(modules)
        for folder, modules in folders().items()
        if len(modules) > MAX_FOLDER_MODULES
    }
    assert crowded == {}


def test_no_three_modules_of_a_folder_share_a_name_prefix() -> None:
    shared = {
        str(folder.relative_to(ROOT)): prefixes
        for folder, modules in folders().items()
        if (prefixes := crowded_prefixes(modules))
    }
    assert shared == {}


def test_the_prefix_rule_finds_a_shared_prefix() -> None:
    # the rule itself: three report modules share one, a private module counts by its
    # name, and two of a kind are allowed
    modules = ["report", "report_format", "_report_pairs", "verifier", "verifier_watch"]
    assert crowded_prefixes(modules) == {"report": ["_report_pairs", "report", "report_format"]}


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
