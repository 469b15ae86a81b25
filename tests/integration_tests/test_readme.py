"""The README's runnable examples run as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
MARKER = "<!-- readme-example: runs in tests/integration_tests/test_readme.py -->"


def runnable_examples() -> list[str]:
    text = README.read_text()
    return re.findall(re.escape(MARKER) + r"\n```python\n(.*?)```", text, re.DOTALL)


def test_the_readme_has_a_runnable_example() -> None:
    assert len(runnable_examples()) >= 1


@pytest.mark.parametrize("code", runnable_examples())
def test_readme_example_runs(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out.splitlines()
    # One line per turn: a chosen tool call, then a unanimous final answer.
    assert out[0].startswith("llm:openai/stub ")
    assert out[-1].startswith("unanimous 0 ")
