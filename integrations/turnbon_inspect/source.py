"""An Inspect model as Turn-BoN's candidate source and as its selector's model.

Inspect calls the model (its provider, retries, cache, limits and log); the engine only
sees candidates. A turn asks once with `num_choices=N`; a provider that answers fewer
choices (one that has no `n`) is asked for the rest one call each, and from then on
one call per candidate.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from inspect_ai.model import (
    ChatMessage,
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    Model,
    ModelOutput,
    messages_to_openai,
)
from inspect_ai.tool import Tool
from inspect_ai.util import LimitExceededError
from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages

from turnbon_graph._litellm.client import CallResult
from turnbon_graph._litellm.failures import describe_error
from turnbon_graph.bench.readers.inspect_logs import usage_of
from turnbon_graph.records import Usage, split_usage
from turnbon_graph.turn.candidates import Candidate
from turnbon_graph.turn.generator import as_they_finish

__all__ = ["InspectModelClient", "InspectSource", "as_langchain"]


async def as_langchain(messages: Sequence[ChatMessage]) -> list[BaseMessage]:
    """Inspect messages as LangChain's, through the OpenAI format both speak."""
    converted: list[Any] = await messages_to_openai(list(messages))
    return convert_to_messages(converted)


@dataclass
class InspectSource:
    """The eval's model as a `CandidateSource`: the agent's Inspect messages and tools go
    to `Model.generate`; each candidate keeps Inspect's own message (`chosen`)."""

    model: Model
    messages: list[ChatMessage]
    """The agent's conversation, as Inspect holds it (the engine gets LangChain's copy)."""
    tools: list[Tool]
    without_n: set[str] = field(default_factory=set)
    """Models that answered fewer choices than `num_choices` asked for: asked one call
    per candidate from then on. The agent keeps it from turn to turn."""
    replies: dict[int, ChatMessageAssistant] = field(default_factory=dict)

    @property
    def one_call(self) -> bool:
        """Whether several candidates are asked for with one `num_choices` call."""
        return self.label not in self.without_n

    @property
    def label(self) -> str:
        return str(self.model)

    def model_for(self, index: int) -> str:
        return self.label

    def why_separate(self, n: int) -> str | None:
        if self.one_call:
            return None
        return f"Inspect's {self.label} answered one choice where num_choices asked for more"

    def chosen(self, index: int) -> ChatMessageAssistant:
        """Inspect's message of candidate `index`, tool call ids and all."""
        return self.replies[index]

    async def stream(
        self,
        messages: Sequence[BaseMessage],
        n: int,
        *_: Any,
        start: int = 0,
        one_call: bool = True,
        **__: Any,
    ) -> AsyncGenerator[Candidate, None]:
        """Candidates `start`..`start + n - 1`. The engine's LangChain `messages` go
        unread: the Inspect conversation they were made from is asked instead."""
        indices = range(start, start + n)
        if self.one_call and one_call and n > 1:
            for candidate in await self._together(indices):
                yield candidate
            return
        async for candidate in as_they_finish([self._alone(i) for i in indices]):
            yield candidate

    async def _generate(self, choices: int) -> tuple[ModelOutput, float]:
        started = time.monotonic()
        config = GenerateConfig(num_choices=choices) if choices > 1 else GenerateConfig()
        output = await self.model.generate(self.messages, self.tools, config=config)
        return output, time.monotonic() - started

    async def _together(self, indices: range) -> list[Candidate]:
        try:
            output, latency = await self._generate(len(indices))
        except (LimitExceededError, asyncio.CancelledError):
            raise
        except Exception:
            return list(await asyncio.gather(*(self._alone(i) for i in indices)))
        choices = output.choices[: len(indices)]
        # One call made them all and Inspect reports its usage once: each gets an equal
        # share (Inspect gives no per-choice token counts), adding up to the call's.
        shares = split_usage(usage_of(output.usage), [1] * len(choices))
        candidates = []
        for index, choice, share in zip(indices, choices, shares, strict=False):
            candidates.append(await self._candidate(index, choice.message, share, latency, True))
        if len(candidates) < len(indices):
            self.without_n.add(self.label)  # it has no `n`: a call per candidate from now on
            missing = indices[len(candidates) :]
            candidates.extend(await asyncio.gather(*(self._alone(i) for i in missing)))
        return candidates

    async def _alone(self, index: int) -> Candidate:
        started = time.monotonic()
        try:
            output, latency = await self._generate(1)
        except (LimitExceededError, asyncio.CancelledError):
            raise
        except Exception as exc:
            return Candidate(
                index=index,
                model=self.label,
                error=describe_error(exc),
                latency_s=time.monotonic() - started,
            )
        return await self._candidate(index, output.message, usage_of(output.usage), latency)

    async def _candidate(
        self,
        index: int,
        message: ChatMessageAssistant,
        usage: Usage,
        latency: float,
        native_n: bool = False,
    ) -> Candidate:
        """Candidate `index` for the engine; Inspect's own message kept (`chosen`)."""
        self.replies[index] = message
        converted = (await as_langchain([message]))[0]
        assert isinstance(converted, AIMessage)
        return Candidate(
            index=index,
            model=self.label,
            message=converted,
            usage=usage,
            latency_s=latency,
            native_n=native_n,
        )


_ROLES: dict[str, type[ChatMessage]] = {
    "system": ChatMessageSystem,
    "user": ChatMessageUser,
    "assistant": ChatMessageAssistant,  # a re-asked question carries the unusable answer
}


class InspectModelClient:
    """Answers a selector's `complete(model=..., messages=...)` through an Inspect model
    (a model role), so the selection is an Inspect model call: logged, retried and
    counted against the sample's limits. LiteLLM's settings in the call are not sent.

    A selector takes a failed call for a reason to fall back; a sample's limit is not
    one: it is kept in `limit`, and the agent raises it once the turn returns."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.limit: LimitExceededError | None = None

    async def complete(self, **kwargs: Any) -> CallResult:
        if self.limit is not None:
            raise self.limit
        started = time.monotonic()
        asked = [_ROLES[m["role"]](content=m["content"]) for m in kwargs["messages"]]
        try:
            output = await self.model.generate(asked)
        except LimitExceededError as exc:
            self.limit = exc
            raise
        reply = SimpleNamespace(content=output.completion, refusal=None)
        finish = "content_filter" if output.stop_reason == "content_filter" else "stop"
        response = SimpleNamespace(choices=[SimpleNamespace(message=reply, finish_reason=finish)])
        return CallResult(
            response=response,
            usage=usage_of(output.usage),
            latency_s=time.monotonic() - started,
            attempts=1,
        )
