"""Every TOML and shell snippet of the README is valid as printed."""

from __future__ import annotations

import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README.read_text(), re.DOTALL | re.M)


def test_the_readme_has_a_toml_example() -> None:
    assert blocks("toml")


@pytest.mark.parametrize("text", blocks("toml"))
def test_toml_snippets_parse(text: str) -> None:
    tomllib.loads(text)


def test_the_run_toml_example_names_only_settings_turnbon_run_knows() -> None:
    from turnbon_graph.cli.run import RUN_DEFAULTS

    for text in blocks("toml"):
        assert set(tomllib.loads(text)) <= set(RUN_DEFAULTS)


@pytest.mark.skipif(shutil.which("bash") is None, reason="no bash to check the syntax with")
@pytest.mark.parametrize("text", blocks("bash"))
def test_shell_snippets_are_valid_bash(text: str) -> None:
    checked = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_the_fault_tables_name_tests_that_exist() -> None:
    """Each `file.py::test_name` (and `::test_name` after it, same file) the README
    cites as holding a fault is a test function in that file."""
    tests = README.parent / "tests" / "integration_tests"
    cited = re.findall(r"`(test_\w+\.py)?::(test_\w+)`", README.read_text())
    assert cited
    current = ""
    for module, name in cited:
        current = module or current
        source = (tests / current).read_text()
        assert re.search(rf"^(async )?def {name}\(", source, re.M), f"{current}::{name}"
