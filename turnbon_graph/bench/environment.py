"""What a benchmark runner needs from an environment, as small protocols.

The core never imports an integration: a terminal sandbox, BFCL, or a user's own
environment implements these, and `turnbon bench` (and notebooks) drive any of them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from turnbon_graph.errors import ConfigurationError

if TYPE_CHECKING:  # `turnbon report` reads runs without importing LangChain's tools
    from langchain_core.tools import BaseTool

Outcome = Literal[
    "pass",
    "wrong_submission",
    "out_of_context",
    "time_limit",
    "resource_limit",
    "budget_exhausted",
    "verifier_failed",
    "agent_error",
]
"""How an attempt ends (the paper's Table 5, plus `resource_limit`: the episode went over
a memory or storage budget its environment enforces, and `budget_exhausted`: a search's
token budget could not afford one model call, so the agent never acted, and
`verifier_failed`: the verifier's own set-up failed before its tests ran, so there is no
verdict on the agent's work; unlike an agent error it is not drawn again by
`--redo-errors`, since the same verifier would fail the same way): only an attempt that
ended on its own can pass, and then the verifier decides between pass and
wrong_submission."""


class TaskSpec(BaseModel):
    """A task as the runner sees it."""

    id: str
    """The task's name, unique in its environment."""
    instruction: str
    """The first user message."""
    agent_timeout_s: float = 600.0
    """Seconds the agent gets to finish (past them the episode ends as `time_limit`)."""
    verifier_timeout_s: float = 120.0
    """Seconds the verification gets."""
    max_turns: int = 50
    """Turns the agent gets after each user message."""
    difficulty: str | None = None
    """The benchmark's difficulty label, if it gives one."""
    category: str | None = None
    """The benchmark's category, if it gives one."""
    follow_ups: list[str] = Field(default_factory=list)
    """Further user messages, each sent when the agent ends its previous turn (multi-turn
    benchmarks such as BFCL); empty for a single instruction."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Anything else the environment keeps with the task (JSON values)."""


class Verdict(BaseModel):
    """The verifier's answer: passed or not, with its output for the record."""

    passed: bool
    """Whether the attempt passed."""
    output: str = ""
    """What the verifier printed, for the record."""
    error: str | None = None
    """Set when the verifier itself could not run (it could not start the tests, its
    sandbox failed): an agent_error. How the tests end is the deliverable's doing, never
    an error."""
    reason: str | None = None
    """Why a verifier that ran gave no pass though its exit code might say otherwise (no
    structured report, one that contradicts the exit code, no test collected): kept in
    the episode's record."""
    reward: float | None = None
    """The number a benchmark's verifier scored the attempt with, when it gives one
    (Terminal-Bench 2's reward file): kept in the record; `passed` says what it means."""
    setup_failure: str | None = None
    """Set when the verifier's own set-up failed before its tests ran (a download, a
    tool it installs), with the line that says so: the attempt has no verdict on what
    the agent did (the outcome `verifier_failed`), whatever reward was written."""
    tamper: list[str] = Field(default_factory=list)
    """Evidence that the deliverable meddled with its verification (pytest's hooks,
    reports or modules, the report file, `os._exit`/`atexit`, bytecode), as the verifier
    observed or found it; empty when it saw none. Evidence, not the verdict: kept in
    the episode's record for the report and the judge."""


@runtime_checkable
class Episode(Protocol):
    """One attempt at one task: the tools the agent acts with, then the verifier."""

    @property
    def tools(self) -> Sequence[BaseTool]:
        """The tools the agent acts with in this episode."""
        ...

    async def verify(self) -> Verdict:
        """Runs the task's verifier on what the agent left.

        Returns:
            Passed or not, with the verifier's output; `error` when the verifier
                itself could not run.
        """
        ...

    async def close(self) -> None:
        """Releases what the episode holds (sandbox, processes, files); called once,
        however the episode ended."""
        ...


@runtime_checkable
class Budgeted(Protocol):
    """An episode whose environment enforces a budget (memory, storage): the driver
    ends it, as `resource_limit`, once `over_budget` says what it went over."""

    @property
    def over_budget(self) -> str | None:
        """What the episode went over (memory, storage), or None while within it."""
        ...


@runtime_checkable
class Environment(Protocol):
    """A set of tasks and a way to start an isolated episode of each."""

    @property
    def name(self) -> str:
        """The environment's name, as `--env` takes it and the run folder records it."""
        ...

    def tasks(self) -> Sequence[TaskSpec]:
        """Its tasks.

        Returns:
            Every task, in a stable order.
        """
        ...

    async def start(self, task: TaskSpec, trial: int) -> Episode:
        """Starts an isolated episode of `task`.

        Args:
            task: one of `tasks()`.
            trial: which attempt at the task this is (0, 1, ...), for names and seeds.

        Returns:
            The episode, ready for the agent's first turn.
        """
        ...


def chosen_tasks(environment: Environment, ids: Sequence[str] | None) -> list[TaskSpec]:
    """The tasks of `environment` named by `ids` (each once, in their order); all without.

    Args:
        environment: where the tasks come from.
        ids: task ids; None or empty: every task.

    Returns:
        The tasks.

    Raises:
        ConfigurationError: an id names no task of `environment` (the available ones are
            listed).
    """
    available = {t.id: t for t in environment.tasks()}
    missing = [i for i in ids or () if i not in available]
    if missing:
        raise ConfigurationError(
            f"unknown task(s) {', '.join(missing)} in {environment.name}; "
            f"available: {', '.join(sorted(available))}"
        )
    return [available[i] for i in dict.fromkeys(ids)] if ids else list(available.values())
