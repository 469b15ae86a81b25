"""The graph factories under the sync API: `invoke`/`stream` with a sync checkpointer
(`SqliteSaver`), the same records and stream events as `ainvoke`/`astream`, and a human
choice that pauses and resumes synchronously."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.types import Command

from tests.helpers import stub_kwargs
from tests.integration_tests.test_graph import (
    TOOL_TURNS,
    assert_executed_what_was_chosen,
    assert_progress_events,
    make_shell,
    progress_graph,
    script_episode,
    script_progress,
)
from turnbon_graph import create_turnbon_agent, create_turnbon_graph, turn_record
from turnbon_graph.selectors import HumanSelector
from turnbon_graph.testing import StubServer, chat_completion, tool_call


@pytest.fixture
def saver(tmp_path: Path) -> Iterator[SqliteSaver]:
    connection = sqlite3.connect(tmp_path / "checkpoints.sqlite", check_same_thread=False)
    try:
        yield SqliteSaver(connection)
    finally:
        connection.close()


def episode_agent(stub: StubServer, executed: list[str]) -> Any:
    return create_turnbon_agent(
        "openai/stub",
        [make_shell(executed)],
        n=3,
        seed=1,
        completion_kwargs=stub_kwargs(stub.base_url),
    )


def test_invoke_runs_the_tool_loop_with_a_sync_checkpointer(
    stub: StubServer, saver: SqliteSaver
) -> None:
    script_episode(stub)
    executed: list[str] = []
    agent = episode_agent(stub, executed).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "sync"}}
    out = agent.invoke({"messages": [HumanMessage("do it")]}, config)
    assert_executed_what_was_chosen(out["messages"], executed)
    assert "turnbon_pending" not in out
    saved = agent.get_state(config).values["messages"]
    assert [turn_record(m) for m in saved] == [turn_record(m) for m in out["messages"]]
    assert sum(1 for m in saved if turn_record(m) is not None) == TOOL_TURNS + 1

    # The thread continues synchronously from the SQLite checkpoint.
    stub.reset()
    stub.script(chat_completion("still done"))
    again = agent.invoke({"messages": [HumanMessage("anything else?")]}, config)
    sent = stub.requests[0].body
    assert sent is not None and len(sent["messages"]) == len(out["messages"]) + 1
    assert again["messages"][-1].content == "still done"


def test_stream_yields_the_same_progress_events_as_astream(stub: StubServer) -> None:
    graph = progress_graph(stub)
    inputs = {"messages": [("user", "hi")]}
    script_progress(stub)
    events = list(graph.stream(inputs, stream_mode="custom"))
    assert_progress_events(events)

    script_progress(stub)

    async def astream() -> list[dict[str, Any]]:
        return [e async for e in graph.astream(inputs, stream_mode="custom")]

    async_events = asyncio.run(astream())
    assert [(e["turnbon"], e.get("index")) for e in async_events] == [
        (e["turnbon"], e.get("index")) for e in events
    ]


def test_invoke_from_a_thread_whose_loop_is_running(stub: StubServer) -> None:
    """`invoke` inside a coroutine (a notebook cell, say): run_sync moves the turn to a
    worker thread with this thread's context, so events and records still arrive."""
    script_episode(stub)
    executed: list[str] = []
    agent = episode_agent(stub, executed).compile()

    async def inside_a_loop() -> list[Any]:
        return list(
            agent.stream({"messages": [HumanMessage("go")]}, stream_mode=["custom", "values"])
        )

    parts = asyncio.run(inside_a_loop())
    kinds = [data["turnbon"] for mode, data in parts if mode == "custom"]
    assert kinds.count("selection_made") == TOOL_TURNS + 1
    final = [data for mode, data in parts if mode == "values"][-1]
    assert_executed_what_was_chosen(final["messages"], executed)


COMMANDS = ["ls", "pytest -x", "cat a.py"]


def test_a_human_choice_pauses_and_resumes_under_invoke(
    stub: StubServer, saver: SqliteSaver
) -> None:
    stub.script(
        *[chat_completion(tool_calls=[tool_call("shell", {"command": c})]) for c in COMMANDS]
    )
    executed: list[str] = []
    graph = create_turnbon_graph(
        "openai/stub",
        [make_shell(executed)],
        n=3,
        selector=HumanSelector(),
        max_concurrency=1,
        completion_kwargs=stub_kwargs(stub.base_url),
    ).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "human-sync"}}
    out = graph.invoke({"messages": [HumanMessage("go")]}, config)
    (pause,) = out["__interrupt__"]
    shown = [c["tool_calls"][0]["args"]["command"] for c in pause.value["candidates"]]
    assert shown == COMMANDS
    assert graph.get_state(config).next == ("select",)
    assert executed == [] and len(stub.requests) == 3

    out = graph.invoke(Command(resume=1), config)
    assert executed == ["pytest -x"]
    chosen = next(m for m in out["messages"] if isinstance(m, AIMessage))
    record = turn_record(chosen)
    assert record is not None and record.selector == "human" and record.selected_index == 1
    assert isinstance(out["messages"][-1], ToolMessage)
    assert len(stub.requests) == 3  # resuming regenerated nothing
