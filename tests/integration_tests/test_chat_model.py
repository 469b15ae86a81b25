"""ChatTurnBoN through LiteLLM's real HTTP path, against the loopback stub server."""

from __future__ import annotations

import itertools
import json
import re
import warnings
from typing import Any, cast

import pytest
from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.prebuilt import create_react_agent
from pydantic import BaseModel

from tests.helpers import generator_requests, selector_answer, selector_requests, stub_kwargs
from turnbon_graph import ChatTurnBoN, TurnRecord, turn_record
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

N = 3
ANSWERS = ("alpha", "beta", "gamma")
FORCE_WEATHER = {"type": "function", "function": {"name": "get_weather"}}
_CANDIDATE_BLOCK = re.compile(r'<candidate index="(\d+)">\n(.*?)\n</candidate>', re.DOTALL)


def make_model(stub: StubServer, **options: Any) -> ChatTurnBoN:
    return ChatTurnBoN(
        model="openai/stub", n=N, completion_kwargs=stub_kwargs(stub.base_url), **options
    )


def script_distinct_answers(stub: StubServer, pick: int, **selector_usage: int) -> None:
    """Generator calls answer alpha, beta, gamma (in arrival order); the selector picks
    display position `pick`."""
    counter = itertools.count()

    def generator(request: CapturedRequest) -> dict[str, Any]:
        k = next(counter)
        usage = {"prompt_tokens": 10 + k, "completion_tokens": 2 + k, "total_tokens": 12 + 2 * k}
        return chat_completion(ANSWERS[k % len(ANSWERS)], usage=usage)

    answer = selector_answer(pick)
    if selector_usage:
        answer["usage"] = {**selector_usage, "total_tokens": sum(selector_usage.values())}
    stub.route(is_selector_request, answer)
    stub.script(generator)


def displayed(request: CapturedRequest) -> list[dict[str, Any]]:
    """The candidates a selector request showed, in display order."""
    assert request.body is not None
    user = request.body["messages"][1]["content"]
    blocks = _CANDIDATE_BLOCK.findall(user)
    assert [int(i) for i, _ in blocks] == list(range(len(blocks)))
    return [json.loads(body) for _, body in blocks]


def record_of(message: AIMessage) -> TurnRecord:
    record = turn_record(message)
    assert record is not None
    return record


def assert_is_display_pick(message: AIMessage, request: CapturedRequest, pick: int) -> None:
    """The returned message is the candidate the selector saw at position `pick`."""
    record = record_of(message)
    assert record.permutation is not None
    assert record.selected_index == record.permutation[pick]
    assert message.content == record.candidates[record.permutation[pick]].content
    # Independently of the record: what the selector was shown at that position.
    assert message.content == displayed(request)[pick]["content"]


async def test_ainvoke_returns_the_candidate_the_selector_chose(stub: StubServer) -> None:
    script_distinct_answers(stub, pick=2)
    message = await make_model(stub).ainvoke("Which letter?")
    assert isinstance(message, AIMessage)
    record = record_of(message)
    assert record.n_ok == N and record.selector == "llm:openai/stub"
    assert sorted(c.content or "" for c in record.candidates) == sorted(ANSWERS)
    [request] = selector_requests(stub.requests)
    assert_is_display_pick(message, request, 2)
    assert len(generator_requests(stub.requests)) == N


def test_sync_invoke(stub: StubServer) -> None:
    script_distinct_answers(stub, pick=0)
    message = make_model(stub).invoke([HumanMessage("Which letter?")])
    [request] = selector_requests(stub.requests)
    assert_is_display_pick(message, request, 0)


async def test_sync_invoke_inside_a_running_loop(stub: StubServer) -> None:
    script_distinct_answers(stub, pick=1)
    # The sync entry point, called where a loop is running: it runs in a worker thread.
    message = make_model(stub).invoke("Which letter?")
    [request] = selector_requests(stub.requests)
    assert_is_display_pick(message, request, 1)


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"sunny in {city}"


async def test_bind_tools_sends_tools_and_tool_choice(stub: StubServer) -> None:
    counter = itertools.count()

    def generator(request: CapturedRequest) -> dict[str, Any]:
        city = ("Paris", "Rome", "Oslo")[next(counter) % 3]
        return chat_completion(tool_calls=[tool_call("get_weather", {"city": city})])

    stub.route(is_selector_request, selector_answer(1))
    stub.script(generator)
    model = make_model(stub).bind_tools([get_weather], tool_choice="get_weather")
    message = await model.ainvoke("Weather?", stop=["STOP"])
    assert isinstance(message, AIMessage)

    calls = generator_requests(stub.requests)
    assert len(calls) == N
    for request in calls:
        assert request.body is not None
        assert [t["function"]["name"] for t in request.body["tools"]] == ["get_weather"]
        assert request.body["tools"][0]["function"]["parameters"]["required"] == ["city"]
        assert request.body["tool_choice"] == FORCE_WEATHER
        assert request.body["stop"] == ["STOP"]
    # Per-call settings are the generator's: the selector request carries none of them.
    [selection] = selector_requests(stub.requests)
    assert selection.body is not None
    assert not {"tools", "tool_choice", "stop"} & selection.body.keys()
    shown = displayed(selection)[1]["tool_calls"]
    assert [{"name": c["name"], "args": c["args"]} for c in message.tool_calls] == shown


class Destination(BaseModel):
    """Where to go."""

    city: str


async def test_with_structured_output_parses_the_chosen_candidate(stub: StubServer) -> None:
    counter = itertools.count()

    def generator(request: CapturedRequest) -> dict[str, Any]:
        city = ("Paris", "Rome", "Oslo")[next(counter) % 3]
        return chat_completion(tool_calls=[tool_call("Destination", {"city": city})])

    stub.route(is_selector_request, selector_answer(2))
    stub.script(generator)
    result = await make_model(stub).with_structured_output(Destination).ainvoke("Where?")
    assert isinstance(result, Destination)
    [selection] = selector_requests(stub.requests)
    assert {"name": "Destination", "args": {"city": result.city}} in displayed(selection)[2][
        "tool_calls"
    ]
    for request in generator_requests(stub.requests):
        assert request.body is not None and request.body["tool_choice"] == "required"


async def test_react_agent_executes_only_the_chosen_tool_calls(stub: StubServer) -> None:
    executed: list[str] = []

    @tool
    def lookup(city: str) -> str:
        """Look up facts about a city."""
        executed.append(city)
        return f"facts about {city}"

    counter = itertools.count()

    def generator(request: CapturedRequest) -> dict[str, Any]:
        assert request.body is not None
        turn = sum(1 for m in request.body["messages"] if m["role"] == "tool")
        if turn >= 2:
            return chat_completion("Paris it is.")  # every candidate agrees: no selector call
        city = f"turn{turn}-city{next(counter)}"
        return chat_completion(tool_calls=[tool_call("lookup", {"city": city})])

    picks = [2, 0]
    stub.route(is_selector_request, *(selector_answer(p) for p in picks))
    stub.script(generator)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # moved to langchain.agents
        agent = create_react_agent(make_model(stub), [lookup])
    result = await agent.ainvoke({"messages": [HumanMessage("Where should I go?")]})
    messages = result["messages"]

    chosen = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    assert len(chosen) == 2
    selections = selector_requests(stub.requests)
    assert len(selections) == 2
    for message, request, pick in zip(chosen, selections, picks, strict=True):
        record = record_of(message)
        assert record.permutation is not None
        picked = record.candidates[record.permutation[pick]]
        assert record.selected_index == picked.index
        assert message.tool_calls == [
            {"name": c["name"], "args": c["args"], "id": c["id"], "type": "tool_call"}
            for c in picked.tool_calls
        ]
        shown = displayed(request)[pick]["tool_calls"]
        assert [{"name": c["name"], "args": c["args"]} for c in message.tool_calls] == shown
    # Only the chosen calls ran, and each result answers its call.
    assert executed == [m.tool_calls[0]["args"]["city"] for m in chosen]
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [r.tool_call_id for r in results] == [m.tool_calls[0]["id"] for m in chosen]
    final = messages[-1]
    assert isinstance(final, AIMessage) and final.content == "Paris it is."
    assert record_of(final).selector == "unanimous"
    # 3 turns x N generator calls, 2 selector calls.
    assert len(generator_requests(stub.requests)) == 3 * N


async def test_usage_metadata_counts_generator_and_selector(stub: StubServer) -> None:
    script_distinct_answers(stub, pick=1, prompt_tokens=100, completion_tokens=9)
    with get_usage_metadata_callback() as booked:
        message = await make_model(stub).ainvoke("Which letter?")
    assert isinstance(message, AIMessage)
    # What the stub reported: generator calls k=0..2 used (10+k, 2+k), the selector (100, 9).
    prompt = sum(10 + k for k in range(N)) + 100
    completion = sum(2 + k for k in range(N)) + 9
    # The message carries the generator calls; the selector's call is a run of its own.
    assert message.usage_metadata is not None
    assert message.usage_metadata["input_tokens"] == prompt - 100
    assert message.usage_metadata["output_tokens"] == completion - 9
    # Together, what LangChain's usage tracking adds up is the whole turn.
    totals = list(booked.usage_metadata.values())
    assert sum(u["input_tokens"] for u in totals) == prompt
    assert sum(u["output_tokens"] for u in totals) == completion
    assert sum(u["total_tokens"] for u in totals) == prompt + completion
    record = record_of(message)
    assert record.usage.generator.prompt_tokens == prompt - 100
    assert record.usage.selector.prompt_tokens == 100
    assert record.usage.generator.calls == N and record.usage.selector.calls == 1
    # The chosen candidate's own usage stays in the record.
    own = record.candidates[record.selected_index].usage
    assert own.calls == 1 and own.prompt_tokens == 10 + ANSWERS.index(str(message.content))


async def test_progress_goes_out_as_custom_callback_events(stub: StubServer) -> None:
    script_distinct_answers(stub, pick=0)
    stream = make_model(stub).astream_events("Which letter?", version="v2")
    events = [event async for event in stream]
    [start] = [e for e in events if e["event"] == "on_chat_model_start"]
    [end] = [e for e in events if e["event"] == "on_chat_model_end"]
    custom = [e for e in events if e["event"] == "on_custom_event"]
    assert {e["name"] for e in custom} == {"turnbon"}
    # Dispatched on the chat model's own run.
    assert {e["run_id"] for e in custom} == {start["run_id"]}
    data = [cast(dict[str, Any], e["data"]) for e in custom]
    assert [d["turnbon"] for d in data] == ["candidate_arrived"] * N + ["selection_made"]
    assert sorted(d["index"] for d in data[:N]) == list(range(N))
    message = end["data"]["output"]
    assert data[-1]["selected_index"] == record_of(message).selected_index


async def test_per_call_model_is_refused(stub: StubServer) -> None:
    with pytest.raises(ValueError, match="per-call model"):
        await make_model(stub).ainvoke("hi", model="openai/other")
    assert stub.requests == []
