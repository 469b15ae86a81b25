"""A tool that raises, in `create_turnbon_agent`: reported to the model by default (the
run and its turn records survive), configurable as `ToolNode`'s `handle_tool_errors`."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolNode

from tests.helpers import stub_kwargs
from turnbon_graph import ConfigurationError, create_turnbon_agent, turn_record
from turnbon_graph.testing import CapturedRequest, StubServer, chat_completion, tool_call


class DiskFull(RuntimeError):
    pass


@tool
def shell(command: str) -> str:
    """Run a shell command."""
    raise DiskFull(f"no space left running {command}")


def one_call_then_done(request: CapturedRequest) -> dict[str, Any]:
    assert request.body is not None
    if any(m["role"] == "tool" for m in request.body["messages"]):
        return chat_completion("done")
    return chat_completion(tool_calls=[tool_call("shell", {"command": "make"}, id="call_1")])


def agent(stub: StubServer, tools: Any = None, **options: Any) -> Any:
    stub.script(one_call_then_done)
    return create_turnbon_agent(
        "openai/stub",
        tools if tools is not None else [shell],
        n=2,
        completion_kwargs=stub_kwargs(stub.base_url),
        **options,
    ).compile()


async def test_a_raising_tool_is_reported_to_the_model_and_the_records_survive(
    stub: StubServer,
) -> None:
    out = await agent(stub).ainvoke({"messages": [HumanMessage("build it")]})
    messages = out["messages"]
    result = next(m for m in messages if isinstance(m, ToolMessage))
    assert result.status == "error" and result.tool_call_id == "call_1"
    assert "no space left running make" in str(result.content)
    assert isinstance(messages[-1], AIMessage) and messages[-1].content == "done"
    records = [turn_record(m) for m in messages if turn_record(m) is not None]
    assert len(records) == 2
    # The model was shown the error on the next turn.
    sent = stub.requests[-1].body
    assert sent is not None and sent["messages"][-1]["role"] == "tool"
    assert "no space left" in sent["messages"][-1]["content"]


async def test_handle_tool_errors_false_lets_the_exception_through(stub: StubServer) -> None:
    with pytest.raises(DiskFull, match="no space left"):
        await agent(stub, handle_tool_errors=False).ainvoke({"messages": [HumanMessage("go")]})


async def test_handle_tool_errors_text_is_what_the_model_is_told(stub: StubServer) -> None:
    graph = agent(stub, handle_tool_errors="the tool failed; try another way")
    out = await graph.ainvoke({"messages": [HumanMessage("go")]})
    result = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert result.content == "the tool failed; try another way"


async def test_a_given_tool_node_keeps_its_own_error_handling(stub: StubServer) -> None:
    with pytest.raises(DiskFull):  # ToolNode's default re-raises what is no input error
        await agent(stub, ToolNode([shell])).ainvoke({"messages": [HumanMessage("go")]})
    with pytest.raises(ConfigurationError, match="keeps its own"):
        agent(stub, ToolNode([shell]), handle_tool_errors=True)
