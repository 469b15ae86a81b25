"""The one base for whatever asks a model for a JSON answer: the selectors that call a
model (llm, fusion, refine, scoring) and the trajectory judge (`analysis.judge`).

`ModelCaller` holds what they share: the call settings and their validation, the client
the calls go through (and its binding to a graph's client), and the loop ask -> parse ->
re-ask once with the problem stated -> give up, with every call's usage added up. What
to do on giving up is the caller's (a selector falls back, the judge records unknown).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from turnbon_graph._litellm.client import (
    CallResult,
    CompletionClient,
    LiteLLMClient,
    check_reserved,
)
from turnbon_graph._litellm.failures import describe_error
from turnbon_graph._litellm.loading import load_litellm
from turnbon_graph._litellm.model_map import supports_response_schema
from turnbon_graph._secrets import redact, secret_values
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import Usage

__all__ = [
    "Asked",
    "ModelCaller",
    "Parse",
    "bind_selector",
    "check_llm_options",
    "gather_all",
    "with_response_format",
]

T = TypeVar("T")

Parse = Callable[[Any], tuple[T | None, str, str | None]]
"""A response -> (value, raw answer text, problem); value is meaningful when problem is None."""


@dataclass
class Asked(Generic[T]):
    """The outcome of asking a model for a JSON answer."""

    value: T | None
    """The parsed answer, or None when `error` says why there is none."""
    answer: str | None
    """The last raw answer text."""
    usage: Usage
    """Every call made, the retry included."""
    error: str | None = None
    attempts: int = 0
    """Questions asked: the first and each re-ask, a call that failed included."""


def check_llm_options(
    kind: str, model: str, completion_kwargs: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Validates a model id and call settings; returns a copy of the settings."""
    if not isinstance(model, str) or not model:
        raise ConfigurationError(
            f"{kind} needs a LiteLLM model id such as 'openai/gpt-4o', got {model!r}"
        )
    kwargs = dict(completion_kwargs or {})
    check_reserved(kwargs, "selector completion_kwargs", "the selector")
    return kwargs


def with_response_format(
    kwargs: Mapping[str, Any],
    *,
    model: str,
    setting: bool | None,
    name: str,
    schema: dict[str, Any],
    strict: bool = True,
) -> dict[str, Any]:
    """`kwargs` plus a JSON-schema `response_format` when `setting` is True, or when it is
    None and LiteLLM says the model supports one."""
    out = dict(kwargs)
    if setting is None:
        setting = supports_response_schema(model)  # looked up once per model id
    if setting:
        out["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": schema, "strict": strict},
        }
    return out


async def gather_all(calls: Sequence[Awaitable[T]]) -> list[T]:
    """Runs `calls` concurrently (the client caps them). The first error propagates as
    itself (not an ExceptionGroup) after the other calls are cancelled."""
    tasks = [asyncio.ensure_future(call) for call in calls]
    try:
        return list(await asyncio.gather(*tasks))
    except BaseException:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


class ModelCaller:
    """Asks models for JSON answers through a `LiteLLMClient`.

    `model`: the model id the subclass calls, validated with `completion_kwargs` here
    (None: it calls no model, as a `ScoringSelector` with a reward function); the subclass
    keeps it under its own public name. `who` names the asker in errors ("the selector
    call failed: ...").

    Given no `client`, it makes a default one (no limits) until `bind_client` hands it
    another: the engine binds a selector instance to the graph's client, so the graph's
    `max_concurrency` and `rate_limit` bound its calls too. A client given to the
    constructor is never replaced: its limits were chosen. Binding changes the instance,
    so one instance in two graphs calls through the client of the graph built last.
    """

    def __init__(
        self,
        kind: str,
        model: str | None,
        # Positional in this order: every subclass forwards its own arguments of these names.
        completion_kwargs: dict[str, Any] | None = None,
        client: CompletionClient | None = None,
        response_format: bool | None = None,
        max_invalid_retries: int = 1,
        *,
        who: str = "selector",
    ) -> None:
        self.completion_kwargs = (
            check_llm_options(kind, model, completion_kwargs) if model is not None else {}
        )
        self._own_client = client is not None
        self.client: CompletionClient = client if client is not None else LiteLLMClient()
        self.response_format = response_format
        self.max_invalid_retries = max_invalid_retries
        self.who = who

    def bind_client(self, client: LiteLLMClient) -> None:
        """Calls through `client` from now on, unless the constructor was given one.

        Args:
            client: the graph's client, whose limits then bound these calls.
        """
        if not self._own_client:
            self.client = client

    async def answer_kwargs(
        self, model: str, name: str, schema: dict[str, Any], *, strict: bool = True
    ) -> dict[str, Any]:
        """The call settings, with the answer's schema as `response_format` where it applies
        (LiteLLM's model map says so; it is loaded off the event loop first, unless
        `response_format` is settled: a selector on another client need not load it)."""
        if self.response_format is None:
            await load_litellm()
        return with_response_format(
            self.completion_kwargs,
            model=model,
            setting=self.response_format,
            name=name,
            schema=schema,
            strict=strict,
        )

    async def ask_json(
        self,
        model: str,
        request: list[dict[str, str]],
        *,
        kwargs: Mapping[str, Any],
        parse: Parse[T],
        retry_prompt: Callable[[str], str],
    ) -> Asked[T]:
        """Asks, parses, and on an unusable answer asks again with the problem stated, up
        to `max_invalid_retries` times.

        A failed call is not retried here (the client already retried what is worth it);
        errors never hold a secret from `kwargs`."""
        usage = Usage()
        answer: str | None = None
        error = "no answer"
        attempts = 0
        for _ in range(1 + self.max_invalid_retries):
            attempts += 1
            try:
                result: CallResult = await self.client.complete(
                    model=model, messages=request, **kwargs
                )
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                described = redact(describe_error(exc), secret_values(kwargs))
                error = f"the {self.who} call failed: {described}"
                break
            usage = usage + result.usage
            value, answer, problem = parse(result.response)
            if answer:  # a reply may echo a key it was sent: never record it
                answer = redact(answer, secret_values(kwargs))
            if problem is None:
                return Asked(value, answer, usage, attempts=attempts)
            error = f"invalid answer: {problem}"
            request = [
                *request,
                {"role": "assistant", "content": answer or ""},
                {"role": "user", "content": retry_prompt(problem)},
            ]
        return Asked(None, answer, usage, error, attempts)


def bind_selector(selector: object, client: LiteLLMClient) -> None:
    """`selector.bind_client(client)` if it has one (the `Selector` protocol does not ask
    for it: a selector of the user's own is left as it is)."""
    bind = getattr(selector, "bind_client", None)
    if callable(bind):
        bind(client)
