"""The reference agents that check a task set before any model is run on it, as
Harbor's do: `oracle` runs the task's own solution, `nop` does nothing. On a sound task
the oracle passes and nop fails; anything else is the task's fault, not an agent's
(`turnbon bench --agent oracle`, `turnbon run TASK --agent nop`).

An oracle episode asks its environment's episode for `run_solution()` (the terminal
environment's copies `solution/` to `/solution` and runs `solve.sh` in the working
directory, as Harbor's oracle does); the verifier then decides as for any agent. Neither
agent calls a model, so their episodes spend no tokens.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from turnbon_graph.bench.agents import ReferenceAgent
from turnbon_graph.bench.environment import Environment, TaskSpec
from turnbon_graph.bench.episode import EpisodeEnd, classify_failure, verdict_outcome
from turnbon_graph.bench.running.runs import EpisodeResult, current_worker
from turnbon_graph.errors import ConfigurationError

SOLUTION_TAIL = 2000
"""The characters of the solution's output an oracle episode keeps (its end)."""


@runtime_checkable
class Solvable(Protocol):
    """An episode that can run its task's reference solution."""

    async def run_solution(self) -> Any: ...


async def run_reference(
    environment: Environment, task: TaskSpec, trial: int, agent: ReferenceAgent
) -> EpisodeEnd:
    """One episode of `task` by a reference agent, verified and closed.

    Args:
        environment: where the episode runs.
        task: the task.
        trial: the attempt's number.
        agent: "oracle" (the task's solution) or "nop" (nothing).

    Returns:
        How it ended; its messages are the instruction and, for the oracle, what the
        solution printed.
    """
    messages: list[BaseMessage] = [HumanMessage(task.instruction)]
    try:
        episode = await environment.start(task, trial)
    except Exception as exc:
        return EpisodeEnd(*classify_failure(exc, task), messages=messages)
    try:
        if agent == "oracle":
            messages.append(await _solved(environment, episode, task))
        verdict = await asyncio.wait_for(episode.verify(), task.verifier_timeout_s)
    except Exception as exc:
        return EpisodeEnd(*classify_failure(exc, task), messages=messages)
    finally:
        await episode.close()
    outcome, error = verdict_outcome(verdict)
    return EpisodeEnd(outcome, error, verdict, messages)


async def _solved(environment: Environment, episode: object, task: TaskSpec) -> AIMessage:
    """Runs the task's solution in `episode`; what it printed, as the oracle's message."""
    if not isinstance(episode, Solvable):
        raise ConfigurationError(
            f"environment {environment.name!r} has no reference solutions: --agent oracle "
            "needs episodes that can run their task's solution (a run_solution method)"
        )
    ran = await asyncio.wait_for(episode.run_solution(), task.agent_timeout_s)
    shown = ran.render() if hasattr(ran, "render") else str(ran)
    return AIMessage(f"solution/solve.sh:\n{shown[-SOLUTION_TAIL:]}")


async def run_reference_episode(
    environment: Environment,
    task: TaskSpec,
    trial: int,
    agent: ReferenceAgent,
    run_dir: Path,
) -> EpisodeResult:
    """One reference episode as a bench run records it: its setting is the agent's name,
    it takes no turn and spends no token. `run_dir` is unused (it writes no turns file)
    and taken so every setting's episode is called alike."""
    del run_dir
    started = time.monotonic()
    end = await run_reference(environment, task, trial, agent)
    assert end.outcome is not None  # verified
    return EpisodeResult(
        task=task.id,
        trial=trial,
        setting=agent,
        n=1,
        turns=0,
        duration_s=round(time.monotonic() - started, 3),
        worker=current_worker(),
        tokens=0,
        **end.result_fields(task),
    )
