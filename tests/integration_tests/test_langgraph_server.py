"""The shipped `langgraph.json` under LangGraph Server (`langgraph dev`, with its
blocking-call checker), driven through `langgraph_sdk` against the stub: a thread runs
to its end with the turn records saved, and a human choice pauses and resumes."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from langgraph_sdk import get_client

from tests.helpers import selector_answer
from turnbon_graph import ConfigurationError, langgraph_server
from turnbon_graph.langgraph_server import make_graph, shell
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

# Looked up, not imported: importing it creates .langgraph_api/ in the working directory.
if importlib.util.find_spec("langgraph_runtime_inmem") is None:
    pytest.skip("langgraph-cli[inmem] is a test extra", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[2]
LANGGRAPH = Path(sys.executable).with_name("langgraph")
SECRET = "sk-server-secret-0123456789"
STARTUP_S = 120.0  # a cold `langgraph dev` imports the API server and our graph
CALL_S = 60.0  # any one SDK call


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def langgraph_dev(stub: StubServer, log: Path, **env: str) -> Iterator[str]:
    """`langgraph dev` on the shipped config and a free loopback port, TURNBON_* aimed
    at the stub; yields its URL once it answers; kills its process group at the end."""
    port = free_port()
    environment = {
        **os.environ,
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
        "LANGSMITH_TRACING": "false",
        "LANGGRAPH_CLI_NO_ANALYTICS": "1",
        "TURNBON_MODEL": "openai/stub",
        "TURNBON_API_BASE": stub.base_url,
        "TURNBON_API_KEY": SECRET,
        "TURNBON_N": "3",
        **env,
    }
    command = [str(LANGGRAPH), "dev", "--no-browser", "--no-reload", "--host", "127.0.0.1"]
    command += ["--port", str(port), "--config", str(ROOT / "langgraph.json")]
    with log.open("w") as out:
        server = subprocess.Popen(
            command,
            cwd=log.parent,  # where the in-memory server persists its threads
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as one below
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url, server, log)
        yield url
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)


def wait_until_ready(url: str, server: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + STARTUP_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"langgraph dev exited with {server.returncode}:\n{log.read_text()}")
        with (
            contextlib.suppress(OSError),
            urllib.request.urlopen(f"{url}/ok", timeout=2) as answer,
        ):
            if answer.status == 200:
                return
        time.sleep(0.25)
    pytest.fail(f"langgraph dev did not answer within {STARTUP_S:g} s:\n{log.read_text()}")


def script(stub: StubServer) -> None:
    """Turn 0: every candidate runs `env` (unanimous: no selector call). Turn 1: three
    distinct commands, the LLM selector picks display position 1. Then 'done'."""
    proposals = iter(range(10**6))

    def generator(request: CapturedRequest) -> dict[str, Any]:
        assert request.body is not None
        turn = sum(1 for m in request.body["messages"] if m["role"] == "tool")
        if turn == 0:
            return chat_completion(tool_calls=[tool_call("shell", {"command": "env"})])
        if turn == 1:
            command = f"echo proposal-{next(proposals) % 3}"
            return chat_completion(tool_calls=[tool_call("shell", {"command": command})])
        return chat_completion("done")

    stub.route(is_selector_request, selector_answer(1))
    stub.script(generator)


def records(values: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        m["response_metadata"]["turnbon"]
        for m in values["messages"]
        if m["type"] == "ai" and "turnbon" in m.get("response_metadata", {})
    ]


def tool_results(values: dict[str, Any]) -> list[str]:
    return [m["content"] for m in values["messages"] if m["type"] == "tool"]


@contextlib.asynccontextmanager
async def bounded() -> AsyncIterator[None]:
    async with asyncio.timeout(CALL_S):
        yield


async def test_a_thread_runs_to_its_end_with_the_turn_records(
    stub: StubServer, tmp_path: Path
) -> None:
    script(stub)
    log = tmp_path / "server.log"
    with langgraph_dev(stub, log) as url:
        client = get_client(url=url)
        async with bounded():
            thread = await client.threads.create()
            run = await client.runs.create(
                thread["thread_id"], "turnbon", input={"messages": [("user", "fix it")]}
            )
            await client.runs.join(thread["thread_id"], run["run_id"])
            finished = await client.runs.get(thread["thread_id"], run["run_id"])
            state = await client.threads.get_state(thread["thread_id"])
    assert finished["status"] == "success", log.read_text()[-3000:]
    values = state["values"]
    assert state["next"] == []
    assert values["messages"][-1]["content"] == "done"
    first, second, final = records(values)
    assert first["selector"] == "unanimous" and first["n_requested"] == 3
    assert second["selector"].startswith("llm") and second["permutation"] is not None
    assert second["selected_index"] == second["permutation"][1]
    assert final["selector"] == "unanimous"
    env_output, echo_output = tool_results(values)
    assert env_output.startswith("exit code 0") and "TURNBON_MODEL=openai/stub" in env_output
    chosen = second["candidates"][second["selected_index"]]["tool_calls"][0]["args"]["command"]
    assert echo_output == f"exit code 0\n{chosen.removeprefix('echo ')}\n"
    # The key reached the provider, and nothing else: not the state, the shell, the log.
    assert stub.requests[0].header("Authorization") == f"Bearer {SECRET}"
    assert SECRET not in json.dumps(values) + log.read_text()
    assert "BlockingError" not in log.read_text()


async def test_a_human_selector_pauses_and_resumes_through_the_sdk(
    stub: StubServer, tmp_path: Path
) -> None:
    script(stub)
    log = tmp_path / "server.log"
    with langgraph_dev(stub, log, TURNBON_SELECTOR="human") as url:
        client = get_client(url=url)
        async with bounded():
            thread = (await client.threads.create())["thread_id"]
            await client.runs.wait(thread, "turnbon", input={"messages": [("user", "go")]})
            paused = await client.threads.get_state(thread)
            asked = len(stub.requests)
            (interrupt,) = paused["tasks"][0]["interrupts"]
            shown = interrupt["value"]["candidates"]
            await client.runs.wait(thread, "turnbon", command={"resume": 2})
            state = await client.threads.get_state(thread)
    # Turn 0 was unanimous (no question); turn 1 asks the person.
    assert paused["next"] == ["select"], log.read_text()[-3000:]
    assert len(shown) == 3 and interrupt["value"]["turnbon"] == "choose_action"
    assert len(records(paused["values"])) == 1
    values = state["values"]
    assert state["next"] == [] and values["messages"][-1]["content"] == "done"
    human = records(values)[1]
    assert human["selector"] == "human" and human["selected_index"] == shown[2]["candidate"]
    picked = shown[2]["tool_calls"][0]["args"]["command"]
    assert tool_results(values)[1] == f"exit code 0\n{picked.removeprefix('echo ')}\n"
    # Resuming regenerated nothing: the next requests are the final turn's.
    assert len(stub.requests) == asked + 3
    assert SECRET not in json.dumps(values) + log.read_text()


def test_the_shell_hides_the_key_and_kills_what_overruns(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("TURNBON_API_KEY", SECRET)
    shown = shell.invoke({"command": f"env; echo {SECRET}"})
    assert shown.startswith("exit code 0") and "TURNBON_API_KEY" not in shown
    assert SECRET not in shown and "[REDACTED]" in shown
    assert shell.invoke({"command": "exit 3"}) == "exit code 3\n"

    monkeypatch.setattr(langgraph_server, "SHELL_TIMEOUT_S", 0.5)
    pid_file = tmp_path / "child.pid"
    answer = shell.invoke({"command": f"sleep 60 >/dev/null 2>&1 & echo $! > {pid_file}; wait"})
    assert answer.startswith("timed out after 0.5 s (killed)")
    # The command's own children die with it (its process group), not only the shell.
    assert dies(int(pid_file.read_text()))


def dies(pid: int) -> bool:
    """Whether process `pid` is gone (or a zombie) within a few seconds."""
    status = Path(f"/proc/{pid}/status")
    for _ in range(50):
        with contextlib.suppress(FileNotFoundError):
            if "State:\tZ" not in status.read_text():
                time.sleep(0.1)
                continue
        return True
    return False


def test_the_environment_must_name_a_model_and_a_whole_n(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("TURNBON_MODEL", raising=False)
    with pytest.raises(ConfigurationError, match="TURNBON_MODEL is not set"):
        make_graph()
    monkeypatch.setenv("TURNBON_MODEL", "openai/stub")
    monkeypatch.setenv("TURNBON_N", "three")
    with pytest.raises(ConfigurationError, match="TURNBON_N must be a whole number"):
        make_graph()
    monkeypatch.setenv("TURNBON_N", "0")
    with pytest.raises(ConfigurationError, match="n must be"):
        make_graph()
    monkeypatch.setenv("TURNBON_N", "2")
    assert set(make_graph().nodes) >= {"generate", "select", "tools"}


def test_runs_share_one_graph_per_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server asks for the graph on every run: one engine per environment, so the
    runs share its limits (`max_concurrency`, `rate_limit`)."""
    monkeypatch.setenv("TURNBON_MODEL", "openai/stub")
    monkeypatch.setenv("TURNBON_N", "2")
    assert make_graph() is make_graph()
    first = make_graph()
    monkeypatch.setenv("TURNBON_N", "3")
    assert make_graph() is not first
