"""The OpenAI chat-completions wire format, both ways: a request body into what a turn
takes (LangChain messages, OpenAI tools, per-call settings), and the chosen `AIMessage`
with its turn record into a `chat.completion` body or `chat.completion.chunk`s.

The LiteLLM provider (`litellm_provider`) and the HTTP server (`serve`) share it, so the
two doors harnesses use cannot translate differently. Messages are accepted as real
harnesses send them: an assistant message with `tool_calls` and no `content` key,
`content: null`, tool messages, lists of content parts, `name` fields. No LiteLLM here.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages
from langchain_core.messages.ai import UsageMetadata

from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import RECORD_KEY, TurnRecord, Usage

__all__ = [
    "RECORD_FIELD",
    "REQUEST_SETTINGS",
    "ChatRequest",
    "chat_completion",
    "chat_completion_chunks",
    "parse_chat_request",
    "parse_messages",
    "parse_tools",
    "turn_usage",
]

RECORD_FIELD = RECORD_KEY
"""The top-level field of a response body that holds the turn record (clients such as the
OpenAI SDK ignore fields they do not know)."""

REQUEST_SETTINGS = frozenset(
    {
        "temperature",
        "top_p",
        "max_tokens",
        "max_completion_tokens",
        "stop",
        "tool_choice",
        "parallel_tool_calls",
        "presence_penalty",
        "frequency_penalty",
        "logit_bias",
        "logprobs",
        "top_logprobs",
        "seed",
        "response_format",
        "reasoning_effort",
        "verbosity",
        "user",
        # common extras of OpenAI-compatible servers (vLLM, llama.cpp, SGLang)
        "top_k",
        "min_p",
        "repetition_penalty",
    }
)
"""The per-call settings a request body may carry, forwarded to every generator call of
its turn. Connection settings (`api_base`, `api_key`, headers) never come from a body."""

_HANDLED = frozenset(
    {"model", "messages", "tools", "functions", "function_call", "stream", "stream_options", "n"}
)


@dataclass(frozen=True)
class ChatRequest:
    """A chat-completions request, as a turn takes it."""

    model: str
    messages: list[BaseMessage]
    tools: list[dict[str, Any]] | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    """Per-call settings (`tool_choice`, `stop`, `temperature`, ...) for the generator."""
    stream: bool = False


def parse_chat_request(
    body: Any, *, allowed: frozenset[str] | None = REQUEST_SETTINGS
) -> ChatRequest:
    """A `ChatRequest` from a JSON request body. Keys outside `allowed` (None: any key)
    raise `ConfigurationError`, as does anything malformed, each naming what to fix."""
    if not isinstance(body, Mapping):
        raise ConfigurationError("the request body must be a JSON object")
    model = body.get("model", "")
    if not isinstance(model, str):
        raise ConfigurationError("model must be a string")
    n = body.get("n", 1)
    if n not in (None, 1):
        raise ConfigurationError(
            f"n must be 1 (got {n!r}): a turn answers with the one chosen action; the "
            "number of candidates is the server's or provider's own option n"
        )
    stream = body.get("stream", False)
    if not isinstance(stream, bool | None):
        raise ConfigurationError("stream must be true or false")
    settings = {k: v for k, v in body.items() if k not in _HANDLED}
    if allowed is not None and (unknown := sorted(set(settings) - allowed)):
        raise ConfigurationError(
            f"unsupported request field(s): {', '.join(unknown)}; the supported settings "
            f"are {', '.join(sorted(allowed))} (the upstream endpoint and its key are the "
            "server's, never the request's)"
        )
    tools = parse_tools(body.get("tools"), body.get("functions"))
    if "function_call" in body and "tool_choice" not in settings:
        settings["tool_choice"] = _legacy_choice(body["function_call"])
    return ChatRequest(
        model=model,
        messages=parse_messages(body.get("messages")),
        tools=tools,
        settings=settings,
        stream=bool(stream),
    )


def parse_messages(raw: Any) -> list[BaseMessage]:
    """LangChain messages from OpenAI-format message dicts (or ready `BaseMessage`s)."""
    if not isinstance(raw, Sequence) or isinstance(raw, str) or not raw:
        raise ConfigurationError("messages must be a non-empty list of message objects")
    normalised: list[Any] = []
    for i, message in enumerate(raw):
        if isinstance(message, BaseMessage):
            normalised.append(message)
            continue
        if not isinstance(message, Mapping) or not isinstance(message.get("role"), str):
            raise ConfigurationError(f"messages[{i}] must be an object with a string 'role'")
        entry = dict(message)
        if entry.get("content") is None:
            entry["content"] = ""  # assistant turns with tool_calls often carry none
        if entry["role"] == "assistant" and entry.get("tool_calls") is not None:
            entry["tool_calls"] = _checked_calls(entry["tool_calls"], f"messages[{i}]")
        if entry.get("function_call") is None:
            entry.pop("function_call", None)
        normalised.append(entry)
    try:
        return convert_to_messages(normalised)
    except (ValueError, TypeError, KeyError) as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigurationError(f"messages could not be read: {first}") from None


def _checked_calls(calls: Any, where: str) -> list[dict[str, Any]]:
    """An assistant message's OpenAI `tool_calls`, each with JSON-object arguments."""
    if not isinstance(calls, list):
        raise ConfigurationError(f"{where}.tool_calls must be a list")
    checked = []
    for j, call in enumerate(calls):
        function = call.get("function") if isinstance(call, Mapping) else None
        if not isinstance(function, Mapping) or not isinstance(function.get("name"), str):
            raise ConfigurationError(
                f"{where}.tool_calls[{j}] must be {{'id', 'type': 'function', "
                "'function': {'name', 'arguments'}}"
            )
        arguments = function.get("arguments") or "{}"
        try:
            parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            raise ConfigurationError(
                f"{where}.tool_calls[{j}].function.arguments must be a JSON object "
                f"(as a string), got {arguments!r:.80}"
            )
        checked.append(
            {
                "id": call.get("id") or f"call_{uuid.uuid4().hex[:24]}",
                "type": "function",
                "function": {"name": function["name"], "arguments": json.dumps(parsed)},
            }
        )
    return checked


def parse_tools(tools: Any, functions: Any = None) -> list[dict[str, Any]] | None:
    """OpenAI `tools` (or legacy `functions`), checked: each a function with a name."""
    if tools is None and functions is not None:
        if not isinstance(functions, list):
            raise ConfigurationError("functions must be a list")
        tools = [{"type": "function", "function": f} for f in functions]
    if tools is None:
        return None
    if not isinstance(tools, list):
        raise ConfigurationError("tools must be a list of {'type': 'function', 'function': ...}")
    for i, tool in enumerate(tools):
        function = tool.get("function") if isinstance(tool, Mapping) else None
        if (
            not isinstance(tool, Mapping)
            or tool.get("type", "function") != "function"
            or not isinstance(function, Mapping)
            or not isinstance(function.get("name"), str)
        ):
            raise ConfigurationError(
                f"tools[{i}] must be {{'type': 'function', 'function': {{'name', "
                "'description', 'parameters'}}}"
            )
    return [dict(tool) for tool in tools] or None


def _legacy_choice(function_call: Any) -> Any:
    if isinstance(function_call, Mapping) and "name" in function_call:
        return {"type": "function", "function": {"name": function_call["name"]}}
    return function_call


# ---------------------------------------------------------------------- responses


def turn_usage(record: TurnRecord | None, message: AIMessage | None = None) -> dict[str, Any]:
    """OpenAI `usage` for a turn: every generator and selector call summed (without a
    record, the message's own usage)."""
    if record is not None:
        total = record.usage.generator + record.usage.selector
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
    message: AIMessage, *, model: str, created: int | None = None, piece: int = 64
) -> list[dict[str, Any]]:
    """The same answer as `chat.completion.chunk`s: the role, content deltas of up to
    `piece` characters, one delta per tool call (its id and name, then its arguments),
    and a last chunk with the finish reason, `usage` and the turn record."""
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
    record = _record(message)
    last = chunk({}, _finish_reason(message))
    last["usage"] = turn_usage(record, message)
    if record is not None:
        last[RECORD_FIELD] = record.to_json()
    chunks.append(last)
    return chunks
