"""Candidates whose tool-call arguments do not parse: recorded, never chosen over a valid
one, and, when every candidate is invalid, answered with error results so the agent goes
on (all through the stub and LiteLLM's real HTTP path)."""

from __future__ import annotations

import itertools
import re
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from tests.helpers import (
    generator_requests,
    selector_answer,
    selector_requests,
    stub_engine,
    stub_kwargs,
)
from tests.integration_tests.test_graph import make_shell
from turnbon_graph import AdaptiveN, create_turnbon_agent, create_turnbon_graph, turn_record
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

BROKEN = '{"command": "ls'


def broken_call(call_id: str) -> dict[str, Any]:
    """A tool call whose arguments are cut off mid-JSON."""
    return {"id": call_id, "type": "function", "function": {"name": "shell", "arguments": BROKEN}}


def generator_script(*replies: dict[str, Any]) -> Any:
    """Generator replies in order of arrival (the last one repeats)."""
    counter = itertools.count()
    return lambda _: replies[min(next(counter), len(replies) - 1)]


def bad(call_id: str = "call_bad") -> dict[str, Any]:
    return chat_completion(tool_calls=[broken_call(call_id)])


def good(command: str) -> dict[str, Any]:
    return chat_completion(tool_calls=[tool_call("shell", {"command": command})])


SHELL_TOOL = [{"type": "function", "function": {"name": "shell", "parameters": {}}}]


async def test_an_invalid_candidate_is_recorded_and_not_shown_to_the_selector(
    stub: StubServer,
) -> None:
    stub.route(is_selector_request, selector_answer(0))
    stub.script(generator_script(bad(), good("ls"), good("pwd")))
    engine = stub_engine(stub, n=3, max_concurrency=1, seed=0)
    message = await engine.run([HumanMessage("go")], tools=SHELL_TOOL)
    record = turn_record(message)
    assert record is not None
    invalid = [c for c in record.candidates if c.invalid_tool_calls]
    assert len(invalid) == 1 and invalid[0].tool_calls == []
    call = invalid[0].invalid_tool_calls[0]
    assert call["name"] == "shell" and call["args"] == BROKEN and call["id"] == "call_bad"
    assert "not valid JSON" in call["error"]
    # The selector saw the two valid candidates only, and one of them runs.
    (asked,) = selector_requests(stub.requests)
    assert asked.body is not None
    user = asked.body["messages"][1]["content"]
    assert len(re.findall(r"^<candidate index=", user, re.MULTILINE)) == 2
    assert "invalid_tool_calls" not in user
    assert record.permutation is not None and invalid[0].index not in record.permutation
    assert message.tool_calls and message.tool_calls[0]["args"]["command"] in ("ls", "pwd")


async def test_one_valid_candidate_beside_an_invalid_one_runs_without_a_selector(
    stub: StubServer,
) -> None:
    stub.route(is_selector_request, selector_answer(0))
    stub.script(generator_script(bad(), good("ls")))
    message = await stub_engine(stub, n=2, max_concurrency=1).run(
        [HumanMessage("go")], tools=SHELL_TOOL
    )
    record = turn_record(message)
    assert record is not None and record.selector == "single"
    assert selector_requests(stub.requests) == []
    assert message.tool_calls[0]["args"] == {"command": "ls"}


async def test_a_fallback_never_lands_on_an_invalid_candidate(stub: StubServer) -> None:
    # Two identical invalid candidates first: "majority" and "first" would both pick one.
    stub.route(is_selector_request, chat_completion("no idea"))
    stub.script(generator_script(bad("call_a"), bad("call_a"), good("ls"), good("pwd")))
    message = await stub_engine(stub, n=4, max_concurrency=1).run(
        [HumanMessage("go")], tools=SHELL_TOOL
    )
    record = turn_record(message)
    assert record is not None and record.fallback is not None
    assert record.fallback.endswith("fell back to first")
    assert not record.candidates[record.selected_index].invalid_tool_calls
    assert message.tool_calls[0]["args"] == {"command": "ls"}


async def test_agreement_among_invalid_candidates_commits_nothing(stub: StubServer) -> None:
    stub.route(is_selector_request, selector_answer(0))
    stub.script(generator_script(bad("call_a"), bad("call_a"), good("ls")))
    adaptive = AdaptiveN(first_batch=2, step=1, threshold=0.6)
    message = await stub_engine(stub, n=3, max_concurrency=1, adaptive=adaptive).run(
        [HumanMessage("go")], tools=SHELL_TOOL
    )
    record = turn_record(message)
    assert record is not None and record.sampling.batches == [2, 1]
    assert message.tool_calls[0]["args"] == {"command": "ls"}


def first_turn_invalid(request: CapturedRequest) -> dict[str, Any]:
    """Every candidate of the first turn is invalid; after a tool result, 'done'."""
    assert request.body is not None
    if any(m["role"] == "tool" for m in request.body["messages"]):
        return chat_completion("done")
    return bad("call_bad")


def assert_told_of_the_parse_error(messages: list[Any]) -> ToolMessage:
    chosen = messages[1]
    assert isinstance(chosen, AIMessage) and chosen.tool_calls == []
    assert chosen.invalid_tool_calls[0]["id"] == "call_bad"
    record = turn_record(chosen)
    assert record is not None and record.selector == "invalid"
    assert record.fallback is not None and "tool-call arguments were invalid" in record.fallback
    result = messages[2]
    assert isinstance(result, ToolMessage)
    assert result.status == "error" and result.tool_call_id == "call_bad"
    assert "not valid JSON" in str(result.content)
    return result


async def test_an_all_invalid_turn_tells_the_model_and_the_agent_goes_on(
    stub: StubServer,
) -> None:
    stub.route(is_selector_request, selector_answer(0))
    stub.script(first_turn_invalid)
    executed: list[str] = []
    agent = create_turnbon_agent(
        "openai/stub", [make_shell(executed)], n=2, completion_kwargs=stub_kwargs(stub.base_url)
    ).compile()
    out = await agent.ainvoke({"messages": [HumanMessage("go")]})
    messages = out["messages"]
    result = assert_told_of_the_parse_error(messages)
    assert executed == []
    assert isinstance(messages[-1], AIMessage) and messages[-1].content == "done"
    assert selector_requests(stub.requests) == []
    # The next request replays the pair validly: an assistant call with the same id.
    sent = generator_requests(stub.requests)[-1].body
    assert sent is not None
    assistant, tool_result = sent["messages"][-2:]
    assert assistant["role"] == "assistant"
    assert [c["id"] for c in assistant["tool_calls"]] == ["call_bad"]
    assert assistant["tool_calls"][0]["function"]["name"] == "shell"
    assert tool_result["role"] == "tool" and tool_result["tool_call_id"] == "call_bad"
    assert tool_result["content"] == result.content


async def test_a_turn_subgraph_ends_with_the_error_results(stub: StubServer) -> None:
    stub.script(first_turn_invalid)
    executed: list[str] = []
    turn = create_turnbon_graph(
        "openai/stub", [make_shell(executed)], n=2, completion_kwargs=stub_kwargs(stub.base_url)
    ).compile()
    out = await turn.ainvoke({"messages": [HumanMessage("go")]})
    assert len(out["messages"]) == 3
    assert_told_of_the_parse_error(out["messages"])
    assert executed == []
