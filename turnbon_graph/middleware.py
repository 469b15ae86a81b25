"""`TurnBoNMiddleware`: Turn-BoN in a LangChain v1 agent (`langchain.agents.create_agent`).

Every model call of the agent becomes a turn: the agent's own model handler is called N
times concurrently with the same request, the selector picks one response, and only that
one goes on to the tools node. The generator is whatever chat model the agent has, so
Turn-BoN here reaches any provider LangChain does, LiteLLM or not.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelRequest,
    ModelResponse,
    hook_config,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables.config import (
    RunnableConfig,
    ensure_config,
    var_child_runnable_config,
)
from langgraph.config import get_stream_writer
from langgraph.constants import TAG_NOSTREAM
from langgraph.errors import GraphBubbleUp
from langgraph.func import task
from langgraph.runtime import Runtime

from turnbon_graph._litellm.chat_model import chat_model_label, usage_of_message
from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph._litellm.failures import describe_error
from turnbon_graph._secrets import redact, reveal_secrets, secret_values
from turnbon_graph._sync import run_sync
from turnbon_graph.config import TurnConfig, TurnOptions, takes_turn_options, turn_config
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import RECORD_KEY
from turnbon_graph.selectors.base import Selector
from turnbon_graph.selectors.human import HumanSelector
from turnbon_graph.turn._builder import call_client, resolve_selector
from turnbon_graph.turn.candidates import Candidate
from turnbon_graph.turn.engine import EventSink, TurnEngine
from turnbon_graph.turn.generator import as_they_finish
from turnbon_graph.turn.state import GeneratedTurn
from turnbon_graph.turn.tool_errors import invalid_call_results

__all__ = ["TurnBoNMiddleware"]

AsyncHandler = Callable[[ModelRequest], Awaitable[ModelResponse]]


class TurnBoNMiddleware(AgentMiddleware):
    """Makes every model call of a `create_agent` agent a Turn-BoN turn.

    ```python
    turnbon = TurnBoNMiddleware(n=4, selector="openai/gpt-4o")
    agent = create_agent(model, tools, middleware=[turnbon])
    ```

    Args:
        config: a ready `TurnConfig`; None starts from the defaults.
        **options: any `TurnConfig` option by name, over `config`, where it applies
            (`TurnConfig` describes each one):

            - `selector`: a LiteLLM model id, a `Selector`, a LangChain chat model, or
              None: an LLM selector speaking through the agent's own model.
            - `completion_kwargs`: model settings for every candidate call, sent as
              `request.override(model_settings=...)` (for example `{"temperature": 1.0}`
              for more varied candidates); its connection settings apply to a LiteLLM
              selector by default.
            - `n`, `seed`, `adaptive`, `early_commit`, `budget`, `dedupe`,
              `ignore_args`, `trace`, as everywhere; `max_concurrency` and `rate_limit`
              bound the candidate calls and a LiteLLM selector's together (`timeout`,
              `max_retries`: the selector's; the agent's model has its own).
            - `selector=HumanSelector()`: the agent pauses with LangGraph's
              `interrupt()` (compile it with a checkpointer) and resumes with
              `Command(resume=i)`. The candidates are generated in a LangGraph task,
              whose result the checkpoint keeps, so the resume selects among exactly
              the candidates the person was shown: none is regenerated.
            - Not here: `prompt` (the agent's `system_prompt` is the prompt), `native_n`
              and `tool_calling` (the agent's model makes its own calls).

    Raises:
        ConfigurationError: an option is unknown or has a bad value, or one that does
            not apply here (`prompt`, `native_n`, `tool_calling`) is set.

    When every candidate's tool-call arguments were invalid, the chosen message carries
    them as `invalid_tool_calls`; the model is told each parse error in an error
    `ToolMessage` (as `ToolNode` answers a bad call) and called again, so the agent goes
    on instead of ending on a turn that ran nothing.

    The chosen `AIMessage` carries its turn record in `response_metadata["turnbon"]`. The
    candidates' calls are tagged `nostream`, so `stream_mode="messages"` shows only the
    chosen message; progress goes out as custom stream events (`stream_mode="custom"`).

    Order with other middleware (the first in the list is outermost): put
    `ModelRetryMiddleware` or `ModelFallbackMiddleware` *after* this one to retry or fall
    back each candidate call on its own (a failed candidate is otherwise just left out of
    the turn), or *before* it to retry or fall back whole turns when every candidate
    failed. `SummarizationMiddleware` works on the state before the model node, so its
    place does not matter; every candidate sees the same summarised request.
    """

    @takes_turn_options
    def __init__(self, *, config: TurnConfig | None = None, **options: Unpack[TurnOptions]) -> None:
        super().__init__()
        self.config = turn_config(config, **options)
        unsupported = [
            name
            for name, default in (("prompt", None), ("native_n", "auto"), ("tool_calling", "auto"))
            if getattr(self.config, name) != default
        ]
        if unsupported:
            raise ConfigurationError(
                f"TurnBoNMiddleware does not take {', '.join(unsupported)}: the agent's own "
                "model makes the candidate calls (set its system_prompt on create_agent)"
            )
        self._settings = reveal_secrets(self.config.completion_kwargs or {})
        self._client = call_client(self.config)
        # A selector that is not the agent's own model is built once: its calls share one
        # client (and so its limits) across every turn of every thread.
        self._selector: Selector | None = None
        if self.config.selector is not None:
            self._selector = resolve_selector(self.config, "", self._settings, self._client)

    @property
    def name(self) -> str:
        """The middleware's name in the agent's graph."""
        return "TurnBoNMiddleware"

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        """The agent's model call as a turn (LangChain calls this hook under `ainvoke`).

        Args:
            request: the agent's model request; every candidate gets the same one, with
                `completion_kwargs` over its model settings.
            handler: the rest of the chain (the agent's model, or the next middleware),
                called once per candidate, concurrently.

        Returns:
            The chosen candidate's response, its message carrying the turn record.

        Raises:
            AllCandidatesFailedError: every candidate's call failed.
        """
        turn = self._prepare(request, handler)
        if turn.pauses:  # the candidates are checkpointed before the person is asked
            return await turn.finish(await _checkpointed_candidates(turn))
        return await turn.run()

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        """`awrap_model_call` under `invoke`: each candidate's `handler` call on a thread
        of its own, concurrently.

        Args:
            request: the agent's model request.
            handler: the rest of the chain, called once per candidate.

        Returns:
            The chosen candidate's response, its message carrying the turn record.

        Raises:
            AllCandidatesFailedError: every candidate's call failed.
        """

        async def call(candidate_request: ModelRequest) -> ModelResponse:
            # The sync handler blocks: each candidate on a thread of its own, concurrently.
            return await asyncio.to_thread(handler, candidate_request)

        turn = self._prepare(request, call)
        if turn.pauses:
            return run_sync(turn.finish(_checkpointed_candidates_sync(turn).result()))
        return run_sync(turn.run())

    @hook_config(can_jump_to=["model"])
    def after_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        """After the model node: a chosen action that cannot run (no candidate's tool-call
        arguments parsed) is answered with its error results, and the model called again.

        Args:
            state: the agent's state.
            runtime: LangGraph's runtime (not used).

        Returns:
            One error `ToolMessage` per invalid call and a jump back to the model, or
                None for any other message.
        """
        return _answer_invalid(state)

    @hook_config(can_jump_to=["model"])
    async def aafter_model(
        self, state: AgentState[Any], runtime: Runtime[Any]
    ) -> dict[str, Any] | None:
        """`after_model` under `ainvoke`.

        Args:
            state: the agent's state.
            runtime: LangGraph's runtime (not used).

        Returns:
            The error results and a jump back to the model, or None.
        """
        return _answer_invalid(state)

    def _prepare(self, request: ModelRequest, handler: AsyncHandler) -> _Turn:
        if self._settings:
            request = request.override(model_settings={**request.model_settings, **self._settings})
        source = _HandlerSource(request, handler, self._client)
        selector = self._selector or resolve_selector(
            self.config.model_copy(update={"selector": request.model}), "", {}, self._client
        )
        messages: list[BaseMessage] = list(request.messages)
        if request.system_message is not None:
            messages.insert(0, request.system_message)
        engine = TurnEngine(generator=source, selector=selector, config=self.config)
        return _Turn(engine, source, messages, _stream_events())


@dataclass
class _Turn:
    """One model call of the agent made a turn: its candidates, then the selection."""

    engine: TurnEngine
    source: _HandlerSource
    messages: list[BaseMessage]
    on_event: EventSink | None

    @property
    def pauses(self) -> bool:
        """A person selects (`HumanSelector`): the graph pauses, and on resume the model
        node runs again from its start, so the candidates must come from a checkpoint."""
        return isinstance(self.engine.selector, HumanSelector)

    async def run(self) -> ModelResponse:
        return await self.finish(await self.generate())

    async def generate(self) -> GeneratedTurn:
        return await self.engine.generate(self.messages, on_event=self.on_event)

    def saved(self, turn: GeneratedTurn) -> dict[str, Any]:
        """The turn and the candidates' whole responses, as a checkpoint holds them."""
        responses = {
            str(i): {"result": r.result, "structured": r.structured_response}
            for i, r in self.source.responses.items()
        }
        return {"turn": turn.to_state(), "responses": responses}

    async def finish(self, generated: GeneratedTurn | dict[str, Any]) -> ModelResponse:
        if isinstance(generated, dict):  # from the checkpoint
            turn = GeneratedTurn.from_state(generated["turn"])
            self.source.responses = {
                int(i): ModelResponse(result=r["result"], structured_response=r["structured"])
                for i, r in generated["responses"].items()
            }
        else:
            turn = generated
        chosen = await self.engine.select(self.messages, turn, on_event=self.on_event)
        record = chosen.response_metadata[RECORD_KEY]
        response = self.source.responses.get(record["selected_index"])
        if response is None or record.get("synthesized") is not None:
            return ModelResponse(result=[chosen])  # an action the selector wrote itself
        # The chosen candidate's whole response (a structured output's ToolMessage too),
        # its AIMessage replaced by the recorded one.
        result = [chosen if isinstance(m, AIMessage) else m for m in response.result]
        return ModelResponse(result=result, structured_response=response.structured_response)


# LangGraph saves a task's result with the node's progress: when a HumanSelector's
# interrupt ends the model node and the resume runs it again, the same task call returns
# the saved candidates instead of calling the model N times more.
@task
async def _checkpointed_candidates(turn: _Turn) -> dict[str, Any]:
    return turn.saved(await turn.generate())


@task
def _checkpointed_candidates_sync(turn: _Turn) -> dict[str, Any]:
    return turn.saved(run_sync(turn.generate()))


def _answer_invalid(state: AgentState[Any]) -> dict[str, Any] | None:
    """The error results for a chosen action that cannot run (its arguments did not
    parse), and back to the model; None for any other message."""
    last = state["messages"][-1] if state["messages"] else None
    if not isinstance(last, AIMessage) or RECORD_KEY not in last.response_metadata:
        return None
    results = invalid_call_results(last)
    return {"messages": results, "jump_to": "model"} if results else None


@dataclass
class _HandlerSource:
    """The agent's model handler as a `CandidateSource`: one handler call per candidate,
    each tagged `nostream` so that no candidate streams as the agent's message."""

    request: ModelRequest
    handler: AsyncHandler
    client: LiteLLMClient
    """Its `slot()` bounds the candidate calls by the turn's max_concurrency and rate_limit."""
    responses: dict[int, ModelResponse] = field(default_factory=dict)

    @property
    def label(self) -> str:
        model = self.request.model
        return chat_model_label(model) if isinstance(model, BaseChatModel) else str(model)

    def model_for(self, index: int) -> str:
        return self.label

    def why_separate(self, n: int) -> str | None:
        return "the agent's own model makes one call per candidate"

    async def stream(
        self, messages: Sequence[BaseMessage], n: int, *_: Any, start: int = 0, **__: Any
    ) -> AsyncGenerator[Candidate, None]:
        """Candidates `start`..`start + n - 1`, one handler call each, as they finish. The
        rest of `CandidateSource.stream`'s arguments go unread: the handler's request
        already holds the agent's messages, tools and settings."""
        async for candidate in as_they_finish([self._call(i) for i in range(start, start + n)]):
            yield candidate

    async def _call(self, index: int) -> Candidate:
        config = ensure_config()
        quiet = RunnableConfig(**{**config, "tags": [*config.get("tags", []), TAG_NOSTREAM]})
        started = time.monotonic()
        var_child_runnable_config.set(quiet)  # this call's task only: it has its own context
        try:
            async with self.client.slot():
                response = await self.handler(self.request)
        except GraphBubbleUp:
            raise  # an interrupt inside the model call belongs to the graph
        except Exception as exc:
            return Candidate(
                index=index,
                model=self.label,
                error=redact(describe_error(exc), secret_values({})),
                latency_s=time.monotonic() - started,
            )
        message = next((m for m in response.result if isinstance(m, AIMessage)), None)
        if message is None:
            return Candidate(
                index=index,
                model=self.label,
                error="the model call returned no AIMessage",
                latency_s=time.monotonic() - started,
            )
        self.responses[index] = response
        return Candidate(
            index=index,
            model=self.label,
            message=message,
            usage=usage_of_message(message),
            latency_s=time.monotonic() - started,
        )


def _stream_events() -> EventSink | None:
    """Progress as custom stream events of the agent's graph (none outside a graph)."""
    try:
        write = get_stream_writer()
    except RuntimeError:
        return None
    return lambda event: write({**event, "source": "turnbon"})
