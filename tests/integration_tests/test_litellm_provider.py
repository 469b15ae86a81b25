"""`model="turnbon/<inner model>"` through LiteLLM's own `completion`/`acompletion`: one
whole Turn-BoN turn on the stub per call (3 candidates, 1 selector call), answered with
the selector's choice as an ordinary `ModelResponse` whose usage covers every call."""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Iterator
from typing import Any

import litellm
import pytest

from turnbon_graph.litellm_provider import TurnBoNProvider, register, turnbon_record
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

MODEL = "turnbon/openai/stub"
KEY = "sk-test-provider-key-0123"
COMMANDS = ("ls", "pwd", "whoami")
CHOSEN = "pwd"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a shell command.",
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string"}},
                "required": ["command"],
            },
        },
    }
]
MESSAGES = [{"role": "user", "content": "Where am I?"}]
_BLOCK = re.compile(r'<candidate index="(\d+)"[^>]*>\n(.*?)\n</candidate>', re.DOTALL)


def choosing(*targets: str) -> Any:
    """A selector reply that picks, whatever order it was shown, the first candidate
    whose action mentions one of `targets`."""

    def answer(request: CapturedRequest) -> dict[str, Any]:
        assert request.body is not None
        shown = _BLOCK.findall(request.body["messages"][1]["content"])
        index = next(int(i) for i, action in shown if any(t in action for t in targets))
        return chat_completion(
            json.dumps({"reason": "it answers the task", "selected_index": index})
        )

    return answer


def script_turns(
    stub: StubServer,
    commands: tuple[str, ...] = COMMANDS,
    chosen: str = CHOSEN,
    *,
    text: bool = False,
) -> None:
    """Generator calls propose `commands` in turn (by arrival), as shell tool calls or
    (`text`) as plain answers; the selector picks the one with `chosen`."""
    counter = itertools.count()

    def generator(request: CapturedRequest) -> dict[str, Any]:
        command = commands[next(counter) % len(commands)]
        if text:
            return chat_completion(command)
        return chat_completion(tool_calls=[tool_call("shell", {"command": command})])

    stub.route(is_selector_request, choosing(chosen))
    stub.script(generator)


def counts(stub: StubServer) -> tuple[int, int]:
    """(generator requests, selector requests) the stub saw."""
    selector = sum(1 for r in stub.requests if is_selector_request(r))
    return len(stub.requests) - selector, selector


@pytest.fixture
def provider(stub: StubServer) -> Iterator[TurnBoNProvider]:
    handler = register(
        TurnBoNProvider(
            n=3,
            selector="openai/stub",
            selector_kwargs={"api_base": stub.base_url, "api_key": "none"},
        )
    )
    yield handler
    handler.close()
    litellm.custom_provider_map = [
        e for e in litellm.custom_provider_map if e["custom_handler"] is not handler
    ]


def call_kwargs(stub: StubServer, **extra: Any) -> dict[str, Any]:
    return {
        "model": MODEL,
        "messages": MESSAGES,
        "tools": TOOLS,
        "api_base": stub.base_url,
        "api_key": KEY,
        **extra,
    }


def assert_is_the_choice(response: Any, stub: StubServer) -> None:
    (call,) = response.choices[0].message.tool_calls
    assert json.loads(call.function.arguments) == {"command": CHOSEN}
    assert response.choices[0].finish_reason == "tool_calls"
    assert counts(stub) == (3, 1)
    # the stub's default usage is 11 prompt + 7 completion tokens per call: 4 calls
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (44, 28)
    assert response.usage.total_tokens == 72
    record = turnbon_record(response)
    assert record is not None and record.selector == "llm:openai/stub"
    assert record.candidates[record.selected_index].tool_calls[0]["args"] == {"command": CHOSEN}
    assert KEY not in json.dumps(record.to_json())


async def test_acompletion_returns_the_selectors_choice(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    script_turns(stub)
    response = await litellm.acompletion(**call_kwargs(stub))
    assert_is_the_choice(response, stub)
    # the inner calls went to the stub with the caller's key and tools
    generator = [r for r in stub.requests if not is_selector_request(r)]
    assert all(r.header("authorization") == f"Bearer {KEY}" for r in generator)
    assert all(r.body is not None and r.body["tools"] == TOOLS for r in generator)


def test_completion_returns_the_selectors_choice(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    script_turns(stub)
    assert_is_the_choice(litellm.completion(**call_kwargs(stub)), stub)


def test_completion_from_a_plain_thread_with_no_event_loop(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    script_turns(stub)
    results: list[Any] = []
    errors: list[BaseException] = []

    def work() -> None:
        try:
            results.append(litellm.completion(**call_kwargs(stub)))
        except BaseException as exc:
            errors.append(exc)

    worker = threading.Thread(target=work)
    worker.start()
    worker.join(timeout=60)
    assert not errors and len(results) == 1
    assert_is_the_choice(results[0], stub)


def _assembled(chunks: list[Any]) -> tuple[str, list[tuple[str, str]], Any]:
    built = litellm.stream_chunk_builder(chunks)
    assert built is not None
    message = built.choices[0].message
    calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
    return message.content or "", calls, built.usage


def _whole(response: Any) -> tuple[str, list[tuple[str, str]], Any]:
    message = response.choices[0].message
    calls = [(c.function.name, c.function.arguments) for c in message.tool_calls or []]
    return message.content or "", calls, response.usage


def test_streamed_chunks_assemble_to_the_same_message(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    script_turns(stub)
    whole = _whole(litellm.completion(**call_kwargs(stub)))
    stub.reset()
    script_turns(stub)
    chunks = list(litellm.completion(**call_kwargs(stub, stream=True)))
    content, calls, usage = _assembled(chunks)
    assert (content, calls) == whole[:2] and calls == [("shell", json.dumps({"command": CHOSEN}))]
    assert (usage.prompt_tokens, usage.completion_tokens) == (44, 28)
    assert counts(stub) == (3, 1)


async def test_async_streamed_chunks_assemble_to_the_same_message(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    script_turns(stub)
    stream = await litellm.acompletion(**call_kwargs(stub, stream=True))
    chunks = [chunk async for chunk in stream]
    _, calls, usage = _assembled(chunks)
    assert calls == [("shell", json.dumps({"command": CHOSEN}))]
    assert (usage.prompt_tokens, usage.completion_tokens) == (44, 28)


async def test_harness_style_messages_are_accepted(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    script_turns(stub)
    history = [
        {"role": "system", "content": "You run shell commands."},
        {"role": "user", "content": [{"type": "text", "text": "Where am I?"}]},
        # no "content" key at all, as SWE-agent-style harnesses replay a tool turn
        {"role": "assistant", "tool_calls": [tool_call("shell", {"command": "ls"}, id="c1")]},
        {"role": "tool", "tool_call_id": "c1", "name": "shell", "content": "README.md"},
        {"role": "assistant", "content": None, "tool_calls": [tool_call("shell", {}, id="c2")]},
        {"role": "tool", "tool_call_id": "c2", "content": "error: no command"},
    ]
    response = await litellm.acompletion(**call_kwargs(stub, messages=history))
    assert_is_the_choice(response, stub)
    sent = next(r for r in stub.requests if not is_selector_request(r))
    assert sent.body is not None
    roles = [m["role"] for m in sent.body["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "assistant", "tool"]
    assert sent.body["messages"][2]["tool_calls"][0]["id"] == "c1"
    tool = sent.body["messages"][3]
    assert (tool["tool_call_id"], tool["content"]) == ("c1", "README.md")


async def test_per_call_settings_reach_the_candidates_only(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    script_turns(stub)
    forced = {"type": "function", "function": {"name": "shell"}}
    await litellm.acompletion(**call_kwargs(stub, tool_choice=forced, stop=["END"]))
    generator = [r.body for r in stub.requests if not is_selector_request(r)]
    assert all(
        b is not None and b["tool_choice"] == forced and b["stop"] == ["END"] for b in generator
    )
    (selector,) = [r.body for r in stub.requests if is_selector_request(r)]
    assert selector is not None and "tool_choice" not in selector


async def test_one_engine_per_inner_model_and_connection(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    script_turns(stub)
    await litellm.acompletion(**call_kwargs(stub))
    await litellm.acompletion(**call_kwargs(stub))
    assert len(provider._engines) == 1
    await litellm.acompletion(**call_kwargs(stub, api_key="sk-another-key-4567"))
    assert len(provider._engines) == 2


async def test_every_candidate_failing_is_a_bad_gateway_without_the_key(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    from turnbon_graph.testing import error

    stub.script(error(404, f"no such model (sent with {KEY})"))
    with pytest.raises(litellm.BadGatewayError) as caught:
        await litellm.acompletion(**call_kwargs(stub))
    assert "All 3 candidate call(s)" in str(caught.value)
    assert KEY not in str(caught.value)
    # A refused key is the caller's (it passed the inner model's key): a 401 saying so.
    stub.reset()
    stub.script(error(401, f"invalid key {KEY}"))
    with pytest.raises(litellm.AuthenticationError) as refused:
        await litellm.acompletion(**call_kwargs(stub))
    assert "refused the key" in str(refused.value) and KEY not in str(refused.value)
