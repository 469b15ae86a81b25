"""Turn-BoN as a LiteLLM custom provider: `model="turnbon/<inner model id>"` runs one
whole turn (N candidates from the inner model, a selector, the chosen action) behind
`litellm.completion` / `litellm.acompletion`, the door most agent harnesses already use.

    from turnbon_graph.litellm_provider import TurnBoNProvider, register

    register(TurnBoNProvider(n=4, selector="openai/gpt-4o"))
    litellm.completion(model="turnbon/openai/gpt-4o-mini", messages=..., tools=...)

The call's `api_base`, `api_key` and headers are the inner model's connection (a default
selector shares it). One engine is kept per inner model and connection, so repeated and
concurrent calls share its `max_concurrency` and `rate_limit`; every turn runs on the
provider's own event loop (a daemon thread), so sync calls from any thread and async
calls from any loop share those limits too. The response is an ordinary `ModelResponse`
whose `usage` covers every call of the turn; its turn record is
`response._hidden_params["turnbon"]` (plain JSON), also `turnbon_record(response)`.
Importing this module imports LiteLLM: it exists to be used with it.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar, Unpack

import httpx
from langchain_core.messages import AIMessage

from turnbon_graph._litellm.price_map import use_bundled_price_map
from turnbon_graph._secrets import redact, reveal_secrets, secret_values
from turnbon_graph.config import TurnConfig, TurnOptions, takes_turn_options, turn_config
from turnbon_graph.errors import (
    AllCandidatesFailedError,
    CallFailure,
    ConfigurationError,
    CredentialsError,
)
from turnbon_graph.openai.chat import (
    RECORD_FIELD,
    chat_completion,
    chat_completion_chunks,
    parse_chat_request,
    turn_usage,
)
from turnbon_graph.records import TurnRecord
from turnbon_graph.turn.engine import TurnEngine, turn_record

use_bundled_price_map()  # before LiteLLM is imported: no fetch of its price list

import litellm  # noqa: E402
from litellm.exceptions import ContextWindowExceededError  # noqa: E402
from litellm.litellm_core_utils.exception_mapping_utils import ExceptionCheckers  # noqa: E402
from litellm.llms.custom_llm import CustomLLM, CustomLLMError  # noqa: E402
from litellm.types.llms.openai import ChatCompletionToolCallChunk  # noqa: E402
from litellm.types.utils import GenericStreamingChunk, ModelResponse  # noqa: E402

__all__ = ["PROVIDER_NAME", "TurnBoNProvider", "register", "turnbon_record"]

PROVIDER_NAME = "turnbon"
"""The default provider prefix: `turnbon/<inner model id>`."""

_T = TypeVar("_T")


class TurnBoNProvider(CustomLLM):
    """A LiteLLM `CustomLLM` whose every completion is a Turn-BoN turn over the inner
    model the id names. Takes the `TurnConfig` options by keyword, or `config=`.

    Args:
        config: a ready `TurnConfig`; None starts from the defaults.
        **options: any `TurnConfig` option by name, over `config`; `TurnConfig`
            describes each one. `completion_kwargs` go to every inner call, under the
            call's own connection (`api_base`, `api_key`, headers).

    Raises:
        ConfigurationError: an option is unknown or has a bad value.
    """

    @takes_turn_options
    def __init__(self, *, config: TurnConfig | None = None, **options: Unpack[TurnOptions]) -> None:
        super().__init__()
        self.config = turn_config(config, **options)
        self.name = PROVIDER_NAME
        self._engines: dict[tuple[str, str], TurnEngine] = {}
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    # ------------------------------------------------------------------ engines, loop

    def engine(self, model: str, connection: dict[str, Any]) -> TurnEngine:
        """The engine for `model` on `connection`, made on first use and kept, so the
        calls to one inner model on one connection share its limits.

        Args:
            model: the inner model id (the call's model without the `turnbon/` prefix).
            connection: the call's `api_base`, `api_key`, `extra_headers`, ... over
                `completion_kwargs`.

        Returns:
            The engine.

        Raises:
            ConfigurationError: the engine cannot be made (as `TurnEngine.from_config`).
        """
        digest = hashlib.sha256(json.dumps(connection, sort_keys=True).encode()).hexdigest()
        with self._lock:
            engine = self._engines.get((model, digest))
            if engine is None:
                kwargs = {**reveal_secrets(self.config.completion_kwargs or {}), **connection}
                config = turn_config(self.config, completion_kwargs=kwargs)
                engine = self._engines[(model, digest)] = TurnEngine.from_config(model, config)
            return engine

    def _portal(self) -> asyncio.AbstractEventLoop:
        """The provider's own event loop, started on first use in a daemon thread."""
        with self._lock:
            if self._loop is None or self._loop.is_closed():
                loop = asyncio.new_event_loop()
                threading.Thread(
                    target=loop.run_forever, name="turnbon-provider", daemon=True
                ).start()
                self._loop = loop
            return self._loop

    def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Runs `coro` on the provider's loop and waits for it (sync callers)."""
        return asyncio.run_coroutine_threadsafe(coro, self._portal()).result()

    async def _arun(self, coro: Coroutine[Any, Any, _T]) -> _T:
        """Runs `coro` on the provider's loop; cancelling the caller cancels it."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._portal()))

    def close(self) -> None:
        """Stops the provider's loop (a later call starts a new one)."""
        with self._lock:
            loop, self._loop = self._loop, None
        if loop is not None:
            loop.call_soon_threadsafe(loop.stop)

    # ------------------------------------------------------------------ one turn

    async def turn(self, call: dict[str, Any]) -> AIMessage:
        """The chosen message for LiteLLM's handler arguments `call`. Failures become
        `CustomLLMError`s with an HTTP status, which LiteLLM raises as its exception of
        that status (`_failed`), their text free of keys.

        Args:
            call: the keyword arguments LiteLLM passes a custom handler: `model`,
                `messages`, `optional_params`, `api_base`, `api_key`, `headers`, ...

        Returns:
            The turn's chosen message, its turn record in `response_metadata`.

        Raises:
            CustomLLMError: status 401 for the inner model's key, 400 for a request or
                option the turn refuses, and when every candidate failed the upstream's
                own 4xx (when all got it), 504 (all timed out) or 502, with a 429's
                Retry-After.
            ContextWindowExceededError: every candidate was refused for a context too
                long for the inner model.
        """
        connection = _connection(call)
        try:
            request = parse_chat_request(
                {
                    **(call.get("optional_params") or {}),
                    "model": call["model"],
                    "messages": call["messages"],
                },
                owns_upstream=True,  # the caller's own connection: LiteLLM's fields pass
            )
            engine = self.engine(call["model"], connection)
            return await engine.run(
                request.messages, tools=request.tools, extra=request.settings or None
            )
        except CredentialsError as exc:  # the inner model's key: the caller's to fix
            raise _error(401, exc, connection) from None
        except ConfigurationError as exc:
            raise _error(400, exc, connection) from None
        except AllCandidatesFailedError as exc:
            raise _failed(exc, connection) from None

    def _response(self, message: AIMessage, call: dict[str, Any]) -> ModelResponse:
        body = chat_completion(message, model=f"{self.name}/{call['model']}")
        record = body.pop(RECORD_FIELD, None)
        response = ModelResponse(**body)
        response._hidden_params[RECORD_FIELD] = record
        return response

    def _chunks(self, message: AIMessage, call: dict[str, Any]) -> Iterator[GenericStreamingChunk]:
        """The chosen message as LiteLLM's generic stream chunks (from the OpenAI ones);
        the last carries the turn's usage, which LiteLLM's stream wrapper gives a caller
        that asked for it (`stream_options.include_usage`) as OpenAI does, in a last chunk
        of its own, and no other caller; and the turn record (`turnbon_record(message)`
        of the chosen message is not reachable through a stream, so it rides on it)."""
        usage = turn_usage(turn_record(message), message)
        for chunk in chat_completion_chunks(message, model=f"{self.name}/{call['model']}"):
            choice = chunk["choices"][0]
            delta = choice["delta"]
            calls = delta.get("tool_calls") or [None]
            finish = choice["finish_reason"]
            yield GenericStreamingChunk(
                text=delta.get("content") or "",
                tool_use=_tool_use(calls[0]),
                is_finished=finish is not None,
                finish_reason=finish or "",
                usage=usage if finish is not None else None,  # type: ignore[typeddict-item]
                index=0,
                provider_specific_fields=(
                    {RECORD_FIELD: chunk[RECORD_FIELD]} if RECORD_FIELD in chunk else None
                ),
            )

    # ------------------------------------------------------------------ LiteLLM's hooks

    def completion(self, *args: Any, **call: Any) -> ModelResponse:
        """`litellm.completion` on a `turnbon/...` model: one turn, on the provider's loop.

        Args:
            *args: LiteLLM's positional handler arguments (not used).
            **call: LiteLLM's keyword handler arguments (as `turn` takes them).

        Returns:
            An OpenAI-shaped response whose `usage` covers every call of the turn; the
                turn record is in `_hidden_params["turnbon"]` (`turnbon_record`).
        """
        return self._response(self._run(self.turn(call)), call)

    async def acompletion(self, *args: Any, **call: Any) -> ModelResponse:
        """`litellm.acompletion` on a `turnbon/...` model (as `completion`).

        Args:
            *args: LiteLLM's positional handler arguments (not used).
            **call: LiteLLM's keyword handler arguments (as `turn` takes them).

        Returns:
            The response, as `completion` returns it.
        """
        return self._response(await self._arun(self.turn(call)), call)

    def streaming(self, *args: Any, **call: Any) -> Iterator[GenericStreamingChunk]:
        """`litellm.completion(..., stream=True)`: the whole turn, then the chosen message
        replayed as chunks.

        Args:
            *args: LiteLLM's positional handler arguments (not used).
            **call: LiteLLM's keyword handler arguments (as `turn` takes them).

        Yields:
            The chosen message's text, then its tool calls; the last chunk carries the
                turn's usage and its record.
        """
        yield from self._chunks(self._run(self.turn(call)), call)

    async def astreaming(  # type: ignore[override]  # an async generator, as LiteLLM calls it
        self, *args: Any, **call: Any
    ) -> AsyncIterator[GenericStreamingChunk]:
        """`litellm.acompletion(..., stream=True)` (as `streaming`).

        Args:
            *args: LiteLLM's positional handler arguments (not used).
            **call: LiteLLM's keyword handler arguments (as `turn` takes them).

        Yields:
            The chunks `streaming` yields.
        """
        message = await self._arun(self.turn(call))
        for chunk in self._chunks(message, call):
            yield chunk


def _tool_use(delta: dict[str, Any] | None) -> ChatCompletionToolCallChunk | None:
    if delta is None:
        return None
    function = delta["function"]
    return ChatCompletionToolCallChunk(
        id=delta.get("id"),
        type="function",
        function={"name": function.get("name"), "arguments": function["arguments"]},
        index=delta["index"],
    )


def _connection(call: dict[str, Any]) -> dict[str, Any]:
    """The inner model's connection settings from LiteLLM's handler arguments."""
    params = call.get("litellm_params") or {}
    connection: dict[str, Any] = {
        "api_base": call.get("api_base"),
        "api_key": call.get("api_key"),
        "extra_headers": dict(call.get("headers") or {}) or None,
        "api_version": params.get("api_version"),
        "organization": params.get("organization"),
    }
    return {k: v for k, v in connection.items() if v is not None}


def _error(
    status: int, exc: Exception, connection: dict[str, Any], message: str | None = None
) -> CustomLLMError:
    """A `CustomLLMError`, which LiteLLM's exception mapping raises to the caller as its
    exception of that status: 400 `BadRequestError`, 401 `AuthenticationError`, 404
    `NotFoundError`, 429 `RateLimitError`, 502 `BadGatewayError`, 504 `Timeout`, ..."""
    text = redact(message if message is not None else str(exc), secret_values(connection))
    return CustomLLMError(status_code=status, message=text)  # type: ignore[no-untyped-call]


def _failed(exc: AllCandidatesFailedError, connection: dict[str, Any]) -> Exception:
    """Every candidate failed: the status of `exc` (the upstream's own 4xx and words when
    every candidate got it, 504 when every call timed out, else 502), with a 429's
    longest Retry-After as its headers (LiteLLM keeps them: `litellm_response_headers`,
    and `response.headers`). A context too long is LiteLLM's `ContextWindowExceededError`,
    as LiteLLM raises it for the inner model, which harnesses catch to end an episode."""
    upstream = exc.upstream
    if upstream is not None and exc.status == 400 and _context_too_long(upstream):
        text = redact(upstream.message, secret_values(connection))
        return ContextWindowExceededError(message=text, model=exc.model, llm_provider=PROVIDER_NAME)
    error = _error(exc.status, exc, connection, upstream.message if upstream else None)
    if (asked := exc.retry_after) is not None:
        headers = httpx.Headers({"retry-after": str(math.ceil(asked))})
        error.headers = headers  # type: ignore[attr-defined]
        request = httpx.Request("POST", "http://turnbon.invalid/chat/completions")
        error.response = httpx.Response(exc.status, headers=headers, request=request)  # type: ignore[attr-defined]
    return error


def _context_too_long(failure: CallFailure) -> bool:
    """Whether the upstream refused the request as too long for the model's context (by
    LiteLLM's own test of an error's text)."""
    if (failure.error or {}).get("code") == "context_length_exceeded":
        return True
    return ExceptionCheckers.is_error_str_context_window_exceeded(failure.message)


def register(provider: TurnBoNProvider, name: str = PROVIDER_NAME) -> TurnBoNProvider:
    """Adds `provider` to `litellm.custom_provider_map` as `name` (replacing one of the
    same name), so `model="<name>/<inner model id>"` reaches it.

    Args:
        provider: the provider to register.
        name: the model id prefix that reaches it.

    Returns:
        `provider`, its `name` set.

    Raises:
        ConfigurationError: `provider` is not a `TurnBoNProvider`.
    """
    if not isinstance(provider, TurnBoNProvider):
        raise ConfigurationError(f"register takes a TurnBoNProvider, got {provider!r}")
    provider.name = name
    kept = [entry for entry in litellm.custom_provider_map if entry.get("provider") != name]
    litellm.custom_provider_map = [*kept, {"provider": name, "custom_handler": provider}]
    return provider


def turnbon_record(response: Any) -> TurnRecord | None:
    """The turn record of a `ModelResponse` (or a stream chunk) the provider returned.

    Args:
        response: a response or chunk from `litellm.completion`/`acompletion`.

    Returns:
        Its `TurnRecord`, or None where it carries none.
    """
    data = (getattr(response, "_hidden_params", None) or {}).get(RECORD_FIELD)
    return TurnRecord.model_validate(data) if data else None
