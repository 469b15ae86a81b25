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
