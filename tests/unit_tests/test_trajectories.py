"""Reading a run folder back as trajectories: commands, picks, exit codes, history."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from turnbon_graph.analysis.trajectories import command_of, exit_code_of, load_trajectories
from turnbon_graph.bench.running.runs import EPISODES_FILE, EpisodeResult, turns_path
from turnbon_graph.records import CandidateRecord, LatencySplit, TurnRecord, UsageSplit


def shell(command: str) -> list[dict[str, Any]]:
    return [{"name": "shell", "args": {"command": command}, "id": "c"}]


def record(commands: list[str | None], picked: int, **extra: Any) -> dict[str, Any]:
    candidates = [
        CandidateRecord(index=i, model="m", tool_calls=shell(c) if c else [], content=c and "")
        for i, c in enumerate(commands)
    ]
    return TurnRecord(
        turn_id="t",
        n_requested=len(commands),
        n_ok=len(commands),
        selected_index=picked,
        selector="llm:m",
        agreement=0.5,
        candidates=candidates,
        usage=UsageSplit(),
        latency_s=LatencySplit(),
        **extra,
    ).to_json()


def write_episode(run: Path, task: str, setting: str, lines: list[dict[str, Any]]) -> None:
    result = EpisodeResult(
        task=task, trial=0, setting=setting, n=4, outcome="pass", turns=len(lines), duration_s=1
    )
    with (run / EPISODES_FILE).open("a") as handle:
        handle.write(result.model_dump_json() + "\n")
    path = turns_path(run, setting, task, 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))


def test_commands_and_exit_codes_are_read_as_the_terminal_tool_wrote_them() -> None:
    assert command_of(shell("ls -la")) == "ls -la"
    assert command_of(shell("make") + shell("make test")) == "make; make test"
    assert command_of([{"name": "search", "args": {"q": "x"}}]) is None
    assert exit_code_of("boom\n[exit code 2]") == 2
    assert exit_code_of("x\n[exit code 137 (killed by SIGKILL)]\n") == 137
    assert exit_code_of("[exit code 1] is what it printed, then more") is None


def test_a_run_folder_reads_back_in_order_with_history(tmp_path: Path) -> None:
    write_episode(
        tmp_path,
        "b-task",
        "N=4",
        [
            {
                "record": record(["ls", "cat a"], 1),
                "observation": [{"tool": "shell", "content": "A\n[exit code 0]"}],
            },
            {
                "record": record(["make", "make"], 0),
                "observation": [{"tool": "shell", "content": "error\n[exit code 2]"}],
            },
            {
                "record": record(
                    [None, "x"], 0, synthesized={"content": "", "tool_calls": shell("fixed")}
                ),
                "observation": None,
            },
        ],
    )
    write_episode(tmp_path, "a-task", "N=1", [])
    trajectories = load_trajectories(tmp_path)
    assert [(t.setting, t.task) for t in trajectories] == [("N=1", "a-task"), ("N=4", "b-task")]
    turns = trajectories[1].turns
    assert [t.number for t in turns] == [1, 2, 3]
    assert [t.chosen_command for t in turns] == ["cat a", "make", "fixed"]  # synthesized ran
    assert [t.exit_code for t in turns] == [0, 2, None]
    assert trajectories[1].history(3) == [("cat a", 0), ("make", 2)]
    assert load_trajectories(tmp_path, settings=["N=1"])[0].task == "a-task"


def test_a_missing_run_folder_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="turnbon bench"):
        load_trajectories(tmp_path / "nope")
