"""ChatTurnBoN's streaming against the stub: the chosen message replayed as chunks, and
its progress events on the model's run and on a LangGraph graph's custom stream."""

from __future__ import annotations

import itertools
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph

from tests.helpers import generator_requests, selector_answer, selector_requests, stub_kwargs
from turnbon_graph import ChatTurnBoN, turn_record
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

N = 3
PROGRESS = ["candidate_arrived"] * N + ["selection_made"]


@tool
def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"sunny in {city}"


def make_model(stub: StubServer, **options: Any) -> ChatTurnBoN:
    return ChatTurnBoN(
        model="openai/stub", n=N, completion_kwargs=stub_kwargs(stub.base_url), **options
    )


def script_same_reply(stub: StubServer) -> None:
    """Every candidate says the same words and makes the same call: no selector call,
    the same answer on every run."""
    call = tool_call("get_weather", {"city": "Zürich"}, id="call_weather_1")
    stub.script(chat_completion("Let me check the weather there.", tool_calls=[call]))


def script_distinct(stub: StubServer, pick: int) -> None:
    counter = itertools.count()

    def generator(request: CapturedRequest) -> dict[str, Any]:
        k = next(counter)
        return chat_completion(f"answer number {k} is here", usage=usage(10 + k, 3))

    stub.route(is_selector_request, selector_answer(pick))
    stub.script(generator)


def usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def added(chunks: list[AIMessageChunk]) -> AIMessageChunk:
    total = chunks[0]
    for chunk in chunks[1:]:
        total = total + chunk
    return total


async def test_astream_replays_the_chosen_message_as_chunks(stub: StubServer) -> None:
    script_same_reply(stub)
    model = make_model(stub).bind_tools([get_weather])
    chunks = [chunk async for chunk in model.astream("Weather in Zürich?")]
    whole = await model.ainvoke("Weather in Zürich?")
    assert isinstance(whole, AIMessage)

    assert all(isinstance(c, AIMessageChunk) for c in chunks)
    texts = [c.content for c in chunks if c.content]
    assert len(texts) > 1  # the text arrives a piece at a time
    calls = [c.tool_call_chunks for c in chunks if c.tool_call_chunks]
    assert [[(t["name"], t["id"]) for t in c] for c in calls] == [
        [("get_weather", "call_weather_1")]
    ]
    # Usage and the record ride on the last chunk only, so the sum has each once.
    assert [c.usage_metadata is not None for c in chunks] == [False] * (len(chunks) - 1) + [True]
    assert chunks[-1].chunk_position == "last"
    total = added(chunks)
    assert total.content == whole.content == "Let me check the weather there."
    assert total.tool_calls == whole.tool_calls
    assert total.tool_calls[0]["args"] == {"city": "Zürich"}
    assert total.usage_metadata == whole.usage_metadata
    record = turn_record(total)
    assert record is not None and record.n_ok == N and record.selector == "unanimous"
    # The candidates' own calls never streamed.
    assert all(r.body is not None and not r.body.get("stream") for r in stub.requests)


class Progress(BaseCallbackHandler):
    """Collects the chat model runs that start and the custom events dispatched."""

    def __init__(self) -> None:
        self.chat_runs: list[UUID] = []
        self.events: list[tuple[str, dict[str, Any], UUID]] = []

    def on_chat_model_start(
        self, serialized: Any, messages: Any, *, run_id: UUID, **_: Any
    ) -> None:
        self.chat_runs.append(run_id)

    def on_custom_event(self, name: str, data: Any, *, run_id: UUID, **_: Any) -> None:
        self.events.append((name, data, run_id))


def test_stream_picks_the_selected_candidate_and_reports_progress_on_its_run(
    stub: StubServer,
) -> None:
    script_distinct(stub, pick=2)
    progress = Progress()
    chunks = list(make_model(stub).stream("Which?", config={"callbacks": [progress]}))
    assert len(chunks) > 1 and all(isinstance(c, AIMessageChunk) for c in chunks)
    total = added(chunks)
    record = turn_record(total)
    assert record is not None and record.permutation is not None
    chosen = record.candidates[record.permutation[2]]
    assert record.selected_index == chosen.index
    assert total.content == chosen.content
    [selection] = selector_requests(stub.requests)
    assert chosen.content is not None and chosen.content in str(selection.body)
    # The progress events went to the callbacks, addressed to the chat model's run.
    assert [name for name, _, _ in progress.events] == ["turnbon"] * (N + 1)
    assert [data["turnbon"] for _, data, _ in progress.events] == PROGRESS
    assert {run for _, _, run in progress.events} == set(progress.chat_runs)
    assert len(progress.chat_runs) == 1


def run_graph(model: ChatTurnBoN, *, sync: bool) -> StateGraph[Any, Any, Any, Any]:
    """A graph whose one node calls the model (sync or async)."""

    def call(state: MessagesState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    async def acall(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("agent", call if sync else acall)
    builder.add_edge(START, "agent")
    return builder


async def test_progress_reaches_a_graphs_custom_stream(stub: StubServer) -> None:
    script_distinct(stub, pick=0)
    graph = run_graph(make_model(stub), sync=False).compile()
    inputs = {"messages": [HumanMessage("Which?")]}
    events = [e async for e in graph.astream(inputs, stream_mode="custom")]
    assert [e["turnbon"] for e in events] == PROGRESS
    assert {e["source"] for e in events} == {"turnbon"}
    assert sorted(e["index"] for e in events[:N]) == list(range(N))
    assert len(generator_requests(stub.requests)) == N


def test_progress_reaches_a_sync_graphs_custom_stream(stub: StubServer) -> None:
    script_distinct(stub, pick=1)
    graph = run_graph(make_model(stub), sync=True).compile()
    events = list(graph.stream({"messages": [HumanMessage("Which?")]}, stream_mode="custom"))
    assert [e["turnbon"] for e in events] == PROGRESS


async def test_only_the_chosen_message_reaches_a_graphs_message_stream(stub: StubServer) -> None:
    script_distinct(stub, pick=1)
    graph = run_graph(make_model(stub), sync=False).compile()
    inputs = {"messages": [HumanMessage("Which?")]}
    custom: list[dict[str, Any]] = []
    messages: list[Any] = []
    async for mode, item in graph.astream(inputs, stream_mode=["custom", "messages"]):
        (custom if mode == "custom" else messages).append(item)
    assert [e["turnbon"] for e in custom] == PROGRESS
    # Neither the other candidates nor the selector's answer: the chosen message alone.
    [(message, _)] = messages
    record = turn_record(message)
    assert record is not None
    assert message.content == record.candidates[record.selected_index].content


class Everything(BaseCallbackHandler):
    """Keeps the repr of every callback payload."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    def on_chat_model_start(self, *args: Any, **kwargs: Any) -> None:
        self.seen.append(repr((args, kwargs)))

    def on_llm_start(self, *args: Any, **kwargs: Any) -> None:
        self.seen.append(repr((args, kwargs)))

    def on_llm_end(self, *args: Any, **kwargs: Any) -> None:
        self.seen.append(repr((args, kwargs)))

    def on_llm_new_token(self, *args: Any, **kwargs: Any) -> None:
        self.seen.append(repr((args, kwargs)))

    def on_custom_event(self, *args: Any, **kwargs: Any) -> None:
        self.seen.append(repr((args, kwargs)))


def test_no_payload_of_a_streamed_turn_shows_a_key(stub: StubServer) -> None:
    script_distinct(stub, pick=0)
    secrets = ("sk-generator-secret-1", "sk-selector-secret-2")
    model = ChatTurnBoN(
        model="openai/stub",
        n=N,
        selector="openai/judge",
        completion_kwargs=stub_kwargs(stub.base_url, api_key=secrets[0]),
        selector_kwargs=stub_kwargs(stub.base_url, api_key=secrets[1]),
    )
    everything = Everything()
    list(model.stream("Which?", config={"callbacks": [everything]}))
    # The chat run, its tokens, its progress events and the selector's run all reported.
    assert len(everything.seen) > N + 4
    assert any("turnbon_selector" in seen for seen in everything.seen)
    for secret in secrets:
        assert not any(secret in seen for seen in everything.seen)
    assert {r.header("Authorization") for r in stub.requests} == {f"Bearer {s}" for s in secrets}
