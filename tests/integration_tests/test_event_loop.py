"""A fresh process's first turn makes no blocking call on the event loop, under the
checker LangGraph Server runs (`langgraph dev` refuses such calls with BlockingError), and
neither does `turnbon serve`'s response store, in memory or in a SQLite file."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from turnbon_graph.testing import StubServer, chat_completion, is_selector_request

pytest.importorskip("langgraph_runtime_inmem", reason="langgraph-cli[inmem] is a test extra")

# Runs in a fresh interpreter, so LiteLLM is not imported yet when the loop starts.
FIRST_TURN = """
import asyncio, sys
from langgraph_runtime_inmem.queue import _enable_blockbuster  # the server's own policy
from turnbon_graph import ChatTurnBoN, create_turnbon_graph

options = {
    "n": 2,
    "completion_kwargs": {"api_base": sys.argv[1], "api_key": "sk-test"},
    "trace": sys.argv[2],  # a JSON-lines trace: its file written off the loop too
}
graph = create_turnbon_graph("openai/stub", **options).compile()
model = ChatTurnBoN(model="openai/stub", **options)


async def main() -> None:
    state = await graph.ainvoke({"messages": [("user", "hi")]})
    print(state["messages"][-1].content)
    print((await model.ainvoke("hi")).content)


_enable_blockbuster()
asyncio.run(main())
"""


def test_the_first_turn_blocks_nothing_on_the_loop(stub: StubServer, tmp_path: Path) -> None:
    stub.route(is_selector_request, chat_completion(json.dumps({"selected_index": 1})))
    stub.script(chat_completion("first"), chat_completion("second"))
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-c", FIRST_TURN, stub.base_url, str(tmp_path / "trace.jsonl")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "BlockingError" not in done.stdout + done.stderr
    assert len(done.stdout.split()) == 2  # both turns answered
    assert any(is_selector_request(r) for r in stub.requests)  # the selector's call too
    assert len((tmp_path / "trace.jsonl").read_text().splitlines()) == 2  # a line a turn


# The Responses API's state, in a fresh interpreter too: the app in this process's loop
STORED_CHAIN = """
import asyncio, json, sys
from pathlib import Path
import httpx
from langgraph_runtime_inmem.queue import _enable_blockbuster
from turnbon_graph.config import turn_config
from turnbon_graph.serve import ServeConfig, create_app

store = Path(sys.argv[2]) if sys.argv[2:] else None
turn = turn_config(n=2, completion_kwargs={"api_base": sys.argv[1], "api_key": "sk-test"})
app = create_app(ServeConfig(model="openai/stub", turn=turn, response_store=store))


async def main() -> None:
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://t/v1") as client:
        made = (await client.post("/responses", json={"model": "t", "input": "hi"})).json()
        chained = {"model": "t", "input": "again", "previous_response_id": made["id"]}
        said = [{"type": "item_reference", "id": made["output"][0]["id"]}]
        answers = [
            await client.post("/responses", json=chained),
            await client.post("/responses", json={"model": "t", "input": said}),
            await client.get(f"/responses/{made['id']}"),
            await client.delete(f"/responses/{made['id']}"),
        ]
        print(json.dumps([made["store"], *(a.status_code for a in answers)]))


_enable_blockbuster()
asyncio.run(main())
"""


@pytest.mark.parametrize("where", ["memory", "sqlite"])
def test_the_response_store_blocks_nothing_on_the_loop(
    stub: StubServer, tmp_path: Path, where: str
) -> None:
    stub.script(chat_completion("the same answer"))  # unanimous
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    store = [str(tmp_path / "responses.db")] if where == "sqlite" else []
    done = subprocess.run(
        [sys.executable, "-c", STORED_CHAIN, stub.base_url, *store],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "BlockingError" not in done.stdout + done.stderr
    assert json.loads(done.stdout) == [True, 200, 200, 200, 200]
