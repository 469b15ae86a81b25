"""Harbor's own trajectory of the trial: `agent/trajectory.json` in ATIF.

ATIF (Agent Trajectory Interchange Format) is what Harbor's agents write and Harbor's
viewer and trace tools read; this file is built from Harbor's own pydantic models
(`harbor.models.trajectories`) and laid out as Terminus-2 lays out its own: step 1 the
task's prompt (source "user"), then one agent step per turn with the chosen answer, its
commands as `bash_command`/`mark_task_complete` tool calls, the observation it led to,
and the turn's tokens (generator and selector together; apart in `metrics.extra`). The
Turn-BoN side of each turn (N, who chose, the chosen index, every candidate's text) is
in the step's `extra["turnbon"]`; the whole turn record stays in `turns.jsonl`.

Harbor cancels `run()` when the agent's time is up, so the file is rewritten after each
change (the prompt, a chosen answer, its observation), whole, in a worker thread, into a
temporary file that then replaces it: a reader sees the last complete version, never a
half-written one. A write that fails (a full disk, a folder made read-only) is logged as a
warning and the trial goes on; the next change tries again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harbor.models.trajectories import (
    Agent,
    FinalMetrics,
    Metrics,
    Observation,
    ObservationResult,
    Step,
    ToolCall,
    Trajectory,
)
from harbor.utils.trajectory_utils import format_trajectory_json

from turnbon_graph.records import TurnRecord
from turnbon_harbor.turn_log import CONTEXT_KEY, TurnTotals

if TYPE_CHECKING:
    from harbor.agents.base import BaseAgent
    from harbor.agents.terminus_2.terminus_json_plain_parser import ParseResult

TRAJECTORY_FILE = "trajectory.json"
"""The trajectory in the trial's agent folder (`BaseAgent.logs_dir`), as Terminus-2's."""
COMMAND_TOOL = "bash_command"
"""Terminus-2's tool-call name for a command it typed."""
COMPLETE_TOOL = "mark_task_complete"
"""Terminus-2's tool-call name for an answer that says the task is complete."""
LOGGER = logging.getLogger(__name__)


class TrajectoryFile:
    """The trial's ATIF trajectory, rewritten whole after each change."""

    def __init__(
        self,
        path: Path,
        agent: Agent,
        totals: TurnTotals,
        session_id: str,
        logger: logging.Logger | None = None,
    ) -> None:
        self.path = path
        self.agent = agent
        self.totals = totals
        self.session_id = session_id
        self.logger = logger or LOGGER
        self.steps: list[Step] = []

    @classmethod
    def of(cls, agent: BaseAgent, totals: TurnTotals) -> TrajectoryFile:
        """The trajectory of `agent`'s trial, in its agent folder.

        Args:
            agent: The running Harbor agent (its name, version, model and session id).
            totals: The episode's running totals, which the final metrics repeat.

        Returns:
            A trajectory with no steps yet (nothing is written until `prompt`).
        """
        about = Agent(
            name=agent.name(),
            version=agent.version() or "unknown",
            model_name=agent.model_name,
            extra={CONTEXT_KEY: {"n": totals.n, "selector": totals.selector}},
        )
        session = agent.session_id or str(uuid.uuid4())
        return cls(agent.logs_dir / TRAJECTORY_FILE, about, totals, session, agent.logger)

    async def prompt(self, text: str) -> None:
        """The task's first prompt, step 1: from here on the file is a valid trajectory.

        Args:
            text: The prompt the model was first given (the task and the terminal).
        """
        self.steps.append(Step(step_id=1, timestamp=now(), source="user", message=text))
        await self.write()

    async def chosen(self, record: TurnRecord, message: str, parsed: ParseResult) -> None:
        """A turn's chosen answer, a step of its own (its observation not known yet).

        Args:
            record: The turn's record (tokens, candidates, who chose).
            message: The chosen answer, as it goes back into the model's transcript.
            parsed: Terminus-2's reading of it (its commands become tool calls).
        """
        step_id = len(self.steps) + 1
        both = record.usage.total
        chosen = [c for c in record.candidates if c.index == record.selected_index]
        step = Step(
            step_id=step_id,
            timestamp=now(),
            source="agent",
            model_name=chosen[0].model if chosen else self.agent.model_name,
            message=message,
            tool_calls=None if parsed.error else tool_calls(parsed, step_id),
            metrics=Metrics(
                prompt_tokens=both.prompt_tokens,
                completion_tokens=both.completion_tokens,
                cached_tokens=both.cached_tokens,
                cost_usd=both.cost_usd,
                extra=record.usage.model_dump(),
            ),
            llm_call_count=both.calls or None,
            extra={CONTEXT_KEY: turn_extra(record)},
        )
        self.steps.append(step)
        await self.write()

    async def observed(self, observation: str) -> None:
        """What the last turn's answer led to, as its step's observation.

        Args:
            observation: The next prompt (the terminal's output, or the parser's feedback).
        """
        step = self.steps[-1]
        if step.source != "agent" or step.observation is not None:
            return
        commands = [c for c in step.tool_calls or [] if c.function_name == COMMAND_TOOL]
        # several commands share one terminal output: only a single one is linked
        source = commands[0].tool_call_id if len(commands) == 1 else None
        result = ObservationResult(source_call_id=source, content=observation)
        self.steps[-1] = step.model_copy(update={"observation": Observation(results=[result])})
        await self.write()

    async def write(self) -> None:
        """Writes the trajectory so far, off the event loop (steps are replaced, never
        changed in place, so the worker reads a list no one alters); a failed write is
        logged, and the trial goes on."""
        usage = self.totals.usage
        both = usage.total
        final = FinalMetrics(
            total_prompt_tokens=both.prompt_tokens,
            total_completion_tokens=both.completion_tokens,
            total_cached_tokens=both.cached_tokens,
            total_cost_usd=both.cost_usd,
            total_steps=len(self.steps),
            extra=usage.model_dump(),
        )
        trajectory = Trajectory(
            session_id=self.session_id,
            agent=self.agent,
            steps=list(self.steps),
            final_metrics=final,
        )
        try:
            await asyncio.to_thread(write_trajectory, self.path, trajectory)
        except OSError as exc:
            self.logger.warning(
                "could not write the trajectory to %s (%s); the trial goes on", self.path, exc
            )


def tool_calls(parsed: ParseResult, step_id: int) -> list[ToolCall] | None:
    """An answer's commands as Terminus-2 records them.

    Args:
        parsed: The answer as Terminus-2's parser read it.
        step_id: Its step, which the calls' ids name.

    Returns:
        One `bash_command` a command, then `mark_task_complete` when the answer says the
            task is complete; None for an answer with neither.
    """
    calls = [
        ToolCall(
            tool_call_id=f"call_{step_id}_{i}",
            function_name=COMMAND_TOOL,
            arguments={"keystrokes": c.keystrokes, "duration": c.duration},
        )
        for i, c in enumerate(parsed.commands, start=1)
    ]
    if parsed.is_task_complete:
        calls.append(
            ToolCall(
                tool_call_id=f"call_{step_id}_task_complete",
                function_name=COMPLETE_TOOL,
                arguments={},
            )
        )
    return calls or None


def turn_extra(record: TurnRecord) -> dict[str, Any]:
    """The Turn-BoN side of a turn, for its step's `extra`.

    Args:
        record: The turn's record.

    Returns:
        N, who chose and which, the candidates' agreement, every candidate's text (None
            for a failed one) in generation order.
    """
    return {
        "turn_id": record.turn_id,
        "n": record.n_requested,
        "n_ok": record.n_ok,
        "selector": record.selector,
        "selected_index": record.selected_index,
        "fallback": record.fallback,
        "agreement": record.agreement,
        "candidates": [c.content for c in record.candidates],
    }


def write_trajectory(path: Path, trajectory: Trajectory) -> None:
    """Writes `trajectory` as Harbor formats it, into `path` at once: a temporary file
    beside it replaces it, so a reader (or a cancelled run) never sees half of one.

    Args:
        path: The trajectory file.
        trajectory: What it holds.
    """
    text = format_trajectory_json(trajectory.to_json_dict())
    temp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    try:
        temp.write_text(text, encoding="utf-8")
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            temp.unlink()
        raise


def now() -> str:
    """The time now, in UTC.

    Returns:
        An ISO 8601 timestamp, as ATIF has them.
    """
    return datetime.now(UTC).isoformat()
