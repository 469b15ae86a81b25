"""Every TOML and shell snippet of the README and the docs pages is valid as printed, and
the fault tables name tests that exist."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
RECORDED = ("example-run", "stub-report")
RUN_PAGE = ROOT / "docs" / "cli.md"
"""Where `turnbon run`'s --config file is shown."""
FAULTS_PAGE = ROOT / "docs" / "terminal.md"
"""Where the terminal environment's fault table lives, a test per row."""


def pages() -> list[Path]:
    docs = [
        path
        for path in sorted((ROOT / "docs").rglob("*.md"))
        if not set(path.relative_to(ROOT / "docs").parts) & set(RECORDED)
    ]
    return [README, *docs, *sorted((ROOT / "integrations").glob("*/README.md"))]


def blocks(language: str, where: list[Path] | None = None) -> list[str]:
    found = []
    for page in where or pages():
        text = page.read_text(encoding="utf-8")
        found += re.findall(rf"^```{language}\n(.*?)^```", text, re.DOTALL | re.M)
    return found


def test_the_run_page_has_a_toml_example() -> None:
    assert blocks("toml", [RUN_PAGE])


@pytest.mark.parametrize("text", blocks("toml"))
def test_toml_snippets_parse(text: str) -> None:
    tomllib.loads(text)


def test_the_run_toml_example_names_only_settings_turnbon_run_knows() -> None:
    from turnbon_graph.cli.run import RUN_DEFAULTS

    for text in blocks("toml", [RUN_PAGE]):
        assert set(tomllib.loads(text)) <= set(RUN_DEFAULTS)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash to check the syntax with")
@pytest.mark.parametrize("text", blocks("bash"))
def test_shell_snippets_are_valid_bash(text: str) -> None:
    checked = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_the_fault_tables_name_tests_that_exist() -> None:
    """Each `file.py::test_name` (and `::test_name` after it, same file) the terminal
    page cites as holding a fault is a test function in that file."""
    tests = ROOT / "tests" / "integration_tests"
    section = FAULTS_PAGE.read_text(encoding="utf-8").split("## Faults, and what holds", 1)[1]
    cited = re.findall(r"`(test_\w+\.py)?::(test_\w+)`", section.split("\n## ", 1)[0])
    assert len(cited) >= 15
    current = ""
    for module, name in cited:
        current = module or current
        source = (tests / current).read_text()
        assert re.search(rf"^(async )?def {name}\(", source, re.M), f"{current}::{name}"
