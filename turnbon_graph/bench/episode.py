"""One agent episode driven to its end and classified: the loop behind `turnbon bench`,
`turnbon run` and `turnbon demo`, usable by any driver of a compiled agent graph.

The agent gets the task's instruction, then each follow-up user message when it ends its
previous turn, all within the task's agent time limit; then the verifier decides. How an
attempt ended is an `Outcome` (the paper's Table 5). Only the agent's own failures count
as outcomes: a provider's (LiteLLM's errors, `AllCandidatesFailedError`), a tool's
(`ToolException`) or the environment's (any `TurnBoNError`, which integrations derive
their errors from; a `ResourceLimitError`, or an episode whose `over_budget` says it went
over a budget, ends as `resource_limit`). Anything else is a bug in the library or the
harness and propagates.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage
from langchain_core.tools import ToolException

from turnbon_graph._litellm.failures import CallFailedError
from turnbon_graph.bench.environment import Budgeted, Environment, Outcome, TaskSpec, Verdict
from turnbon_graph.errors import ResourceLimitError, TurnBoNError
from turnbon_graph.graph import agent_graph

if TYPE_CHECKING:
    from langchain_core.runnables import RunnableConfig
    from langgraph.types import StateSnapshot

    from turnbon_graph.bench.environment import Episode
    from turnbon_graph.turn.engine import TurnEngine

OnState = Callable[[list[BaseMessage]], None]
"""Called with the messages of every state the agent streams (LangGraph's "values")."""
OnPause = Callable[["StateSnapshot", Sequence[str]], Awaitable[None]]
"""Called when a checkpointed agent stopped at an interrupt, with the checkpoint and the
user messages still to come; the agent then resumes. Its time is not the agent's."""

PROVIDER_MODULES = ("litellm", "openai")
"""Where the provider's exceptions come from (LiteLLM's derive from OpenAI's)."""
VERIFIER_TAIL = 4000
"""The characters of the verifier's output an episode's result keeps (its end)."""
CONTEXT_OVERFLOW = ("contextwindowexceeded", "context length", "context window")


@dataclass
class EpisodeEnd:
    """How an episode ended, with what the agent said and did."""

    outcome: Outcome | None
    """None: the agent ended on its own and nothing verified it (`verify=False`)."""
    error: str | None = None
    verdict: Verdict | None = None
    messages: list[BaseMessage] = field(default_factory=list)
    """The last state's messages, also when the agent failed or ran out of time."""

    def result_fields(self, task: TaskSpec) -> dict[str, Any]:
        """What an `EpisodeResult` takes from this ending and its task, whichever way the
        episode was run (an attempt, a search)."""
        verdict = self.verdict
        return {
            "outcome": self.outcome,
            "error": self.error,
            "verifier_output": (verdict.output if verdict else "")[-VERIFIER_TAIL:],
            "tamper": verdict.tamper if verdict else [],
            "reward": verdict.reward if verdict else None,
            "category": task.category,
            "difficulty": task.difficulty,
        }


async def run_agent(
    environment: Environment,
    engine: TurnEngine,
    task: TaskSpec,
    trial: int,
    *,
    max_turns: int | None = None,
    on_state: OnState | None = None,
    verify: bool = True,
) -> EpisodeEnd:
    """Starts an episode of `task`, runs a Turn-BoN agent on it (`agent_graph` over the
    episode's tools, at most `max_turns` turns a user message, default the task's), then
    the verifier (unless `verify` is False), and closes the episode."""
    episode: Episode | None = None
    try:
        try:
            episode = await environment.start(task, trial)
            graph = agent_graph(engine, list(episode.tools), max_turns=max_turns or task.max_turns)
            agent = graph.compile()
        except Exception as exc:
            return EpisodeEnd(*classify_failure(exc, task))
        return await play(agent, episode, task, on_state=on_state, verify=verify)
    finally:
        if episode is not None:
            await episode.close()


async def play(
    agent: Any,
    episode: Episode,
    task: TaskSpec,
    *,
    segments: Sequence[str] | None = None,
    config: RunnableConfig | None = None,
    resume: bool = False,
    on_state: OnState | None = None,
    on_pause: OnPause | None = None,
    verify: bool = True,
) -> EpisodeEnd:
    """Drives a compiled agent graph on `episode` (see `drive`), then verifies it, and
    classifies how it ended. The caller closes the episode."""
    seen: list[BaseMessage] = []

    def record(messages: list[BaseMessage]) -> None:
        seen[:] = messages
        if on_state is not None:
            on_state(messages)
        # Checked after every state, so the step that went over is the episode's last.
        if isinstance(episode, Budgeted) and (over := episode.over_budget):
            raise ResourceLimitError(f"the episode went over its budget: {over}")

    try:
        await drive(
            agent,
            [task.instruction, *task.follow_ups] if segments is None else segments,
            timeout_s=task.agent_timeout_s,
            config=config,
            resume=resume,
            on_state=record,
            on_pause=on_pause,
        )
        verdict = (
            await asyncio.wait_for(episode.verify(), task.verifier_timeout_s) if verify else None
        )
    except Exception as exc:
        return EpisodeEnd(*classify_failure(exc, task), messages=list(seen))
    outcome, error = verdict_outcome(verdict)
    return EpisodeEnd(outcome, error, verdict, list(seen))


async def drive(
    agent: Any,
    segments: Sequence[str],
    *,
    timeout_s: float,
    config: RunnableConfig | None = None,
    resume: bool = False,
    on_state: OnState | None = None,
    on_pause: OnPause | None = None,
) -> list[BaseMessage]:
    """Sends each of `segments` as a user message once the agent ended its previous
    turn; returns the last state's messages. Raises TimeoutError after `timeout_s` of the
    agent's own time (pauses do not count).

    Without `config` the graph keeps no state: each message goes with the conversation
    so far. With `config` (a thread of a graph compiled with a checkpointer) the history
    is the checkpoint's, each message is sent alone, `resume` first continues the thread
    from its checkpoint, and an interrupt calls `on_pause` before the agent resumes.
    """
    messages: list[BaseMessage] = []
    spent = 0.0
    pending: list[dict[str, Any] | None] = [None] if resume else []
    pending += [{"messages": [HumanMessage(text)]} for text in segments]
    for position, payload in enumerate(pending):
        if config is None and payload is not None:
            payload = {"messages": [*messages, *payload["messages"]]}
        later = segments[position + 1 - int(resume) :]
        while True:
            begun = time.monotonic()
            async with asyncio.timeout(max(timeout_s - spent, 0.0)):
                async for state in agent.astream(payload, config, stream_mode="values"):
                    if "messages" not in state:  # an interrupt's chunk, not a state
                        continue
                    messages = list(state["messages"])
                    if on_state is not None:
                        on_state(messages)
            spent += time.monotonic() - begun
            if config is None:
                break
            snapshot = await agent.aget_state(config)
            if not snapshot.next:
                break
            if on_pause is not None:
                await on_pause(snapshot, later)
            payload = None
    return messages


def verdict_outcome(verdict: Verdict | None) -> tuple[Outcome | None, str | None]:
    """The verifier's answer as an outcome; a verifier that could not run is an agent
    error (the attempt has no verdict)."""
    if verdict is None:
        return None, None
    if verdict.error:
        return "agent_error", f"verifier: {verdict.error}"
    if verdict.setup_failure:
        return "verifier_failed", f"verifier: {verdict.setup_failure}"
    if verdict.passed:
        return "pass", None
    return "wrong_submission", f"verdict: {verdict.reason}" if verdict.reason else None


def classify_failure(exc: Exception, task: TaskSpec) -> tuple[Outcome, str]:
    """How an exception that stopped the agent ends the attempt: out of time, out of
    context, or an agent error. Re-raises an exception that is none of the agent's, the
    provider's, a tool's or the environment's: a bug must not pass for an outcome."""
    if isinstance(exc, TimeoutError):
        return "time_limit", f"no result within {task.agent_timeout_s:g} s"
    if isinstance(exc, ResourceLimitError):
        return "resource_limit", str(exc)[:2000]
    if not is_agent_failure(exc):
        raise exc
    text = f"{type(exc).__name__}: {exc}"
    overflow = any(k in text.lower() for k in CONTEXT_OVERFLOW)
    return ("out_of_context" if overflow else "agent_error"), text[:2000]


def is_agent_failure(exc: BaseException) -> bool:
    """Whether `exc` is the provider's, a tool's or the environment's (see the module)."""
    if isinstance(exc, TurnBoNError | ToolException | CallFailedError):
        return True
    return any(c.__module__.partition(".")[0] in PROVIDER_MODULES for c in type(exc).__mro__)
