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
    "agent_error",
]
"""How an attempt ends (the paper's Table 5, plus `resource_limit`: the episode went over
a memory or storage budget its environment enforces, and `budget_exhausted`: a search's
token budget could not afford one model call, so the agent never acted): only an attempt
that ended on its own can pass, and then the verifier decides between pass and
wrong_submission."""


class TaskSpec(BaseModel):
    """A task as the runner sees it."""

    id: str
    instruction: str
    agent_timeout_s: float = 600.0
    verifier_timeout_s: float = 120.0
    max_turns: int = 50
    difficulty: str | None = None
    category: str | None = None
    follow_ups: list[str] = Field(default_factory=list)
    """Further user messages, each sent when the agent ends its previous turn (multi-turn
    benchmarks such as BFCL); empty for a single instruction."""
    metadata: dict[str, Any] = Field(default_factory=dict)


class Verdict(BaseModel):
    """The verifier's answer: passed or not, with its output for the record."""

    passed: bool
    output: str = ""
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
    tamper: list[str] = Field(default_factory=list)
    """Evidence that the deliverable meddled with its verification (pytest's hooks,
    reports or modules, the report file, `os._exit`/`atexit`, bytecode), as the verifier
    observed or found it; empty when it saw none. Evidence, not the verdict: kept in
    the episode's record for the report and the judge."""


@runtime_checkable
class Episode(Protocol):
    """One attempt at one task: the tools the agent acts with, then the verifier."""

    @property
    def tools(self) -> Sequence[BaseTool]: ...

    async def verify(self) -> Verdict: ...

    async def close(self) -> None: ...


@runtime_checkable
class Budgeted(Protocol):
    """An episode whose environment enforces a budget (memory, storage): the driver
    ends it, as `resource_limit`, once `over_budget` says what it went over."""

    @property
    def over_budget(self) -> str | None: ...


@runtime_checkable
class Environment(Protocol):
    """A set of tasks and a way to start an isolated episode of each."""

    @property
    def name(self) -> str: ...

    def tasks(self) -> Sequence[TaskSpec]: ...

    async def start(self, task: TaskSpec, trial: int) -> Episode: ...


def chosen_tasks(environment: Environment, ids: Sequence[str] | None) -> list[TaskSpec]:
    """The tasks of `environment` named by `ids` (each once, in their order); all without."""
    available = {t.id: t for t in environment.tasks()}
    missing = [i for i in ids or () if i not in available]
    if missing:
        raise ConfigurationError(
            f"unknown task(s) {', '.join(missing)} in {environment.name}; "
            f"available: {', '.join(sorted(available))}"
        )
    return [available[i] for i in dict.fromkeys(ids)] if ids else list(available.values())
