"""`POST /v1/responses` on `turnbon serve`, driven by the official OpenAI SDK
(`responses.create`, `responses.stream`, `responses.parse`) and by openai-agents'
default model (`OpenAIResponsesModel`): each call is one Turn-BoN turn on the stub (3
candidates, 1 selector call), answered as a Responses API `response` object (or its
events) with the turn's usage and record; a bad body is a 400 naming its field, before
any call. The docs/harnesses.md recipes marked for this file run here as written, on the
weather episode of tests/integration_tests/test_harness_clients.py."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response
from pydantic import BaseModel

from tests.integration_tests.test_harness_clients import (
    ANSWER,
    RUN_BY,
    SELECTOR,
    assert_the_chosen_call_ran,
    run_recipe,
    script,
    server,  # noqa: F401  (fixture: `turnbon serve` for the recipes, n=4)
    text_answer,
    tokens,
    turns,
    upstream,  # noqa: F401  (fixture: the stub as OpenAI)
    weather_call,
)
from tests.integration_tests.test_harness_clients import (
    CHOSEN as CITY,
)
from tests.integration_tests.test_litellm_provider import CHOSEN, TOOLS, counts, script_turns
from tests.integration_tests.test_serve import UPSTREAM_KEY, client_of, serve_config
from turnbon_graph.serve import BackgroundServer
from turnbon_graph.testing import StubResponse, StubServer, chat_completion, error

QUESTION = "Where am I?"
SHELL = {
    "type": "function",
    "name": "shell",
    "description": "Run a shell command.",
    "parameters": TOOLS[0]["function"]["parameters"],
}
"""`TOOLS`' shell tool as the Responses API takes it."""


@pytest.fixture
def serving(stub: StubServer) -> Any:
    with BackgroundServer(serve_config(stub)) as running:
        yield running


def generator_bodies(stub: StubServer) -> list[dict[str, Any]]:
    from turnbon_graph.testing import is_selector_request

    return [r.body or {} for r in stub.requests if not is_selector_request(r)]


def test_a_text_input_is_one_turn_answered_as_a_response(
    stub: StubServer, serving: BackgroundServer
) -> None:
    script_turns(stub, text=True)
    response = client_of(serving).responses.create(
        model="turnbon", input=QUESTION, instructions="Answer with one command."
    )
    assert response.output_text == CHOSEN and response.status == "completed"
    assert response.id.startswith("resp_") and response.model == "turnbon"
    assert counts(stub) == (3, 1)
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (44, 28)
    assert response.usage.total_tokens == 72
    record = (response.model_extra or {})["turnbon"]
    assert record["selector"] == "llm:openai/stub"
    assert record["candidates"][record["selected_index"]]["content"] == CHOSEN
    assert UPSTREAM_KEY not in json.dumps(record)
    for sent in generator_bodies(stub):
        assert sent["messages"] == [
            {"role": "system", "content": "Answer with one command."},
            {"role": "user", "content": QUESTION},
        ]


def test_a_message_list_input_gets_a_body_that_is_openais_response_type(
    stub: StubServer, serving: BackgroundServer
) -> None:
    script_turns(stub, text=True)
    said = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}]
    raw = httpx.post(f"{serving.base_url}/responses", json={"model": "t", "input": said})
    assert raw.status_code == 200
    response = Response.model_validate(raw.json())  # strictly, not as the SDK builds it
    assert response.output_text == CHOSEN and response.usage is not None
    assert all(sent["messages"][-1]["role"] == "user" for sent in generator_bodies(stub))


def test_a_function_call_and_its_output_on_the_next_call(
    stub: StubServer, serving: BackgroundServer
) -> None:
    script_turns(stub)
    client = client_of(serving)
    asked: list[Any] = [{"role": "user", "content": QUESTION}]
    forced = {"type": "function", "name": "shell"}
    first = client.responses.create(
        model="turnbon",
        input=asked,
        tools=[SHELL],  # type: ignore[list-item]
        tool_choice=forced,  # type: ignore[arg-type]
    )
    (call,) = first.output
    assert call.type == "function_call" and call.name == "shell"
    assert json.loads(call.arguments) == {"command": CHOSEN}
    sent = generator_bodies(stub)
    assert len(sent) == 3
    assert all(b["tools"][0]["function"]["name"] == "shell" for b in sent)
    assert all(
        b["tool_choice"] == {"type": "function", "function": {"name": "shell"}} for b in sent
    )

    stub.reset()
    stub.script(chat_completion("You are in /home/ann."))  # unanimous: no selector call
    ran = {"type": "function_call_output", "call_id": call.call_id, "output": "/home/ann"}
    second = client.responses.create(
        model="turnbon",
        input=[*asked, *(item.to_dict() for item in first.output), ran],  # type: ignore[misc]
        tools=[SHELL],  # type: ignore[list-item]
    )
    assert second.output_text == "You are in /home/ann."
    for body in generator_bodies(stub):
        user, assistant, tool = body["messages"]
        assert user == {"role": "user", "content": QUESTION}
        (replayed,) = assistant["tool_calls"]
        assert replayed["id"] == call.call_id and replayed["function"]["name"] == "shell"
        assert json.loads(replayed["function"]["arguments"]) == {"command": CHOSEN}
        assert tool == {"role": "tool", "tool_call_id": call.call_id, "content": "/home/ann"}


TEXT_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.content_part.added",
    "response.output_text.delta",
    "response.output_text.done",
    "response.content_part.done",
    "response.output_item.done",
    "response.completed",
]
CALL_EVENTS = [
    "response.created",
    "response.in_progress",
    "response.output_item.added",
    "response.function_call_arguments.delta",
    "response.function_call_arguments.done",
    "response.output_item.done",
    "response.completed",
]


def test_a_streamed_response_is_openais_event_sequence(
    stub: StubServer, serving: BackgroundServer
) -> None:
    script_turns(stub, text=True)
    events = list(client_of(serving).responses.create(model="turnbon", input=QUESTION, stream=True))
    assert [e.type for e in events] == TEXT_EVENTS
    assert [e.sequence_number for e in events] == list(range(len(events)))
    deltas = [e.delta for e in events if e.type == "response.output_text.delta"]
    assert "".join(deltas) == CHOSEN
    completed = events[-1]
    assert completed.type == "response.completed"
    assert completed.response.output_text == CHOSEN
    assert completed.response.usage is not None and completed.response.usage.total_tokens == 72
    assert (completed.response.model_extra or {})["turnbon"]["n_requested"] == 3
    # as OpenAI sends it: each event named by its type, no [DONE]
    stub.reset()
    script_turns(stub, text=True)
    body = {"model": "turnbon", "input": QUESTION, "stream": True}
    with httpx.stream("POST", f"{serving.base_url}/responses", json=body) as raw:
        assert raw.headers["content-type"].startswith("text/event-stream")
        frames = [f for f in raw.read().decode().split("\n\n") if f]
    for frame in frames:
        name, data = frame.split("\n")
        assert name == f"event: {json.loads(data.removeprefix('data: '))['type']}"


@pytest.mark.parametrize("tools", [None, [SHELL]], ids=["text", "function-call"])
def test_the_sdks_stream_helper_assembles_the_plain_answer(
    stub: StubServer, serving: BackgroundServer, tools: Any
) -> None:
    request: dict[str, Any] = {"model": "turnbon", "input": QUESTION}
    if tools:
        request["tools"] = tools
    script_turns(stub, text=not tools)
    plain = client_of(serving).responses.create(**request)
    stub.reset()
    script_turns(stub, text=not tools)
    with client_of(serving).responses.stream(**request) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds == (CALL_EVENTS if tools else TEXT_EVENTS)
    assert final.output_text == plain.output_text
    shape = [
        (i.type, getattr(i, "name", None), getattr(i, "arguments", None)) for i in final.output
    ]
    assert shape == [
        (i.type, getattr(i, "name", None), getattr(i, "arguments", None)) for i in plain.output
    ]
    assert final.usage == plain.usage and final.usage is not None
    assert (final.model_extra or {})["turnbon"]["selector"] == "llm:openai/stub"


class Place(BaseModel):
    city: str


def test_a_json_schema_format_reaches_the_upstream_as_response_format(
    stub: StubServer, serving: BackgroundServer
) -> None:
    stub.script(chat_completion('{"city": "Paris"}'))  # unanimous
    parsed = client_of(serving).responses.parse(model="turnbon", input=QUESTION, text_format=Place)
    assert parsed.output_parsed == Place(city="Paris")
    for sent in generator_bodies(stub):
        given = sent["response_format"]
        assert given["type"] == "json_schema" and given["json_schema"]["name"] == "Place"
        assert given["json_schema"]["strict"] is True
        assert given["json_schema"]["schema"]["properties"] == {
            "city": {"title": "City", "type": "string"}
        }


def test_fields_that_change_nothing_are_accepted_and_settings_reach_the_upstream(
    stub: StubServer, serving: BackgroundServer
) -> None:
    for store in (True, False):
        stub.reset()
        script_turns(stub, text=True)
        response = client_of(serving).responses.create(
            model="turnbon",
            input=QUESTION,
            store=store,
            metadata={"run": "r-7"},
            include=[],
            truncation="auto",
            user="ann",
            temperature=0.4,
            max_output_tokens=300,
        )
        assert response.output_text == CHOSEN
        for sent in generator_bodies(stub):
            assert not {"store", "metadata", "include", "truncation", "user"} & set(sent)
            assert sent["temperature"] == 0.4
            assert sent.get("max_tokens", sent.get("max_completion_tokens")) == 300


@pytest.mark.parametrize(
    ("body", "param", "says"),
    [
        ({"input": QUESTION, "temperature": 3}, "temperature", "from 0 to 2"),
        ({"input": QUESTION, "max_output_tokens": 0}, "max_output_tokens", "integer from 1"),
        ({"input": QUESTION, "conversation": 5}, "conversation", "a conversation id"),
        ({"input": 5}, "input", "a string or a list"),
        ({"input": [{"type": "web_search_call", "id": "ws_1"}]}, "input", "item_reference"),
        ({"input": [{"role": "user"}]}, "input", "needs role, content"),
        ({"input": QUESTION, "tools": [{"type": "web_search"}]}, "tools", "function tool"),
        (
            {"input": QUESTION, "text": {"format": {"type": "json_schema"}}},
            "text.format",
            "'json_schema'",
        ),
        ({"input": QUESTION, "tool_choice": "always"}, "tool_choice", "'required'"),
        ({"input": QUESTION, "background": True}, "background", "not supported"),
        ({"input": QUESTION, "api_base": "http://x"}, "api_base", "the server's"),
        ({"input": QUESTION, "frobnicate": 1}, "frobnicate", "unsupported request field"),
    ],
)
def test_a_bad_body_is_a_400_naming_its_field_before_any_call(
    stub: StubServer, serving: BackgroundServer, body: dict[str, Any], param: str, says: str
) -> None:
    response = httpx.post(f"{serving.base_url}/responses", json={"model": "turnbon", **body})
    assert response.status_code == 400
    problem = response.json()["error"]
    assert problem["type"] == "invalid_request_error" and problem["param"] == param
    assert says in problem["message"], problem["message"]
    assert stub.requests == []  # nothing went upstream


def test_the_sdk_sees_a_bad_request_and_a_body_that_is_not_json(
    stub: StubServer, serving: BackgroundServer
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        client_of(serving).responses.create(model="turnbon", input=QUESTION, temperature=3)
    assert caught.value.param == "temperature"
    broken = httpx.post(
        f"{serving.base_url}/responses",
        content="{not json",
        headers={"content-type": "application/json"},
    )
    assert broken.status_code == 400 and "not valid JSON" in broken.json()["error"]["message"]
    assert stub.requests == []


def test_upstream_failures_come_as_on_the_chat_endpoint(
    stub: StubServer, serving: BackgroundServer
) -> None:
    said = "max_tokens is too large: this model supports at most 16384 completion tokens"
    stub.script(error(400, f"{said} (key {UPSTREAM_KEY})"))
    with pytest.raises(openai.BadRequestError) as caught:
        client_of(serving).responses.create(model="turnbon", input=QUESTION)
    assert caught.value.message.endswith(f"{said} (key [REDACTED])")  # its words, no key
    stub.reset()
    stub.script(error(503, "overloaded"))  # retried, then given up
    with pytest.raises(openai.APIStatusError) as failed:
        client_of(serving).responses.create(model="turnbon", input=QUESTION)
    assert failed.value.status_code == 502
    assert (failed.value.body or {})["code"] == "all_candidates_failed"  # type: ignore[union-attr]


def test_a_long_streamed_turn_is_kept_alive_until_its_events(stub: StubServer) -> None:
    stub.script(StubResponse(body=chat_completion("same answer"), delay=0.6))  # unanimous
    body = {"model": "turnbon", "input": QUESTION, "stream": True}
    with BackgroundServer(serve_config(stub, keepalive_s=0.1)) as running:
        with httpx.stream("POST", f"{running.base_url}/responses", json=body) as response:
            frames = [f for f in response.read().decode().split("\n\n") if f]
        with client_of(running).responses.stream(model="turnbon", input=QUESTION) as stream:
            final = stream.get_final_response()
    comments = [f for f in frames if f.startswith(":")]
    assert comments and frames[: len(comments)] == comments  # all before the first event
    assert frames[-1].startswith("event: response.completed")
    assert final.output_text == "same answer"


# ------------------------------------------------------------------- the recipes


def test_the_page_has_the_responses_recipes() -> None:
    here = {name for name, test in RUN_BY.items() if test.endswith("/test_serve_responses.py")}
    assert here == {"openai-responses", "openai-agents"}


def test_the_openai_sdk_responses_recipe(
    server: BackgroundServer,  # noqa: F811
    upstream: StubServer,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    script(upstream, weather_call, text_answer)
    run_recipe("openai-responses", server)
    assert_the_chosen_call_ran(upstream)
    first, second = turns(upstream)
    assert capsys.readouterr().out.splitlines() == [
        f"4 candidates, {SELECTOR}: {tokens(first)} tokens",
        f"4 candidates, unanimous: {tokens(second)} tokens",
        ANSWER,
    ]


def test_openai_agents_runs_its_tool_loop_on_the_server(
    server: BackgroundServer,  # noqa: F811
    upstream: StubServer,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    script(upstream, weather_call, text_answer)
    namespace = run_recipe("openai-agents", server)
    assert_the_chosen_call_ran(upstream)  # the agent ran the selector's pick, and only it
    first, second = turns(upstream)
    assert capsys.readouterr().out.splitlines() == [
        f"{tokens(first)} tokens",
        f"{tokens(second)} tokens",
        ANSWER,
    ]
    assert namespace["result"].final_output == ANSWER


def test_openai_agents_run_streamed(
    server: BackgroundServer,  # noqa: F811
    upstream: StubServer,  # noqa: F811
) -> None:
    from agents import OpenAIResponsesModel, Runner
    from openai import AsyncOpenAI

    script(upstream, weather_call, text_answer)
    recipe = run_recipe("openai-agents", server)  # (its own run answered first)
    # a client of its own: the recipe's is bound to the event loop its asyncio.run closed
    client = AsyncOpenAI(base_url=server.base_url, api_key="none")
    agent = recipe["agent"].clone(model=OpenAIResponsesModel(model="turnbon", openai_client=client))
    upstream.reset()
    script(upstream, weather_call, text_answer)
    deltas: list[str] = []
    calls: list[Any] = []

    async def run() -> Any:
        result = Runner.run_streamed(agent, "What is the weather in Paris?")
        async for event in result.stream_events():
            if (
                event.type == "raw_response_event"
                and event.data.type == "response.output_text.delta"
            ):
                deltas.append(event.data.delta)
            if event.type == "run_item_stream_event" and event.name == "tool_called":
                calls.append(json.loads(event.item.raw_item.arguments))  # type: ignore[union-attr]
        return result

    result = asyncio.run(run())
    assert calls == [{"city": CITY}]
    assert "".join(deltas) == ANSWER and result.final_output == ANSWER
    assert_the_chosen_call_ran(upstream)
    assert sum(r.usage.total_tokens for r in result.raw_responses) == tokens(upstream.requests)
