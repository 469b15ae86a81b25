"""The fault table: each fault class played against the loopback stub, one row each.

Every row runs the library's real path (LiteLLM over HTTP to `StubServer`) with one
fault scripted, and says what was expected, what was observed, and whether it held.
The last row kills a checkpointed agent (SQLite) with SIGKILL mid-run in a subprocess
and resumes it in another. Each row is bounded (a few seconds; at most about 30).

    python benchmarks/faults.py
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from turnbon_graph import (
    AllCandidatesFailedError,
    TurnEngine,
    create_turnbon_agent,
    create_turnbon_graph,
    turn_record,
)
from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph._litellm.loading import load_litellm
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    error,
    is_selector_request,
    tool_call,
)

KEY = "sk-fault-table-secret-0123456789"
ASK = [HumanMessage("Fix the failing test.")]
MESSAGES = [{"role": "user", "content": "hi"}]
Row = tuple[str, str, Callable[[StubServer], Awaitable[tuple[str, bool]]]]


def endpoint(stub: StubServer) -> dict[str, Any]:
    return {"api_base": stub.base_url, "api_key": KEY}


async def one_call(stub: StubServer, **client: Any) -> tuple[str, bool, float]:
    """One call through a `LiteLLMClient`: (what happened, whether it succeeded, seconds)."""
    started = time.monotonic()
    try:
        await LiteLLMClient(**client).complete(
            model="openai/stub", messages=MESSAGES, **endpoint(stub)
        )
    except Exception as exc:
        return f"failed: {type(exc).__name__}", False, time.monotonic() - started
    return "ok", True, time.monotonic() - started


def calls(stub: StubServer) -> int:
    return len(stub.requests)


async def retry_after(stub: StubServer) -> tuple[str, bool]:
    stub.script(error(429, retry_after=1), chat_completion("ok"))
    what, ok, took = await one_call(stub, backoff_base=0.01)
    return f"{what} after {calls(stub)} calls, {took:.1f} s", ok and took >= 1 and calls(stub) == 2


async def retry_after_too_long(stub: StubServer) -> tuple[str, bool]:
    stub.script(error(429, retry_after=120))
    what, ok, took = await one_call(stub)
    return f"{what} after {calls(stub)} call, {took:.1f} s", not ok and calls(stub) == 1


async def retried(stub: StubServer, fault: StubResponse | dict[str, Any]) -> tuple[str, bool]:
    stub.script(fault, chat_completion("ok"))
    what, ok, _ = await one_call(stub, backoff_base=0.01)
    return f"{what} after {calls(stub)} calls", ok and calls(stub) == 2


async def hung(stub: StubServer) -> tuple[str, bool]:
    stub.script(StubResponse(body=chat_completion("late"), delay=8))
    what, ok, took = await one_call(stub, timeout=1, max_retries=0)
    return f"{what} after {took:.1f} s", not ok and took < 5


async def all_failing(stub: StubServer) -> tuple[str, bool]:
    stub.script(error(400, "bad request"))
    graph = create_turnbon_graph("openai/stub", n=3, completion_kwargs=endpoint(stub))
    app = graph.compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    try:
        await app.ainvoke({"messages": ASK}, config)
    except AllCandidatesFailedError as exc:
        kept = len((await app.aget_state(config)).values["messages"])
        return f"{type(exc).__name__}; {kept} message in state", kept == 1
    return "the turn succeeded", False


async def cancellation(stub: StubServer) -> tuple[str, bool]:
    stub.script(StubResponse(body=chat_completion("slow"), delay=20))
    engine = TurnEngine.from_options("openai/stub", n=4, completion_kwargs=endpoint(stub))
    task = asyncio.create_task(engine.run(ASK))
    for _ in range(200):
        if calls(stub) == 4:
            break
        await asyncio.sleep(0.05)
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    for _ in range(100):
        if stub.disconnects == 4:
            break
        await asyncio.sleep(0.05)
    return f"{calls(stub)} calls in flight, {stub.disconnects} closed", stub.disconnects == 4


def shell_tool(raises: bool = False) -> Any:
    @tool
    def shell(command: str) -> str:
        """Run a shell command."""
        if raises:
            raise OSError(f"cannot run {command}")
        return f"ran {command}"

    return shell


def after_a_tool(first: dict[str, Any]) -> Callable[[CapturedRequest], dict[str, Any]]:
    """`first` until a tool result is in the request, then 'done'."""

    def reply(request: CapturedRequest) -> dict[str, Any]:
        assert request.body is not None
        if any(m["role"] == "tool" for m in request.body["messages"]):
            return chat_completion("done")
        return first

    return reply


async def agent_outcome(stub: StubServer, tool_: Any) -> tuple[list[Any], ToolMessage | None]:
    agent = create_turnbon_agent("openai/stub", [tool_], n=2, completion_kwargs=endpoint(stub))
    out = await agent.compile().ainvoke({"messages": ASK})
    messages = out["messages"]
    result = next((m for m in messages if isinstance(m, ToolMessage)), None)
    return messages, result


async def invalid_arguments(stub: StubServer) -> tuple[str, bool]:
    broken = {"id": "call_x", "type": "function", "function": {"name": "shell", "arguments": "{"}}
    stub.script(after_a_tool(chat_completion(tool_calls=[broken])))
    messages, result = await agent_outcome(stub, shell_tool())
    told = result is not None and result.status == "error" and result.tool_call_id == "call_x"
    done = messages[-1].content == "done"
    return f"error result to the model: {told}; agent went on: {done}", told and done


async def no_choices(stub: StubServer) -> tuple[str, bool]:
    stub.route(is_selector_request, chat_completion(choices=[]))
    counter = iter(range(100))
    stub.script(
        lambda _: chat_completion(tool_calls=[tool_call("shell", {"command": f"c{next(counter)}"})])
    )
    engine = TurnEngine.from_options("openai/stub", n=2, completion_kwargs=endpoint(stub))
    record = turn_record(await engine.run(ASK))
    fallback = record.fallback if record else None
    return f"fallback: {fallback}", bool(fallback and "no choices" in fallback)


async def echoed_key(stub: StubServer) -> tuple[str, bool]:
    stub.route(is_selector_request, chat_completion(f'{{"selected_index": 0, "reason": "{KEY}"}}'))
    counter = iter(range(100))
    stub.script(lambda _: chat_completion(f"my key is {KEY} ({next(counter)})"))
    with tempfile.TemporaryDirectory() as folder:
        trace = Path(folder) / "trace.jsonl"
        engine = TurnEngine.from_options(
            "openai/stub", n=2, completion_kwargs=endpoint(stub), trace=str(trace)
        )
        message = await engine.run(ASK)
        leaked = KEY in json.dumps(message.response_metadata) or KEY in trace.read_text()
    return f"key in record or trace: {leaked}", not leaked


async def raising_tool(stub: StubServer) -> tuple[str, bool]:
    stub.script(after_a_tool(chat_completion(tool_calls=[tool_call("shell", {"command": "x"})])))
    messages, result = await agent_outcome(stub, shell_tool(raises=True))
    records = sum(1 for m in messages if turn_record(m) is not None)
    told = result is not None and result.status == "error"
    return f"error result: {told}; run finished with {records} turn records", told and records == 2


# --------------------------------------------------------------------------- kill -9

CHILD = """
import json, sys, time
from pathlib import Path
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite import SqliteSaver
from turnbon_graph import create_turnbon_agent, turn_record
from turnbon_graph.selectors import FirstSelector

base_url, db, marks, mode = sys.argv[1:5]

@tool
def shell(command: str) -> str:
    \"\"\"Run a shell command.\"\"\"
    Path(marks, command).touch()
    if mode == "first" and command == "step-1":
        time.sleep(60)  # killed here, mid-run
    return "ok"

config = {"configurable": {"thread_id": "t"}}
with SqliteSaver.from_conn_string(db) as saver:
    agent = create_turnbon_agent(
        "openai/stub", [shell], n=2, selector=FirstSelector(),
        completion_kwargs={"api_base": base_url, "api_key": "none"},
    ).compile(checkpointer=saver)
    start = {"messages": [("user", "go")]} if mode == "first" else None
    out = agent.invoke(start, config)
    records = [turn_record(m) for m in out["messages"]]
    print(json.dumps([r.turn_id for r in records if r is not None]))
"""

STEPS = 3


def steps(request: CapturedRequest) -> dict[str, Any]:
    assert request.body is not None
    done = sum(1 for m in request.body["messages"] if m["role"] == "tool")
    if done >= STEPS:
        return chat_completion("done")
    return chat_completion(tool_calls=[tool_call("shell", {"command": f"step-{done}"})])


async def kill_and_resume(stub: StubServer) -> tuple[str, bool]:
    stub.script(steps)
    return await asyncio.to_thread(_kill_and_resume, stub)


def _kill_and_resume(stub: StubServer) -> tuple[str, bool]:
    with tempfile.TemporaryDirectory() as folder:
        db, marks = str(Path(folder) / "threads.sqlite"), Path(folder, "marks")
        marks.mkdir()
        run = [sys.executable, "-c", CHILD, stub.base_url, db, str(marks)]
        child = subprocess.Popen([*run, "first"], stdout=subprocess.PIPE, text=True)
        for _ in range(400):
            if (marks / "step-1").exists() or child.poll() is not None:
                break
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        generated = sum(1 for r in stub.requests if not is_selector_request(r))
        resumed = subprocess.run([*run, "resume"], capture_output=True, text=True, timeout=30)
        ids = json.loads(resumed.stdout or "[]")
    again = sum(1 for r in stub.requests if not is_selector_request(r)) - generated
    held = child.returncode == -signal.SIGKILL and len(ids) == len(set(ids)) == STEPS + 1
    observed = (
        f"killed with {generated // 2} turns generated; resume made {again // 2} more, "
        f"{len(ids)} turn records, {len(set(ids))} distinct"
    )
    return observed, held and again // 2 == STEPS + 1 - generated // 2


ROWS: list[Row] = [
    ("429 with Retry-After: 1", "waited 1 s, then ok", retry_after),
    ("429 with Retry-After: 120 (cap 60 s)", "the call fails at once", retry_after_too_long),
    ("503", "retried, then ok", lambda stub: retried(stub, error(503))),
    ("connection reset", "retried, then ok", lambda stub: retried(stub, StubResponse(drop=True))),
    ("hung reply, timeout=1", "the call fails after ~1 s", hung),
    (
        "truncated JSON body",
        "retried, then ok",
        lambda stub: retried(stub, StubResponse(body='{"id": "x", "choices": [{"mess')),
    ),
    (
        "HTML body",
        "retried, then ok",
        lambda stub: retried(
            stub,
            StubResponse(body="<html><body>Bad gateway</body></html>", status=200),
        ),
    ),
    ("every candidate fails", "AllCandidatesFailedError, nothing appended", all_failing),
    ("cancelled turn", "every call in flight closed", cancellation),
    ("invalid tool-call arguments", "error ToolMessage, the agent goes on", invalid_arguments),
    ("selector reply with choices: []", "falls back, reason recorded", no_choices),
    ("a reply echoing the API key", "redacted from record and trace", echoed_key),
    ("a tool that raises", "error ToolMessage, turn records kept", raising_tool),
    ("kill -9, then resume (SQLite)", "no turn lost or duplicated", kill_and_resume),
]

NOT_COVERED = ["sandbox: fork bomb", "sandbox: output flood", "sandbox: hang", "sandbox: tamper"]


async def main() -> None:
    await load_litellm()  # its import takes seconds: not part of any row
    print("| fault | expected | observed | held |")
    print("|---|---|---|---|")
    for fault, expected, play in ROWS:
        with StubServer() as stub:
            try:
                observed, held = await asyncio.wait_for(play(stub), timeout=45)
            except Exception as exc:
                observed, held = f"raised {type(exc).__name__}: {exc}"[:120], False
        observed = observed.replace(KEY, "<KEY>").replace("|", "/")
        print(f"| {fault} | {expected} | {observed} | {'yes' if held else 'no'} |", flush=True)
    for fault in NOT_COVERED:
        print(f"| {fault} | - | not covered here (the terminal sandbox's own tests) | - |")


if __name__ == "__main__":
    asyncio.run(main())
