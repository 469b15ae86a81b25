"""The OpenAI chat-completions wire format, both ways: a request body into what a turn
takes (LangChain messages, OpenAI tools, per-call settings), and the chosen `AIMessage`
with its turn record into a `chat.completion` body or `chat.completion.chunk`s.

The LiteLLM provider (`litellm_provider`) and the HTTP server (`serve`) share it, so the
two doors harnesses use cannot translate differently. One declared list says what a
request may carry: `FORWARDED` fields (OpenAI's sampling and tool settings, and the
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NoReturn

from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages
from langchain_core.messages.ai import UsageMetadata

from turnbon_graph.errors import ConfigurationError, RequestFieldError
from turnbon_graph.records import RECORD_KEY, TurnRecord, Usage
from turnbon_graph.request_text import check_utf8, check_value

__all__ = [
    "CONNECTION_FIELDS",
    "FORWARDED",
    "IGNORED",
    "MAX_TOKENS_LIMIT",
    "RECORD_FIELD",
    "REFUSED",
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

MAX_TOKENS_LIMIT = 2**31 - 1
"""The largest `max_tokens` / `max_completion_tokens` OpenAI takes (a 32-bit integer)."""

# ---------------------------------------------------------------------- field checks

_Check = Callable[[str, Any], None]
"""Raises `RequestFieldError` naming the field when its value is not one OpenAI takes."""


def _fail(name: str, wanted: str, value: Any) -> NoReturn:
    raise RequestFieldError(name, f"{name} must be {wanted}, got {value!r:.80}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _number(low: float, high: float | None = None) -> _Check:
    """A number from `low` to `high`; without `high`, one above `low`."""
    wanted = f"a number from {low:g} to {high:g}" if high is not None else f"a number above {low:g}"

    def check(name: str, value: Any) -> None:
        if not _is_number(value) or not (low <= value <= high if high is not None else value > low):
            _fail(name, wanted, value)

    return check


def _integer(low: int, high: int) -> _Check:
    def check(name: str, value: Any) -> None:
        if not _is_integer(value) or not low <= value <= high:
            _fail(name, f"an integer from {low} to {high}", value)

    return check


def _boolean(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        _fail(name, "true or false", value)


def _one_of(*choices: str) -> _Check:
    def check(name: str, value: Any) -> None:
        if value not in choices:
            _fail(name, "one of " + ", ".join(repr(c) for c in choices), value)

    return check


def _string(name: str, value: Any) -> None:
    if not isinstance(value, str):
        _fail(name, "a string", value)


def _object(name: str, value: Any) -> None:
    if not isinstance(value, Mapping):
        _fail(name, "a JSON object", value)


def _stop(name: str, value: Any) -> None:
    if isinstance(value, str):
        return
    if not isinstance(value, list) or len(value) > 4 or not all(isinstance(v, str) for v in value):
        _fail(name, "a string or a list of up to 4 strings", value)


def _logit_bias(name: str, value: Any) -> None:
    if not isinstance(value, Mapping) or not all(
        _is_number(bias) and -100 <= bias <= 100 for bias in value.values()
    ):
        _fail(name, "an object of token ids to numbers from -100 to 100", value)


def _tool_choice(name: str, value: Any) -> None:
    if value in ("none", "auto", "required"):
        return
    given = value if isinstance(value, Mapping) else {}
    function = given.get("function")
    allowed = given.get("allowed_tools")
    if (
        given.get("type") == "function"
        and isinstance(function, Mapping)
        and isinstance(function.get("name"), str)
    ) or (
        given.get("type") == "allowed_tools"
        and isinstance(allowed, Mapping)
        and allowed.get("mode") in ("auto", "required")
        and isinstance(allowed.get("tools"), list)
    ):
        return
    _fail(
        name,
        "'none', 'auto', 'required', {'type': 'function', 'function': {'name': ...}} or "
        "{'type': 'allowed_tools', 'allowed_tools': {'mode', 'tools'}}",
        value,
    )


def _response_format(name: str, value: Any) -> None:
    given = value if isinstance(value, Mapping) else {}
    schema = given.get("json_schema")
    if given.get("type") in ("text", "json_object") or (
        given.get("type") == "json_schema"
        and isinstance(schema, Mapping)
        and isinstance(schema.get("name"), str)
        and isinstance(schema.get("schema", {}), Mapping)
    ):
        return
    _fail(
        name,
        "{'type': 'text'}, {'type': 'json_object'} or {'type': 'json_schema', "
        "'json_schema': {'name', 'schema'}}",
        value,
    )


def _stream_options(name: str, value: Any) -> None:
    if not isinstance(value, Mapping) or not all(
        isinstance(value.get(key, False), bool) for key in ("include_usage", "include_obfuscation")
    ):
        _fail(name, "an object such as {'include_usage': true}", value)


_INT64 = 2**63 - 1

FORWARDED: Mapping[str, _Check] = MappingProxyType(
    {
        "temperature": _number(0, 2),
        "top_p": _number(0, 1),
        "max_tokens": _integer(1, MAX_TOKENS_LIMIT),
        "max_completion_tokens": _integer(1, MAX_TOKENS_LIMIT),
        "presence_penalty": _number(-2, 2),
        "frequency_penalty": _number(-2, 2),
        "stop": _stop,
        "seed": _integer(-_INT64 - 1, _INT64),
        "tool_choice": _tool_choice,
        "parallel_tool_calls": _boolean,
        "response_format": _response_format,
        "logit_bias": _logit_bias,
        "reasoning_effort": _string,
        "verbosity": _one_of("low", "medium", "high"),
        # what OpenAI-compatible servers (vLLM, SGLang, llama.cpp) add to the same body
        "top_k": _integer(-1, _INT64),
        "min_p": _number(0, 1),
        "repetition_penalty": _number(0, None),
        "chat_template_kwargs": _object,
    }
)
"""The fields forwarded to every generator call of the turn (never to the selector's),
each with the check its value passes first."""

IGNORED: Mapping[str, _Check | None] = MappingProxyType(
    {
        # about storage, billing, caching and abuse tracking of the one request: the turn's
        # calls are its own, so these are not sent upstream
        "store": _boolean,
        "metadata": _object,
        "service_tier": _string,
        "user": _string,
        "safety_identifier": _string,
        "prompt_cache_key": _string,
        "prompt_cache_retention": _string,
        "prediction": _object,  # Predicted Outputs: a latency hint for one completion
        # the chosen message carries no logprobs: checked, then dropped
        "logprobs": _boolean,
        "top_logprobs": _integer(0, 20),
    }
)
"""The fields accepted (their values checked) and dropped: they change nothing a turn
does, so they are not sent upstream."""

CONNECTION_FIELDS = frozenset(
    {
        "api_base",
        "base_url",
        "api_key",
        "api_version",
        "organization",
        "headers",
        "extra_headers",
        "custom_llm_provider",
    }
)
"""The upstream connection: the server's (or, for the provider, the call's own
arguments), never a field of a request body."""

REFUSED: Mapping[str, str] = MappingProxyType(
    {
        "audio": "a turn answers with text and tool calls, never audio",
        **{
            name: "the upstream endpoint and its key are the server's, never the request's"
            for name in sorted(CONNECTION_FIELDS)
        },
    }
)
"""The fields a request may not carry, each with why (`n` > 1 and any modality but text
are refused by their own checks)."""

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
    settings: dict[str, Any] = {}
    unknown: list[str] = []
    for name, value in body.items():
        if name in _TURN_FIELDS or value is None:
            continue
        if name in REFUSED:
            raise RequestFieldError(name, f"{name} is not accepted: {REFUSED[name]}")
        if name in IGNORED:
            if (check := IGNORED[name]) is not None:
                check(name, value)
        elif name in FORWARDED:
            FORWARDED[name](name, value)
            settings[name] = value
        elif name == _EXTRA_BODY and owns_upstream:
            settings[name] = _extra_body(value)
        elif owns_upstream:
            settings[name] = value
        else:
            unknown.append(name)
    if unknown:
        raise RequestFieldError(
            unknown[0],
            f"unsupported request field(s): {', '.join(sorted(unknown))}; a request may "
            f"carry {', '.join(sorted({*FORWARDED, *IGNORED}))} (send a vendor's own field "
            "as a field of the body, not in extra_body)",
        )
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
    if n is not None and (not _is_integer(n) or n < 1):
        _fail("n", "a positive integer", n)
    if n not in (None, 1):
        raise RequestFieldError(
            "n",
            f"n must be 1 (got {n!r}): a turn answers with the one chosen action; the "
            "number of candidates is the server's or provider's own option n",
        )
    if body.get("stream") is not None:
        _boolean("stream", body["stream"])
    if body.get("stream_options") is not None:
        _stream_options("stream_options", body["stream_options"])
    modalities = body.get("modalities")
    if modalities is not None:
        if not isinstance(modalities, list) or not all(isinstance(m, str) for m in modalities):
            _fail("modalities", "a list of strings", modalities)
        if set(modalities) - {"text"}:
            raise RequestFieldError(
                "modalities",
                f"modalities may only ask for text (got {modalities!r}): a turn answers "
                "with text and tool calls, never audio",
            )


def _extra_body(value: Any) -> dict[str, Any]:
    """The provider caller's `extra_body` (merged into the upstream body by LiteLLM),
    unless it would set what the turn or the connection sets."""
    _object(_EXTRA_BODY, value)
    taken = sorted(set(value) & (_TURN_FIELDS | CONNECTION_FIELDS))
    if taken:
        raise RequestFieldError(
            _EXTRA_BODY,
            f"extra_body may not set {', '.join(taken)}: the turn or the connection sets it",
        )
    return dict(value)


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
        # JSON text that is ASCII may still spell a lone surrogate
        check_value(parsed, f"{where}.tool_calls[{j}].function.arguments", param="messages")
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
