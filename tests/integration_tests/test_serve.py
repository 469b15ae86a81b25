"""`turnbon serve` driven by the official OpenAI SDK: each chat completion is one
Turn-BoN turn on the stub (3 candidates, 1 selector call), answered with the selector's
choice; errors in OpenAI's shape; the bearer check; the CLI process and its shutdown."""

from __future__ import annotations

import itertools
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI
from pydantic import SecretStr

from tests.helpers import terminate
from tests.integration_tests.test_litellm_provider import (
    BAD_VALUES,
    CHOSEN,
    TOOLS,
    counts,
    rate_limits,
    script_turns,
)
from turnbon_graph.config import turn_config
from turnbon_graph.serve import BackgroundServer, ServeConfig
from turnbon_graph.testing import (
    StubResponse,
    StubServer,
    chat_completion,
    error,
    is_selector_request,
)

UPSTREAM_KEY = "sk-upstream-secret-0123456789"
MESSAGES: list[Any] = [{"role": "user", "content": "Where am I?"}]


def serve_config(stub: StubServer, **fields: Any) -> ServeConfig:
    options = fields.pop("options", {})
    turn = turn_config(
        n=3,
        seed=0,
        completion_kwargs={"api_base": stub.base_url, "api_key": UPSTREAM_KEY},
        **options,
    )
    return ServeConfig(model="openai/stub", turn=turn, **fields)


@pytest.fixture
def server(stub: StubServer) -> Iterator[BackgroundServer]:
    with BackgroundServer(serve_config(stub)) as running:
        yield running


def client_of(server: BackgroundServer, key: str = "none") -> OpenAI:
    return OpenAI(base_url=server.base_url, api_key=key, max_retries=0)


def test_a_plain_answer_is_the_selectors_choice_with_the_turns_usage(
    stub: StubServer, server: BackgroundServer
) -> None:
    script_turns(stub, text=True)
    response = client_of(server).chat.completions.create(model="turnbon", messages=MESSAGES)
    assert response.choices[0].message.content == CHOSEN
    assert response.choices[0].finish_reason == "stop"
    assert counts(stub) == (3, 1)
    assert response.usage is not None
    assert (response.usage.prompt_tokens, response.usage.completion_tokens) == (44, 28)
    record = (response.model_extra or {})["turnbon"]
    assert record["selector"] == "llm:openai/stub"
    assert record["candidates"][record["selected_index"]]["content"] == CHOSEN
    assert UPSTREAM_KEY not in json.dumps(record)


def test_tools_and_tool_choice(stub: StubServer, server: BackgroundServer) -> None:
    script_turns(stub)
    forced = {"type": "function", "function": {"name": "shell"}}
    response = client_of(server).chat.completions.create(
        model="turnbon",
        messages=MESSAGES,
        tools=TOOLS,
        tool_choice=forced,  # type: ignore[arg-type]
    )
    (call,) = response.choices[0].message.tool_calls or []
    assert call.function.name == "shell"  # type: ignore[union-attr]
    assert json.loads(call.function.arguments) == {"command": CHOSEN}  # type: ignore[union-attr]
    assert response.choices[0].finish_reason == "tool_calls"
    generator = [r.body for r in stub.requests if r.body and "tools" in r.body]
    assert len(generator) == 3
    assert all(b["tool_choice"] == forced and b["tools"] == TOOLS for b in generator)
    assert all(r.header("authorization") == f"Bearer {UPSTREAM_KEY}" for r in stub.requests)


def _streamed(client: OpenAI, **request: Any) -> tuple[str, list[tuple[str, str]], Any]:
    content = ""
    calls: dict[int, list[str]] = {}
    usage = None
    for chunk in client.chat.completions.create(stream=True, **request):
        for choice in chunk.choices:
            content += choice.delta.content or ""
            for part in choice.delta.tool_calls or []:
                entry = calls.setdefault(part.index, ["", ""])
                if part.function is not None:
                    entry[0] += part.function.name or ""
                    entry[1] += part.function.arguments or ""
        usage = chunk.usage or usage
    return content, [(name, args) for name, args in (calls[i] for i in sorted(calls))], usage


@pytest.mark.parametrize("tools", [None, TOOLS], ids=["plain", "tools"])
def test_the_assembled_stream_equals_the_plain_answer(
    stub: StubServer, server: BackgroundServer, tools: Any
) -> None:
    request: dict[str, Any] = {"model": "turnbon", "messages": MESSAGES}
    if tools:
        request["tools"] = tools
    script_turns(stub, text=not tools)
    plain = client_of(server).chat.completions.create(**request)
    stub.reset()
    script_turns(stub, text=not tools)
    asked = {"stream_options": {"include_usage": True}}
    content, calls, usage = _streamed(client_of(server), **request, **asked)
    message = plain.choices[0].message
    assert content == (message.content or "")
    assert calls == [(c.function.name, c.function.arguments) for c in message.tool_calls or []]  # type: ignore[union-attr]
    assert usage == plain.usage


def _events(server: BackgroundServer, **fields: Any) -> list[Any]:
    """The raw server-sent events of a streamed chat completion: each data line's JSON,
    and "[DONE]"."""
    body = {"model": "turnbon", "messages": MESSAGES, "stream": True, **fields}
    with httpx.stream("POST", f"{server.base_url}/chat/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        text = response.read().decode()
    data = [line.removeprefix("data: ") for line in text.split("\n\n") if line]
    return [event if event == "[DONE]" else json.loads(event) for event in data]


def test_the_stream_is_server_sent_events_ending_in_done_with_no_usage_unasked(
    stub: StubServer, server: BackgroundServer
) -> None:
    script_turns(stub, text=True)
    *chunks, done = _events(server)
    assert done == "[DONE]"
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["turnbon"]["selector"] == "llm:openai/stub"
    assert all("usage" not in chunk for chunk in chunks)  # as OpenAI: only when asked


def test_a_stream_asked_for_usage_ends_in_a_usage_chunk_with_no_choices(
    stub: StubServer, server: BackgroundServer
) -> None:
    script_turns(stub, text=True)
    *chunks, last, done = _events(server, stream_options={"include_usage": True})
    assert done == "[DONE]"
    assert last["choices"] == [] and last["usage"]["total_tokens"] == 72
    assert last["turnbon"]["selector"] == "llm:openai/stub"  # the record stays last
    assert all(chunk["usage"] is None and "turnbon" not in chunk for chunk in chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    # the SDK sees the same: usage on the last chunk only, the record in its model_extra
    stub.reset()
    script_turns(stub, text=True)
    stream = client_of(server).chat.completions.create(
        model="turnbon", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
    )
    received = list(stream)
    assert [c.usage is not None for c in received] == [False] * (len(received) - 1) + [True]
    assert (received[-1].model_extra or {})["turnbon"]["n_requested"] == 3


def test_a_long_streamed_turn_is_kept_alive_until_its_chunks(stub: StubServer) -> None:
    # Every candidate answers alike after 0.6 s (unanimous: no selector call); the stream
    # starts after 0.1 s with SSE comments, which the SDK skips.
    stub.script(StubResponse(body=chat_completion("same answer"), delay=0.6))
    body = {"model": "turnbon", "messages": MESSAGES, "stream": True}
    with BackgroundServer(serve_config(stub, keepalive_s=0.1)) as running:
        with httpx.stream("POST", f"{running.base_url}/chat/completions", json=body) as response:
            assert response.status_code == 200
            events = [e for e in response.read().decode().split("\n\n") if e]
        stub.reset()
        stub.script(StubResponse(body=chat_completion("same answer"), delay=0.6))
        content, _, _ = _streamed(client_of(running), model="turnbon", messages=MESSAGES)
    comments = [e for e in events if e.startswith(":")]
    assert comments and events[: len(comments)] == comments  # all before the first chunk
    assert events[-1] == "data: [DONE]" and content == "same answer"


def test_a_kept_alive_stream_that_fails_ends_in_an_error_event(stub: StubServer) -> None:
    stub.script(error(401, f"invalid api key {UPSTREAM_KEY}", delay=0.6))
    with BackgroundServer(serve_config(stub, keepalive_s=0.1)) as running:
        with pytest.raises(openai.APIError) as caught:
            _streamed(client_of(running), model="turnbon", messages=MESSAGES)
        assert not isinstance(caught.value, openai.APIStatusError)  # an event, after a 200
        assert "refused the key" in caught.value.message
        assert UPSTREAM_KEY not in caught.value.message
        stub.reset()
        script_turns(stub, text=True)  # the server stays up
        answer = client_of(running).chat.completions.create(model="turnbon", messages=MESSAGES)
    assert answer.choices[0].message.content == CHOSEN


def test_a_streamed_turn_that_fails_soon_keeps_its_status(stub: StubServer) -> None:
    stub.script(error(401, "invalid api key"))
    config = serve_config(stub, keepalive_s=30)
    with BackgroundServer(config) as running, pytest.raises(openai.APIStatusError) as caught:
        _streamed(client_of(running), model="turnbon", messages=MESSAGES)
    assert caught.value.status_code == 502


def test_the_commands_defaults_are_the_servers() -> None:
    import dataclasses

    from turnbon_graph.cli.serve import SETTINGS

    defaults = {f.name: f.default for f in dataclasses.fields(ServeConfig)}
    shared = {"host", "port", "name", "shutdown_timeout", "keepalive_s"}
    assert {k: SETTINGS[k] for k in shared} == {k: defaults[k] for k in shared}


@pytest.mark.parametrize(
    ("content", "says"),
    [
        ('{"model": "turnbon", "messages": []}', "non-empty list"),
        ("{not json", "not valid JSON"),
        ('{"messages": [{"role": "user", "content": "x"}], "n": 2}', "n must be 1"),
        ('{"messages": [{"role": "user", "content": "x"}], "api_base": "http://x"}', "api_base"),
        ('{"messages": [{"role": "user", "content": "x"}], "audio": {"voice": "x"}}', "audio"),
        (
            '{"messages": [{"role": "user", "content": "x"}], "modalities": ["text", "audio"]}',
            "never audio",
        ),
    ],
)
def test_a_bad_request_is_a_400_in_openais_error_shape(
    stub: StubServer, server: BackgroundServer, content: str, says: str
) -> None:
    response = httpx.post(
        f"{server.base_url}/chat/completions",
        content=content,
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 400
    problem = response.json()["error"]
    assert set(problem) >= {"message", "type", "code"} and says in problem["message"]
    assert problem["type"] == "invalid_request_error"
    assert stub.requests == []  # nothing went upstream


def test_the_sdk_sees_a_bad_request_error(stub: StubServer, server: BackgroundServer) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client_of(server).chat.completions.create(model="turnbon", messages=[])
    assert caught.value.status_code == 400


def test_every_candidate_failing_upstream_is_a_502_and_the_server_stays_up(
    stub: StubServer, server: BackgroundServer
) -> None:
    stub.script(error(503, f"overloaded (sent with {UPSTREAM_KEY})"))  # retried, then given up
    with pytest.raises(openai.APIStatusError) as caught:
        client_of(server).chat.completions.create(model="turnbon", messages=MESSAGES)
    assert caught.value.status_code == 502
    body: Any = caught.value.body
    assert body["code"] == "all_candidates_failed" and "All 3 candidate call(s)" in body["message"]
    assert UPSTREAM_KEY not in json.dumps(body)
    # The server's own upstream key refused: a 502 that says so, not the client's 400.
    stub.reset()
    stub.script(error(401, f"invalid api key {UPSTREAM_KEY}"))
    with pytest.raises(openai.APIStatusError) as caught:
        client_of(server).chat.completions.create(model="turnbon", messages=MESSAGES)
    assert caught.value.status_code == 502
    body = caught.value.body
    assert body["code"] == "upstream_credentials" and "refused the key" in body["message"]
    assert UPSTREAM_KEY not in json.dumps(body)
    stub.reset()
    script_turns(stub, text=True)
    answer = client_of(server).chat.completions.create(model="turnbon", messages=MESSAGES)
    assert answer.choices[0].message.content == CHOSEN


def test_fields_that_change_nothing_are_accepted_and_not_sent_upstream(
    stub: StubServer, server: BackgroundServer
) -> None:
    script_turns(stub, text=True)
    response = client_of(server).chat.completions.create(
        model="turnbon",
        messages=MESSAGES,
        store=False,
        metadata={"run": "r-7"},
        service_tier="auto",
        user="ann",
        prediction={"type": "content", "content": "pwd"},
        modalities=["text"],
        temperature=0.4,
        extra_body={"chat_template_kwargs": {"enable_thinking": False}},
    )
    assert response.choices[0].message.content == CHOSEN
    generator = [r.body or {} for r in stub.requests if not is_selector_request(r)]
    assert len(generator) == 3
    for sent in generator:
        assert not {"store", "metadata", "service_tier", "user", "prediction"} & set(sent)
        assert sent["temperature"] == 0.4
        assert sent["chat_template_kwargs"] == {"enable_thinking": False}  # a vendor field


@pytest.mark.parametrize(
    ("field", "value", "says"),
    # (LiteLLM itself cuts a longer stop list to 4 before the provider sees it)
    [*BAD_VALUES, ("stop", ["a", "b", "c", "d", "e"], "up to 4 strings")],
)
def test_a_bad_value_is_a_400_naming_its_field_before_any_call(
    stub: StubServer, server: BackgroundServer, field: str, value: Any, says: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client_of(server).chat.completions.create(
            model="turnbon", messages=MESSAGES, extra_body={field: value}
        )
    assert caught.value.status_code == 400
    assert caught.value.param == field and says in caught.value.message
    assert stub.requests == []  # nothing went upstream


def test_every_candidate_refused_alike_is_the_upstreams_own_status_and_words(
    stub: StubServer, server: BackgroundServer
) -> None:
    said = "max_tokens is too large: this model supports at most 16384 completion tokens"
    stub.script(error(400, f"{said} (key {UPSTREAM_KEY})"))
    with pytest.raises(openai.BadRequestError) as caught:
        client_of(server).chat.completions.create(model="turnbon", messages=MESSAGES)
    assert caught.value.status_code == 400
    body: Any = caught.value.body
    assert body["message"] == f"{said} (key [REDACTED])"  # its words, no key
    assert body["type"] == "invalid_request_error"
    stub.reset()
    stub.script(error(404, "The model `stub` does not exist"))
    with pytest.raises(openai.NotFoundError) as missing:
        client_of(server).chat.completions.create(model="turnbon", messages=MESSAGES)
    assert "The model `stub` does not exist" in missing.value.message


def test_a_rate_limit_on_every_candidate_is_a_429_with_the_longest_retry_after(
    stub: StubServer,
) -> None:
    # No retries left: what the upstream said after them is what the client hears (one
    # call per candidate, so that each candidate meets one of these).
    stub.script(*rate_limits())
    config = serve_config(stub, options={"max_retries": 0, "native_n": False})
    with BackgroundServer(config) as running, pytest.raises(openai.RateLimitError) as caught:
        client_of(running).chat.completions.create(model="turnbon", messages=MESSAGES)
    body: Any = caught.value.body
    assert caught.value.status_code == 429 and body["message"] == "slow down"
    assert body["type"] == "rate_limit_error"
    assert caught.value.response.headers["retry-after"] == "21"
    assert len(stub.requests) == 3


def test_a_retry_after_too_long_to_wait_reaches_the_client(stub: StubServer) -> None:
    # Over the 60 s a call waits: the engine gives up at once and the client hears the ask.
    stub.script(error(429, "slow down", retry_after=120))
    config = serve_config(stub, options={"native_n": False})
    with BackgroundServer(config) as running, pytest.raises(openai.RateLimitError) as caught:
        client_of(running).chat.completions.create(model="turnbon", messages=MESSAGES)
    assert caught.value.response.headers["retry-after"] == "120"
    assert len(stub.requests) == 3  # one call each, none retried


def test_a_mixed_set_of_failures_is_a_502(stub: StubServer) -> None:
    stub.script(error(400, "bad request"), error(500, "it broke"))  # then 500s
    config = serve_config(stub, options={"max_retries": 0, "native_n": False})
    with BackgroundServer(config) as running, pytest.raises(openai.APIStatusError) as caught:
        client_of(running).chat.completions.create(model="turnbon", messages=MESSAGES)
    assert caught.value.status_code == 502
    assert "retry-after" not in caught.value.response.headers
    body: Any = caught.value.body
    assert body["code"] == "all_candidates_failed" and "All 3 candidate call(s)" in body["message"]


def test_dropped_connections_are_a_502(stub: StubServer) -> None:
    stub.script(StubResponse(drop=True))
    config = serve_config(stub, options={"max_retries": 0})
    with BackgroundServer(config) as running, pytest.raises(openai.APIStatusError) as caught:
        client_of(running).chat.completions.create(model="turnbon", messages=MESSAGES)
    assert caught.value.status_code == 502
    body: Any = caught.value.body
    assert body["code"] == "all_candidates_failed"


def test_every_candidate_timing_out_is_a_504(stub: StubServer) -> None:
    stub.script(StubResponse(body=chat_completion("late"), delay=5))
    config = serve_config(stub, options={"timeout": 0.3, "max_retries": 0})
    with BackgroundServer(config) as running, pytest.raises(openai.APIStatusError) as caught:
        client_of(running).chat.completions.create(model="turnbon", messages=MESSAGES)
    assert caught.value.status_code == 504
    body: Any = caught.value.body
    assert body["code"] == "timeout" and "Timeout" in body["message"]


def test_the_bearer_check_refuses_a_wrong_key(stub: StubServer) -> None:
    script_turns(stub, text=True)
    config = serve_config(stub, require_key=SecretStr("client-key-42"))
    with BackgroundServer(config) as running:
        with pytest.raises(openai.AuthenticationError) as caught:
            client_of(running, "wrong").chat.completions.create(model="t", messages=MESSAGES)
        assert caught.value.status_code == 401
        with pytest.raises(openai.AuthenticationError):
            client_of(running, "wrong").models.list()
        assert stub.requests == []
        answer = client_of(running, "client-key-42").chat.completions.create(
            model="t", messages=MESSAGES
        )
        assert answer.choices[0].message.content == CHOSEN
        assert httpx.get(running.base_url.removesuffix("/v1") + "/health").status_code == 200


def test_models_and_health_answer(server: BackgroundServer) -> None:
    assert [m.id for m in client_of(server).models.list()] == ["turnbon"]
    health = httpx.get(server.base_url.removesuffix("/v1") + "/health")
    assert health.status_code == 200 and health.json()["status"] == "ok"
    missing = httpx.get(server.base_url + "/nothing-here")
    assert missing.status_code == 404 and "error" in missing.json()


def test_concurrent_requests_share_one_engines_concurrency_cap(stub: StubServer) -> None:
    delay = 0.05
    stub.script(StubResponse(body=chat_completion("same answer"), delay=delay))
    config = serve_config(stub, options={"max_concurrency": 1})
    with BackgroundServer(config) as running, ThreadPoolExecutor(4) as pool:
        client = client_of(running)
        answers = list(
            pool.map(
                lambda _: client.chat.completions.create(model="t", messages=MESSAGES), range(4)
            )
        )
    assert all(a.choices[0].message.content == "same answer" for a in answers)
    arrivals = sorted(r.received_at for r in stub.requests)
    assert len(arrivals) == 12  # 4 requests x 3 candidates, unanimous: no selector call
    # one call in flight at a time across all requests: each starts after the last ended
    assert all(later - earlier >= delay * 0.99 for earlier, later in itertools.pairwise(arrivals))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_command_serves_and_finishes_in_flight_requests_on_sigterm(
    stub: StubServer, tmp_path: Any
) -> None:
    stub.script(StubResponse(body=chat_completion("finished"), delay=0.5))
    port = _free_port()
    config = tmp_path / "serve.toml"
    config.write_text(f'model = "openai/stub"\napi_base = "{stub.base_url}"\nn = 5\n')
    env = {**os.environ, "TURNBON_TEST_UPSTREAM": UPSTREAM_KEY}
    command = [sys.executable, "-m", "turnbon_graph.cli", "serve", "--config", str(config)]
    command += ["-n", "2", "--api-key-env", "TURNBON_TEST_UPSTREAM", "--port", str(port)]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/health").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
        health = httpx.get(f"{base}/health").json()
        assert health["n"] == 2  # the flag over the file's n = 5
        client = OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0)
        answers: list[Any] = []
        worker = threading.Thread(
            target=lambda: answers.append(
                client.chat.completions.create(model="turnbon", messages=MESSAGES)
            )
        )
        worker.start()
        while not stub.requests:  # the turn is in flight upstream
            time.sleep(0.01)
        process.send_signal(signal.SIGTERM)
        worker.join(timeout=60)
        # uvicorn finishes the request, then ends the process by the signal it caught
        assert process.wait(timeout=60) == -signal.SIGTERM
    finally:
        if process.poll() is None:
            process.kill()
    _, stderr = process.communicate()
    assert [a.choices[0].message.content for a in answers] == ["finished"]
    assert stub.requests[0].header("authorization") == f"Bearer {UPSTREAM_KEY}"
    assert UPSTREAM_KEY not in stderr and "Traceback" not in stderr


def test_workers_serve_one_port_from_processes_of_their_own(stub: StubServer) -> None:
    stub.script(chat_completion("from a worker"))
    port = _free_port()
    env = {**os.environ, "TURNBON_TEST_UPSTREAM": UPSTREAM_KEY}
    command = [sys.executable, "-m", "turnbon_graph.cli", "serve", "--model", "openai/stub"]
    command += ["--api-base", stub.base_url, "--api-key-env", "TURNBON_TEST_UPSTREAM"]
    command += ["-n", "2", "--port", str(port), "--workers", "2"]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        pids: set[int] = set()
        deadline = time.monotonic() + 120
        while len(pids) < 2 and time.monotonic() < deadline:  # each worker answers in turn
            try:
                pids.add(httpx.get(f"{base}/health", timeout=5).json()["pid"])
            except httpx.TransportError:
                time.sleep(0.1)
        assert len(pids) == 2 and process.pid not in pids, pids
        client = OpenAI(base_url=f"{base}/v1", api_key="none", max_retries=0)
        answer = client.chat.completions.create(model="turnbon", messages=MESSAGES)
        assert answer.choices[0].message.content == "from a worker"
    finally:
        terminate(process)
    _, stderr = process.communicate()
    assert "2 worker processes" in stderr
    assert UPSTREAM_KEY not in stderr and "Traceback" not in stderr
    assert stub.requests[0].header("authorization") == f"Bearer {UPSTREAM_KEY}"
