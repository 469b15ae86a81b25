"""Tests of the loopback stub server, driven through LiteLLM's real HTTP path."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import litellm
import pytest

# litellm.exceptions, not litellm.*: the package root does not re-export them for mypy.
from litellm.exceptions import (
    APIConnectionError,
    InternalServerError,
    RateLimitError,
    ServiceUnavailableError,
    Timeout,
)

from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    choice,
    error,
    is_selector_request,
    tool_call,
)

litellm.suppress_debug_info = True

USER = [{"role": "user", "content": "hi"}]
SELECTOR = [
    {"role": "system", "content": "You are the selector. Pick the best candidate."},
    {"role": "user", "content": "candidates: ..."},
]


async def acall(stub: StubServer, messages: list[dict[str, Any]] = USER, **kwargs: Any) -> Any:
    return await litellm.acompletion(
        model="openai/stub",
        api_base=stub.base_url,
        api_key="sk-test",
        messages=messages,
        num_retries=0,
        max_retries=0,
        **kwargs,
    )


async def wait_for(predicate: Callable[[], bool], within: float = 30.0) -> bool:
    """Poll until predicate() is true; a generous bound, no timing thresholds. (At 2 s,
    a process's first LiteLLM call on a loaded machine had not reached the stub yet.)"""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.01)
    return bool(predicate())


def http(url: str, method: str = "GET", data: bytes | None = None) -> tuple[int, Any]:
    req = urllib.request.Request(url, method=method, data=data)
    req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


# ----------------------------------------------------------------- replies


async def test_text_reply(stub: StubServer) -> None:
    usage = {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8}
    stub.script(chat_completion("hello there", usage=usage))

    resp = await acall(stub)

    assert resp.choices[0].message.content == "hello there"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage.prompt_tokens == 5
    assert resp.usage.completion_tokens == 3
    assert resp.usage.total_tokens == 8


async def test_tool_call_reply(stub: StubServer) -> None:
    stub.script(chat_completion(tool_calls=[tool_call("search", {"q": "x", "k": 2}, id="call_1")]))

    resp = await acall(stub)

    msg = resp.choices[0].message
    assert resp.choices[0].finish_reason == "tool_calls"
    assert len(msg.tool_calls) == 1
    call = msg.tool_calls[0]
    assert call.id == "call_1"
    assert call.function.name == "search"
    assert json.loads(call.function.arguments) == {"q": "x", "k": 2}


async def test_native_n_choices(stub: StubServer) -> None:
    stub.script(chat_completion(choices=[choice("a"), choice("b", index=1)]))

    resp = await acall(stub, n=2)

    assert [c.message.content for c in resp.choices] == ["a", "b"]


def test_tool_call_helper_generates_ids() -> None:
    a, b = tool_call("f", {}), tool_call("f", {})
    assert a["id"].startswith("call_")
    assert a["id"] != b["id"]
    assert a["type"] == "function"
    assert a["function"] == {"name": "f", "arguments": "{}"}


def test_sync_caller(stub: StubServer) -> None:
    # The server runs on its own loop, so blocking clients work from sync tests too.
    stub.script(chat_completion("sync ok"))
    resp = litellm.completion(
        model="openai/stub",
        api_base=stub.base_url,
        api_key="sk-test",
        messages=USER,
        num_retries=0,
        max_retries=0,
    )
    assert resp.choices[0].message.content == "sync ok"


# ----------------------------------------------------------------- routing


async def test_selector_routing(stub: StubServer) -> None:
    stub.route(is_selector_request, chat_completion("selector says 1"))
    stub.script(chat_completion("candidate"))

    gen = await acall(stub)
    sel = await acall(stub, SELECTOR)

    assert gen.choices[0].message.content == "candidate"
    assert sel.choices[0].message.content == "selector says 1"
    assert [is_selector_request(r) for r in stub.requests] == [False, True]


def test_is_selector_request_content_parts() -> None:
    parts = [{"type": "text", "text": "You are the selector of ..."}]
    req = CapturedRequest(
        "/v1/chat/completions", {}, {"messages": [{"role": "system", "content": parts}]}, 0.0
    )
    assert is_selector_request(req)
    not_system = CapturedRequest(
        "/", {}, {"messages": [{"role": "user", "content": "You are the selector"}]}, 0.0
    )
    assert not is_selector_request(not_system)
    assert not is_selector_request(CapturedRequest("/", {}, None, 0.0))


async def test_repeat_last_true(stub: StubServer) -> None:
    stub.script(chat_completion("a"), chat_completion("b"))

    got = [(await acall(stub)).choices[0].message.content for _ in range(3)]

    assert got == ["a", "b", "b"]


async def test_repeat_last_false_falls_through(stub: StubServer) -> None:
    stub.script(chat_completion("once"), repeat_last=False)
    stub.script(chat_completion("second route"), repeat_last=False)

    got = [(await acall(stub)).choices[0].message.content for _ in range(3)]

    # Both routes exhausted, so the default answers last.
    assert got == ["once", "second route", "ok"]


async def test_concurrent_requests_each_consume_one_responder(stub: StubServer) -> None:
    stub.script(*(chat_completion(c) for c in "abcd"), repeat_last=False)

    replies = await asyncio.gather(*(acall(stub) for _ in range(5)))

    assert sorted(r.choices[0].message.content for r in replies) == ["a", "b", "c", "d", "ok"]
    assert len(stub.requests) == 5


async def test_matcher_may_read_requests(stub: StubServer) -> None:
    # Matchers run under the server's lock; it must be re-entrant.
    stub.route(lambda _: len(stub.requests) > 1, chat_completion("second or later"))

    first = await acall(stub)
    second = await acall(stub)

    assert first.choices[0].message.content == "ok"
    assert second.choices[0].message.content == "second or later"


async def test_callable_responder_and_default(stub: StubServer) -> None:
    def echo(req: CapturedRequest) -> dict[str, Any]:
        assert req.body is not None
        return chat_completion(f"echo {req.body['messages'][-1]['content']}")

    stub.route(lambda r: r.body is not None and r.body.get("n") == 3, echo)

    echoed = await acall(stub, n=3)
    fallback = await acall(stub)

    assert echoed.choices[0].message.content == "echo hi"
    assert fallback.choices[0].message.content == "ok"


async def test_custom_default() -> None:
    with StubServer(default=chat_completion("custom")) as server:
        resp = await acall(server)
    assert resp.choices[0].message.content == "custom"


async def test_responder_exception_becomes_500(stub: StubServer) -> None:
    def broken(_: CapturedRequest) -> dict[str, Any]:
        raise ValueError("boom")

    stub.script(broken)

    with pytest.raises(InternalServerError):
        await acall(stub)
    assert [type(e) for e in stub.responder_errors] == [ValueError]


async def test_reset(stub: StubServer) -> None:
    stub.script(chat_completion("scripted"))
    await acall(stub)

    stub.reset()

    assert stub.requests == []
    assert stub.disconnects == 0
    assert (await acall(stub)).choices[0].message.content == "ok"


# ----------------------------------------------------------------- capture


async def test_request_capture(stub: StubServer) -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "search",
                "description": "search",
                "parameters": {"type": "object", "properties": {"q": {"type": "string"}}},
            },
        }
    ]
    response_format = {"type": "json_object"}

    await acall(stub, tools=tools, tool_choice="required", n=2, response_format=response_format)

    (req,) = stub.requests
    assert req.path == "/v1/chat/completions"
    assert req.body is not None
    assert req.body["tools"] == tools
    assert req.body["tool_choice"] == "required"
    assert req.body["n"] == 2
    assert req.body["response_format"] == response_format
    assert req.body["messages"] == USER
    assert req.header("authorization") == "Bearer sk-test"
    assert "Bearer sk-test" in req.headers.values()


async def test_requests_in_arrival_order(stub: StubServer) -> None:
    before = time.monotonic()
    for i in range(3):
        await acall(stub, [{"role": "user", "content": str(i)}])
    reqs = stub.requests
    assert [r.body["messages"][0]["content"] for r in reqs if r.body] == ["0", "1", "2"]
    assert before <= reqs[0].received_at <= reqs[1].received_at <= reqs[2].received_at


# ----------------------------------------------------------------- errors


async def test_500_is_internal_server_error_without_retries(stub: StubServer) -> None:
    stub.script(error(500))

    with pytest.raises(InternalServerError) as info:
        await acall(stub)

    assert info.value.status_code == 500
    # num_retries=0 / max_retries=0 really stop both LiteLLM and the OpenAI SDK retrying.
    assert len(stub.requests) == 1


async def test_503_is_service_unavailable(stub: StubServer) -> None:
    stub.script(error(503))

    with pytest.raises(ServiceUnavailableError) as info:
        await acall(stub)

    assert info.value.status_code == 503


async def test_429_retry_after_is_reachable(stub: StubServer) -> None:
    stub.script(error(429, "slow down", retry_after=7))

    with pytest.raises(RateLimitError) as info:
        await acall(stub)

    exc = info.value
    assert exc.status_code == 429
    assert "slow down" in exc.message
    # exc.response is the upstream httpx.Response (typed, case-insensitive headers).
    assert exc.response.headers["retry-after"] == "7"
    # Also set dynamically by LiteLLM's exception mapping (untyped, hence getattr).
    assert getattr(exc, "litellm_response_headers")["Retry-After"] == "7"  # noqa: B009
    assert exc.headers is None  # deliberately not populated from upstream headers
    assert len(stub.requests) == 1


async def test_malformed_body(stub: StubServer) -> None:
    stub.script(StubResponse(body="{not json"))

    # LiteLLM maps the JSON decode failure to a 500-style InternalServerError.
    with pytest.raises(InternalServerError):
        await acall(stub)


async def test_dropped_connection(stub: StubServer) -> None:
    stub.script(StubResponse(drop=True))

    # The OpenAI SDK raises APIConnectionError, but LiteLLM's OpenAI handler wraps it
    # with status 500, so it surfaces as InternalServerError, not APIConnectionError.
    with pytest.raises(InternalServerError) as info:
        await acall(stub)

    assert not isinstance(info.value, APIConnectionError)
    assert "Connection error" in info.value.message
    assert len(stub.requests) == 1


async def test_timeout_and_disconnect(stub: StubServer) -> None:
    stub.script(StubResponse(body=chat_completion("late"), delay=3.0))

    with pytest.raises(Timeout):
        await acall(stub, timeout=0.2)

    # The client closes the socket on timeout; the delaying handler notices.
    assert await wait_for(lambda: stub.disconnects == 1)


async def test_cancellation_counts_disconnect(stub: StubServer) -> None:
    stub.script(StubResponse(body=chat_completion("late"), delay=3.0))

    task = asyncio.create_task(acall(stub))
    assert await wait_for(lambda: len(stub.requests) == 1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await wait_for(lambda: stub.disconnects == 1)


async def test_delay_then_success(stub: StubServer) -> None:
    stub.script(StubResponse(body=chat_completion("after delay"), delay=0.05))

    resp = await acall(stub)

    assert resp.choices[0].message.content == "after delay"
    assert stub.disconnects == 0


# ----------------------------------------------------------------- raw HTTP


def test_models_and_unknown_paths(stub: StubServer) -> None:
    status, body = http(f"{stub.base_url}/models")
    assert status == 200
    assert body["object"] == "list"
    assert body["data"][0]["id"] == "stub"

    status, body = http(f"{stub.base_url}/nope")
    assert status == 404
    assert "error" in body
    assert stub.requests == []


def test_chat_completions_without_v1_prefix(stub: StubServer) -> None:
    root = stub.base_url.removesuffix("/v1")
    status, body = http(f"{root}/chat/completions", "POST", json.dumps({"messages": USER}).encode())
    assert status == 200
    assert body["choices"][0]["message"]["content"] == "ok"
    assert stub.requests[0].path == "/chat/completions"


def test_non_json_request_body_is_captured_as_none(stub: StubServer) -> None:
    status, _ = http(f"{stub.base_url}/chat/completions", "POST", b"not json")
    assert status == 200
    assert stub.requests[0].body is None


def test_error_helper() -> None:
    resp = error(429, "busy", retry_after=1.5, delay=0.1)
    assert resp.status == 429
    assert resp.headers == {"Retry-After": "1.5"}
    assert resp.delay == 0.1
    assert isinstance(resp.body, dict)
    assert set(resp.body["error"]) >= {"message", "type", "code"}
    assert resp.body["error"]["message"] == "busy"
    assert error(500).headers == {}


def test_lifecycle() -> None:
    server = StubServer()
    with pytest.raises(RuntimeError):
        _ = server.base_url
    server.start()
    try:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert server.base_url.endswith("/v1")
        with pytest.raises(RuntimeError):
            server.start()
    finally:
        server.stop()
    server.stop()  # idempotent
    with pytest.raises(RuntimeError):
        _ = server.base_url
