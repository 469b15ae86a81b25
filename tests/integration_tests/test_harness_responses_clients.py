"""Agent clients on `turnbon serve`'s Responses API with their defaults, which lean on
the server's state: agno (`OpenAIResponses`, continuing each response by
`previous_response_id`, and replaying the whole conversation when OpenAI's "not found"
says it must) and the Vercel AI SDK's Responses model (`@ai-sdk/openai`, which sends an
earlier answer back as an `item_reference`), run by Node.js. The docs/harnesses.md
recipes marked for this file run here as written, on the weather episode of
test_harness_clients.py, and then a follow-up question; so does
tests/js_clients/stream_chain.mjs, the AI SDK streaming.

The AI SDK's packages are pinned in tests/js_clients/package-lock.json and installed by
`make setup-test` (npm ci); without node the JavaScript tests skip."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.integration_tests.test_harness_clients import (
    ANSWER,
    CHOSEN,
    OBSERVED,
    RECIPES,
    RUN_BY,
    SERVER,
    TEST_EXTRA,
    assert_the_chosen_call_ran,
    needs,
    run_recipe,
    script,
    tokens,
    turns,
    upstream,  # noqa: F401  (fixture: the stub as OpenAI)
    weather_call,
)
from turnbon_graph.config import turn_config
from turnbon_graph.serve import BackgroundServer, ServeConfig
from turnbon_graph.testing import CapturedRequest, StubServer, chat_completion

JS_CLIENTS = Path(__file__).resolve().parents[1] / "js_clients"
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(
    NODE is None, reason="node (Node.js 20 or later) is not installed: the AI SDK runs on it"
)
FOLLOW_UP = "And tomorrow?"
TOMORROW = "Sunny again tomorrow."


def answers(request: CapturedRequest) -> dict[str, Any]:
    """The answer once the tool has run; to the follow-up question, tomorrow's."""
    assert request.body is not None
    asked = request.body["messages"][-1]
    return chat_completion(TOMORROW if asked.get("content") == FOLLOW_UP else ANSWER)


def serve(stub: StubServer, **fields: Any) -> BackgroundServer:
    """`turnbon serve --model openai/gpt-4o-mini -n 4 --selector openai/gpt-4o`, as the
    page starts it."""
    turn = turn_config(n=4, selector="openai/gpt-4o")
    return BackgroundServer(ServeConfig(model="openai/gpt-4o-mini", turn=turn, **fields))


@pytest.fixture
def server(upstream: StubServer) -> Iterator[BackgroundServer]:  # noqa: F811
    with serve(upstream) as running:
        yield running


def assert_the_follow_up_saw_the_conversation(stub: StubServer) -> None:
    """The last turn's calls read the whole conversation: the question, the chosen call,
    its output, the answer (resolved from the client's reference) and the follow-up."""
    for request in turns(stub)[-1]:
        assert request.body is not None
        said = request.body["messages"]
        assert [m["role"] for m in said] == ["user", "assistant", "tool", "assistant", "user"]
        assert said[3]["content"] == ANSWER and said[4]["content"] == FOLLOW_UP


def test_the_page_has_the_stateful_client_recipes() -> None:
    here = {name for name, test in RUN_BY.items() if test.endswith(f"/{Path(__file__).name}")}
    assert here == {"agno", "vercel-ai-sdk"}


# ------------------------------------------------------------------- agno


@needs("agno", TEST_EXTRA)
def test_agno_continues_its_responses_by_previous_response_id(
    server: BackgroundServer,
    upstream: StubServer,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    script(upstream, weather_call, answers)
    run = run_recipe("agno", server)["run"]
    assert_the_chosen_call_ran(upstream)
    first, second = turns(upstream)
    assert capsys.readouterr().out.splitlines() == [ANSWER, f"{tokens(first + second)} tokens"]
    assistant = [m for m in run.messages if m.role == "assistant"]
    assert [c["function"]["arguments"] for c in assistant[0].tool_calls] == ['{"city": "Paris"}']
    # agno chained: each assistant message keeps the id of the response it continues from
    ids = [m.provider_data["response_id"] for m in assistant]
    assert len(set(ids)) == 2 and all(i.startswith("resp_") for i in ids)


@needs("agno", TEST_EXTRA)
def test_agno_replays_the_conversation_when_its_response_is_not_kept(
    upstream: StubServer,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A store too small to keep any response: agno's chained request gets OpenAI's
    previous_response_not_found, and agno sends the whole conversation instead."""
    script(upstream, weather_call, answers)
    with serve(upstream, response_store_bytes=100) as running:
        run_recipe("agno", running)
    assert_the_chosen_call_ran(upstream)
    assert capsys.readouterr().out.splitlines()[0] == ANSWER


# ------------------------------------------------------------------- the Vercel AI SDK


def run_node(script_path: Path, *args: str) -> str:
    """`node script_path args...` with the pinned packages of tests/js_clients: its
    standard output."""
    assert NODE is not None
    installed = JS_CLIENTS / "node_modules" / "ai"
    assert installed.is_dir(), "the AI SDK is not installed: make setup-test (npm ci)"
    done = subprocess.run(
        [NODE, str(script_path), *args], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@needs_node
def test_the_vercel_ai_sdk_recipe(
    server: BackgroundServer,
    upstream: StubServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    script(upstream, weather_call, answers)
    code = RECIPES["vercel-ai-sdk"]
    assert code.count(SERVER) == 1
    recipe = tmp_path / "recipe.mjs"
    recipe.write_text(code.replace(SERVER, server.base_url), encoding="utf-8")
    (tmp_path / "node_modules").symlink_to(JS_CLIENTS / "node_modules")  # its imports
    out = run_node(recipe).splitlines()
    assert_the_chosen_call_ran(upstream)
    assert_the_follow_up_saw_the_conversation(upstream)
    first, second, third = turns(upstream)
    assert out == [
        f"{ANSWER} ({tokens(first + second)} tokens)",
        f"{TOMORROW} ({tokens(third)} tokens)",
    ]


@needs_node
def test_the_vercel_ai_sdk_streams_a_tool_calling_conversation(
    server: BackgroundServer,
    upstream: StubServer,  # noqa: F811
) -> None:
    script(upstream, weather_call, answers)
    seen = json.loads(run_node(JS_CLIENTS / "stream_chain.mjs", server.base_url))
    assert_the_chosen_call_ran(upstream)
    assert_the_follow_up_saw_the_conversation(upstream)
    first, second, third = turns(upstream)
    assert seen == {
        "texts": [ANSWER, TOMORROW],
        "calls": [{"city": CHOSEN}],
        "tokens": [tokens(first + second), tokens(third)],
    }
    assert f"{CHOSEN}{OBSERVED}" in json.dumps(third[0].body)
