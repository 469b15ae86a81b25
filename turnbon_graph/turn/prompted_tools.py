"""Prompted tool calls: tool use for models without native tool calling.

Some models (small open models, servers without a tool parser) ignore `tools` but honour
`response_format` with a JSON schema, often enforced by a grammar. In this mode the tools
are described in the system prompt, the reply is constrained to a schema that is a choice
of one tool name with that tool's argument schema (or a final answer), and the reply is
turned back into an ordinary `AIMessage` with `tool_calls`: the rest of the library
cannot tell the difference. The conversation's earlier tool calls and results are
replayed as text, since such chat templates have no tool roles.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from langchain_core.messages import AIMessage

from turnbon_graph.errors import ConfigurationError

FINAL_ANSWER = "final_answer"
"""The pseudo-tool a prompted reply uses to answer without calling a tool."""

_INSTRUCTIONS = """\
# Tools
You act by calling exactly one tool per reply. Reply with a single JSON object and \
nothing else: {{"tool": "<tool name>", "arguments": {{...}}}}. The arguments must match \
the tool's JSON schema.{final}

Available tools (name, description, argument schema):
{tools}"""

_FINAL = (
    " When the task is complete, or you need to answer in words, reply with "
    '{"tool": "final_answer", "arguments": {"content": "<your answer>"}}.'
)


def _function(tool: dict[str, Any]) -> dict[str, Any]:
    function = tool.get("function", tool)
    if not isinstance(function, dict) or "name" not in function:
        raise ConfigurationError(f"not an OpenAI-format tool: {tool!r}")
    return function


def offered_tools(
    tools: list[dict[str, Any]], tool_choice: Any = None
) -> tuple[list[dict[str, Any]], bool]:
    """The tools a reply may call under `tool_choice`, and whether it may answer instead."""
    functions = [_function(t) for t in tools]
    if any(f["name"] == FINAL_ANSWER for f in functions):
        raise ConfigurationError(
            f"a tool is named {FINAL_ANSWER!r}, which prompted tool calls reserve for "
            "answering without a tool; rename it"
        )
    if tool_choice in (None, "auto"):
        return functions, True
    if tool_choice == "none":
        return [], True
    if tool_choice in ("required", "any"):
        return functions, False
    if isinstance(tool_choice, dict):
        name = tool_choice.get("function", {}).get("name")
        chosen = [f for f in functions if f["name"] == name]
        if chosen:
            return chosen, False
    raise ConfigurationError(f"tool_choice {tool_choice!r} names no offered tool")


def reply_schema(functions: list[dict[str, Any]], allow_final: bool) -> dict[str, Any]:
    """A choice of one tool name with that tool's argument schema (or a final answer)."""
    branches = [
        _branch(f["name"], f.get("parameters") or {"type": "object", "properties": {}})
        for f in functions
    ]
    if allow_final:
        content = {
            "type": "object",
            "properties": {"content": {"type": "string"}},
            "required": ["content"],
            "additionalProperties": False,
        }
        branches.append(_branch(FINAL_ANSWER, content))
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def _branch(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"tool": {"type": "string", "const": name}, "arguments": parameters},
        "required": ["tool", "arguments"],
        "additionalProperties": False,
    }


def prompted_request(
    messages: list[dict[str, Any]], tools: list[dict[str, Any]], tool_choice: Any = None
) -> tuple[list[dict[str, Any]], dict[str, Any], set[str]]:
    """(messages with the tools in the system prompt and tool turns as text,
    the `response_format`, the names a reply may use)."""
    functions, allow_final = offered_tools(tools, tool_choice)
    described = "\n".join(
        json.dumps(
            {
                "name": f["name"],
                "description": f.get("description", ""),
                "arguments": f.get("parameters") or {},
            },
            ensure_ascii=False,
        )
        for f in functions
    )
    instructions = _INSTRUCTIONS.format(final=_FINAL if allow_final else "", tools=described)
    rewritten = _as_text_turns(messages)
    if rewritten and rewritten[0]["role"] in ("system", "developer"):
        first = rewritten[0]
        rewritten[0] = {"role": "system", "content": f"{_text(first['content'])}\n\n{instructions}"}
    else:
        rewritten.insert(0, {"role": "system", "content": instructions})
    schema = reply_schema(functions, allow_final)
    response_format = {"type": "json_schema", "json_schema": {"name": "action", "schema": schema}}
    allowed = {f["name"] for f in functions} | ({FINAL_ANSWER} if allow_final else set())
    return rewritten, response_format, allowed


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return "" if content is None else str(content)


def _as_text_turns(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Assistant tool calls become the JSON replies they were; tool results user turns."""
    names: dict[str, str] = {}
    out: list[dict[str, Any]] = []
    for message in messages:
        role = message.get("role")
        if role == "assistant" and message.get("tool_calls"):
            lines = []
            for call in message["tool_calls"]:
                function = call.get("function", {})
                names[call.get("id", "")] = function.get("name", "")
                arguments = function.get("arguments") or "{}"
                try:
                    parsed = json.loads(arguments) if isinstance(arguments, str) else arguments
                except json.JSONDecodeError:
                    parsed = arguments
                lines.append(json.dumps({"tool": function.get("name"), "arguments": parsed}))
            out.append({"role": "assistant", "content": "\n".join(lines)})
        elif role == "tool":
            name = names.get(message.get("tool_call_id", ""), "the tool")
            out.append(
                {"role": "user", "content": f"Result of {name}:\n{_text(message.get('content'))}"}
            )
        else:
            out.append({k: v for k, v in message.items() if k in ("role", "content", "name")})
    return out


def parse_prompted_reply(message: AIMessage, allowed: set[str]) -> AIMessage:
    """The same message with its JSON reply turned into a tool call or a final answer.

    A reply that is not such JSON (a model that ignored the schema) becomes an invalid
    tool call carrying the error, so it is recorded rather than executed."""
    raw = _text(message.content).strip()
    error: str | None = None
    call: dict[str, Any] | None = None
    try:
        parsed = json.loads(raw[raw.find("{") : raw.rfind("}") + 1] if "{" in raw else raw)
    except json.JSONDecodeError as exc:
        error = f"the reply is not JSON ({exc.msg})"
    else:
        if not isinstance(parsed, dict) or not isinstance(parsed.get("arguments", {}), dict):
            error = 'the reply is not {"tool": ..., "arguments": {...}}'
        elif parsed.get("tool") not in allowed:
            error = f"the reply names tool {parsed.get('tool')!r}, not one of {sorted(allowed)}"
        else:
            call = parsed
    update: dict[str, Any] = {
        "response_metadata": {**message.response_metadata, "tool_calling": "prompted"}
    }
    if call is None:
        update |= {
            "tool_calls": [],
            "invalid_tool_calls": [
                {
                    "type": "invalid_tool_call",
                    "name": None,
                    "args": raw,
                    "id": _call_id(),
                    "error": error,
                }
            ],
        }
    elif call["tool"] == FINAL_ANSWER:
        update |= {"content": str(call.get("arguments", {}).get("content", "")), "tool_calls": []}
    else:
        update |= {
            "content": "",
            "tool_calls": [
                {
                    "type": "tool_call",
                    "name": call["tool"],
                    "args": call.get("arguments", {}),
                    "id": _call_id(),
                }
            ],
        }
    return message.model_copy(update=update)


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
