"""`create_turnbon_agent(state_schema=..., context_schema=...)`: custom state keys,
`InjectedState`, tools' `Command` updates and `runtime.context`, as in LangGraph's own
agents."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Annotated, Any

import pytest
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import MessagesState
from langgraph.prebuilt import InjectedState, ToolRuntime
from langgraph.types import Command
from pydantic import BaseModel
from typing_extensions import TypedDict

from tests.helpers import stub_kwargs
from turnbon_graph import ConfigurationError, create_turnbon_agent, turn_record
from turnbon_graph.testing import CapturedRequest, StubServer, chat_completion, tool_call


class NotesState(MessagesState):
    notes: Annotated[list[str], operator.add]
    user_name: str


@dataclass
class Caller:
    user_id: str


@tool
def remember(note: str, runtime: ToolRuntime) -> Command:
    """Remember a note for later."""
    message = ToolMessage(f"noted {note}", tool_call_id=runtime.tool_call_id)
    return Command(update={"notes": [note], "messages": [message]})


def script_calls(stub: StubServer, *calls: tuple[str, dict[str, Any]]) -> None:
    """Turn t (the tool results so far) calls `calls[t]`, then answers 'done'; every
    candidate of a turn agrees, so no selector call is made."""

    def generator(request: CapturedRequest) -> dict[str, Any]:
        assert request.body is not None
        turn = sum(1 for m in request.body["messages"] if m["role"] == "tool")
        if turn >= len(calls):
            return chat_completion("done")
        name, args = calls[turn]
        return chat_completion(tool_calls=[tool_call(name, args)])

    stub.script(generator)


def agent(stub: StubServer, tools: list[Any], **shape: Any) -> Any:
    return create_turnbon_agent(
        "openai/stub", tools, n=2, completion_kwargs=stub_kwargs(stub.base_url), **shape
    ).compile(checkpointer=InMemorySaver())


async def test_a_tools_command_updates_a_custom_state_key(stub: StubServer) -> None:
    script_calls(stub, ("remember", {"note": "a"}), ("remember", {"note": "b"}))
    app = agent(stub, [remember], state_schema=NotesState)
    config = {"configurable": {"thread_id": "notes"}}
    out = await app.ainvoke({"messages": [HumanMessage("take notes")], "notes": []}, config)
    assert out["notes"] == ["a", "b"]
    assert (await app.aget_state(config)).values["notes"] == ["a", "b"]
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == [
        "noted a",
        "noted b",
    ]
    assert turn_record(out["messages"][-1]) is not None
    assert "turnbon_pending" not in out
    # The injected runtime is not offered to the model as an argument.
    offered = stub.requests[0].body
    assert offered is not None
    assert set(offered["tools"][0]["function"]["parameters"]["properties"]) == {"note"}


async def test_a_tool_reads_custom_keys_through_injected_state(stub: StubServer) -> None:
    seen: list[dict[str, Any]] = []

    @tool
    def whoami(state: Annotated[dict[str, Any], InjectedState]) -> str:
        """Say who the user is."""
        seen.append(state)
        return f"you are {state['user_name']}"

    script_calls(stub, ("whoami", {}))
    app = agent(stub, [whoami], state_schema=NotesState)
    out = await app.ainvoke(
        {"messages": [HumanMessage("who am I?")], "user_name": "ada"},
        {"configurable": {"thread_id": "who"}},
    )
    assert out["user_name"] == "ada"
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["you are ada"]
    # The tools see the user's state, never the graph's private candidates.
    (state,) = seen
    assert "turnbon_pending" not in state and state["user_name"] == "ada"


async def test_tools_read_the_run_context_as_the_context_schema(stub: StubServer) -> None:
    @tool
    def account(runtime: ToolRuntime[Caller]) -> str:
        """Look up the caller's account."""
        return f"account of {runtime.context.user_id}"

    script_calls(stub, ("account", {}))
    builder = create_turnbon_agent(
        "openai/stub",
        [account],
        n=2,
        context_schema=Caller,
        completion_kwargs=stub_kwargs(stub.base_url),
    )
    app = builder.compile()
    assert set(app.get_context_jsonschema()["properties"]) == {"user_id"}
    # A plain dict, as LangGraph Server and the SDK send it, becomes the dataclass.
    out = await app.ainvoke({"messages": [HumanMessage("mine?")]}, context={"user_id": "u-7"})
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["account of u-7"]


def test_a_custom_state_works_under_invoke_too(stub: StubServer) -> None:
    script_calls(stub, ("remember", {"note": "sync"}))
    app = agent(stub, [remember], state_schema=NotesState)
    out = app.invoke({"messages": [HumanMessage("note it")]}, {"configurable": {"thread_id": "s"}})
    assert out["notes"] == ["sync"]


class NoMessages(TypedDict):
    notes: list[str]


class PydanticState(BaseModel):
    messages: list[Any]


@pytest.mark.parametrize("schema", [NoMessages, PydanticState, dict])
def test_a_state_schema_without_messages_is_refused(schema: Any) -> None:
    @tool
    def noop() -> str:
        """Do nothing."""
        return ""

    with pytest.raises(ConfigurationError, match="state_schema must be a TypedDict"):
        create_turnbon_agent("openai/stub", [noop], state_schema=schema)
