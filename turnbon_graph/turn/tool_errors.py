"""What the agent sees for an action that cannot run: an error result per tool call, as
`ToolNode` gives a bad call, and how many turns were taken since the human last spoke.
Shared by the graph, the middleware and the search strategies.
"""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langgraph.prebuilt.tool_node import TOOL_CALL_ERROR_TEMPLATE

from turnbon_graph.records import RECORD_KEY


def invalid_call_results(message: AIMessage) -> list[ToolMessage]:
    """Error results for an action none of whose calls runs, as `ToolNode` gives a bad
    call: one per invalid call with its parse error, and one per parsed call of the same
    action (an action runs whole or not at all). None for an action that can run."""
    if not message.invalid_tool_calls:
        return []
    not_run = "not run: another call of this action had invalid arguments"
    errors = [
        (c.get("id"), c.get("name"), c.get("error") or "") for c in message.invalid_tool_calls
    ]
    errors += [(c.get("id"), c["name"], not_run) for c in message.tool_calls]
    return [
        ToolMessage(
            TOOL_CALL_ERROR_TEMPLATE.format(error=error),
            tool_call_id=call_id or "",
            name=name,
            status="error",
        )
        for call_id, name, error in errors
    ]


def turns_since_human(messages: Sequence[BaseMessage]) -> int:
    """Turn-BoN turns taken since the last human message (derived, so a resumed thread
    and a new question both count right)."""
    count = 0
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage) and RECORD_KEY in message.response_metadata:
            count += 1
    return count
