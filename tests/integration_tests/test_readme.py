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


def test_the_readme_has_its_runnable_examples() -> None:
    # the graph agent and the create_agent middleware
    assert len(runnable_examples()) >= 2


@pytest.mark.parametrize("code", runnable_examples())
def test_readme_example_runs(code: str, capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})
    out = capsys.readouterr().out.splitlines()
    # One line per turn: a tool call the LLM selector chose, then a unanimous final answer.
    assert out[0].startswith(("llm:openai/stub ", "llm:openai-chat:stub "))
    assert out[-1].startswith("unanimous 0 ")
    assert len(out) == 2
