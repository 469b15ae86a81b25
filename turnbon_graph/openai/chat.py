"""The OpenAI chat-completions wire format, both ways: a request body into what a turn
takes (LangChain messages, OpenAI tools, per-call settings), and the chosen `AIMessage`
with its turn record into a `chat.completion` body or `chat.completion.chunk`s.

The LiteLLM provider (`litellm_provider`) and the HTTP server (`serve`) share it, so the
two doors harnesses use cannot translate differently. One declared list (`openai.fields`)
says what a request may carry: `FORWARDED` fields (OpenAI's sampling and tool settings, and the
vendor fields of OpenAI-compatible servers such as `chat_template_kwargs`) reach every
generator call, `IGNORED` ones (`store`, `metadata`, `service_tier`, `user`, ...) are
accepted and dropped, `REFUSED` ones (`audio`, the connection) are refused with why, and
every value is checked as OpenAI checks it before any call (`RequestFieldError` names the
field). Messages are accepted as real harnesses send them: an assistant message with
`tool_calls` and no `content` key, `content: null`, tool messages, lists of content
parts, `name` fields. Streams are sent as OpenAI sends them: `usage` only when
`stream_options.include_usage` asks, in a last chunk with no choices. No LiteLLM here.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.messages.ai import UsageMetadata

from turnbon_graph.errors import ConfigurationError, RequestFieldError
from turnbon_graph.openai.fields import (
    CONNECTION_FIELDS,
    FORWARDED,
    IGNORED,
    REFUSED,
    boolean,
    fail,
    is_integer,
    json_object,
    sort_request_fields,
    unsupported_fields_error,
)
from turnbon_graph.openai.messages import parse_messages, parse_tools
from turnbon_graph.openai.text import check_utf8
from turnbon_graph.records import RECORD_KEY, TurnRecord, Usage

__all__ = [
    "RECORD_FIELD",
    "ChatRequest",
    "chat_completion",
    "chat_completion_chunks",
    "parse_chat_request",
    "turn_usage",
]

RECORD_FIELD = RECORD_KEY
"""The top-level field of a response body that holds the turn record (clients such as the
OpenAI SDK ignore fields they do not know)."""


# ---------------------------------------------------------------------- field checks


_TURN_FIELDS = frozenset(
    {
        "model",
        "messages",
        "tools",
        "functions",
        "function_call",
        "stream",
        "stream_options",
        "n",
        "modalities",
    }
)
"""What the turn itself reads: never forwarded as such."""

_EXTRA_BODY = "extra_body"


@dataclass(frozen=True)
class ChatRequest:
    """A chat-completions request, as a turn takes it."""

    model: str
    messages: list[BaseMessage]
    tools: list[dict[str, Any]] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    """Per-call settings (`tool_choice`, `stop`, `temperature`, ...) for the generator."""
    stream: bool = False
    include_usage: bool = False
    """`stream_options.include_usage`: a stream ends in a chunk with the turn's `usage`."""


def parse_chat_request(body: Any, *, owns_upstream: bool = False) -> ChatRequest:
    """A `ChatRequest` from a JSON request body, every value checked before any call.

    Fields in `FORWARDED` reach every generator call, `IGNORED` ones are dropped, a null
    value counts as absent. Raises `RequestFieldError` (a `ConfigurationError`) naming the
    field for a value OpenAI would refuse, text that is not valid UTF-8 (`check_utf8`), a
    `REFUSED` field, `n` > 1, audio, and any other field, unless `owns_upstream`: a
    caller whose connection the upstream is (the LiteLLM provider's) has other fields
    forwarded as LiteLLM forwards them, and its `extra_body` too."""
    if not isinstance(body, Mapping):
        raise ConfigurationError("the request body must be a JSON object")
    check_utf8(body)  # first: no later error may quote text that cannot be encoded
    model = body.get("model", "")
    if not isinstance(model, str):
        raise RequestFieldError("model", "model must be a string")
    _check_turn_fields(body)
    settings, unknown = sort_request_fields(
        body, own=_TURN_FIELDS, kept=FORWARDED, ignored=IGNORED, refused=REFUSED
    )
    if unknown and not owns_upstream:
        raise unsupported_fields_error(
            unknown,
            f"{', '.join(sorted({*FORWARDED, *IGNORED}))} (send a vendor's own field as a "
            "field of the body, not in extra_body)",
        )
    for name, value in unknown.items():  # forwarded as LiteLLM forwards them
        settings[name] = _extra_body(value) if name == _EXTRA_BODY else value
    tools = parse_tools(body.get("tools"), body.get("functions"))
    if body.get("function_call") is not None and "tool_choice" not in settings:
        settings["tool_choice"] = _legacy_choice(body["function_call"])
    options = body.get("stream_options") or {}
    return ChatRequest(
        model=model,
        messages=parse_messages(body.get("messages")),
        tools=tools,
        settings=settings,
        stream=bool(body.get("stream")),
        include_usage=bool(options.get("include_usage")),
    )


def _check_turn_fields(body: Mapping[str, Any]) -> None:
    """`n`, `stream`, `stream_options` and `modalities`: the turn's own fields."""
    n = body.get("n")
    if n is not None and (not is_integer(n) or n < 1):
        fail("n", "a positive integer", n)
    if n not in (None, 1):
        raise RequestFieldError(
            "n",
            f"n must be 1 (got {n!r}): a turn answers with the one chosen action; the "
            "number of candidates is the server's or provider's own option n",
        )
    if body.get("stream") is not None:
        boolean("stream", body["stream"])
    if body.get("stream_options") is not None:
        _stream_options("stream_options", body["stream_options"])
    modalities = body.get("modalities")
    if modalities is not None:
        if not isinstance(modalities, list) or not all(isinstance(m, str) for m in modalities):
            fail("modalities", "a list of strings", modalities)
        if set(modalities) - {"text"}:
            raise RequestFieldError(
                "modalities",
                f"modalities may only ask for text (got {modalities!r}): a turn answers "
                "with text and tool calls, never audio",
            )


def _extra_body(value: Any) -> dict[str, Any]:
    """The provider caller's `extra_body` (merged into the upstream body by LiteLLM),
    unless it would set what the turn or the connection sets."""
    json_object(_EXTRA_BODY, value)
    taken = sorted(set(value) & (_TURN_FIELDS | CONNECTION_FIELDS))
    if taken:
        raise RequestFieldError(
            _EXTRA_BODY,
            f"extra_body may not set {', '.join(taken)}: the turn or the connection sets it",
        )
    return dict(value)


# ---------------------------------------------------------------------- responses


def turn_usage(record: TurnRecord | None, message: AIMessage | None = None) -> dict[str, Any]:
    """OpenAI `usage` for a turn: every generator and selector call summed (without a
    record, the message's own usage)."""
    if record is not None:
        total = record.usage.total
    else:
        meta: UsageMetadata | None = message.usage_metadata if message is not None else None
        total = Usage(
            prompt_tokens=meta["input_tokens"] if meta else 0,
            completion_tokens=meta["output_tokens"] if meta else 0,
        )
    return {
        "prompt_tokens": total.prompt_tokens,
        "completion_tokens": total.completion_tokens,
        "total_tokens": total.total_tokens,
        "prompt_tokens_details": {"cached_tokens": total.cached_tokens},
        "completion_tokens_details": {"reasoning_tokens": total.reasoning_tokens},
    }


def _record(message: AIMessage) -> TurnRecord | None:
    data = message.response_metadata.get(RECORD_KEY)
    return TurnRecord.model_validate(data) if data else None


def _openai_calls(message: AIMessage) -> list[dict[str, Any]]:
    return [
        {
            "id": call.get("id") or f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["args"])},
        }
        for call in message.tool_calls
    ]


def _finish_reason(message: AIMessage) -> str:
    if message.tool_calls:
        return "tool_calls"
    given = message.response_metadata.get("finish_reason")
    return given if given in ("length", "content_filter") else "stop"


def _envelope(model: str, created: int | None) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
        "created": int(time.time()) if created is None else created,
        "model": model,
    }


def chat_completion(
    message: AIMessage, *, model: str, created: int | None = None
) -> dict[str, Any]:
    """A `chat.completion` body for the chosen message, `usage` covering the whole turn
    and the turn record (if the message has one) under `RECORD_FIELD`."""
    record = _record(message)
    calls = _openai_calls(message)
    reply: dict[str, Any] = {
        "role": "assistant",
        "content": message.text or (None if calls else ""),
    }
    if calls:
        reply["tool_calls"] = calls
    if reasoning := message.additional_kwargs.get("reasoning_content"):
        reply["reasoning_content"] = reasoning
    body = {
        **_envelope(model, created),
        "object": "chat.completion",
        "choices": [
            {
                "index": 0,
                "message": reply,
                "logprobs": None,
                "finish_reason": _finish_reason(message),
            }
        ],
        "usage": turn_usage(record, message),
    }
    if record is not None:
        body[RECORD_FIELD] = record.to_json()
    return body


def chat_completion_chunks(
    message: AIMessage,
    *,
    model: str,
    created: int | None = None,
    piece: int = 64,
    include_usage: bool = False,
) -> list[dict[str, Any]]:
    """The same answer as `chat.completion.chunk`s, as OpenAI streams them: the role,
    content deltas of up to `piece` characters, one delta per tool call (its id and name,
    then its arguments), and a chunk with the finish reason. With `include_usage`
    (`stream_options.include_usage`), every chunk has `"usage": null` and a last one with
    empty `choices` carries the turn's `usage`. The last chunk carries the turn record."""
    envelope = {**_envelope(model, created), "object": "chat.completion.chunk"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **envelope,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    chunks = [chunk({"role": "assistant", "content": ""})]
    text = message.text
    chunks.extend(chunk({"content": text[i : i + piece]}) for i in range(0, len(text), piece))
    for index, call in enumerate(_openai_calls(message)):
        head = {"name": call["function"]["name"], "arguments": ""}
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {"index": index, "id": call["id"], "type": "function", "function": head}
                    ]
                }
            )
        )
        arguments = {"arguments": call["function"]["arguments"]}
        chunks.append(chunk({"tool_calls": [{"index": index, "function": arguments}]}))
    chunks.append(chunk({}, _finish_reason(message)))
    record = _record(message)
    if include_usage:
        for each in chunks:
            each["usage"] = None
        chunks.append({**envelope, "choices": [], "usage": turn_usage(record, message)})
    if record is not None:
        chunks[-1][RECORD_FIELD] = record.to_json()
    return chunks


def _legacy_choice(function_call: Any) -> Any:
    if isinstance(function_call, Mapping) and "name" in function_call:
        return {"type": "function", "function": {"name": function_call["name"]}}
    return function_call


def _stream_options(name: str, value: Any) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(value.get(key, False), bool) for key in ("include_usage", "include_obfuscation")
    ):
        fail(name, "an object such as {'include_usage': true}", value)
