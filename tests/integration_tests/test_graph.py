"""The graph factories in real LangGraph graphs, with real ToolNodes and checkpointers."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition

from tests.helpers import selector_answer, selector_requests, stub_kwargs
from turnbon_graph import (
    AllCandidatesFailedError,
    ConfigurationError,
    CredentialsError,
    create_turnbon_agent,
    create_turnbon_graph,
    turn_record,
)
from turnbon_graph.selectors import FirstSelector
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    error,
    is_selector_request,
    tool_call,
)

SECRET = "sk-very-secret-key-123"
TOOL_TURNS = 3


def make_shell(executed: list[str]) -> Any:
    @tool
    def shell(command: str) -> str:
        """Run a shell command and return its output."""
        executed.append(command)
        return f"output of {command}"

    return shell


def script_episode(stub: StubServer, display_pick: int = 1) -> None:
    """Turn t (from the transcript length) proposes distinct commands until TOOL_TURNS
    actions have run, then every candidate answers 'done' (a unanimous final turn)."""
    counter = itertools.count()

    def generator(request: CapturedRequest) -> dict[str, Any]:
        assert request.body is not None
        turn = sum(1 for m in request.body["messages"] if m["role"] == "tool")
        if turn >= TOOL_TURNS:
            return chat_completion("done")
        command = f"turn{turn}-cand{next(counter)}"
        return chat_completion(tool_calls=[tool_call("shell", {"command": command})])

    stub.route(is_selector_request, selector_answer(display_pick))
    stub.script(generator)


def assert_executed_what_was_chosen(messages: list[Any], executed: list[str]) -> None:
    chosen = [m for m in messages if isinstance(m, AIMessage) and m.tool_calls]
    assert len(chosen) == TOOL_TURNS
    for message in chosen:
        record = turn_record(message)
        assert record is not None
        picked = record.candidates[record.selected_index]
        # The message is the selected candidate, and the selector's display pick maps to it.
        assert message.tool_calls[0]["args"] == picked.tool_calls[0]["args"]
        assert record.permutation is not None and record.selected_index == record.permutation[1]
    assert executed == [m.tool_calls[0]["args"]["command"] for m in chosen]
    results = [m for m in messages if isinstance(m, ToolMessage)]
    assert [r.tool_call_id for r in results] == [m.tool_calls[0]["id"] for m in chosen]
    assert isinstance(messages[-1], AIMessage) and messages[-1].content == "done"


async def test_drop_in_model_node_in_a_hand_built_graph(stub: StubServer) -> None:
    script_episode(stub)
    executed: list[str] = []
    shell = make_shell(executed)
    turnbon = create_turnbon_graph(
        "openai/stub",
        [shell],
        execute_tools=False,
        n=4,
        seed=5,
        completion_kwargs=stub_kwargs(stub.base_url),
    ).compile()
    parent = StateGraph(MessagesState)
    parent.add_node("agent", turnbon)
    parent.add_node("tools", ToolNode([shell]))
    parent.add_edge(START, "agent")
    parent.add_conditional_edges("agent", tools_condition)
    parent.add_edge("tools", "agent")
    graph = parent.compile(checkpointer=InMemorySaver())

    config = {"configurable": {"thread_id": "drop-in"}}
    out = await graph.ainvoke({"messages": [HumanMessage("do it")]}, config)
    assert_executed_what_was_chosen(out["messages"], executed)
    assert "turnbon_pending" not in out
    # Every generator request offered the tool.
    assert all(r.body and r.body["tools"] for r in stub.requests if not is_selector_request(r))
    saved = (await graph.aget_state(config)).values["messages"]
    assert [turn_record(m) for m in saved] == [turn_record(m) for m in out["messages"]]


async def test_agent_runs_the_loop_and_resumes_a_thread(stub: StubServer) -> None:
    script_episode(stub)
    executed: list[str] = []
    agent = create_turnbon_agent(
        "openai/stub",
        [make_shell(executed)],
        n=3,
        seed=1,
        completion_kwargs=stub_kwargs(stub.base_url),
    ).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "agent"}}
    out = await agent.ainvoke({"messages": [HumanMessage("do it")]}, config)
    assert_executed_what_was_chosen(out["messages"], executed)
    final = turn_record(out["messages"][-1])
    assert final is not None and final.selector == "unanimous"

    # A follow-up on the same thread sees the whole saved conversation.
    stub.reset()
    stub.script(chat_completion("still done"))
    again = await agent.ainvoke({"messages": [HumanMessage("anything else?")]}, config)
    sent = stub.requests[0].body
    assert sent is not None and len(sent["messages"]) == len(out["messages"]) + 1
    assert again["messages"][-1].content == "still done"
    saved = (await agent.aget_state(config)).values["messages"]
    assert sum(1 for m in saved if turn_record(m) is not None) == TOOL_TURNS + 2


async def test_subgraph_with_its_own_tool_node(stub: StubServer) -> None:
    script_episode(stub)
    executed: list[str] = []
    graph = create_turnbon_graph(
        "openai/stub",
        [make_shell(executed)],
        n=2,
        completion_kwargs=stub_kwargs(stub.base_url),
    )
    assert set(graph.nodes) == {"generate", "select", "tools"}
    out = await graph.compile().ainvoke({"messages": [HumanMessage("one step")]})
    assert [type(m) for m in out["messages"]] == [HumanMessage, AIMessage, ToolMessage]
    assert executed == [out["messages"][1].tool_calls[0]["args"]["command"]]
    assert set(create_turnbon_graph("openai/stub").nodes) == {"generate", "select"}


def script_progress(stub: StubServer) -> None:
    """One failed candidate then two good ones (calls made one at a time), pick 0."""
    stub.reset()
    stub.route(
        lambda r: not is_selector_request(r),
        error(400, "nope"),
        chat_completion("a"),
        chat_completion("b"),
    )
    stub.route(is_selector_request, selector_answer(0))


def progress_graph(stub: StubServer) -> Any:
    """A graph whose candidates come one call each, so one of them can fail alone."""
    return create_turnbon_graph(
        "openai/stub",
        n=3,
        native_n=False,
        max_concurrency=1,
        completion_kwargs=stub_kwargs(stub.base_url),
        name="mine",
    ).compile()


def assert_progress_events(events: list[dict[str, Any]]) -> None:
    """The events of one `script_progress` turn, tagged with the graph's name."""
    kinds = [e["turnbon"] for e in events]
    assert kinds.count("candidate_arrived") == 2 and kinds.count("candidate_failed") == 1
    assert kinds[-1] == "selection_made"
    assert {e["source"] for e in events} == {"mine"}
    assert len({e["turn_id"] for e in events}) == 1


async def test_progress_goes_out_as_custom_stream_events(stub: StubServer) -> None:
    script_progress(stub)
    graph = progress_graph(stub)
    events = [e async for e in graph.astream({"messages": [("user", "hi")]}, stream_mode="custom")]
    assert_progress_events(events)


async def test_all_candidates_failing_appends_nothing(stub: StubServer) -> None:
    stub.script(error(400, "model does not exist"))
    agent = create_turnbon_agent(
        "openai/stub",
        [make_shell([])],
        n=2,
        completion_kwargs=stub_kwargs(stub.base_url),
    ).compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "fail"}}
    with pytest.raises(AllCandidatesFailedError, match="model does not exist"):
        await agent.ainvoke({"messages": [HumanMessage("go")]}, config)
    saved = (await agent.aget_state(config)).values["messages"]
    assert [type(m) for m in saved] == [HumanMessage]


async def test_max_turns_stops_after_the_last_action_ran(stub: StubServer) -> None:
    script_episode(stub)
    executed: list[str] = []
    agent = create_turnbon_agent(
        "openai/stub",
        [make_shell(executed)],
        n=2,
        max_turns=2,
        selector=FirstSelector(),
        completion_kwargs=stub_kwargs(stub.base_url),
    ).compile()
    out = await agent.ainvoke({"messages": [HumanMessage("go")]})
    assert len(executed) == 2
    assert isinstance(out["messages"][-1], ToolMessage)


async def test_trace_and_records_never_hold_the_api_key(stub: StubServer, tmp_path: Path) -> None:
    script_episode(stub)
    trace = tmp_path / "trace.jsonl"
    agent = create_turnbon_agent(
        "openai/stub",
        [make_shell([])],
        n=3,
        trace=trace,
        completion_kwargs={
            **stub_kwargs(stub.base_url, api_key=SECRET),
            "extra_headers": {"X-Team-Token": "team-token-value"},
        },
    ).compile()
    out = await agent.ainvoke({"messages": [HumanMessage("go")]})
    assert stub.requests[0].header("Authorization") == f"Bearer {SECRET}"
    assert stub.requests[0].header("X-Team-Token") == "team-token-value"
    lines = trace.read_text().splitlines()
    assert len(lines) == TOOL_TURNS + 1
    assert [json.loads(line)["turn_id"] for line in lines] == [
        r.turn_id for m in out["messages"] if (r := turn_record(m))
    ]
    dumped = trace.read_text() + json.dumps([m.model_dump() for m in out["messages"]], default=str)
    assert SECRET not in dumped and "team-token-value" not in dumped
    # The default selector (the generator's model) shared the generator's endpoint and key.
    assert selector_requests(stub.requests)[0].header("Authorization") == f"Bearer {SECRET}"


def _someone_waits_for_a_fifo_reader() -> bool:
    """Whether a thread of this process is blocked opening a FIFO that has no reader."""
    for task in Path("/proc/self/task").iterdir():
        try:
            if (task / "wchan").read_text() == "wait_for_partner":
                return True
        except OSError:
            continue
    return False


async def test_a_slow_trace_file_never_stalls_the_event_loop(
    stub: StubServer, tmp_path: Path
) -> None:
    # The trace file is a FIFO: appending to it blocks until a reader opens it. A thread
    # waits until the turn's write is blocked there, then lets the loop release it. Were
    # the write made on the loop, the loop could not answer and the release would time out.
    stub.script(chat_completion("done"))
    fifo = tmp_path / "trace.jsonl"
    os.mkfifo(fifo)
    looked, released = threading.Event(), threading.Event()
    seen_blocked: list[bool] = []
    released_by_the_loop: list[bool] = []
    lines: list[str] = []

    def late_reader() -> None:
        for _ in range(1000):  # up to 10 s for the turn to reach its trace write
            if _someone_waits_for_a_fifo_reader():
                seen_blocked.append(True)
                break
            time.sleep(0.01)
        looked.set()
        released_by_the_loop.append(released.wait(timeout=5))
        with fifo.open(encoding="utf-8") as reader:
            lines.extend(reader.read().splitlines())

    async def release_once_blocked() -> None:
        await asyncio.to_thread(looked.wait)
        released.set()

    reader_thread = threading.Thread(target=late_reader)
    reader_thread.start()
    graph = create_turnbon_graph(
        "openai/stub",
        n=1,
        selector=FirstSelector(),
        trace=fifo,
        completion_kwargs=stub_kwargs(stub.base_url),
    ).compile()
    releasing = asyncio.create_task(release_once_blocked())
    try:
        await graph.ainvoke({"messages": [HumanMessage("go")]})
    finally:
        await asyncio.to_thread(reader_thread.join, 30)
        await releasing
    if not seen_blocked:
        pytest.skip("this kernel does not show a thread waiting on a FIFO")
    assert released_by_the_loop == [True]  # the loop ran while the write waited
    assert [json.loads(line)["n_requested"] for line in lines] == [1]


async def test_failed_calls_never_leak_the_key_into_errors(stub: StubServer) -> None:
    stub.script(error(401, f"Incorrect API key provided: {SECRET}"))
    graph = create_turnbon_graph(
        "openai/stub",
        n=1,
        completion_kwargs=stub_kwargs(stub.base_url, api_key=SECRET),
    ).compile()
    # A refused key ends the turn as the CredentialsError naming it, with the key redacted
    # from its text and from its chain.
    with pytest.raises(CredentialsError) as caught:
        await graph.ainvoke({"messages": [HumanMessage("go")]})
    assert "refused the key" in str(caught.value)
    assert "REDACTED" in str(caught.value)
    chained: BaseException | None = caught.value
    while chained is not None:
        assert SECRET not in str(chained)
        chained = chained.__cause__ or chained.__context__


async def test_a_key_from_the_environment_is_redacted_from_failed_candidates(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # LiteLLM reads the key from the environment: it is in no kwargs, yet an error that
    # quotes it must not reach the record or the raised error.
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    # A 400 fails only its own candidate (a 401 would end the turn as a CredentialsError).
    stub.script(error(400, f"Bad request for key {SECRET}"), chat_completion("ok"))
    trace = tmp_path / "trace.jsonl"
    graph = create_turnbon_graph(
        "openai/stub",
        n=2,
        native_n=False,  # one call each: the failed one is a candidate of the record
        selector=FirstSelector(),
        trace=trace,
        completion_kwargs={"api_base": stub.base_url},
    ).compile()
    await graph.ainvoke({"messages": [HumanMessage("go")]})
    record = trace.read_text()
    assert "Bad request for key [REDACTED]" in record
    assert SECRET not in record


def test_bad_options_fail_at_construction_with_advice() -> None:
    with pytest.raises(ConfigurationError, match="n must be"):
        create_turnbon_graph("openai/stub", n=0)
    with pytest.raises(ConfigurationError, match="LiteLLM model id"):
        create_turnbon_graph("", n=2)
    with pytest.raises(ConfigurationError, match="selector_kwargs"):
        create_turnbon_graph("openai/stub", selector=FirstSelector(), selector_kwargs={"x": 1})
    with pytest.raises(ConfigurationError, match="selector must be"):
        create_turnbon_graph("openai/stub", selector=42)  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs at least one tool"):
        create_turnbon_agent("openai/stub", [])
    with pytest.raises(ConfigurationError, match="may not set 'tools'"):
        create_turnbon_graph("openai/stub", completion_kwargs={"tools": []})
    with pytest.raises(ConfigurationError, match="max_concurrency"):
        create_turnbon_graph("openai/stub", max_concurrency=0)
