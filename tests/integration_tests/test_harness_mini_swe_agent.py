"""mini-swe-agent, unchanged, on Turn-BoN through both doors: its `DefaultAgent` with a
`LocalEnvironment` in a temp dir and its `LitellmModel`, once as
`turnbon/openai/stub` with the provider registered and once as `openai/turnbon` against
`turnbon serve`. Each turn the stub proposes three bash commands and the selector picks
one; every command the agent ran must be that pick, and it submits."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import litellm
import pytest

# mini-swe-agent prints a banner and reads a global config dir at import time
os.environ.setdefault("MSWEA_SILENT_STARTUP", "1")
os.environ.setdefault("MSWEA_GLOBAL_CONFIG_DIR", tempfile.mkdtemp(prefix="mswea-config-"))

from minisweagent.agents.default import DefaultAgent
from minisweagent.environments.local import LocalEnvironment
from minisweagent.models.litellm_model import LitellmModel

from tests.integration_tests.test_litellm_provider import choosing
from turnbon_graph.config import turn_config
from turnbon_graph.litellm_provider import TurnBoNProvider, register
from turnbon_graph.serve import BackgroundServer, ServeConfig
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

SUBMIT = "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT && cat hello.txt"
TURNS = [
    # the selector's pick is never the first to arrive
    ["echo bye >hello.txt", "echo hi >hello.txt", "rm -f hello.txt"],
    ["cat hello.txt", "ls -la", SUBMIT],
]
PICKS = ["echo hi >hello.txt", SUBMIT]


def script_episode(stub: StubServer) -> None:
    """Generator calls get the current turn's commands in order (the turn is how many
    assistant messages the request carries); the selector picks the turn's target."""
    counters = [itertools.count() for _ in TURNS]

    def generator(request: CapturedRequest) -> dict[str, Any]:
        assert request.body is not None
        turn = sum(1 for m in request.body["messages"] if m["role"] == "assistant")
        command = TURNS[turn][next(counters[turn]) % 3]
        return chat_completion(
            f"THOUGHT: {command}", tool_calls=[tool_call("bash", {"command": command})]
        )

    stub.route(is_selector_request, choosing("echo hi", "COMPLETE_TASK"))
    stub.script(generator)


def run_agent(model: LitellmModel, workdir: Path) -> tuple[dict[str, Any], list[str]]:
    agent = DefaultAgent(
        model,
        LocalEnvironment(cwd=str(workdir)),
        system_template="You solve tasks with bash commands.",
        instance_template="{{task}}",
        step_limit=5,
        cost_limit=0,
    )
    result = agent.run("Write hi into hello.txt, then submit.")
    ran = [
        action["command"]
        for message in agent.messages
        for action in message.get("extra", {}).get("actions", [])
    ]
    return result, ran


def assert_the_picks_ran_and_it_submitted(
    result: dict[str, Any], ran: list[str], workdir: Path, stub: StubServer
) -> None:
    assert ran == PICKS
    assert result["exit_status"] == "Submitted" and result["submission"] == "hi\n"
    assert (workdir / "hello.txt").read_text() == "hi\n"
    selector = sum(1 for r in stub.requests if is_selector_request(r))
    assert (len(stub.requests) - selector, selector) == (6, 2)  # 2 turns of 3 + 1


@pytest.fixture
def provider() -> Iterator[TurnBoNProvider]:
    handler = register(TurnBoNProvider(n=3, seed=0))  # the default selector: the inner model
    yield handler
    handler.close()
    litellm.custom_provider_map = [
        e for e in litellm.custom_provider_map if e["custom_handler"] is not handler
    ]


def test_mini_swe_agent_through_the_litellm_provider(
    stub: StubServer, provider: TurnBoNProvider, tmp_path: Path
) -> None:
    script_episode(stub)
    model = LitellmModel(
        model_name="turnbon/openai/stub",
        model_kwargs={"api_base": stub.base_url, "api_key": "none", "drop_params": True},
        cost_tracking="ignore_errors",  # LiteLLM has no price for turnbon/...: see the record
    )
    result, ran = run_agent(model, tmp_path)
    assert_the_picks_ran_and_it_submitted(result, ran, tmp_path, stub)


def test_mini_swe_agent_through_turnbon_serve(stub: StubServer, tmp_path: Path) -> None:
    script_episode(stub)
    turn = turn_config(n=3, seed=0, completion_kwargs={"api_base": stub.base_url, "api_key": "x"})
    with BackgroundServer(ServeConfig(model="openai/stub", turn=turn)) as server:
        model = LitellmModel(
            model_name="openai/turnbon",
            model_kwargs={"api_base": server.base_url, "api_key": "none", "drop_params": True},
            cost_tracking="ignore_errors",
        )
        result, ran = run_agent(model, tmp_path)
    assert_the_picks_ran_and_it_submitted(result, ran, tmp_path, stub)
