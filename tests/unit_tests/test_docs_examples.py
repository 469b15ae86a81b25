"""Every Python block of the README, the docs pages and the integrations' READMEs is
complete: it compiles as a module (no top-level `await`), pyflakes finds nothing in it
(no undefined name, no unused import), and every name it imports from this project's
packages exists. The runnable ones are also run (tests/integration_tests/test_readme.py).

And what a user reads holds no development notes: no pointers into the repository's
history or its design notes, no package index that does not have the package."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ("example-run", "stub-report")


def pages() -> list[Path]:
    docs = [
        path
        for path in sorted((ROOT / "docs").rglob("*.md"))
        if not set(path.relative_to(ROOT / "docs").parts) & set(RECORDED)
    ]
    return [ROOT / "README.md", *docs, *sorted((ROOT / "integrations").glob("*/README.md"))]


def python_blocks() -> list[tuple[str, str]]:
    blocks = []
    for page in pages():
        text = page.read_text(encoding="utf-8")
        for number, code in enumerate(re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)):
            blocks.append((f"{page.relative_to(ROOT)}#{number}", code))
    return blocks


BLOCKS = python_blocks()


class Collect:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def write(self, text: str) -> None:
        self.lines.append(text)

    def flush(self) -> None:
        pass


def test_the_pages_have_python_blocks() -> None:
    assert len(BLOCKS) >= 15


@pytest.mark.parametrize(("name", "code"), BLOCKS, ids=[name for name, _ in BLOCKS])
def test_the_block_compiles_and_pyflakes_finds_nothing(name: str, code: str) -> None:
    compile(code, name, "exec")  # a top-level `await` is a SyntaxError here
    api = pytest.importorskip("pyflakes.api", reason="pyflakes: install the test extra")
    reporter = pytest.importorskip("pyflakes.reporter")
    warnings, errors = Collect(), Collect()
    found = api.check(code, name, reporter.Reporter(warnings, errors))
    assert found == 0, "".join(warnings.lines + errors.lines)


OWN = ("turnbon_graph", "turnbon_terminal", "turnbon_bfcl", "turnbon_local")


def own_imports(code: str) -> list[tuple[str, list[str]]]:
    """(module, names) for each `from M import names` and `import M` of this project's."""
    imports = []
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            imports.append((node.module, [alias.name for alias in node.names]))
        elif isinstance(node, ast.Import):
            imports.extend((alias.name, []) for alias in node.names)
    return [(module, names) for module, names in imports if module.split(".")[0] in OWN]


@pytest.mark.parametrize(("name", "code"), BLOCKS, ids=[name for name, _ in BLOCKS])
def test_the_names_it_imports_from_this_project_exist(name: str, code: str) -> None:
    for module_name, names in own_imports(code):
        if module_name.startswith(("turnbon_bfcl", "turnbon_local")):
            # their optional dependencies (bfcl-eval, xllamacpp) are imported on use only
            pytest.importorskip(module_name.split(".")[0])
        module = importlib.import_module(module_name)
        for attribute in names:
            assert hasattr(module, attribute), f"{name}: {module_name}.{attribute}"


FORBIDDEN = {
    r"\.\./shared": "a pointer outside the repository",
    r"DESIGN\.md": "the design notes",
    r"\bthis machine\b": "the machine the docs were written on",
    r"\bthe issue\b": "the issue tracker",
    r"\bcommit [0-9a-f]{7,40}\b": "a commit hash",
    r"py-spy": "a profiler breakdown",
    r"pip install '?turnbon-graph": "a package index (the package is on none)",
}


@pytest.mark.parametrize("page", pages(), ids=lambda page: str(page.relative_to(ROOT)))
def test_what_a_user_reads_holds_no_development_notes(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    for pattern, what in FORBIDDEN.items():
        found = re.search(pattern, text, re.IGNORECASE)
        assert found is None, f"{what}: {found.group(0) if found else ''!r}"


def test_the_readme_is_a_front_page() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 250
    first_screen = "\n".join(readme.splitlines()[:80])
    assert "bubblewrap" in first_screen and "chromium" in first_screen


def test_every_docs_page_is_in_the_site_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:\n", 1)[1]
    listed = set(re.findall(r":\s+(\S+\.md)\s*$", nav, re.M))
    for page in pages():
        if page.is_relative_to(ROOT / "docs"):
            assert page.relative_to(ROOT / "docs").as_posix() in listed, page.name
