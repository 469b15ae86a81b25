"""The OpenAI chat-completions translation both doors share: request bodies as harnesses
send them in, the chosen message and its turn record out (whole and as chunks)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from turnbon_graph.errors import ConfigurationError, RequestFieldError
from turnbon_graph.openai.chat import (
    RECORD_FIELD,
    chat_completion,
    chat_completion_chunks,
    parse_chat_request,
)
from turnbon_graph.openai.fields import FORWARDED, IGNORED, REFUSED
from turnbon_graph.openai.messages import parse_messages
from turnbon_graph.records import (
    RECORD_KEY,
    CandidateRecord,
    LatencySplit,
    TurnRecord,
    Usage,
    UsageSplit,
)

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "shell",
            "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}},
        },
    }
]
USER = [{"role": "user", "content": "x"}]


def _call(name: str, args: dict[str, Any], id: str = "call_1") -> dict[str, Any]:
    return {"id": id, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def test_harness_style_messages_become_langchain_messages() -> None:
    messages = parse_messages(
        [
            {"role": "system", "content": "be brief"},
            {"role": "user", "content": [{"type": "text", "text": "list files"}], "name": "ann"},
            # no content key at all, as mini-swe-agent and SWE-agent replay tool turns
            {"role": "assistant", "tool_calls": [_call("shell", {"command": "ls"})]},
            {"role": "tool", "tool_call_id": "call_1", "content": "a.txt", "name": "shell"},
            {"role": "assistant", "content": None, "tool_calls": [_call("shell", {}, "c2")]},
            {"role": "tool", "tool_call_id": "c2", "content": None},
        ]
    )
    system, user, first, tool, second, empty = messages
    assert isinstance(system, SystemMessage) and system.content == "be brief"
    assert isinstance(user, HumanMessage) and user.name == "ann" and user.text == "list files"
    assert isinstance(first, AIMessage) and first.content == ""
    assert first.tool_calls == [
        {"name": "shell", "args": {"command": "ls"}, "id": "call_1", "type": "tool_call"}
    ]
    assert isinstance(tool, ToolMessage) and tool.tool_call_id == "call_1"
    assert isinstance(second, AIMessage) and second.tool_calls[0]["args"] == {}
    assert isinstance(empty, ToolMessage) and empty.content == ""


def test_request_settings_and_tools_are_split_from_the_messages() -> None:
    request = parse_chat_request(
        {
            "model": "turnbon",
            "messages": [{"role": "user", "content": "hi"}],
            "tools": TOOLS,
            "tool_choice": "required",
            "stop": ["\n\n"],
            "temperature": 0.2,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    )
    assert request.model == "turnbon" and request.stream
    assert request.tools == TOOLS
    assert request.settings == {"tool_choice": "required", "stop": ["\n\n"], "temperature": 0.2}


def test_legacy_functions_become_tools() -> None:
    request = parse_chat_request(
        {
            "messages": [{"role": "user", "content": "hi"}],
            "functions": [TOOLS[0]["function"]],
            "function_call": {"name": "shell"},
        }
    )
    assert request.tools == TOOLS
    assert request.settings["tool_choice"] == {"type": "function", "function": {"name": "shell"}}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ([], "JSON object"),
        ({"messages": []}, "non-empty list"),
        ({"messages": [{"content": "no role"}]}, "'role'"),
        ({"messages": [{"role": "user", "content": "x"}], "n": 3}, "n must be 1"),
        ({"messages": [{"role": "user", "content": "x"}], "tools": [{"x": 1}]}, "tools[0]"),
        ({"messages": [{"role": "wizard", "content": "x"}]}, "could not be read"),
        (
            {
                "messages": [
                    {
                        "role": "assistant",
                        "tool_calls": [{"function": {"name": "f", "arguments": "[1"}}],
                    }
                ]
            },
            "arguments must be a JSON object",
        ),
        # the endpoint and its key are the server's: a body may not redirect them
        ({"messages": [{"role": "user", "content": "x"}], "api_base": "http://evil"}, "api_base"),
        ({"messages": [{"role": "user", "content": "x"}], "api_key": "sk-1"}, "api_key"),
    ],
)
def test_malformed_requests_say_what_to_fix(body: Any, says: str) -> None:
    with pytest.raises(ConfigurationError) as caught:
        parse_chat_request(body)
    assert says in str(caught.value)


def test_a_caller_that_owns_the_upstream_forwards_litellms_fields_and_its_extra_body() -> None:
    request = parse_chat_request(
        {
            "messages": [{"role": "user", "content": "x"}],
            "custom_flag": 1,
            "extra_body": {"guided_choice": ["a", "b"]},
            "store": True,
        },
        owns_upstream=True,
    )
    assert request.settings == {"custom_flag": 1, "extra_body": {"guided_choice": ["a", "b"]}}
    with pytest.raises(RequestFieldError, match="extra_body may not set n"):
        parse_chat_request({"messages": USER, "extra_body": {"n": 4}}, owns_upstream=True)


def test_fields_that_change_nothing_for_a_turn_are_accepted_and_not_forwarded() -> None:
    ignored = {
        "store": False,
        "metadata": {"run": "7"},
        "service_tier": "auto",
        "user": "ann",
        "prediction": {"type": "content", "content": "x"},
        "safety_identifier": "h-1",
        "prompt_cache_key": "k",
        "logprobs": False,
        "top_logprobs": 0,
        "modalities": ["text"],
    }
    assert set(ignored) - {"modalities"} <= set(IGNORED)
    request = parse_chat_request({"messages": USER, **ignored, "seed": 3, "temperature": None})
    assert request.settings == {"seed": 3}  # a null counts as absent


def test_vendor_fields_of_openai_compatible_servers_are_forwarded() -> None:
    vendor = {"chat_template_kwargs": {"enable_thinking": False}, "top_k": 20, "min_p": 0.05}
    assert parse_chat_request({"messages": USER, **vendor}).settings == vendor
    assert set(vendor) <= set(FORWARDED)


@pytest.mark.parametrize(
    ("field", "value", "says"),
    [
        ("temperature", "hot", "temperature must be a number from 0 to 2"),
        ("temperature", 2.5, "temperature must be a number from 0 to 2"),
        ("temperature", True, "temperature must be a number"),
        ("top_p", 1.5, "top_p must be a number from 0 to 1"),
        ("max_tokens", -5, "max_tokens must be an integer from 1 to 2147483647"),
        ("max_tokens", 10**12, "max_tokens must be an integer from 1 to 2147483647"),
        ("max_tokens", 1.5, "max_tokens must be an integer"),
        ("max_completion_tokens", 0, "max_completion_tokens must be an integer from 1"),
        ("presence_penalty", -3, "presence_penalty must be a number from -2 to 2"),
        ("frequency_penalty", "x", "frequency_penalty must be a number from -2 to 2"),
        ("n", "2", "n must be a positive integer"),
        ("n", 0, "n must be a positive integer"),
        ("n", 2, "n must be 1"),
        ("stream", "yes", "stream must be true or false"),
        ("stop", ["a", "b", "c", "d", "e"], "stop must be a string or a list of up to 4"),
        ("stop", 7, "stop must be a string or a list"),
        ("seed", 1.5, "seed must be an integer"),
        ("logprobs", "yes", "logprobs must be true or false"),
        ("top_logprobs", 21, "top_logprobs must be an integer from 0 to 20"),
        ("tool_choice", "always", "tool_choice must be 'none', 'auto', 'required'"),
        ("tool_choice", {"type": "function"}, "tool_choice must be"),
        ("response_format", {"type": "yaml"}, "response_format must be"),
        ("response_format", {"type": "json_schema"}, "response_format must be"),
        ("stream_options", {"include_usage": "yes"}, "stream_options must be an object"),
        ("stream_options", True, "stream_options must be an object"),
        ("store", "no", "store must be true or false"),
        ("metadata", "x", "metadata must be a JSON object"),
        ("modalities", ["text", "audio"], "never audio"),
        ("audio", {"voice": "alloy", "format": "wav"}, "audio is not accepted"),
        ("extra_body", {"top_k": 3}, "unsupported request field(s): extra_body"),
        ("api_base", "http://evil", "the upstream endpoint and its key are the server's"),
        ("headers", {"x": "y"}, "the upstream endpoint and its key are the server's"),
        ("guided_json", {}, "unsupported request field(s): guided_json"),
    ],
)
def test_a_value_openai_refuses_is_refused_naming_its_field(
    field: str, value: Any, says: str
) -> None:
    with pytest.raises(RequestFieldError) as caught:
        parse_chat_request({"messages": USER, field: value})
    assert caught.value.param == field
    assert says in str(caught.value)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("temperature", 0),
        ("temperature", 2),
        ("max_tokens", 2**31 - 1),
        ("stop", "END"),
        ("stop", ["a", "b", "c", "d"]),
        ("seed", -1),
        ("tool_choice", {"type": "function", "function": {"name": "shell"}}),
        ("tool_choice", {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": []}}),
        ("response_format", {"type": "json_schema", "json_schema": {"name": "a", "schema": {}}}),
        ("logit_bias", {"50256": -100}),
    ],
)
def test_values_at_openais_bounds_are_forwarded(field: str, value: Any) -> None:
    assert parse_chat_request({"messages": USER, field: value}).settings == {field: value}


def test_stream_options_ask_for_usage() -> None:
    asked = parse_chat_request(
        {"messages": USER, "stream": True, "stream_options": {"include_usage": True}}
    )
    assert asked.stream and asked.include_usage and asked.settings == {}
    assert not parse_chat_request({"messages": USER, "stream": True}).include_usage


def _record() -> TurnRecord:
    return TurnRecord(
        turn_id="t1",
        n_requested=2,
        n_ok=2,
        selected_index=1,
        selector="llm:openai/stub",
        agreement=0.5,
        candidates=[CandidateRecord(index=0, model="m"), CandidateRecord(index=1, model="m")],
        usage=UsageSplit(
            generator=Usage(calls=2, prompt_tokens=20, completion_tokens=10, reasoning_tokens=3),
            selector=Usage(calls=1, prompt_tokens=50, completion_tokens=5, cached_tokens=4),
        ),
        latency_s=LatencySplit(),
    )


def _chosen(**fields: Any) -> AIMessage:
    return AIMessage(**fields, response_metadata={RECORD_KEY: _record().to_json()})


def test_a_chosen_tool_call_becomes_a_chat_completion_with_the_turns_usage() -> None:
    message = _chosen(
        content="", tool_calls=[{"name": "shell", "args": {"command": "ls -la"}, "id": "call_9"}]
    )
    body = chat_completion(message, model="turnbon", created=7)
    assert body["object"] == "chat.completion" and body["model"] == "turnbon"
    (choice,) = body["choices"]
    assert choice["finish_reason"] == "tool_calls"
    assert choice["message"] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_9",
                "type": "function",
                "function": {"name": "shell", "arguments": '{"command": "ls -la"}'},
            }
        ],
    }
    assert body["usage"]["prompt_tokens"] == 70
    assert body["usage"]["completion_tokens"] == 15
    assert body["usage"]["total_tokens"] == 85
    assert body["usage"]["completion_tokens_details"] == {"reasoning_tokens": 3}
    assert body["usage"]["prompt_tokens_details"] == {"cached_tokens": 4}
    assert body[RECORD_FIELD]["selected_index"] == 1


def test_a_chosen_answer_finishes_with_stop() -> None:
    body = chat_completion(_chosen(content="All done."), model="m")
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "All done."}
    assert body["choices"][0]["finish_reason"] == "stop"


def _assemble(chunks: list[dict[str, Any]]) -> dict[str, Any]:
    """What a client rebuilds from the deltas, the way the OpenAI SDK does."""
    content = ""
    calls: dict[int, dict[str, Any]] = {}
    finish = None
    for chunk in chunks:
        assert chunk["object"] == "chat.completion.chunk"
        (choice,) = chunk["choices"]
        delta = choice["delta"]
        content += delta.get("content") or ""
        for part in delta.get("tool_calls") or []:
            call = calls.setdefault(
                part["index"], {"type": "function", "function": {"name": "", "arguments": ""}}
            )
            call["id"] = part.get("id") or call.get("id")
            call["function"]["name"] += part.get("function", {}).get("name") or ""
            call["function"]["arguments"] += part.get("function", {}).get("arguments") or ""
        finish = choice["finish_reason"] or finish
    message: dict[str, Any] = {"role": "assistant", "content": content or None}
    if calls:
        message["tool_calls"] = [calls[i] for i in sorted(calls)]
    return {"message": message, "finish_reason": finish}


def test_chunks_assemble_to_the_same_message_with_the_record_last_and_no_usage() -> None:
    message = _chosen(
        content="Running two commands. " * 10,
        tool_calls=[
            {"name": "shell", "args": {"command": "ls"}, "id": "call_a"},
            {"name": "shell", "args": {"command": "pwd"}, "id": "call_b"},
        ],
    )
    whole = chat_completion(message, model="m")
    chunks = chat_completion_chunks(message, model="m", piece=16)
    assert len(chunks) > 6  # the content really came in pieces
    assembled = _assemble(chunks)
    assert assembled["message"] == whole["choices"][0]["message"]
    assert assembled["finish_reason"] == "tool_calls"
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"
    assert chunks[-1][RECORD_FIELD] == whole[RECORD_FIELD]
    assert all("usage" not in chunk for chunk in chunks)  # not asked for
    assert len({chunk["id"] for chunk in chunks}) == 1


def test_asked_for_usage_the_chunks_end_in_a_usage_chunk_with_no_choices() -> None:
    message = _chosen(content="All done.")
    whole = chat_completion(message, model="m")
    chunks = chat_completion_chunks(message, model="m", include_usage=True)
    *deltas, last = chunks
    assert last["choices"] == [] and last["usage"] == whole["usage"]
    assert last[RECORD_FIELD] == whole[RECORD_FIELD]
    assert all(chunk["usage"] is None and RECORD_FIELD not in chunk for chunk in deltas)
    assert _assemble(deltas)["message"] == whole["choices"][0]["message"]
    assert deltas[-1]["choices"][0]["finish_reason"] == "stop"


def test_the_serve_page_lists_every_declared_field() -> None:
    page = (Path(__file__).parents[2] / "docs" / "serve.md").read_text()
    table = page[page.index("## Request fields") : page.index("## Errors")]
    for name in [*FORWARDED, *IGNORED, *REFUSED]:
        assert f"`{name}`" in table, name
