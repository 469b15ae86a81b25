"""The OpenAI Responses API wire format, both ways, on top of the chat one
(`openai.chat`): a `POST /v1/responses` body into the `ChatRequest` a turn takes, and
the chosen `AIMessage` into a `response` object or its stream of events.

The translation is LiteLLM's own (`LiteLLMCompletionResponsesConfig`: Responses request
-> chat request, chat response -> Responses response), so input items, `instructions`,
function tools, `tool_choice`, `function_call` / `function_call_output` items and
`text.format` read as LiteLLM reads them everywhere else. What it does not do is here:
checking each field before any call (LiteLLM drops what it cannot read; a turn answers
400 naming it), and the stream events, which LiteLLM derives from a live upstream stream
while a turn's answer is whole before its stream starts.

LiteLLM is imported by `client.load_litellm` (the server's lifespan and each request call
it first, off the event loop); `import litellm` brings the transformation with it.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage

from turnbon_graph.errors import ConfigurationError, RequestFieldError
from turnbon_graph.openai.chat import RECORD_FIELD, ChatRequest, chat_completion, parse_chat_request
from turnbon_graph.openai.fields import (
    FORWARDED,
    IGNORED,
    REFUSED,
    Check,
    boolean,
    fail,
    json_object,
    one_of,
    sort_request_fields,
    string,
    unsupported_fields_error,
)

if TYPE_CHECKING:
    from litellm.responses.litellm_completion_transformation.transformation import (
        LiteLLMCompletionResponsesConfig,
    )

__all__ = [
    "IGNORED_FIELDS",
    "READ_FIELDS",
    "REFUSED_FIELDS",
    "ResponsesRequest",
    "parse_responses_request",
    "response_body",
    "response_events",
]


def _tools(name: str, value: Any) -> None:
    if not isinstance(value, list):
        fail(name, "a list of function tools", value)
    for i, tool in enumerate(value):
        if (
            not isinstance(tool, Mapping)
            or tool.get("type") != "function"
            or not isinstance(tool.get("name"), str)
        ):
            raise RequestFieldError(
                name,
                f"{name}[{i}] must be a function tool {{'type': 'function', 'name', "
                f"'parameters'}}, got {tool!r:.80}: a turn's candidates are function calls "
                "that the client runs (hosted tools such as web_search are OpenAI's own)",
            )


def _tool_choice(name: str, value: Any) -> None:
    if value in ("none", "auto", "required"):
        return
    if (
        isinstance(value, Mapping)
        and value.get("type") == "function"
        and isinstance(value.get("name"), str)
    ):
        return
    fail(name, "'none', 'auto', 'required' or {'type': 'function', 'name': ...}", value)


def _text(name: str, value: Any) -> None:
    json_object(name, value)
    given = value.get("format")
    if given is not None:
        schema = given.get("schema", {}) if isinstance(given, Mapping) else None
        if not isinstance(given, Mapping) or not (
            given.get("type") in ("text", "json_object")
            or (
                given.get("type") == "json_schema"
                and isinstance(given.get("name"), str)
                and isinstance(schema, Mapping)
            )
        ):
            fail(
                f"{name}.format",
                "{'type': 'text'}, {'type': 'json_object'} or {'type': 'json_schema', "
                "'name', 'schema'}",
                given,
            )
    if value.get("verbosity") is not None:
        FORWARDED["verbosity"](f"{name}.verbosity", value["verbosity"])


def _reasoning(name: str, value: Any) -> None:
    json_object(name, value)
    for key in ("effort", "summary", "generate_summary"):
        if value.get(key) is not None:
            string(f"{name}.{key}", value[key])


def _background(name: str, value: Any) -> None:
    boolean(name, value)
    if value:
        raise RequestFieldError(
            name, "background is not supported: a turn is answered in its own request"
        )


def _strings(name: str, value: Any) -> None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        fail(name, "a list of strings", value)


READ_FIELDS: Mapping[str, Check] = MappingProxyType(
    {
        "instructions": string,
        "tools": _tools,
        "tool_choice": _tool_choice,
        "parallel_tool_calls": FORWARDED["parallel_tool_calls"],
        "temperature": FORWARDED["temperature"],
        "top_p": FORWARDED["top_p"],
        "max_output_tokens": FORWARDED["max_tokens"],
        "text": _text,
        "reasoning": _reasoning,
    }
)
"""The fields LiteLLM's transformation reads into the turn's chat request (`tools`,
`tool_choice`, `max_tokens`, `response_format`, `reasoning_effort`, ...), each with the
check its value passes first."""

IGNORED_FIELDS: Mapping[str, Check | None] = MappingProxyType(
    {
        **{
            name: IGNORED[name]
            for name in (
                "store",
                "metadata",
                "service_tier",
                "user",
                "safety_identifier",
                "prompt_cache_key",
                "prompt_cache_retention",
                "top_logprobs",
            )
        },
        "include": _strings,  # extra output (logprobs, encrypted reasoning): none is made
        "truncation": one_of("auto", "disabled"),
        "stream_options": json_object,
        "background": _background,  # false only
    }
)
"""The fields accepted (their values checked) and not sent upstream, as on the chat
endpoint. `store` says whether the server keeps the response (`serve.state`)."""

REFUSED_FIELDS: Mapping[str, str] = MappingProxyType(
    {
        **REFUSED,
        "previous_response_id": (
            "a request is read once its previous response's items are in its input "
            "(turnbon serve resolves it against its response store)"
        ),
        "conversation": (
            "conversation objects are not kept here: continue a stored response with "
            "previous_response_id, or send the whole conversation as input"
        ),
        "prompt": "stored prompts are OpenAI's own: send instructions and input",
    }
)
"""The fields a request may not carry, each with why."""

_TURN_FIELDS = frozenset({"model", "input", "stream"})

_CHAT_NAMES = MappingProxyType(
    {
        "messages": "input",
        "max_tokens": "max_output_tokens",
        "response_format": "text.format",
        "reasoning_effort": "reasoning.effort",
    }
)
"""A chat request's field by the Responses field it came from, for errors."""

_CHAT_FIELDS = (
    "tools",
    "tool_choice",
    "parallel_tool_calls",
    "temperature",
    "top_p",
    "max_tokens",
    "response_format",
    "reasoning_effort",
)
"""What the turn takes of LiteLLM's chat request (not its `stream_options`, `metadata`,
`user`, ...: the turn's calls are its own)."""

_ITEM_TYPES = ("message", "function_call", "function_call_output", "reasoning")


def _transformation() -> type[LiteLLMCompletionResponsesConfig]:
    """LiteLLM's transformation, already imported with litellm (`client.load_litellm`)."""
    from litellm.responses.litellm_completion_transformation.transformation import (
        LiteLLMCompletionResponsesConfig,
    )

    return LiteLLMCompletionResponsesConfig


@dataclass(frozen=True)
class ResponsesRequest:
    """A Responses API request, as a turn takes it."""

    chat: ChatRequest
    """The turn: messages, tools and settings from LiteLLM's chat request, and `stream`."""
    echoed: dict[str, Any] = field(default_factory=dict)
    """The request's fields that the response object echoes (`instructions`, `tools`, ...)."""


def parse_responses_request(body: Any, *, model: str) -> ResponsesRequest:
    """A `ResponsesRequest` from a JSON request body, every field checked before any call
    (a `RequestFieldError` naming it). `model` is the LiteLLM model the turn samples,
    whose provider LiteLLM's transformation takes into account."""
    if not isinstance(body, Mapping):
        raise ConfigurationError("the request body must be a JSON object")
    name = body.get("model") or ""
    if not isinstance(name, str):
        raise RequestFieldError("model", "model must be a string")
    if body.get("stream") is not None:
        boolean("stream", body["stream"])
    given: Any = body.get("input")
    _check_input(given)
    read, unknown = sort_request_fields(
        body, own=_TURN_FIELDS, kept=READ_FIELDS, ignored=IGNORED_FIELDS, refused=REFUSED_FIELDS
    )
    if unknown:
        raise unsupported_fields_error(
            unknown,
            f"input, model, stream, {', '.join(sorted({*READ_FIELDS, *IGNORED_FIELDS}))}",
        )
    try:
        converted = _transformation().transform_responses_api_request_to_chat_completion_request(
            model=model,
            input=given,
            responses_api_request=read,  # type: ignore[arg-type]
            stream=False,
        )
    except Exception as exc:  # LiteLLM's own refusal of an input item: the client's 400
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise RequestFieldError("input", f"input could not be read: {first:.200}") from None
    chat = {key: converted[key] for key in _CHAT_FIELDS if converted.get(key) is not None}
    verbosity = (read.get("text") or {}).get("verbosity")
    if verbosity is not None:  # LiteLLM leaves text.verbosity out of its chat request
        chat["verbosity"] = verbosity
    try:
        parsed = parse_chat_request(
            {"model": name, "messages": converted["messages"], "stream": body.get("stream"), **chat}
        )
    except ConfigurationError as exc:
        param = getattr(exc, "param", None) or "messages"
        raise RequestFieldError(_CHAT_NAMES.get(param, param), str(exc)) from None
    echoed = {"parallel_tool_calls": True, **read, "model": name}  # OpenAI's default: true
    return ResponsesRequest(chat=parsed, echoed=echoed)


def _check_input(given: Any) -> None:
    """`input`: a string, or a list of the items a turn can read. LiteLLM passes over
    items it cannot read; a turn would then answer a conversation the client did not
    send, so each is checked here."""
    if isinstance(given, str):
        return
    if not isinstance(given, list):
        fail("input", "a string or a list of input items", given)
    for i, item in enumerate(given):
        where = f"input[{i}]"
        if not isinstance(item, Mapping):
            fail(where, "an object", item)
        kind = item.get("type", "message")
        if kind not in _ITEM_TYPES:
            raise RequestFieldError(
                "input",
                f"{where}.type {kind!r} is not accepted: a turn reads "
                f"{', '.join(_ITEM_TYPES)} items, and item_reference to stored ones",
            )
        needs: tuple[str, ...] = {
            "message": ("role", "content"),
            "function_call": ("call_id", "name", "arguments"),
            "function_call_output": ("call_id", "output"),
            "reasoning": (),
        }[kind]
        if missing := [key for key in needs if item.get(key) is None]:
            raise RequestFieldError(
                "input", f"{where} ({kind}) needs {', '.join(needs)}; it has no {missing[0]}"
            )


# ---------------------------------------------------------------------- responses


ITEM_PREFIXES = {"message": "msg", "function_call": "fc", "reasoning": "rs"}
ITEM_PREFIXES |= {"function_call_output": "fco"}
"""The prefix of an item's id by its type, as OpenAI shapes them (`msg_` + hex)."""


def item_id(kind: str) -> str:
    """A new id for an item of type `kind`: its prefix, `_` and 32 hex digits."""
    return f"{ITEM_PREFIXES.get(kind, 'item')}_{uuid.uuid4().hex}"


def response_body(message: AIMessage, request: ResponsesRequest, *, model: str) -> dict[str, Any]:
    """The `response` object for the chosen message (LiteLLM's transformation of the
    turn's `chat.completion`), `usage` covering the whole turn and the turn record (if
    the message has one) under `RECORD_FIELD`. `model` is the name it answers as."""
    chat = chat_completion(message, model=model)
    record = chat.pop(RECORD_FIELD, None)
    response = _transformation().transform_chat_completion_response_to_responses_api_response(
        request_input="",  # (unread: the input is the client's to keep)
        responses_api_request=request.echoed,  # type: ignore[arg-type]
        chat_completion_response=chat,
    )
    body: dict[str, Any] = response.model_dump(mode="json", exclude_none=True, by_alias=True)
    body["id"] = f"resp_{uuid.uuid4().hex}"
    body["store"] = False  # until the server stores it (`serve.state.keep`)
    for item in body.get("output") or []:
        # LiteLLM's are a uuid with dashes, or "fc_" + the upstream call id (which repeats:
        # an item_reference needs one of its own): ids as OpenAI shapes them
        item["id"] = item_id(str(item.get("type", "message")))
    usage = body.get("usage") or {}
    usage.pop("cost", None)
    # the SDK's ResponseUsage requires cache_write_tokens, which LiteLLM's leaves out
    usage.setdefault("input_tokens_details", {}).setdefault("cache_write_tokens", 0)
    usage["input_tokens_details"].setdefault("cached_tokens", 0)
    usage.setdefault("output_tokens_details", {}).setdefault("reasoning_tokens", 0)
    if record is not None:
        body[RECORD_FIELD] = record
    return body


def response_events(body: dict[str, Any], *, piece: int = 64) -> list[dict[str, Any]]:
    """The same response as the events OpenAI streams: `response.created` and
    `response.in_progress` (no output yet), then each output item added, its content
    (text deltas of up to `piece` characters, a function call's arguments) and done,
    and `response.completed` with the whole `body` (its usage and turn record)."""
    events: list[dict[str, Any]] = []

    def emit(kind: str, **fields: Any) -> None:
        events.append({"type": kind, "sequence_number": len(events), **fields})

    started = {k: v for k, v in body.items() if k not in ("usage", RECORD_FIELD)}
    started.update(status="in_progress", output=[])
    emit("response.created", response=started)
    emit("response.in_progress", response=started)
    for index, item in enumerate(body.get("output") or []):
        at: dict[str, Any] = {"output_index": index}
        if item.get("type") == "message":
            emit(
                "response.output_item.added",
                **at,
                item={**item, "status": "in_progress", "content": []},
            )
            for part_index, part in enumerate(item.get("content") or []):
                where = {**at, "item_id": item["id"], "content_index": part_index}
                text = part.get("text", "") if part.get("type") == "output_text" else None
                if text is None:  # a refusal: whole
                    emit("response.content_part.added", **where, part=part)
                else:
                    emit("response.content_part.added", **where, part={**part, "text": ""})
                    for start in range(0, len(text), piece):
                        emit(
                            "response.output_text.delta",
                            **where,
                            delta=text[start : start + piece],
                            logprobs=[],
                        )
                    emit("response.output_text.done", **where, text=text, logprobs=[])
                emit("response.content_part.done", **where, part=part)
        elif item.get("type") == "function_call":
            emit(
                "response.output_item.added",
                **at,
                item={**item, "status": "in_progress", "arguments": ""},
            )
            calls = {**at, "item_id": item["id"]}
            emit("response.function_call_arguments.delta", **calls, delta=item["arguments"])
            emit(
                "response.function_call_arguments.done",
                **calls,
                arguments=item["arguments"],
                name=item["name"],
            )
        else:  # a reasoning item: whole
            emit("response.output_item.added", **at, item=item)
        emit("response.output_item.done", **at, item=item)
    emit("response.completed", response=body)
    return events
