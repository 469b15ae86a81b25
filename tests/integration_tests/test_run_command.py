"""`turnbon run`: a task folder, a shipped id or an inline instruction, shown live."""

from __future__ import annotations

import re
from importlib.metadata import EntryPoint
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import runs_once
from turnbon_graph.bench import registry
from turnbon_graph.cli import main
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    tool_call,
)
from turnbon_terminal.task.folders import SHIPPED_TASKS


def test_a_task_folder_runs_every_trial_with_its_verdict(
    capsys: pytest.CaptureFixture[str],
) -> None:
    task = str(SHIPPED_TASKS / "largest-file")
    options = ["--model", "stub", "-n", "3", "--trials", "2", "--max-turns", "4", "--seed", "1"]
    code = main(["run", task, *options])
    out = capsys.readouterr().out
    assert "Task largest-file" in out and "N=3; at most 4 turns" in out
    assert "=== Trial 1 of 2 ===" in out and "=== Trial 2 of 2 ===" in out
    assert out.count("Verdict: ") == 2
    passed = out.count("Verdict: PASS")
    assert f"Passed {passed} of 2 trials" in out
    assert code == (0 if passed == 2 else 1)  # scripts can tell a failed trial


_lister = runs_once("cat notes.txt && echo changed > notes.txt")
"""Lists and overwrites the files, then stops once it has seen the output."""


def test_an_inline_instruction_starts_in_a_copy_of_the_workdir(
    stub: StubServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    project = tmp_path / "project"
    project.mkdir()
    (project / "notes.txt").write_text("original words\n")
    stub.script(_lister)
    model = ["--model", "openai/m", "--api-base", stub.base_url, "-n", "2", "--selector", "first"]
    code = main(["run", "--instruction", "Show the notes.", "--workdir", str(project), *model])
    out = capsys.readouterr().out
    assert code == 0
    assert "Task inline:" in out and "Show the notes." in out
    assert "  | original words" in out  # the agent saw the copied file
    assert "Verdict: none (this task has no verifier)" in out
    assert (project / "notes.txt").read_text() == "original words\n"  # the user's copy is untouched
    instruction = stub.requests[0].body["messages"][-1]["content"]
    assert "Show the notes." in instruction


def test_a_config_file_sets_what_flags_do_not(
    stub: StubServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    (tmp_path / "files").mkdir()
    (tmp_path / "files" / "notes.txt").write_text("from the config's folder\n")
    config = tmp_path / "run.toml"
    config.write_text(
        'instruction = "Show the notes."\nworkdir = "files"\nmodel = "openai/m"\n'
        f'api_base = "{stub.base_url}"\nn = 2\nselector = "first"\nmax_turns = 3\n'
    )
    stub.script(_lister)
    assert main(["run", "--config", str(config), "-n", "3"]) == 0
    out = capsys.readouterr().out
    assert "N=3; at most 3 turns" in out  # the flag won over the file's n = 2
    assert "selector: first" in out
    assert "  | from the config's folder" in out  # workdir relative to the file


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["run"], "either a TASK"),
        (["run", "largest-file", "--instruction", "x"], "either a TASK"),
        (["run", "largest-file", "--workdir", "."], "--workdir goes with --instruction"),
        (["run", "list the files"], "; for a task in your own words, pass --instruction TEXT"),
        (["run", str(SHIPPED_TASKS)], "give one task folder"),
    ],
)
def test_bad_requests_say_what_to_do(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    assert message in capsys.readouterr().err


def test_a_config_file_with_an_unknown_setting_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "run.toml"
    config.write_text('task = "largest-file"\nmodle = "openai/m"\n')
    assert main(["run", "--config", str(config)]) == 2
    assert "unknown setting(s) modle" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("model = 5", "model = 5: must be a string"),
        ('temperature = "hot"', "temperature = 'hot': must be a number"),
        ("n = 0", "n = 0: must be"),
        ("trials = true", "trials = True: must be a whole number"),
        ('tool_calling = "sometimes"', "tool_calling = 'sometimes': must be one of"),
        ('keep_workdir = "yes"', "keep_workdir = 'yes': must be true or false"),
    ],
)
def test_config_values_follow_the_flags_rules_and_name_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    config = tmp_path / "run.toml"
    config.write_text(f'task = "largest-file"\n{line}\n')
    assert main(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config}: {message}" in err
    assert "Traceback" not in err


def _counter(monkeypatch: pytest.MonkeyPatch, factory: str) -> None:
    """`--env counter` is the tests' counter environment made by `factory`."""
    entry = EntryPoint("counter", f"tests.cli_envs:{factory}", registry.ENVIRONMENTS_GROUP)
    monkeypatch.setattr(registry, "environment_entry_points", lambda: [entry])
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def _counting(request: CapturedRequest) -> dict[str, Any]:
    """Brings the counter to the target in one step, then says done."""
    messages = request.body["messages"]
    if messages[-1]["role"] != "user" or len(messages) > 2:
        return chat_completion("done")
    target = int(re.findall(r"to (\d+)", messages[-1]["content"])[0])
    return chat_completion(None, [tool_call("increment", {"by": target})])


def _run_counter(stub: StubServer) -> int:
    model = ["--model", "openai/m", "--api-base", stub.base_url, "-n", "1", "--selector", "first"]
    return main(["run", "three", "--env", "counter", *model])


def test_the_tasks_follow_up_messages_are_sent(
    stub: StubServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _counter(monkeypatch, "counter_with_follow_up")
    stub.script(_counting)
    assert _run_counter(stub) == 0
    out = capsys.readouterr().out
    assert "User: Now confirm." in out and "Verdict: PASS" in out
    users = [m["content"] for m in stub.requests[-1].body["messages"] if m["role"] == "user"]
    assert users == ["Bring the counter to 3.", "Now confirm."]


def test_the_tasks_time_limit_ends_the_episode(
    stub: StubServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    _counter(monkeypatch, "hasty_counter")
    stub.script(lambda r: StubResponse(body=_counting(r), delay=2.0))
    assert _run_counter(stub) == 1
    out = capsys.readouterr().out
    assert "Ended: time limit (no result within 0.3 s)" in out and "Verdict:" not in out


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A user's folder with notes.txt, for `_run_lister`."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    folder = tmp_path / "project"
    folder.mkdir()
    (folder / "notes.txt").write_text("original words\n")
    return folder


def _run_lister(stub: StubServer, project: Path, capsys: Any, *flags: str) -> tuple[int, str]:
    """`turnbon run --instruction` over a copy of `project`: (exit code, last line)."""
    stub.script(_lister)
    model = ["--model", "openai/m", "--api-base", stub.base_url, "-n", "1", "--selector", "first"]
    argv = ["run", "--instruction", "Show the notes.", "--workdir", str(project), *model]
    code = main([*argv, *flags])
    return code, capsys.readouterr().out.strip().splitlines()[-1]


def test_keep_workdir_keeps_the_agents_copy_and_says_where(
    stub: StubServer, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, last = _run_lister(stub, project, capsys, "--keep-workdir")
    assert code == 0
    found = re.fullmatch(r"Working copy kept: (\S+) \(the episode ran in (\S+)\)", last)
    assert found is not None, last
    kept, ran_in = Path(found.group(1)), Path(found.group(2))
    assert (kept / "notes.txt").read_text() == "changed\n"  # what the agent left
    assert (project / "notes.txt").read_text() == "original words\n"
    assert not ran_in.exists()


def test_without_keep_workdir_the_last_line_says_where_it_ran_and_that_it_is_gone(
    stub: StubServer, project: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, last = _run_lister(stub, project, capsys)
    assert code == 0
    found = re.fullmatch(r"The episode ran in (\S+), removed when it ended \(.*\)", last)
    assert found is not None, last
    assert not Path(found.group(1)).exists()
    assert "--keep-workdir" in last


def test_keep_workdir_can_come_from_the_config_file(
    stub: StubServer, project: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "run.toml"
    config.write_text("keep_workdir = true\n")
    _, last = _run_lister(stub, project, capsys, "--config", str(config))
    assert last.startswith("Working copy kept: ")


def test_a_bad_flag_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as raised:
        main(["run", "largest-file", "--model", "stub", "--trials", "0"])
    assert raised.value.code == 2
    assert "--trials: 0 is less than 1" in capsys.readouterr().err
