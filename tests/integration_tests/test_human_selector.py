"""Human choice: the graph pauses in `select` with interrupt(), resumes with the person's
pick, and never regenerates, in one process and across a process restart (SQLite)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from langgraph.types import Command

from tests.helpers import stub_engine, stub_kwargs
from turnbon_graph import ConfigurationError, create_turnbon_graph
from turnbon_graph import turn_record as record_of
from turnbon_graph.selectors import HumanSelector
from turnbon_graph.testing import StubServer, chat_completion, tool_call

ROOT = Path(__file__).resolve().parents[2]
COMMANDS = ["ls", "pytest -x", "cat a.py"]


def script(stub: StubServer) -> None:
    stub.script(
        *[
            chat_completion(
                tool_calls=[tool_call("shell", {"command": c})],
                reasoning_content=f"PRIVATE REASONING {i}",
            )
            for i, c in enumerate(COMMANDS)
        ]
    )


def graph(stub: StubServer, executed: list[str]) -> Any:
    @tool
    def shell(command: str) -> str:
        """Run a shell command."""
        executed.append(command)
        return f"ran: {command}"

    return create_turnbon_graph(
        "openai/stub",
        [shell],
        n=3,
        selector=HumanSelector(),
        max_concurrency=1,
        completion_kwargs=stub_kwargs(stub.base_url),
    ).compile(checkpointer=InMemorySaver())


async def test_pauses_with_the_candidates_and_resumes_with_the_pick(stub: StubServer) -> None:
    script(stub)
    executed: list[str] = []
    app = graph(stub, executed)
    config = {"configurable": {"thread_id": "h"}}
    out = await app.ainvoke({"messages": [HumanMessage("go")]}, config)
    (pause,) = out["__interrupt__"]
    payload = pause.value
    assert [c["tool_calls"][0]["args"]["command"] for c in payload["candidates"]] == COMMANDS
    assert [c["index"] for c in payload["candidates"]] == [0, 1, 2]
    assert "Command(resume=" in payload["instructions"] and "0 to 2" in payload["instructions"]
    assert "PRIVATE" not in json.dumps(payload)
    assert pause.response_schema is not None  # clients can render a typed form
    assert executed == [] and len(stub.requests) == 3

    # A bad value is refused, and not saved: the same choice can be answered again.
    for bad in (3, -1, True, "1", {"index": 7}, {"pick": 1}):
        with pytest.raises(ConfigurationError, match="from 0 to 2"):
            await app.ainvoke(Command(resume=bad), config)
    out = await app.ainvoke(Command(resume={"index": 2}), config)
    assert executed == ["cat a.py"]
    chosen = next(m for m in out["messages"] if isinstance(m, AIMessage))
    record = record_of(chosen)
    assert record is not None
    assert record.selector == "human" and record.selected_index == 2
    assert record.selector_answer == "2" and record.usage.selector.calls == 0
    assert chosen.additional_kwargs["reasoning_content"] == "PRIVATE REASONING 2"
    assert isinstance(out["messages"][-1], ToolMessage)
    assert len(stub.requests) == 3  # resuming regenerated nothing


async def test_outside_a_graph_it_says_where_it_works(stub: StubServer) -> None:
    script(stub)
    engine = stub_engine(stub, n=3, selector=HumanSelector())
    with pytest.raises(ConfigurationError, match="create_turnbon_graph"):
        await engine.run([HumanMessage("go")])


def run_side(*args: str) -> dict[str, Any]:
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "LANGGRAPH_STRICT_MSGPACK": "true"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.integration_tests.human_process", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    # Strict msgpack: the checkpoint round-trips with no type off LangGraph's allowlist.
    warnings = ("Blocked", "unregistered", "reconstruct", "allowlist")
    assert not any(w in done.stderr for w in warnings), done.stderr
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def test_pauses_in_one_process_and_resumes_in_another(stub: StubServer, tmp_path: Path) -> None:
    script(stub)
    db, log = str(tmp_path / "checkpoints.sqlite"), str(tmp_path / "executed.log")
    first = run_side(db, stub.base_url, log, "start")
    assert first["next"] == ["select"]
    shown = [c["tool_calls"][0]["args"]["command"] for c in first["interrupt"]["candidates"]]
    assert shown == COMMANDS
    assert len(stub.requests) == 3 and not Path(log).exists()

    second = run_side(db, stub.base_url, log, "resume", "1")
    assert len(stub.requests) == 3  # the candidates came from the checkpoint
    assert Path(log).read_text().splitlines() == ["pytest -x"]
    assert second["tool_results"] == ["ran: pytest -x"]
    assert second["record"]["selector"] == "human" and second["record"]["selected_index"] == 1
    assert second["reasoning"] == "PRIVATE REASONING 1"  # the message survived the checkpoint


async def test_a_drop_in_turn_pauses_and_resumes_inside_a_parent_graph(stub: StubServer) -> None:
    script(stub)
    executed: list[str] = []

    @tool
    def shell(command: str) -> str:
        """Run a shell command."""
        executed.append(command)
        return f"ran: {command}"

    turn = create_turnbon_graph(
        "openai/stub",
        [shell],
        execute_tools=False,
        n=3,
        selector=HumanSelector(),
        max_concurrency=1,
        completion_kwargs=stub_kwargs(stub.base_url),
    ).compile()
    parent = StateGraph(MessagesState)
    parent.add_node("agent", turn)
    parent.add_node("tools", ToolNode([shell]))
    parent.add_edge(START, "agent")
    parent.add_edge("agent", "tools")
    parent.add_edge("tools", END)
    app = parent.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "parent"}}
    out = await app.ainvoke({"messages": [HumanMessage("go")]}, config)
    assert len(out["__interrupt__"][0].value["candidates"]) == 3
    out = await app.ainvoke(Command(resume=0), config)
    assert executed == ["ls"] and len(stub.requests) == 3
    assert "turnbon_pending" not in out
