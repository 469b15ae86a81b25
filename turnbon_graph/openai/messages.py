"""Messages and tools between LangChain and the OpenAI format, both ways: a request's
message dicts and tools into LangChain messages, LangChain messages and tools into what a
LiteLLM call sends, and a LiteLLM choice back into an `AIMessage` (with its private
reasoning kept for the providers that need it replayed).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    InvalidToolCall,
    SystemMessage,
    convert_to_messages,
    convert_to_openai_messages,
)
from langchain_core.output_parsers.openai_tools import make_invalid_tool_call, parse_tool_call
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from turnbon_graph.errors import ConfigurationError
from turnbon_graph.openai.text import check_value
from turnbon_graph.records import Usage

__all__ = [
    "REASONING_KEYS",
    "ToolLike",
    "message_from_choice",
    "parse_messages",
    "parse_tools",
    "to_openai_messages",
    "to_openai_tools",
]


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


# Private reasoning keys LiteLLM puts on a message; kept, replayed, never shown to a selector.
REASONING_KEYS = ("reasoning_content", "thinking_blocks")


ToolLike = BaseTool | Callable[..., Any]


def to_openai_messages(
    messages: Sequence[BaseMessage], system_prompt: str | None = None
) -> list[dict[str, Any]]:
    """OpenAI-format messages for LiteLLM, with private reasoning put back on assistant turns.

    `convert_to_openai_messages` drops `additional_kwargs`; providers with thinking
    (Anthropic, DeepSeek) need it replayed on the assistant message that used tools.
    It drops `invalid_tool_calls` too, which would leave the error results the graph
    gives them (`ToolMessage`s with their ids) answering no call: they go out as calls.
    """
    out: list[dict[str, Any]] = []
    if system_prompt and not any(isinstance(m, SystemMessage) for m in messages):
        out.append({"role": "system", "content": system_prompt})
    for message in messages:
        converted = convert_to_openai_messages(message)
        if isinstance(message, AIMessage):
            for key in REASONING_KEYS:
                if message.additional_kwargs.get(key):
                    converted[key] = message.additional_kwargs[key]
            if message.invalid_tool_calls:
                converted["tool_calls"] = [
                    *converted.get("tool_calls", []),
                    *map(_invalid_call_to_openai, message.invalid_tool_calls),
                ]
        out.append(converted)
    return out


def _invalid_call_to_openai(call: InvalidToolCall) -> dict[str, Any]:
    # Empty arguments: several providers' adapters decode them and would fail the whole
    # request on the raw text, which the error result quotes instead.
    return {
        "id": call.get("id"),
        "type": "function",
        "function": {"name": call.get("name") or "", "arguments": "{}"},
    }


def to_openai_tools(tools: Sequence[ToolLike]) -> list[dict[str, Any]]:
    """LangChain tools (or functions, or OpenAI tool dicts) as OpenAI tool definitions."""
    return [convert_to_openai_tool(tool) for tool in tools]


def message_from_choice(choice: Any, response: Any, usage: Usage | None) -> AIMessage:
    """An `AIMessage` from one LiteLLM choice; malformed tool-call arguments become
    `invalid_tool_calls` instead of an exception."""
    raw = choice.message
    tool_calls = []
    invalid_tool_calls = []
    for raw_call in getattr(raw, "tool_calls", None) or []:
        as_dict = raw_call.model_dump() if hasattr(raw_call, "model_dump") else dict(raw_call)
        try:
            parsed = parse_tool_call(as_dict, return_id=True)
        except Exception as exc:  # OutputParserException on bad JSON arguments
            invalid_tool_calls.append(make_invalid_tool_call(as_dict, str(exc)))
        else:
            if parsed is not None:
                tool_calls.append(parsed)
    additional_kwargs: dict[str, Any] = {}
    for key in REASONING_KEYS:
        value = getattr(raw, key, None)
        if value:
            additional_kwargs[key] = value
    refusal = getattr(raw, "refusal", None)
    if refusal:
        additional_kwargs["refusal"] = refusal
    metadata: dict[str, Any] = {
        "model_name": getattr(response, "model", None),
        "finish_reason": getattr(choice, "finish_reason", None),
    }
    usage_metadata = None
    if usage is not None:
        usage_metadata = {
            "input_tokens": usage.prompt_tokens,
            "output_tokens": usage.completion_tokens,
            "total_tokens": usage.total_tokens,
            "output_token_details": {"reasoning": usage.reasoning_tokens},
        }
    return AIMessage(
        content=raw.content or "",
        tool_calls=tool_calls,
        invalid_tool_calls=invalid_tool_calls,
        additional_kwargs=additional_kwargs,
        response_metadata=metadata,
        usage_metadata=usage_metadata,
        id=getattr(response, "id", None),
    )
