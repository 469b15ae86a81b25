"""A run folder's episodes as trajectories: per turn, every candidate's action, the pick,
and what the executed command returned.

The analyses (behaviours, selector preference, the judge, branch rollouts) read runs
through this one view, so they agree on what "the command of a candidate" means.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnbon_graph.bench.running.runs import EpisodeResult, read_episodes, read_turns
from turnbon_graph.records import CandidateRecord, TurnRecord

SHELL_ARGUMENT = "command"
"""The argument that holds a shell command line (the terminal environment's `shell` tool)."""

_EXIT_CODE = re.compile(r"\[exit code (\d+)(?: \(killed by [A-Z0-9]+\))?\]\s*$")


def command_of(tool_calls: Sequence[Mapping[str, Any]]) -> str | None:
    """The shell command line of an action: the `command` arguments of its tool calls,
    joined with `; ` when there are several; None for an action with no shell call."""
    commands = [
        str(args[SHELL_ARGUMENT])
        for call in tool_calls
        if isinstance(args := call.get("args"), Mapping) and SHELL_ARGUMENT in args
    ]
    return "; ".join(commands) if commands else None


def exit_code_of(observation: str) -> int | None:
    """The exit code the terminal tool printed on the last line of its output, or None."""
    match = _EXIT_CODE.search(observation.rstrip())
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class TurnView:
    """One turn of an episode as recorded: the record and the executed action's result."""

    number: int
    """1-based position of the turn in its episode."""
    record: TurnRecord
    """The turn's record: every candidate, the pick."""
    observation: str | None
    """The tool output the chosen action produced (several calls joined), or None."""

    @property
    def candidates(self) -> list[CandidateRecord]:
        """The candidates that produced an action (failed calls left out)."""
        return [c for c in self.record.candidates if c.error is None]

    @property
    def chosen(self) -> CandidateRecord:
        """The picked candidate."""
        return self.record.candidates[self.record.selected_index]

    @property
    def chosen_tool_calls(self) -> list[dict[str, Any]]:
        """What was executed: a synthesized action when the selector wrote one."""
        if self.record.synthesized is not None:
            return list(self.record.synthesized.get("tool_calls") or [])
        return self.chosen.tool_calls

    @property
    def chosen_command(self) -> str | None:
        """The executed shell command line, or None for an action with no shell call."""
        return command_of(self.chosen_tool_calls)

    @property
    def exit_code(self) -> int | None:
        """The executed command's exit code, or None when the output does not show it."""
        return None if self.observation is None else exit_code_of(self.observation)


@dataclass(frozen=True)
class Trajectory:
    """One episode of a run: its result and its turns in order."""

    result: EpisodeResult
    """The episode's result, as the run folder keeps it."""
    turns: list[TurnView]
    """Its turns, in order."""

    @property
    def setting(self) -> str:
        """The episode's setting."""
        return self.result.setting

    @property
    def task(self) -> str:
        """The episode's task."""
        return self.result.task

    def history(self, before: int) -> list[tuple[str, int | None]]:
        """(command, exit code) of the executed shell commands of turns 1 .. before-1.

        Args:
            before: a turn's number (1-based).

        Returns:
            The commands, oldest first (turns without a shell call left out).
        """
        return [
            (command, turn.exit_code)
            for turn in self.turns[: before - 1]
            if (command := turn.chosen_command) is not None
        ]


def _observation(line: Mapping[str, Any]) -> str | None:
    parts = line.get("observation")
    if not parts:
        return None
    return "\n".join(str(part.get("content", "")) for part in parts)


def load_trajectories(run: str | Path, settings: Iterable[str] | None = None) -> list[Trajectory]:
    """Every finished episode of the run folder `run` (optionally only some settings),
    ordered by setting, task and trial.

    Args:
        run: the run folder.
        settings: only these settings; None: all.

    Returns:
        The trajectories.

    Raises:
        FileNotFoundError: there is no folder at `run`.
    """
    run = Path(run)
    if not run.is_dir():
        raise FileNotFoundError(f"no run folder at {run} (run `turnbon bench` to make one)")
    wanted = None if settings is None else set(settings)
    trajectories = []
    for result in sorted(read_episodes(run), key=lambda r: r.key):
        if wanted is not None and result.setting not in wanted:
            continue
        turns = [
            TurnView(
                number=i,
                record=TurnRecord.model_validate(line["record"]),
                observation=_observation(line),
            )
            for i, line in enumerate(read_turns(run, *result.key), start=1)
        ]
        trajectories.append(Trajectory(result=result, turns=turns))
    return trajectories


def dumps_action(tool_calls: Sequence[Mapping[str, Any]], content: str | None) -> str:
    """A compact, readable rendering of an action for prompts and tables."""
    command = command_of(tool_calls)
    if command is not None:
        return f"$ {command}"
    if tool_calls:
        return json.dumps([{"name": c.get("name"), "args": c.get("args")} for c in tool_calls])
    return content or ""
