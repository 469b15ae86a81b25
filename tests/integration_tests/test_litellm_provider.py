"""`model="turnbon/<inner model>"` through LiteLLM's own `completion`/`acompletion`: one
whole Turn-BoN turn on the stub per call (3 candidates, 1 selector call), answered with
the selector's choice as an ordinary `ModelResponse` whose usage covers every call."""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import litellm
import pytest

from turnbon_graph.litellm_provider import TurnBoNProvider, register, turnbon_record
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    error,
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


@contextmanager
def registered(stub: StubServer, **options: Any) -> Iterator[TurnBoNProvider]:
    """A provider like the fixture's with other options (one call per candidate)."""
    handler = register(
        TurnBoNProvider(
            n=3,
            native_n=False,
            selector="openai/stub",
            selector_kwargs={"api_base": stub.base_url, "api_key": "none"},
            **options,
        )
    )
    try:
        yield handler
    finally:
        handler.close()
        litellm.custom_provider_map = [
            e for e in litellm.custom_provider_map if e["custom_handler"] is not handler
        ]


async def test_every_candidate_failing_upstream_is_a_bad_gateway_without_the_key(
    stub: StubServer,
) -> None:
    stub.script(error(500, f"it broke (sent with {KEY})"))
    with registered(stub, max_retries=0), pytest.raises(litellm.BadGatewayError) as caught:
        await litellm.acompletion(**call_kwargs(stub))
    assert "All 3 candidate call(s)" in str(caught.value)
    assert KEY not in str(caught.value)


async def test_a_refused_key_is_an_authentication_error(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    # A refused key is the caller's (it passed the inner model's key): a 401 saying so.
    stub.script(error(401, f"invalid key {KEY}"))
    with pytest.raises(litellm.AuthenticationError) as refused:
        await litellm.acompletion(**call_kwargs(stub))
    assert "refused the key" in str(refused.value) and KEY not in str(refused.value)


async def test_every_candidate_refused_alike_is_litellms_error_of_that_status(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    said = "max_tokens is too large: this model supports at most 16384 completion tokens"
    stub.script(error(400, f"{said} (key {KEY})"))
    with pytest.raises(litellm.BadRequestError) as caught:
        await litellm.acompletion(**call_kwargs(stub))
    assert caught.value.status_code == 400
    assert caught.value.message.endswith(f"{said} (key [REDACTED])")  # its words, no key
    assert "All 3 candidate" not in caught.value.message
    stub.reset()
    stub.script(error(404, "The model `stub` does not exist"))
    with pytest.raises(litellm.NotFoundError) as missing:
        await litellm.acompletion(**call_kwargs(stub))
    assert missing.value.message.endswith("The model `stub` does not exist")


async def test_a_context_too_long_for_every_candidate_is_litellms_context_window_error(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    said = "This model's maximum context length is 8192 tokens; your messages had 9000"
    stub.script(error(400, said))
    with pytest.raises(litellm.ContextWindowExceededError) as caught:
        await litellm.acompletion(**call_kwargs(stub))
    assert caught.value.status_code == 400 and caught.value.message.endswith(said)


def rate_limits() -> list[StubResponse]:
    """429s asking to retry after 7, 20.5 and 3 s: one for each of 3 candidates (one
    call each), the longest rounded up 21 s."""
    return [error(429, "slow down", retry_after=seconds) for seconds in (7, 20.5, 3)]


async def test_a_rate_limit_on_every_candidate_is_a_rate_limit_error_with_its_retry_after(
    stub: StubServer,
) -> None:
    stub.script(*rate_limits())
    with registered(stub, max_retries=0), pytest.raises(litellm.RateLimitError) as caught:
        await litellm.acompletion(**call_kwargs(stub))
    assert caught.value.status_code == 429 and caught.value.message.endswith("slow down")
    assert caught.value.litellm_response_headers["retry-after"] == "21"
    assert caught.value.response.headers["retry-after"] == "21"


async def test_a_mixed_set_of_failures_is_a_bad_gateway(stub: StubServer) -> None:
    stub.script(error(400, "bad request"), error(500, "it broke"))
    with registered(stub, max_retries=0), pytest.raises(litellm.BadGatewayError) as caught:
        await litellm.acompletion(**call_kwargs(stub))
    assert "All 3 candidate call(s)" in caught.value.message


async def test_every_candidate_timing_out_is_litellms_timeout(stub: StubServer) -> None:
    stub.script(StubResponse(body=chat_completion("late"), delay=5))
    with registered(stub, max_retries=0, timeout=0.3), pytest.raises(litellm.Timeout) as caught:
        await litellm.acompletion(**call_kwargs(stub))
    assert "All 3 candidate call(s)" in caught.value.message


BAD_VALUES = [
    ("temperature", "hot", "temperature must be a number from 0 to 2"),
    ("max_tokens", -5, "max_tokens must be an integer from 1"),
    ("max_tokens", 10**12, "max_tokens must be an integer from 1 to 2147483647"),
    ("top_logprobs", 25, "top_logprobs must be an integer from 0 to 20"),
    ("tool_choice", "always", "tool_choice must be"),
    ("n", 2, "n must be 1"),
    ("audio", {"voice": "alloy", "format": "wav"}, "never audio"),
]
"""(field, value, what the refusal says): values both doors refuse before any call."""


@pytest.mark.parametrize(("field", "value", "says"), BAD_VALUES)
async def test_a_bad_value_is_a_bad_request_naming_its_field_before_any_call(
    stub: StubServer, provider: TurnBoNProvider, field: str, value: Any, says: str
) -> None:
    with pytest.raises(litellm.BadRequestError) as caught:
        await litellm.acompletion(**call_kwargs(stub, **{field: value}))
    assert says in caught.value.message
    assert stub.requests == []  # nothing went upstream


async def test_fields_that_change_nothing_are_accepted_and_not_sent_upstream(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    script_turns(stub)
    ignored = {"store": False, "service_tier": "auto", "prompt_cache_key": "k", "user": "ann"}
    vendor = {"chat_template_kwargs": {"enable_thinking": False}}
    response = await litellm.acompletion(
        **call_kwargs(stub, metadata={"run": "r-7"}, extra_body={"top_k": 5}, **ignored, **vendor)
    )
    assert_is_the_choice(response, stub)
    generator = [r.body or {} for r in stub.requests if not is_selector_request(r)]
    for sent in generator:
        assert not {*ignored, "metadata"} & set(sent)
        assert sent["chat_template_kwargs"] == {"enable_thinking": False} and sent["top_k"] == 5


def test_a_stream_carries_usage_only_when_asked_ending_in_a_chunk_with_no_choices(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    script_turns(stub)
    unasked = list(litellm.completion(**call_kwargs(stub, stream=True)))
    assert all(getattr(chunk, "usage", None) is None for chunk in unasked)
    stub.reset()
    script_turns(stub)
    asked = list(
        litellm.completion(**call_kwargs(stub, stream=True, stream_options={"include_usage": True}))
    )
    *deltas, last = asked
    assert last.choices == [] and (last.usage.prompt_tokens, last.usage.completion_tokens) == (
        44,
        28,
    )
    assert all(getattr(chunk, "usage", None) is None for chunk in deltas)


async def test_an_async_stream_asked_for_usage_ends_in_it(
    stub: StubServer, provider: TurnBoNProvider
) -> None:
    script_turns(stub)
    stream = await litellm.acompletion(
        **call_kwargs(stub, stream=True, stream_options={"include_usage": True})
    )
    chunks = [chunk async for chunk in stream]
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens == 72
    assert all(getattr(chunk, "usage", None) is None for chunk in chunks[:-1])
