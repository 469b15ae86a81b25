"""`turnbon serve` under abuse, each through the real command or server and a real client:
a large body is read off the event loop (`/health` answers meanwhile), text that is not
valid UTF-8 is a 400 before any upstream call (and a `BadRequestError` from the
`turnbon/` LiteLLM provider), a client that leaves mid-body is one log line, and the stub
behind `--model stub` keeps a bounded log of the requests it saw."""

from __future__ import annotations

import gc
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx
import litellm
import pytest
import uvicorn

from tests.integration_tests.test_litellm_provider import provider  # noqa: F401  (fixture)
from tests.integration_tests.test_serve_guards import ServeCommand, serve_config
from turnbon_graph.litellm_provider import TurnBoNProvider
from turnbon_graph.serve import BackgroundServer
from turnbon_graph.serve.runner import run_server
from turnbon_graph.testing import StubServer, chat_completion, last_user_text


@pytest.fixture(scope="module")
def command() -> Iterator[ServeCommand]:
    """`turnbon serve --model stub` in a process of its own (so that the test's client
    shares no interpreter with it), at --log-level info."""
    running = ServeCommand("--model", "stub", "-n", "2")
    try:
        running.base_url  # noqa: B018 - started
        yield running
    finally:
        running.stop()


@pytest.fixture
def server(stub: StubServer) -> Iterator[BackgroundServer]:
    with BackgroundServer(serve_config(stub)) as running:
        yield running


# ---------------------------------------------------------------------- large bodies

ITEMS = 90_000
"""Messages in the large body: about 9.7 MiB of JSON, under the 10 MiB limit."""


def large_body(endpoint: str) -> bytes:
    """A large body of many short messages whose last has a role no API knows: read
    whole (parsed, checked, converted) and only then refused, a 400 with no turn."""
    items: list[dict[str, Any]] = [{"role": "user", "content": "x" * 80}] * ITEMS
    items = [*items, {"role": "narrator", "content": "the end"}]
    field = "messages" if endpoint == "chat/completions" else "input"
    return json.dumps({"model": "turnbon", field: items}).encode()


def test_turnbon_serve_freezes_what_lives_as_long_as_it(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The process `turnbon serve` owns starts serving with LiteLLM and the app out of
    the collector's full passes, each of which held every request up for a quarter of a
    second (benchmarks/serve_large_body.py); a server embedded in a process of the
    user's (`BackgroundServer`) leaves that process's collector alone."""
    seen: list[tuple[int, bool]] = []

    def serving(self: uvicorn.Server, sockets: Any = None) -> None:
        seen.append((gc.get_freeze_count(), "litellm" in sys.modules))

    monkeypatch.setattr(uvicorn.Server, "run", serving)
    gc.unfreeze()
    try:
        run_server(serve_config(stub))
        [(frozen, litellm_loaded)] = seen
        assert frozen > 10_000 and litellm_loaded
        monkeypatch.undo()  # a real server next
        gc.unfreeze()
        with BackgroundServer(serve_config(stub)) as running:
            running.base_url  # noqa: B018 - started
            assert gc.get_freeze_count() == 0
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("endpoint", ["chat/completions", "responses"])
def test_health_answers_while_a_large_body_is_read(command: ServeCommand, endpoint: str) -> None:
    body = large_body(endpoint)
    health = command.base_url.removesuffix("/v1") + "/health"
    sent: dict[str, Any] = {}

    def send() -> None:
        started = time.monotonic()
        sent["response"] = httpx.post(f"{command.base_url}/{endpoint}", content=body, timeout=300)
        sent["took"] = time.monotonic() - started

    waits: list[float] = []
    with httpx.Client(timeout=300) as client:
        assert client.get(health).status_code == 200  # connected before the body goes
        sender = threading.Thread(target=send)
        sender.start()
        while sender.is_alive():
            started = time.monotonic()
            assert client.get(health).status_code == 200
            waits.append(time.monotonic() - started)
        sender.join()
    response = sent["response"]
    assert response.status_code == 400, response.text
    assert "narrator" in response.json()["error"]["message"]  # read to its last message
    # the loop answered all along, its longest wait a fraction of the body's time (about
    # 0.1 to 0.2 alone, up to 0.36 within the whole suite on 2 busy cores; 0.7 to 0.9 when
    # the body was read on the loop): what remains is what holds the interpreter lock on
    # the reading thread, the scan for the JSON's depth, its parse and the garbage
    # collector's full passes over the objects made
    assert max(waits) < sent["took"] / 2, (max(waits), sent["took"], len(waits))


# ---------------------------------------------------------------------- UTF-8

SURROGATE = "\ud800"
"""A lone UTF-16 surrogate: JSON spells it ("\\ud800"), UTF-8 cannot encode it."""
TEXT = [{"role": "user", "content": "what next?"}]
CALL = {"id": "call_1", "type": "function", "function": {"name": "shell", "arguments": "{}"}}


def with_arguments(arguments: str) -> list[dict[str, Any]]:
    """A conversation whose assistant called a tool with `arguments` (JSON text)."""
    call = {**CALL, "function": {"name": "shell", "arguments": arguments}}
    return [
        *TEXT,
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "done"},
    ]


CHAT_BODIES = {
    "model": ({"model": f"turnbon{SURROGATE}", "messages": TEXT}, "model"),
    "content": ({"messages": [{"role": "user", "content": f"hi {SURROGATE}"}]}, "messages"),
    "content part": (
        {"messages": [{"role": "user", "content": [{"type": "text", "text": SURROGATE}]}]},
        "messages",
    ),
    "a key": ({"messages": [{"role": "user", "content": "hi", SURROGATE: 1}]}, "messages"),
    "a field name": ({"messages": TEXT, SURROGATE: 1}, "\\ud800"),
    "arguments": (
        {"messages": with_arguments(json.dumps({"q": SURROGATE}, ensure_ascii=False))},
        "messages",
    ),
    "arguments' JSON escape": ({"messages": with_arguments('{"q": "\\ud800"}')}, "messages"),
    "an ignored field": ({"messages": TEXT, "user": SURROGATE}, "user"),
    "a tool": (
        {
            "messages": TEXT,
            "tools": [{"type": "function", "function": {"name": "f", "description": SURROGATE}}],
        },
        "tools",
    ),
}
RESPONSES_BODIES = {
    "model": ({"model": SURROGATE, "input": "hi"}, "model"),
    "input text": ({"input": f"hi {SURROGATE}"}, "input"),
    "input item": ({"input": [{"role": "user", "content": SURROGATE}]}, "input"),
    "instructions": ({"input": "hi", "instructions": SURROGATE}, "instructions"),
    "metadata": ({"input": "hi", "metadata": {"k": SURROGATE}}, "metadata"),
    "function call": (
        {
            "input": [
                {"role": "user", "content": "hi"},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": SURROGATE},
                {"type": "function_call_output", "call_id": "c", "output": "done"},
            ]
        },
        "input",
    ),
}


def assert_refused(response: httpx.Response, param: str, stub: StubServer) -> None:
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["code"] == "invalid_request"
    assert error["param"] == param
    assert "not valid UTF-8 text" in error["message"] and "\\ud800" in error["message"]
    assert stub.requests == []  # refused before any upstream call


SURROGATE_CASES = [
    *(
        (f"chat/completions: {case}", "chat/completions", *given)
        for case, given in CHAT_BODIES.items()
    ),
    *((f"responses: {case}", "responses", *given) for case, given in RESPONSES_BODIES.items()),
]


@pytest.mark.parametrize(
    ("endpoint", "body", "param"),
    [case[1:] for case in SURROGATE_CASES],
    ids=[case[0] for case in SURROGATE_CASES],
)
def test_a_lone_surrogate_anywhere_is_a_400_before_any_call(
    stub: StubServer, server: BackgroundServer, endpoint: str, body: dict[str, Any], param: str
) -> None:
    # json.dumps spells the surrogate as JSON's escape, as Python's requests and
    # JavaScript's JSON.stringify send it (the openai SDK cannot encode it at all)
    response = httpx.post(f"{server.base_url}/{endpoint}", content=json.dumps(body))
    assert_refused(response, param, stub)


def test_a_surrogate_sent_as_utf8_bytes_and_bytes_that_are_not_utf8_are_400s(
    stub: StubServer, server: BackgroundServer
) -> None:
    url = f"{server.base_url}/chat/completions"
    encoded = b'{"messages": [{"role": "user", "content": "hi \xed\xa0\x80"}]}'  # UTF-8's form
    assert_refused(httpx.post(url, content=encoded), "messages", stub)
    response = httpx.post(url, content=b'{"messages": [{"role": "user", "content": "\xff"}]}')
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_utf8"
    assert "not valid UTF-8 text (at byte " in response.json()["error"]["message"]
    assert stub.requests == []


def test_a_surrogate_pair_is_one_character_and_answered(
    stub: StubServer, server: BackgroundServer
) -> None:
    stub.script(chat_completion("fine"))
    body = {"messages": [{"role": "user", "content": "hi \ud83d\ude00"}]}  # one emoji
    response = httpx.post(f"{server.base_url}/chat/completions", content=json.dumps(body))
    assert response.status_code == 200
    assert last_user_text(stub.requests[0]) == "hi \U0001f600"


async def test_the_litellm_provider_refuses_a_surrogate_before_any_call(
    stub: StubServer,
    provider: TurnBoNProvider,  # noqa: F811
) -> None:
    with pytest.raises(litellm.BadRequestError) as caught:
        await litellm.acompletion(
            model="turnbon/openai/stub",
            messages=with_arguments('{"q": "\\ud800"}'),
            api_base=stub.base_url,
            api_key="none",
        )
    assert "messages[1].tool_calls[0].function.arguments.q is not valid UTF-8" in str(caught.value)
    assert stub.requests == []


# ---------------------------------------------------------------------- a client leaves


def leave_mid_body(base_url: str) -> None:
    """Headers and 8 of the 1,000 bytes they announce, then the connection closed."""
    port = int(base_url.rsplit(":", 1)[1].removesuffix("/v1"))
    with socket.create_connection(("127.0.0.1", port)) as conn:
        conn.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n"
            b'Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"model"'
        )


def wait_for(lines: list[str], text: str, count: int) -> None:
    """Until `count` lines of `lines` (a process's output, growing) have `text`, or a
    traceback has appeared (the test fails on it then)."""
    deadline = time.monotonic() + 60
    while sum(text in line for line in lines) < count and time.monotonic() < deadline:
        if any("Traceback" in line for line in lines):
            return
        time.sleep(0.05)


def test_a_client_that_leaves_mid_body_is_one_log_line(command: ServeCommand) -> None:
    before = len(command.stderr)
    said = "the client left after 8 of the 1,000 bytes of its body"
    for count in (1, 2):  # the second is logged after the first was handled whole
        leave_mid_body(command.base_url)
        wait_for(command.stderr, said, count)
    logged = command.stderr[before:]
    assert not any("Traceback" in line or "Exception" in line for line in logged), logged
    assert [line for line in logged if said in line] == [
        f"INFO:     POST /v1/chat/completions: {said}\n"
    ] * 2
    assert httpx.get(command.base_url.removesuffix("/v1") + "/health").status_code == 200


# ---------------------------------------------------------------------- the stub's log


def post(stub: StubServer, text: str) -> None:
    body = {"model": "stub", "messages": [{"role": "user", "content": text}]}
    response = httpx.post(f"{stub.base_url}/chat/completions", json=body)
    assert response.status_code == 200


def test_the_stub_keeps_the_latest_requests_within_its_bound() -> None:
    bound = 64 * 1024
    with StubServer(max_log_bytes=bound) as stub:
        for i in range(40):  # about 8 KiB each: five times the bound
            post(stub, f"{i} " + "x" * 8000)
        kept = stub.requests
        assert stub.received == 40
        assert 2 <= len(kept) <= bound // 8000  # as many as fit, and no more
        said = [int((last_user_text(r) or "").split()[0]) for r in kept]
        assert said == list(range(40 - len(kept), 40))  # the most recent, in order
        post(stub, "big " + "x" * 2 * bound)  # larger than the bound alone: kept alone
        assert [(last_user_text(r) or "")[:4] for r in stub.requests] == ["big "]
        assert stub.received == 41
        stub.reset()
        assert stub.requests == [] and stub.received == 0
