"""The bundled `StubServer` streams: a request with `stream: true` gets its scripted
completion as OpenAI's `chat.completion.chunk` server-sent events, read here by the
official OpenAI SDK, by LiteLLM's real streaming path and as raw SSE; errors, malformed
bodies and delays are answered as scripted."""

from __future__ import annotations

import json
from typing import Any

import httpx
import litellm
import openai
import pytest
from openai import OpenAI

from turnbon_graph.testing import (
    StubResponse,
    StubServer,
    chat_completion,
    choice,
    error,
    tool_call,
)

MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]
USAGE = {"prompt_tokens": 5, "completion_tokens": 9, "total_tokens": 14}


def client_of(stub: StubServer) -> OpenAI:
    return OpenAI(base_url=stub.base_url, api_key="none", max_retries=0)


def test_the_sdk_assembles_the_scripted_text(stub: StubServer) -> None:
    text = "a reply long enough to come in several content deltas"
    stub.script(chat_completion(text, usage=USAGE))
    chunks = list(
        client_of(stub).chat.completions.create(model="stub", messages=MESSAGES, stream=True)
    )
    assert {c.object for c in chunks} == {"chat.completion.chunk"}
    assert chunks[0].choices[0].delta.role == "assistant"
    deltas = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert len(deltas) > 1 and "".join(deltas) == text
    assert [c.choices[0].finish_reason for c in chunks][-1] == "stop"
    assert all(c.usage is None for c in chunks)  # not asked for: no usage
    assert stub.requests[0].body and stub.requests[0].body["stream"] is True


def test_usage_comes_in_a_last_chunk_only_when_asked(stub: StubServer) -> None:
    stub.script(chat_completion("counted", usage=USAGE))
    chunks = list(
        client_of(stub).chat.completions.create(
            model="stub", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
    )
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.usage.model_dump(exclude_none=True) == USAGE
    assert all(c.usage is None for c in chunks[:-1])


def test_tool_calls_stream_as_deltas_the_sdk_assembles(stub: StubServer) -> None:
    calls = [
        tool_call("shell", {"command": "pytest -x tests/unit_tests"}, id="call_1"),
        tool_call("read", {"path": "README.md"}, id="call_2"),
    ]
    stub.script(chat_completion("Two steps.", calls))
    stream = client_of(stub).chat.completions.create(model="stub", messages=MESSAGES, stream=True)
    assembled: dict[int, dict[str, str]] = {}
    finish = None
    for chunk in stream:
        delta = chunk.choices[0].delta
        for call in delta.tool_calls or []:
            entry = assembled.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] += call.id or ""
            if call.function is not None:
                entry["name"] += call.function.name or ""
                entry["arguments"] += call.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert finish == "tool_calls"
    assert [assembled[i] for i in sorted(assembled)] == [
        {"id": c["id"], "name": c["function"]["name"], "arguments": c["function"]["arguments"]}
        for c in calls
    ]


def test_litellms_streaming_path_rebuilds_the_completion(stub: StubServer) -> None:
    stub.script(
        chat_completion("Let me look.", [tool_call("shell", {"command": "ls"})], usage=USAGE)
    )
    chunks = list(
        litellm.completion(
            model="openai/stub",
            api_base=stub.base_url,
            api_key="none",
            messages=MESSAGES,
            stream=True,
            stream_options={"include_usage": True},
        )
    )
    rebuilt: Any = litellm.stream_chunk_builder(chunks, messages=MESSAGES)
    message = rebuilt.choices[0].message
    assert message.content == "Let me look."
    assert [(c.function.name, json.loads(c.function.arguments)) for c in message.tool_calls] == [
        ("shell", {"command": "ls"})
    ]
    assert rebuilt.usage.total_tokens == USAGE["total_tokens"]


def test_the_wire_is_server_sent_events_ending_in_done(stub: StubServer) -> None:
    stub.script(chat_completion("sse", choices=[choice("one"), choice("two", index=1)]))
    body = {"model": "stub", "messages": MESSAGES, "stream": True}
    with httpx.stream("POST", f"{stub.base_url}/chat/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line for line in response.iter_lines() if line]
    assert all(e.startswith("data: ") for e in events) and events[-1] == "data: [DONE]"
    chunks = [json.loads(e.removeprefix("data: ")) for e in events[:-1]]
    by_choice: dict[int, str] = {}
    for chunk in chunks:
        for entry in chunk["choices"]:
            by_choice[entry["index"]] = by_choice.get(entry["index"], "") + (
                entry["delta"].get("content") or ""
            )
    assert by_choice == {0: "one", 1: "two"}
    assert len({c["id"] for c in chunks}) == 1  # one completion's chunks


def test_a_scripted_error_is_answered_as_scripted_to_a_streaming_request(
    stub: StubServer,
) -> None:
    stub.script(error(429, "slow down", retry_after=1))
    with pytest.raises(openai.RateLimitError) as caught:
        client_of(stub).chat.completions.create(model="stub", messages=MESSAGES, stream=True)
    assert caught.value.status_code == 429
    assert caught.value.response.headers["retry-after"] == "1"


def test_a_malformed_body_and_a_delay_are_answered_as_scripted(stub: StubServer) -> None:
    stub.script(
        StubResponse(body="not json {"), StubResponse(body=chat_completion("late"), delay=0.2)
    )
    body = {"model": "stub", "messages": MESSAGES, "stream": True}
    first = httpx.post(f"{stub.base_url}/chat/completions", json=body)
    assert first.text == "not json {"  # verbatim, not an event stream
    stream = client_of(stub).chat.completions.create(model="stub", messages=MESSAGES, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in stream) == "late"


def test_a_request_without_stream_still_gets_one_body(stub: StubServer) -> None:
    stub.script(chat_completion("whole"))
    response = client_of(stub).chat.completions.create(model="stub", messages=MESSAGES)
    assert response.object == "chat.completion"
    assert response.choices[0].message.content == "whole"


def test_reasoning_streams_before_the_content(stub: StubServer) -> None:
    thought = "the user greets me; a greeting back is enough"
    stub.script(chat_completion("Hello!", reasoning_content=thought))
    body = {"model": "stub", "messages": MESSAGES, "stream": True}
    with httpx.stream("POST", f"{stub.base_url}/chat/completions", json=body) as response:
        events = [line.removeprefix("data: ") for line in response.iter_lines() if line]
    deltas = [json.loads(e)["choices"][0]["delta"] for e in events[:-1]]
    reasoning = "".join(d.get("reasoning_content") or "" for d in deltas)
    assert reasoning == thought
    first_content = next(i for i, d in enumerate(deltas) if d.get("content"))
    assert all("reasoning_content" not in d for d in deltas[first_content:])
