"""Stub responders that play a selector's model, and readers of its requests (no mocks of
our code: these answer over HTTP, through LiteLLM, like a provider would)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from langchain_core.messages import HumanMessage

from tests.helpers import stub_engine, stub_kwargs
from turnbon_graph import TurnEngine
from turnbon_graph.selectors import Selector
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

ASK = [HumanMessage("fix the failing test")]
COMMANDS = ["ls", "pytest -x", "cat a.py", "git status"]
_BLOCK = re.compile(r'<candidate index="(\d+)"[^>]*>\n(.*?)\n</candidate>', re.DOTALL)


def system_prompt(request: CapturedRequest) -> str:
    assert request.body is not None
    return str(request.body["messages"][0]["content"])


def user_prompt(request: CapturedRequest) -> str:
    assert request.body is not None
    return str(request.body["messages"][1]["content"])


def shown_actions(request: CapturedRequest) -> list[dict[str, Any]]:
    """The candidate actions a selector request shows, in display order."""
    return [json.loads(body) for _, body in _BLOCK.findall(user_prompt(request))]


def shown_commands(request: CapturedRequest) -> list[str]:
    return [str(a["tool_calls"][0]["args"]["command"]) for a in shown_actions(request)]


def prompt_is(prompt: str) -> Callable[[CapturedRequest], bool]:
    return lambda r: is_selector_request(r) and system_prompt(r) == prompt


class Model:
    """Answers selector requests with `decide(request)` (text, or a StubResponse sent
    as is) and reports distinct usage per call, so tests can check the record's sums."""

    def __init__(self, decide: Callable[[CapturedRequest], str | StubResponse]) -> None:
        self.decide = decide
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.requests: list[CapturedRequest] = []

    def __call__(self, request: CapturedRequest) -> StubResponse | dict[str, Any]:
        self.requests.append(request)
        out = self.decide(request)
        if isinstance(out, StubResponse):
            return out
        self.calls += 1
        prompt, completion = 100 + self.calls, self.calls
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        usage = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
        }
        return chat_completion(out, usage=usage)


def pick(index: int, reason: str = "scripted") -> str:
    return json.dumps({"reason": reason, "selected_index": index})


def prefers(*ranking: str) -> Callable[[CapturedRequest], str]:
    """A judge that picks the shown command ranked best, wherever it is shown."""

    def decide(request: CapturedRequest) -> str:
        shown = shown_commands(request)
        best = min(shown, key=lambda c: ranking.index(c) if c in ranking else len(ranking))
        return pick(shown.index(best))

    return decide


def script_generator(stub: StubServer, commands: list[str] = COMMANDS) -> None:
    """Generator calls answer `commands` in arrival order (then the last, repeated)."""
    stub.route(
        lambda r: not is_selector_request(r),
        *[
            chat_completion(
                tool_calls=[tool_call("shell", {"command": c})],
                reasoning_content=f"PRIVATE REASONING {i}",
            )
            for i, c in enumerate(commands)
        ],
    )


def script_fresh_batches(stub: StubServer) -> None:
    """Every generator call proposes a new command: step 0, step 1, ..."""
    counter = iter(range(1000))
    stub.route(
        lambda r: not is_selector_request(r),
        lambda _: chat_completion(
            tool_calls=[tool_call("shell", {"command": f"step {next(counter)}"})]
        ),
    )


def engine(stub: StubServer, selector: Selector, n: int = 4) -> TurnEngine:
    # max_concurrency=1: arrival order = script order, so commands map to indices
    return stub_engine(stub, n=n, selector=selector, max_concurrency=1)


def judge_options(stub: StubServer) -> dict[str, Any]:
    return {"completion_kwargs": stub_kwargs(stub.base_url)}
