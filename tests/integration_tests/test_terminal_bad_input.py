"""Bad input through the CLI: a task file that is not UTF-8 is named with what to do (no
traceback), and `turnbon rollouts` whose every model call failed exits 1, like bench."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.integration_tests.test_terminal_environment import spec, write_task
from turnbon_graph.analysis.rollouts import read_reports
from turnbon_graph.cli import main
from turnbon_graph.testing import StubResponse, StubServer
from turnbon_terminal import TaskFormatError, TerminalEnvironment

LATIN_1 = "Écrivez « bonjour » dans out.txt.\n".encode("latin-1")
"""Text saved in Latin-1: not UTF-8 (the É is the single byte 0xc9)."""
PASSES = "def test_x() -> None:\n    pass\n"


def run_task(folder: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["run", str(folder), "--model", "stub", "--max-turns", "2"])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("instruction.md", LATIN_1),
        ("task.toml", b'[metadata]\ncategory = "' + "écrire".encode("latin-1") + b'"\n'),
    ],
)
def test_a_task_file_that_is_not_utf8_exits_2_naming_it(
    name: str, content: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_task(tmp_path, "latin", PASSES)
    (folder / name).write_bytes(content)
    code, _, err = run_task(folder, capsys)
    assert code == 2
    assert f"turnbon run: error: {folder / name} is not UTF-8 text" in err
    assert "save it as UTF-8" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("script", ["environment/setup.sh", "solution/solve.sh"])
def test_a_script_that_is_not_utf8_exits_2_naming_it(
    script: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = write_task(tmp_path, "latin-script", PASSES, setup="echo ready\n")
    (folder / script).write_bytes(b"echo " + LATIN_1)
    code, out, err = run_task(folder, capsys)
    # Refused with the task, before any episode starts (not an agent error mid-run).
    assert code == 2
    assert f"turnbon run: error: {folder / script} is not UTF-8 text (byte 5 is 0xc9)" in err
    assert "save it as UTF-8" in err and "Traceback" not in err
    assert "Ended:" not in out


async def test_a_solution_made_unreadable_after_loading_is_refused_naming_it(
    tmp_path: Path,
) -> None:
    folder = write_task(tmp_path, "latin-solution", PASSES)
    env = TerminalEnvironment(tmp_path)
    (folder / "solution" / "solve.sh").write_bytes(b"echo " + LATIN_1)  # changed since
    episode = await env.start(spec(env, "latin-solution"), 0)
    try:
        with pytest.raises(TaskFormatError, match=r"solve\.sh is not UTF-8 text \(byte 5 is 0xc9"):
            await episode.run_solution()
    finally:
        await episode.close()


def test_rollouts_whose_every_model_call_failed_exit_1_saying_what_to_do(
    stub: StubServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-rollouts")
    stub.script(lambda _: StubResponse(body={"error": {"message": "down"}}, status=500))
    run = tmp_path / "rollouts"
    model = ["--model", "openai/m", "--api-base", stub.base_url]
    command = ["rollouts", "--env", "terminal", *model, "--task", "largest-file"]
    code = main([*command, "-n", "2", "--turns", "1", "--run", str(run)])
    out, err = capsys.readouterr()
    assert code == 1
    (report,) = read_reports(run)
    assert report.outcome == "agent_error" and report.turns == []
    assert "| N=2 | llm:openai/m | 1 | 0 |" in out  # the table is still shown
    assert "1 of 1 episode(s) ended in an agent error; the first: " in err
    assert "No episode produced a report with a verdict" in err
    assert "check the model id, the api_base and the API key" in err
    assert "Traceback" not in err
    assert stub.requests  # the calls were made, and failed
