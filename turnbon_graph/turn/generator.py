"""Candidate generation: N concurrent LiteLLM calls, yielded as they arrive.

Messages and tools go out through langchain-core's converters; replies come back as
`AIMessage`s with `tool_calls`. Private reasoning stays on the candidate's message
(`additional_kwargs`) and in the executed message, for providers that need it replayed.
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import AsyncGenerator, Coroutine, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
)
from pydantic import BaseModel, ConfigDict, Field

from turnbon_graph._litellm.client import LiteLLMClient, check_reserved
from turnbon_graph._litellm.failures import call_failure, describe_error
from turnbon_graph._litellm.loading import load_litellm
from turnbon_graph._litellm.model_map import choice_tokens, supports_native_n, supports_native_tools
from turnbon_graph._secrets import redact, secret_values, without_secrets
from turnbon_graph._sync import sized_for_loop
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.openai.messages import message_from_choice, to_openai_messages
from turnbon_graph.records import split_usage
from turnbon_graph.turn.candidates import Candidate
from turnbon_graph.turn.prompted_tools import parse_prompted_reply, prompted_request

ToolCalling = Literal["auto", "native", "prompted"]
NativeN = bool | Literal["auto"]


class CandidateSource(Protocol):
    """Where a turn's candidates come from: N calls yielded as they finish. The engine
    needs nothing else of a generator, so a LangChain agent's own model calls
    (`TurnBoNMiddleware`) serve as well as LiteLLM's (`CandidateGenerator`)."""

    @property
    def label(self) -> str:
        """The model(s) named in errors: 'All 4 candidate call(s) to <label> failed'."""
        ...

    def model_for(self, index: int) -> str:
        """The model that proposes candidate `index`."""
        ...

    def why_separate(self, n: int) -> str | None:
        """Why `n` candidates would come from one call each rather than from one call
        with `n`; None when one call serves them all."""
        ...

    def stream(
        self,
        messages: Sequence[BaseMessage],
        n: int,
        tools: list[dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
        *,
        start: int = 0,
        one_call: bool = True,
    ) -> AsyncGenerator[Candidate, None]:
        """Candidates `start`..`start + n - 1` for `messages` (failed ones carry `error`),
        in the order they finish; closing it early cancels the calls still in flight.
        `one_call=False`: one call per candidate even where `n` could serve them all (the
        caller takes them as they arrive)."""
        ...


async def as_they_finish(
    calls: Sequence[Coroutine[Any, Any, Candidate]],
) -> AsyncGenerator[Candidate, None]:
    """The candidates of `calls`, run concurrently, in the order they finish: a
    `CandidateSource.stream` of one call per candidate. Closing it early cancels the calls
    still in flight."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        for done in asyncio.as_completed(tasks):
            yield await done
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


_REFUSED = (400, 404, 422)
"""Statuses of a request refused as such (a parameter the endpoint does not take)."""


class CandidateGenerator:
    """Proposes N candidate next actions per turn from one model or a pool of models.

    `models` is a LiteLLM model id or a pool: a list of ids and `ModelSpec`s. Each entry
    fills `spec.n` consecutive slots (an id fills one), and candidate i comes from slot
    `i % slots`: `[ModelSpec(model="a", n=3), "b"]` proposes a, a, a, b, a, a, a, b, ...
    With `native_n`, a single model that supports `n` is asked once for all N; if the
    provider refuses, or returns fewer choices, the missing candidates come from
    separate calls. `native_n="auto"` does so only for a model id given as such (no
    `ModelSpec`, whose per-candidate settings a single call cannot carry) and, once the
    endpoint has refused `n` or answered with fewer choices, makes separate calls for that
    model from then on.

    `tool_calling`: "native" sends `tools`; "prompted" describes them in the system
    prompt and constrains the reply with a JSON-schema `response_format` (for models
    without tool calling, see `prompted_tools`); "auto" (default) is native where
    LiteLLM's model map says the model supports function calling or does not know the
    model, prompted where it says it does not.
    """

    def __init__(
        self,
        models: ModelPool,
        client: LiteLLMClient,
        *,
        completion_kwargs: dict[str, Any] | None = None,
        native_n: NativeN = False,
        tool_calling: ToolCalling = "auto",
    ) -> None:
        self.specs = _specs(models)
        self.slots = [k for k, spec in enumerate(self.specs) for _ in range(spec.n)]
        self.models = list(dict.fromkeys(spec.model for spec in self.specs))
        kwargs = dict(completion_kwargs or {})
        check_reserved(kwargs, "completion_kwargs", "the turn itself")
        if tool_calling not in ("auto", "native", "prompted"):
            raise ConfigurationError(
                f"tool_calling must be 'auto', 'native' or 'prompted', got {tool_calling!r}"
            )
        self.client = client
        self.completion_kwargs = kwargs
        if native_n not in (True, False, "auto"):
            raise ConfigurationError(f"native_n must be True, False or 'auto', got {native_n!r}")
        self.native_n = native_n
        # One model id given as such: no per-candidate settings a single call cannot carry.
        self._plain_model = isinstance(models, str) or all(isinstance(m, str) for m in models)
        self._refuses_n: set[str] = set()
        """Models whose endpoint refused `n` or ignored it: `auto` calls them one by one."""
        self.tool_calling = tool_calling

    def prompts_tools(self, model: str) -> bool:
        """Whether `model`'s tool calls are prompted rather than native."""
        if self.tool_calling == "auto":
            return not supports_native_tools(model)
        return self.tool_calling == "prompted"

    def _request(
        self,
        spec: ModelSpec,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        extra: dict[str, Any],
    ) -> _Request:
        model = spec.model
        kwargs: dict[str, Any] = {
            **self.completion_kwargs,
            **spec.completion_kwargs,
            **extra,
            "model": model,
        }
        if tools and self.prompts_tools(model):
            kwargs.pop("parallel_tool_calls", None)  # a prompted reply holds exactly one call
            rewritten, response_format, allowed = prompted_request(
                messages, tools, kwargs.pop("tool_choice", None)
            )
            kwargs |= {"messages": rewritten, "response_format": response_format}
            return _Request(kwargs, allowed)
        kwargs["messages"] = messages
        if tools:
            kwargs["tools"] = tools
        return _Request(kwargs, None)

    @property
    def label(self) -> str:
        return self.models[0] if len(self.models) == 1 else "+".join(self.models)

    async def stream(
        self,
        messages: Sequence[BaseMessage],
        n: int,
        tools: list[dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
        *,
        start: int = 0,
        one_call: bool = True,
    ) -> AsyncGenerator[Candidate, None]:
        """Yields N candidates (failed ones carry `error`) in the order they finish, with
        indices `start`..`start + n - 1`: from one call with `n` where `why_separate`
        finds nothing against it and `one_call` allows, else from a call each.

        `extra` holds per-call completion settings (`tool_choice`, `stop`, ...) that
        override `completion_kwargs` for this turn only.

        Closing the iterator early, or cancelling its consumer, cancels every call
        still in flight: use `contextlib.aclosing`.
        """
        extra = extra or {}
        check_reserved(extra, "per-call completion settings", "the turn itself")
        await load_litellm()  # the model-map lookups below import it otherwise, on the loop
        request = await sized_for_loop(messages, to_openai_messages, messages)
        requests = [self._request(spec, request, tools, extra) for spec in self.specs]
        indices = range(start, start + n)
        pending: set[asyncio.Task[list[Candidate]]] = set()
        try:
            if one_call and self.why_separate(n) is None:
                pending.add(asyncio.create_task(self._native(requests[0], indices)))
            else:
                pending.update(
                    asyncio.create_task(self._single(requests[self._slot(i)], i)) for i in indices
                )
            while pending:
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                for task in done:
                    candidates = task.result()
                    for candidate in candidates:
                        yield candidate
        finally:
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)

    def why_separate(self, n: int) -> str | None:
        """Why `n` candidates come from a call each, not one call with `n=n` (`native_n`,
        above); None when one call serves them."""
        if n < 2:
            return "one candidate"
        if not self.native_n:
            return "native_n=False"
        if len(self.specs) != 1:
            return "a pool of several models"
        model = self.specs[0].model
        if self.native_n == "auto" and not self._plain_model:
            return "a ModelSpec's settings apply per candidate"
        if self.native_n == "auto" and model in self._refuses_n:
            return "its endpoint refused or ignored n before"
        if not supports_native_n(model):
            return "LiteLLM does not list n for its provider"
        return None

    def _slot(self, index: int) -> int:
        return self.slots[index % len(self.slots)]

    def model_for(self, index: int) -> str:
        """The model that proposes candidate `index`."""
        return self.specs[self._slot(index)].model

    async def _single(self, request: _Request, index: int) -> list[Candidate]:
        model = self.model_for(index)
        started = time.monotonic()
        try:
            result = await self.client.complete(**request.kwargs)
            choice = result.response.choices[0]
        except (asyncio.CancelledError, ConfigurationError):
            raise  # a missing or refused key is the caller's to fix, not a candidate's failure
        except Exception as exc:
            error = redact(describe_error(exc), request.secrets)
            return [
                Candidate(
                    index=index,
                    model=model,
                    error=error,
                    failure=call_failure(exc, request.secrets),
                    latency_s=time.monotonic() - started,
                )
            ]
        message = request.parse(message_from_choice(choice, result.response, result.usage))
        message = without_secrets(message, request.secrets)
        return [
            Candidate(
                index=index,
                model=model,
                message=message,
                usage=result.usage,
                latency_s=result.latency_s,
                deployment=result.deployment,
            )
        ]

    async def _native(self, request: _Request, indices: range) -> list[Candidate]:
        model = self.specs[0].model
        try:
            result = await self.client.complete(**request.kwargs, n=len(indices))
        except (asyncio.CancelledError, ConfigurationError):
            raise
        except Exception as exc:
            # Fall back to N separate calls, whose own failures are recorded per candidate;
            # `auto` keeps to them for this model only when the request itself was refused
            # (a 4xx: `n` unsupported), not when the endpoint failed for a while.
            if getattr(exc, "status_code", None) in _REFUSED:
                self._refuses_n.add(model)
            singles = await asyncio.gather(*(self._single(request, i) for i in indices))
            return [c for batch in singles for c in batch]
        choices = list(result.response.choices)[: len(indices)]
        secrets = request.secrets
        # One call produced them all, and its usage is the call's: each candidate gets its
        # share by its own completion tokens, the shares adding up to the reported usage.
        # Counted on a thread: LiteLLM loads the model's tokenizer on its first count
        # (tiktoken's tables, or a Hugging Face tokenizer), which the loop must not wait for.
        counts = await asyncio.to_thread(lambda: [choice_tokens(model, c) for c in choices])
        shares = split_usage(result.usage, counts)
        candidates = [
            Candidate(
                index=index,
                model=model,
                message=without_secrets(
                    request.parse(message_from_choice(choice, result.response, share)),
                    secrets,
                ),
                usage=share,
                latency_s=result.latency_s,
                deployment=result.deployment,
                native_n=True,
            )
            for index, choice, share in zip(indices, choices, shares, strict=False)
        ]
        if len(candidates) < len(indices):
            self._refuses_n.add(model)  # it ignored `n`: `auto` asks it one by one from now
            missing = await asyncio.gather(
                *(self._single(request, i) for i in indices[len(candidates) :])
            )
            candidates.extend(c for batch in missing for c in batch)
        return candidates


class ModelSpec(BaseModel):
    """One model of a mixed candidate pool: how many slots it fills, with its own
    completion settings (temperature, api_base, ...) over the shared ones."""

    model_config = ConfigDict(frozen=True)

    model: str = Field(min_length=1)
    """The LiteLLM model id."""
    n: int = Field(1, ge=1)
    """How many consecutive slots of the pool this model fills (candidate i comes from
    slot i % slots)."""
    completion_kwargs: dict[str, Any] = Field(default_factory=dict)
    """Settings for this model's calls, over the shared `completion_kwargs`."""


ModelPool = str | Sequence[str | ModelSpec]


def _specs(models: ModelPool) -> list[ModelSpec]:
    entries = [models] if isinstance(models, str) else list(models)
    specs = []
    for entry in entries:
        if isinstance(entry, ModelSpec):
            specs.append(entry)
        elif isinstance(entry, str) and entry:
            specs.append(ModelSpec(model=entry, n=1))
        else:
            specs = []
            break
    if not specs:
        raise ConfigurationError(
            "model must be a LiteLLM model id such as 'openai/gpt-4o-mini', or a non-empty "
            f"list of ids and ModelSpec(model=..., n=..., completion_kwargs=...); got {models!r}"
        )
    for spec in specs:
        check_reserved(
            spec.completion_kwargs,
            f"ModelSpec({spec.model!r}).completion_kwargs",
            "the turn itself",
        )
    return specs


@dataclass
class _Request:
    """One model's call arguments for a turn, and how to read its replies."""

    kwargs: dict[str, Any]
    allowed_tools: set[str] | None
    """Tool names a prompted reply may use; None for native tool calling."""

    @functools.cached_property
    def secrets(self) -> list[str]:
        """What its replies must not carry: read once per turn, not once per candidate
        (it scans the environment)."""
        return secret_values(self.kwargs)

    def parse(self, message: AIMessage) -> AIMessage:
        if self.allowed_tools is None:
            return message
        return parse_prompted_reply(message, self.allowed_tools)
