"""One Turn-BoN turn: generate N candidates, select one, build the turn record.

The single engine behind both `create_turnbon_graph` and `ChatTurnBoN`, so the graph and
the chat model cannot drift apart. It has two phases because the graph runs them as two
nodes: the candidates are checkpointed between them, so a selector that pauses the graph
(or a crash) never costs a regeneration (`turn.state.GeneratedTurn`).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import aclosing
from pathlib import Path
from typing import Any, Unpack

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from turnbon_graph._secrets import reveal_secrets
from turnbon_graph.config import TurnConfig, TurnOptions, takes_turn_options, turn_config
from turnbon_graph.errors import AllCandidatesFailedError, ConfigurationError
from turnbon_graph.records import (
    RECORD_KEY,
    JSONLTraceSink,
    LatencySplit,
    SamplingRecord,
    TraceSink,
    TurnRecord,
    Usage,
    UsageSplit,
    write_trace,
)
from turnbon_graph.selectors.base import Selector
from turnbon_graph.turn._builder import call_client, resolve_selector
from turnbon_graph.turn.candidates import Candidate, agreement
from turnbon_graph.turn.choice import choose
from turnbon_graph.turn.generator import CandidateGenerator, CandidateSource, ModelPool
from turnbon_graph.turn.state import GeneratedTurn

EventSink = Callable[[dict[str, Any]], None]
"""Receives progress events: candidate_arrived, candidate_failed, selection_made."""


class TurnEngine:
    """Generates, selects and records one turn. Holds no per-turn state."""

    def __init__(
        self,
        *,
        generator: CandidateSource,
        selector: Selector,
        config: TurnConfig | None = None,
        trace: TraceSink | None = None,
    ) -> None:
        """An engine around a ready generator and selector (`from_config` builds both).

        Args:
            generator: where the candidates come from: a `CandidateGenerator` on LiteLLM,
                or any `CandidateSource` (the middleware's is the agent's own model).
            selector: chooses among the candidates.
            config: the turn's options (n, prompt, sampling, ...); its connection
                options were already used to build the generator and selector. None:
                the defaults.
            trace: where each turn record is written, over `config.trace`.

        Raises:
            ConfigurationError: `selector` is not a `Selector`.
        """
        config = config if config is not None else TurnConfig()
        if not isinstance(selector, Selector):
            raise ConfigurationError(
                f"selector must be a LiteLLM model id, a Selector (with `name` and async "
                f"`select`), or None; got {selector!r}"
            )
        self.generator = generator
        self.selector = selector
        self.config = config
        if trace is None:
            given = config.trace
            trace = JSONLTraceSink(given) if isinstance(given, str | Path) else given
        self.trace: TraceSink | None = trace

    @classmethod
    def from_config(cls, model: ModelPool, config: TurnConfig) -> TurnEngine:
        """The engine of `config` for `model`. One client serves the generator and the
        selector, so the limits bound every call.

        Args:
            model: a LiteLLM model id, or a mixed pool: a list of ids and `ModelSpec`s.
                The selector, unless `config` names one, is an `LLMSelector` on the
                pool's first model, sharing its endpoint.
            config: the turn's options.

        Returns:
            The engine, its `LiteLLMClient` made (LiteLLM itself is imported on the first
                call).

        Raises:
            ConfigurationError: the pool is empty or holds something other than ids and
                `ModelSpec`s, or `completion_kwargs` or `selector_kwargs` set what a
                turn sets itself (`model`, `messages`, `tools`, `n`).
        """
        client = call_client(config)
        generator = CandidateGenerator(
            model,
            client,
            completion_kwargs=reveal_secrets(config.completion_kwargs or {}),
            native_n=config.native_n,
            tool_calling=config.tool_calling,
        )
        # A default selector is the pool's first model: it shares that model's endpoint,
        # which may be set on its ModelSpec alone.
        endpoint = {**generator.completion_kwargs, **generator.specs[0].completion_kwargs}
        selector = resolve_selector(config, generator.models[0], endpoint, client)
        return cls(generator=generator, selector=selector, config=config)

    @classmethod
    @takes_turn_options
    def from_options(
        cls, model: ModelPool, *, config: TurnConfig | None = None, **options: Unpack[TurnOptions]
    ) -> TurnEngine:
        """`from_config` with the entry points' keywords.

        Args:
            model: a LiteLLM model id, or a mixed pool (as in `from_config`).
            config: a ready `TurnConfig`; None starts from the defaults.
            **options: any `TurnConfig` option by name, over `config`; `TurnConfig`
                describes each one.

        Returns:
            The engine of `turn_config(config, **options)`.

        Raises:
            ConfigurationError: an option is unknown or has a bad value, or as
                `from_config` raises.
        """
        return cls.from_config(model, turn_config(config, **options))

    async def run(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: list[dict[str, Any]] | None = None,
        on_event: EventSink | None = None,
        extra: dict[str, Any] | None = None,
    ) -> AIMessage:
        """Both phases: the chosen message for `messages`.

        Args:
            messages: the conversation so far; the prompt goes first unless it holds a
                system message (`transcript`).
            tools: OpenAI-format tool definitions offered to every candidate.
            on_event: receives each progress event (`candidate_arrived`,
                `candidate_failed`, `selection_made`) as it happens.
            extra: per-call completion settings for the generator calls (as in
                `generate`).

        Returns:
            The chosen `AIMessage`, its turn record in `response_metadata["turnbon"]`
                (`turn_record` reads it).

        Raises:
            AllCandidatesFailedError: no candidate call succeeded.
            ConfigurationError: a key is missing or refused, `extra` sets what a turn
                sets itself, or the selector answered an index outside the candidates it
                was shown.
        """
        turn = await self.generate(messages, tools=tools, on_event=on_event, extra=extra)
        return await self.select(messages, turn, on_event=on_event)

    def transcript(self, messages: Sequence[BaseMessage]) -> list[BaseMessage]:
        """The messages both generator and selector see: the prompt first, unless the
        messages carry their own system message.

        Args:
            messages: the conversation so far.

        Returns:
            A new list: `config.prompt` as a system message (when it is set and
                `messages` carry none), then `messages`.
        """
        if self.config.prompt and not any(isinstance(m, SystemMessage) for m in messages):
            return [SystemMessage(self.config.prompt), *messages]
        return list(messages)

    async def generate(
        self,
        messages: Sequence[BaseMessage],
        *,
        tools: list[dict[str, Any]] | None = None,
        on_event: EventSink | None = None,
        extra: dict[str, Any] | None = None,
    ) -> GeneratedTurn:
        """Runs the N generator calls (fewer under a `Budget`, in batches with
        `AdaptiveN`, stopping early with `EarlyCommit`).

        Args:
            messages: the conversation so far.
            tools: OpenAI-format tool definitions offered to every candidate.
            on_event: receives `candidate_arrived` or `candidate_failed` for each
                candidate as it arrives.
            extra: per-call completion settings for the generator calls
                (`tool_choice`, `stop`, ...), over `completion_kwargs`; the selector's
                calls do not get them.

        Returns:
            The turn's candidates, failed ones included, to pass to `select` (a graph
                checkpoints them in between).

        Raises:
            AllCandidatesFailedError: no candidate call succeeded; it carries each
                call's failure.
            ConfigurationError: a key is missing or refused, or `extra` sets what a turn
                sets itself (`model`, `messages`, `tools`, `n`).
        """
        turn_id = uuid.uuid4().hex
        started = time.monotonic()
        request = self.transcript(messages)
        cap, budget_note = (
            self.config.budget.affordable(self.config.n, messages)
            if self.config.budget
            else (self.config.n, None)
        )
        size = min(self.config.adaptive.first_batch, cap) if self.config.adaptive else cap
        # What needs candidates one call each, whatever the endpoint takes.
        needs_separate = (
            "early commit takes candidates as they arrive"
            if self.config.early_commit
            else "adaptive N samples in batches"
            if self.config.adaptive
            else None
        )
        candidates: list[Candidate] = []
        sampling = SamplingRecord(budget=budget_note)
        committed: int | None = None
        while size:
            batch = await self._collect(
                request, size, len(candidates), tools, extra, turn_id, on_event, needs_separate
            )
            candidates = sorted([*candidates, *batch], key=lambda c: c.index)
            sampling.batches.append(size)
            sampling.cancelled.extend(c.index for c in batch if c.cancelled)
            if self.config.adaptive is None:
                break
            step = self.config.adaptive.next_step(candidates, len(candidates), cap)
            committed, size = step.commit, step.size
            sampling.stopped = step.reason or None
        sampling.calls = len(candidates)
        sampling.native_n = any(c.native_n for c in candidates)
        if not all(c.native_n for c in candidates):
            sampling.separate_calls = needs_separate or self.generator.why_separate(len(candidates))
        turn = GeneratedTurn(
            turn_id,
            len(candidates),
            candidates,
            time.monotonic() - started,
            tools=tools,
            extra=extra,
            committed=committed,
            sampling=sampling,
        )
        if not turn.ok:
            last = max(candidates, key=lambda c: c.latency_s).error or "unknown error"
            failures = [c.failure for c in candidates]
            raise AllCandidatesFailedError(self.generator.label, len(candidates), last, failures)
        return turn

    async def _collect(
        self,
        request: list[BaseMessage],
        n: int,
        start: int,
        tools: list[dict[str, Any]] | None,
        extra: dict[str, Any] | None,
        turn_id: str,
        on_event: EventSink | None,
        separate: str | None = None,
    ) -> list[Candidate]:
        """One batch of `n` calls, candidates `start`.., as they arrive; with early commit,
        stops waiting (and cancels the rest) once enough are in and the grace has passed."""
        arrived: list[Candidate] = []
        deadline: float | None = None
        stream = self.generator.stream(
            request, n, tools, extra, start=start, one_call=separate is None
        )
        async with aclosing(stream):
            while True:
                try:
                    async with asyncio.timeout_at(deadline):
                        candidate = await anext(stream)
                except (StopAsyncIteration, TimeoutError):
                    break
                candidate.ignore_args = self.config.ignore_args
                arrived.append(candidate)
                if on_event is not None:
                    on_event(_candidate_event(turn_id, candidate))
                hedge = self.config.early_commit
                if (
                    hedge
                    and deadline is None
                    and sum(c.ok for c in arrived) >= hedge.min_candidates
                ):
                    if hedge.grace_s == 0:
                        break
                    deadline = asyncio.get_running_loop().time() + hedge.grace_s
        done = {c.index for c in arrived}
        late = [
            Candidate(
                index=i,
                model=self.generator.model_for(i),
                error=f"cancelled by early commit ({len(arrived)} of {n} had arrived)",
                cancelled=True,
            )
            for i in range(start, start + n)
            if i not in done
        ]
        return arrived + late

    async def select(
        self,
        messages: Sequence[BaseMessage],
        turn: GeneratedTurn,
        *,
        on_event: EventSink | None = None,
    ) -> AIMessage:
        """Chooses among the turn's candidates and returns the chosen message with its
        record in `response_metadata["turnbon"]`.

        No selector is asked when the candidates agree (or adaptive sampling committed);
        a selector that rejects every candidate gets one fresh batch, then the turn falls
        back to the majority or the first candidate.

        Args:
            messages: the conversation `generate` was given.
            turn: what `generate` returned.
            on_event: receives `selection_made`, and the events of a resample.

        Returns:
            The chosen `AIMessage` (or the one a selector wrote), with its turn record;
                the record also goes to the trace sink.

        Raises:
            ConfigurationError: the selector answered an index outside the candidates it
                was shown.
        """
        started = time.monotonic()
        asked = turn  # a resample asks the same question: the same tools and settings

        async def resample() -> GeneratedTurn:
            return await self.generate(
                messages, tools=asked.tools, extra=asked.extra, on_event=on_event
            )

        selection, turn, selector_usage = await choose(
            self.selector,
            self.transcript(messages),
            turn,
            dedupe=self.config.dedupe,
            resample=resample,
        )
        ok = turn.ok
        chosen = ok[selection.index]
        scores: list[float | None] | None = None
        if selection.scores is not None:
            by_index = dict(zip((c.index for c in ok), selection.scores, strict=True))
            scores = [by_index.get(c.index) for c in turn.candidates]
        record = TurnRecord(
            turn_id=turn.turn_id,
            n_requested=turn.n_requested,
            n_ok=sum(1 for c in turn.candidates if c.ok),
            selected_index=chosen.index,
            selector=selection.selector,
            fallback=selection.fallback,
            permutation=selection.permutation,
            selector_answer=selection.answer,
            agreement=agreement(ok),
            candidates=[c.to_record() for c in turn.candidates],
            usage=UsageSplit(
                generator=sum((c.usage for c in turn.candidates), Usage()),
                selector=selector_usage,
            ),
            latency_s=LatencySplit(generate=turn.latency_s, select=time.monotonic() - started),
            scores=scores,
            synthesized=_action(selection.message) if selection.message is not None else None,
            resamples=1 if turn.rejected else 0,  # at most one fresh batch per turn
            sampling=turn.sampling,
        )
        executed = selection.message or chosen.message
        assert executed is not None
        message = executed.model_copy(
            update={
                "response_metadata": {**executed.response_metadata, RECORD_KEY: record.to_json()}
            }
        )
        if self.trace is not None:
            await write_trace(self.trace, record)
        if on_event is not None:
            on_event(
                {
                    "turnbon": "selection_made",
                    "turn_id": turn.turn_id,
                    "selected_index": chosen.index,
                    "selector": selection.selector,
                    "fallback": selection.fallback,
                }
            )
        return message


def _action(message: AIMessage) -> dict[str, Any]:
    return {
        "content": message.text,
        "tool_calls": [
            {"name": c["name"], "args": c["args"], "id": c.get("id")} for c in message.tool_calls
        ],
    }


def _candidate_event(turn_id: str, candidate: Candidate) -> dict[str, Any]:
    event: dict[str, Any] = {
        "turnbon": "candidate_arrived" if candidate.ok else "candidate_failed",
        "turn_id": turn_id,
        "index": candidate.index,
        "model": candidate.model,
        "latency_s": candidate.latency_s,
    }
    if candidate.ok:
        event["action"] = candidate.action
    else:
        event["error"] = candidate.error
    return event


def turn_record(message: BaseMessage) -> TurnRecord | None:
    """The turn record on a message chosen by Turn-BoN, or None for any other message.

    Args:
        message: any message, typically the last `AIMessage` of a Turn-BoN turn.

    Returns:
        The `TurnRecord` in its `response_metadata["turnbon"]`, or None.
    """
    data = message.response_metadata.get(RECORD_KEY) if isinstance(message, AIMessage) else None
    return TurnRecord.model_validate(data) if data else None
