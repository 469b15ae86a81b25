"""Actions a selector writes itself (fusion, refinement): their JSON answer, validation
and conversion to an executable `AIMessage`, and `ActionWriter`, the base of those
selectors, which asks for one.

The selector is not given the tool schemas, so a written action is checked against what
the candidates used: every tool name must be one some candidate called, every argument
name one some candidate passed to that tool.
"""

from __future__ import annotations

import difflib
import json
import re
import secrets
import string
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage
from pydantic import BaseModel, Field, field_validator

from turnbon_graph.selectors.model_call import Asked, ModelCaller
from turnbon_graph.selectors.prompting import as_json, parse_reply, retry_prompt
from turnbon_graph.turn.candidates import Candidate, canonical_action

ToolNames = dict[str, set[str]]
"""Tool name -> the argument names candidates passed to it."""

WRITTEN_RETRY_PROMPT = retry_prompt(
    " (reason, content, tool_calls), following the rules stated above."
)


class WrittenCall(BaseModel):
    """One tool call of an action a selector wrote: the tool's name and its arguments."""

    name: str
    args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("args", mode="before")
    @classmethod
    def _decode(cls, value: Any) -> Any:
        # Models used to function calling often send arguments as a JSON string.
        if isinstance(value, str):
            try:
                return json.loads(value)
            except ValueError:
                return value
        return value


class WrittenAction(BaseModel):
    """The answer of a selector that writes the action; `reason` is optional on input."""

    reason: str = ""
    content: str = ""
    tool_calls: list[WrittenCall] = Field(default_factory=list)
    none_acceptable: bool = False


def tools_used(candidates: Sequence[Candidate], *extra: AIMessage | None) -> ToolNames:
    """The tools (and their argument names) the candidates, and `extra` messages, call."""
    used: ToolNames = {}
    messages = [c.message for c in candidates] + list(extra)
    for message in messages:
        for call in message.tool_calls if message is not None else ():
            used.setdefault(call["name"], set()).update(call["args"])
    return used


def action_schema(tools: ToolNames | None, *, allow_none: bool, reason: str = "") -> dict[str, Any]:
    """The JSON schema of a written action. `args` stays an open object, so this schema
    is sent non-strict (strict mode needs every property of every object listed).

    With `tools`, the names are an enum (the `response_format`); None is the schema a
    prompt shows, whose names are in the tools block (`tools_section`), so no
    candidate-chosen name reaches the answer section."""
    name: dict[str, Any] = {"type": "string", "description": "A tool the candidates use."}
    if tools is not None:
        name = {"type": "string", "enum": sorted(tools)}
    call: dict[str, Any] = {
        "type": "object",
        "properties": {
            "name": name,
            "args": {"type": "object", "description": "The tool's arguments."},
        },
        "required": ["name", "args"],
        "additionalProperties": False,
    }
    properties: dict[str, Any] = {
        "reason": {"type": "string", "description": reason},
        "content": {
            "type": "string",
            "description": "The action's text: the reply itself when it calls no tool.",
        },
        "tool_calls": {"type": "array", "items": call},
    }
    if allow_none:
        properties["none_acceptable"] = {
            "type": "boolean",
            "description": "true only if no acceptable action can be written from these.",
        }
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


def tools_section(tools: ToolNames) -> str:
    """The tools and argument names the candidates use, as data: each name is one the
    candidates chose, so it is rendered like them (`as_json`), inside a tag of its own."""
    known = {name: sorted(args) for name, args in sorted(tools.items())}
    return (
        "## Tools the candidates use\n"
        "One JSON object: each tool's name and its argument names.\n"
        f"<tools_used>\n{as_json(known)}\n</tools_used>"
    )


def action_rules(tools: ToolNames, *, allow_none: bool) -> str:
    """The rules of a written action, for the prompt (no name in it: see `tools_section`)."""
    if tools:
        rules = (
            "tool_calls lists the tool calls to make, each with a name and args. Use only "
            "the tools and argument names the candidates use, listed above. "
        )
    else:
        rules = "The candidates call no tool, so tool_calls must be empty. "
    rules += "With no tool calls, content is the agent's reply and must not be empty."
    if allow_none:
        rules += (
            " Set none_acceptable to true (with empty content and tool_calls) only if no "
            "acceptable action can be written: the agent then proposes new candidates."
        )
    return rules


def check_action(action: WrittenAction, tools: ToolNames) -> str | None:
    """What is wrong with a written action, or None."""
    for call in action.tool_calls:
        name = as_json(call.name)
        if call.name not in tools:
            offered = as_json(sorted(tools)) if tools else "none"
            return f"tool {name} is not one the candidates use (use one of {offered})"
        unknown = sorted(set(call.args) - tools[call.name])
        if unknown:
            return (
                f"tool {name} has argument(s) {as_json(unknown)} that no candidate passes "
                f"to it (known: {as_json(sorted(tools[call.name]))})"
            )
    if not action.tool_calls and not action.content.strip():
        return "the action is empty: give tool_calls, or content for a reply"
    return None


def parse_action(
    response: Any, tools: ToolNames, allow_none: bool
) -> tuple[WrittenAction | None, str, str | None]:
    """(action, raw text, problem). A rejection (`none_acceptable`) needs no action."""
    action, raw, problem = parse_reply(
        response, WrittenAction, "a JSON object with content and tool_calls"
    )
    if action is None:
        return None, raw, problem
    if allow_none and action.none_acceptable:
        return action, raw, None
    action.none_acceptable = False  # not on offer: judge the action itself
    problem = check_action(action, tools)
    return (None, raw, problem) if problem else (action, raw, None)


def to_message(action: WrittenAction, like: AIMessage | None) -> AIMessage:
    """The executable message: each tool call with a fresh id shaped like `like`'s."""
    template = like.tool_calls[0].get("id") if like is not None and like.tool_calls else None
    return AIMessage(
        content=action.content,
        tool_calls=[
            {"name": c.name, "args": c.args, "id": fresh_call_id(template), "type": "tool_call"}
            for c in action.tool_calls
        ],
    )


_ID_PREFIX = re.compile(r"^(.*[_-])?([A-Za-z0-9]*)$")
_ALPHABET = string.ascii_letters + string.digits


def fresh_call_id(template: str | None) -> str:
    """A new tool-call id with the prefix and length of `template` (a provider's own id):
    providers validate their id formats (Mistral: 9 alphanumerics, Anthropic: toolu_...)."""
    match = _ID_PREFIX.match(template or "")
    prefix, body = (match.group(1) or "", match.group(2)) if match else ("", "")
    if not template or not match:
        prefix, body = "call_", "x" * 24
    return prefix + "".join(secrets.choice(_ALPHABET) for _ in range(max(len(body), 9)))


def closest(candidates: Sequence[Candidate], message: AIMessage) -> tuple[int, bool]:
    """(position of the candidate `message` is closest to, whether it is the same action).

    Same canonical action first; else the most similar canonical action, ties earliest."""
    action = canonical_action(message, candidates[0].ignore_args)
    ratios = []
    for position, candidate in enumerate(candidates):
        if candidate.action == action:
            return position, True
        ratios.append(difflib.SequenceMatcher(None, action, candidate.action).ratio())
    return ratios.index(max(ratios)), False


class ActionWriter(ModelCaller):
    """A selector whose `model` writes the action to execute (fusion, refinement)."""

    model: str
    allow_none: bool

    async def write(
        self, request: list[dict[str, str]], tools: ToolNames, name: str
    ) -> Asked[WrittenAction]:
        """Asks `request` for an action using only `tools`; `name` names its schema."""
        schema = action_schema(tools, allow_none=self.allow_none)
        return await self.ask_json(
            self.model,
            request,
            kwargs=await self.answer_kwargs(self.model, name, schema, strict=False),
            parse=lambda response: parse_action(response, tools, self.allow_none),
            retry_prompt=lambda problem: WRITTEN_RETRY_PROMPT.format(error=problem),
        )
