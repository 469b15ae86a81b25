"""TurnBoNMiddleware in a real LangChain v1 agent: `create_agent` with `ChatOpenAI` (not
LiteLLM) as the generator, against the loopback stub."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRetryMiddleware
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from tests.helpers import (
    generator_requests,
    requests_in_flight,
    selector_answer,
    selector_requests,
    stub_kwargs,
)
from turnbon_graph import ConfigurationError, TurnBoNMiddleware, turn_record
from turnbon_graph.selectors import FirstSelector, HumanSelector
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    error,
    is_selector_request,
    tool_call,
)

executed: list[str] = []


@tool
def shell(command: str) -> str:
    """Run a shell command."""
    executed.append(command)
    return f"ran {command}"


@pytest.fixture(autouse=True)
def fresh_log() -> Iterator[None]:
    executed.clear()
    yield
    executed.clear()


def turns_done(request: CapturedRequest) -> int:
    messages = (request.body or {}).get("messages", [])
    return sum(1 for m in messages if m.get("role") == "tool")


def proposals(request: CapturedRequest) -> dict[str, Any]:
    """Turn t's three candidates propose `t-0`, `t-1`, `t-2` (by arrival); after two
    turns the agent answers."""
    done = turns_done(request)
    if done >= 2:
        return chat_completion("all done")
    proposals.counter[done] = proposals.counter.get(done, -1) + 1  # type: ignore[attr-defined]
    return chat_completion(
        tool_calls=[tool_call("shell", {"command": f"{done}-{proposals.counter[done]}"})]  # type: ignore[attr-defined]
    )


def chat_model(stub: StubServer) -> ChatOpenAI:
    return ChatOpenAI(model="gen", base_url=stub.base_url, api_key="sk-test", max_retries=0)


def script(stub: StubServer, answer: int = 2) -> None:
    proposals.counter = {}  # type: ignore[attr-defined]
    stub.route(is_selector_request, selector_answer(answer))
    stub.route(lambda r: not is_selector_request(r), proposals)


def middleware(stub: StubServer, **options: Any) -> TurnBoNMiddleware:
    options.setdefault("selector", "openai/sel")
    options.setdefault("selector_kwargs", stub_kwargs(stub.base_url))
    return TurnBoNMiddleware(n=3, seed=0, max_concurrency=1, **options)


async def test_every_executed_call_is_the_selectors_choice(stub: StubServer) -> None:
    script(stub)
    agent = create_agent(chat_model(stub), [shell], middleware=[middleware(stub)])
    result = await agent.ainvoke({"messages": [("user", "fix it")]})
    chosen = [m for m in result["messages"] if isinstance(m, AIMessage)]
    assert chosen[-1].content == "all done"
    records = [turn_record(m) for m in chosen[:-1]]
    assert all(r is not None for r in records)
    # Each turn: three generator calls, one selector call, and the executed command is the
    # candidate the selector's answer names (through the shuffled order it was shown).
    for record, command in zip(records, executed, strict=True):
        assert record is not None and record.n_requested == 3
        assert record.selector == "llm:openai/sel" and record.fallback is None
        assert record.permutation is not None
        picked = record.candidates[record.selected_index]
        assert record.selected_index == record.permutation[2]
        assert picked.tool_calls[0]["args"]["command"] == command
    assert len(executed) == 2
    assert len(generator_requests(stub.requests)) == 3 * 2 + 3  # the answer turn too
    assert len(selector_requests(stub.requests)) == 2  # the final answer is unanimous
    # Only the chosen calls ran: the tool messages answer exactly the executed calls.
    tool_messages = [m for m in result["messages"] if isinstance(m, ToolMessage)]
    assert [m.content for m in tool_messages] == [f"ran {c}" for c in executed]


def test_the_sync_agent_runs_the_same_turns(stub: StubServer) -> None:
    script(stub)
    agent = create_agent(chat_model(stub), [shell], middleware=[middleware(stub)])
    result = agent.invoke({"messages": [("user", "fix it")]})
    assert result["messages"][-1].content == "all done"
    assert len(executed) == 2
    assert len(generator_requests(stub.requests)) == 9


async def test_the_default_selector_speaks_through_the_agents_model(stub: StubServer) -> None:
    script(stub, answer=0)
    agent = create_agent(chat_model(stub), [shell], middleware=[TurnBoNMiddleware(n=3, seed=0)])
    result = await agent.ainvoke({"messages": [("user", "fix it")]})
    record = turn_record(next(m for m in result["messages"] if isinstance(m, AIMessage)))
    assert record is not None and record.selector == "llm:openai-chat:gen"
    assert record.fallback is None
    (first_selection, *_) = selector_requests(stub.requests)
    assert first_selection.header("authorization") == "Bearer sk-test"  # the agent's model


async def test_candidates_do_not_stream_as_the_agents_messages(stub: StubServer) -> None:
    script(stub)
    # The stub streams (ChatOpenAI asks it to, under messages mode): every candidate's
    # chunks would reach the messages stream, unless it is tagged `nostream`.
    agent = create_agent(chat_model(stub), [shell], middleware=[middleware(stub)])
    streamed: list[AIMessage] = []
    custom: list[dict[str, Any]] = []
    async for mode, chunk in agent.astream(
        {"messages": [("user", "fix it")]}, stream_mode=["messages", "custom"]
    ):
        if mode == "messages":
            message, _ = chunk
            if isinstance(message, AIMessage):
                streamed.append(message)
        else:
            custom.append(chunk)
    assert all(r.body and r.body["stream"] for r in generator_requests(stub.requests))
    # One streamed AI message per turn (the chosen one), not one per candidate.
    assert [m.tool_calls[0]["args"]["command"] for m in streamed if m.tool_calls] == executed
    assert len(streamed) == 3
    kinds = [event["turnbon"] for event in custom]
    assert kinds.count("candidate_arrived") == 9 and kinds.count("selection_made") == 3


def test_the_readme_agent_streams_in_messages_mode(stub: StubServer) -> None:
    """The README's example, streamed: ChatOpenAI asks the stub for a stream under
    messages mode, and the agent runs the same turns as `invoke` does."""
    stub.route(is_selector_request, chat_completion(json.dumps({"selected_index": 1})))
    stub.script(
        chat_completion(tool_calls=[tool_call("shell", {"command": "ls"})]),
        chat_completion(tool_calls=[tool_call("shell", {"command": "pytest -x"})]),
        chat_completion("All tests pass."),
    )
    model = ChatOpenAI(model="stub", base_url=stub.base_url, api_key="none")
    turnbon = TurnBoNMiddleware(n=2, max_concurrency=1, seed=0)  # the default selector: `model`
    agent = create_agent(model, [shell], middleware=[turnbon])
    streamed = [
        message
        for message, _ in agent.stream(
            {"messages": [("user", "make the tests pass")]}, stream_mode="messages"
        )
    ]
    assert all(r.body and r.body["stream"] is True for r in stub.requests)
    chosen = [m for m in streamed if isinstance(m, AIMessage)]
    assert [c["args"]["command"] for m in chosen for c in m.tool_calls] == executed
    assert chosen[-1].content == "All tests pass."
    records = [record for m in chosen if (record := turn_record(m)) is not None]
    assert [(r.selector, r.n_ok) for r in records] == [
        ("llm:openai-chat:stub", 2),
        ("unanimous", 2),
    ]
    assert [m.content for m in streamed if isinstance(m, ToolMessage)] == [f"ran {executed[0]}"]


async def test_a_failed_candidate_is_left_out_and_retry_middleware_inside_retries_it(
    stub: StubServer,
) -> None:
    proposals.counter = {}  # type: ignore[attr-defined]
    stub.route(is_selector_request, selector_answer(0))
    stub.route(
        lambda r: not is_selector_request(r),
        error(500, "boom"),
        *[proposals] * 20,
    )
    agent = create_agent(
        chat_model(stub),
        [shell],
        middleware=[
            middleware(stub, selector=FirstSelector(), selector_kwargs=None),
            ModelRetryMiddleware(max_retries=1, initial_delay=0),
        ],
    )
    result = await agent.ainvoke({"messages": [("user", "fix it")]})
    record = turn_record(next(m for m in result["messages"] if isinstance(m, AIMessage)))
    # The 500 was retried inside the turn by ModelRetryMiddleware: all three candidates in.
    assert record is not None and record.n_ok == 3
    assert len(generator_requests(stub.requests)) == 10


async def test_without_retry_a_failed_candidate_is_recorded_and_not_chosen(
    stub: StubServer,
) -> None:
    proposals.counter = {}  # type: ignore[attr-defined]
    stub.route(is_selector_request, selector_answer(0))
    stub.route(lambda r: not is_selector_request(r), error(500, "boom"), *[proposals] * 20)
    mw = middleware(stub, selector=FirstSelector(), selector_kwargs=None)
    agent = create_agent(chat_model(stub), [shell], middleware=[mw])
    result = await agent.ainvoke({"messages": [("user", "fix it")]})
    record = turn_record(next(m for m in result["messages"] if isinstance(m, AIMessage)))
    assert record is not None and record.n_ok == 2
    failed = [c for c in record.candidates if c.error]
    assert len(failed) == 1 and "500" in (failed[0].error or "")
    assert record.candidates[record.selected_index].error is None


def test_options_that_do_not_apply_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="does not take prompt"):
        TurnBoNMiddleware(prompt="be brief")
    with pytest.raises(ConfigurationError, match="temprature is not a turn option"):
        TurnBoNMiddleware(temprature=1.0)


async def test_candidate_settings_reach_every_candidate_call(stub: StubServer) -> None:
    script(stub)
    mw = middleware(stub, completion_kwargs={"temperature": 1.3})
    agent = create_agent(chat_model(stub), [shell], middleware=[mw])
    await agent.ainvoke({"messages": [("user", "fix it")]})
    temperatures = {(r.body or {}).get("temperature") for r in generator_requests(stub.requests)}
    assert temperatures == {1.3}
    assert json.dumps([r.body for r in selector_requests(stub.requests)]).count("1.3") == 0


async def test_max_concurrency_bounds_the_agents_own_model_calls(stub: StubServer) -> None:
    delay = 0.2  # long enough that calls let run together overlap at the stub
    stub.route(is_selector_request, selector_answer(0))
    counter = iter(range(100))
    stub.route(
        lambda r: not is_selector_request(r),
        lambda _: StubResponse(body=chat_completion(f"answer {next(counter)}"), delay=delay),
    )
    bounded = middleware(stub, selector=FirstSelector(), selector_kwargs=None)
    agent = create_agent(chat_model(stub), [shell], middleware=[bounded])
    await agent.ainvoke({"messages": [("user", "hi")]})
    assert len(stub.requests) == 3 and requests_in_flight(stub, delay) == 1
    stub.reset()
    stub.route(
        lambda r: True,
        lambda _: StubResponse(body=chat_completion(f"answer {next(counter)}"), delay=delay),
    )
    free = TurnBoNMiddleware(n=3, selector=FirstSelector())
    await create_agent(chat_model(stub), [shell], middleware=[free]).ainvoke(
        {"messages": [("user", "hi")]}
    )
    # Without the cap they overlap (all 3 unless a loaded machine staggers their start).
    assert requests_in_flight(stub, delay) > 1


async def test_an_all_invalid_turn_tells_the_model_and_the_agent_goes_on(
    stub: StubServer,
) -> None:
    def first_turn_invalid(request: CapturedRequest) -> dict[str, Any]:
        if turns_done(request):
            return chat_completion("done")
        broken = {"name": "shell", "arguments": '{"command": "ls'}
        return chat_completion(
            tool_calls=[{"id": "call_bad", "type": "function", "function": broken}]
        )

    stub.script(first_turn_invalid)
    turnbon = TurnBoNMiddleware(n=2, selector=FirstSelector())
    agent = create_agent(chat_model(stub), [shell], middleware=[turnbon])
    messages = (await agent.ainvoke({"messages": [{"role": "user", "content": "go"}]}))["messages"]
    chosen, result, answer = messages[1:]
    assert isinstance(chosen, AIMessage) and chosen.invalid_tool_calls[0]["id"] == "call_bad"
    assert isinstance(result, ToolMessage) and result.status == "error"
    assert result.tool_call_id == "call_bad" and "not valid JSON" in str(result.content)
    assert isinstance(answer, AIMessage) and answer.content == "done"
    assert executed == []
    # The model saw the pair: its call (same id) and the parse error.
    sent = (generator_requests(stub.requests)[-1].body or {})["messages"]
    assert [c["id"] for c in sent[-2]["tool_calls"]] == ["call_bad"]
    assert sent[-1]["role"] == "tool" and sent[-1]["tool_call_id"] == "call_bad"


def human_agent(stub: StubServer) -> Any:
    script(stub)
    turnbon = TurnBoNMiddleware(n=3, seed=0, selector=HumanSelector())
    return create_agent(
        chat_model(stub), [shell], middleware=[turnbon], checkpointer=InMemorySaver()
    )


def shown_commands(paused: dict[str, Any]) -> list[str]:
    (pause,) = paused["__interrupt__"]
    return [c["tool_calls"][0]["args"]["command"] for c in pause.value["candidates"]]


async def test_a_human_selector_pauses_and_resumes_with_the_candidates_shown(
    stub: StubServer,
) -> None:
    agent = human_agent(stub)
    thread = {"configurable": {"thread_id": "t"}}
    paused = await agent.ainvoke({"messages": [("user", "fix it")]}, thread)
    first = shown_commands(paused)
    assert len(generator_requests(stub.requests)) == 3 and executed == []
    paused = await agent.ainvoke(Command(resume=1), thread)
    # The resume ran the person's pick among exactly those three: nothing regenerated.
    assert executed == [first[1]]
    assert len(generator_requests(stub.requests)) == 6  # the next turn's three
    second = shown_commands(paused)
    done = await agent.ainvoke(Command(resume={"index": 2}), thread)
    assert executed == [first[1], second[2]]
    assert done["messages"][-1].content == "all done"
    record = turn_record(done["messages"][1])
    assert record is not None and record.selector == "human"
    assert selector_requests(stub.requests) == []


def test_the_sync_agent_pauses_for_a_person_too(stub: StubServer) -> None:
    agent = human_agent(stub)
    thread = {"configurable": {"thread_id": "t"}}
    first = shown_commands(agent.invoke({"messages": [("user", "fix it")]}, thread))
    agent.invoke(Command(resume=0), thread)
    assert executed == [first[0]]
    assert len(generator_requests(stub.requests)) == 6
