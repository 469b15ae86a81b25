"""ChatTurnBoN.with_structured_output by each method, against the stub: what the
generator calls are asked for, and that the chosen candidate's answer is parsed."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from langchain_core.exceptions import OutputParserException
from langchain_core.messages import AIMessage
from pydantic import BaseModel
from typing_extensions import TypedDict

from tests.helpers import generator_requests, selector_answer, selector_requests, stub_kwargs
from tests.integration_tests.test_chat_model import displayed
from turnbon_graph import ChatTurnBoN, ConfigurationError, turn_record
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

N = 3
CITIES = ("Paris", "Rome", "Oslo")


class Destination(BaseModel):
    """Where to go."""

    city: str


class DestinationDict(TypedDict):
    """Where to go."""

    city: str


def make_model(stub: StubServer) -> ChatTurnBoN:
    return ChatTurnBoN(model="openai/stub", n=N, completion_kwargs=stub_kwargs(stub.base_url))


def script_json(stub: StubServer, pick: int) -> None:
    """Every candidate answers a different city as JSON text; the selector picks `pick`."""
    counter = itertools.count()

    def generator(request: CapturedRequest) -> dict[str, Any]:
        return chat_completion(json.dumps({"city": CITIES[next(counter) % N]}))

    stub.route(is_selector_request, selector_answer(pick))
    stub.script(generator)


def chosen_city(stub: StubServer, pick: int) -> str:
    """The city the selector saw at position `pick`."""
    [selection] = selector_requests(stub.requests)
    return str(json.loads(displayed(selection)[pick]["content"])["city"])


async def ask(stub: StubServer, method: str, pick: int, schema: type = Destination) -> Any:
    """The structured answer by `method`, the selector picking display position `pick`."""
    script_json(stub, pick)
    chat = make_model(stub).with_structured_output(schema, method=method)  # type: ignore[arg-type]
    return await chat.ainvoke("Where? Answer in JSON with a city key.")


def response_formats(stub: StubServer) -> list[Any]:
    return [r.body.get("response_format") for r in generator_requests(stub.requests) if r.body]


async def test_json_schema_sends_the_schema_and_parses_the_chosen_answer(
    stub: StubServer,
) -> None:
    result = await ask(stub, "json_schema", pick=2)
    assert isinstance(result, Destination)
    assert result.city == chosen_city(stub, 2)
    formats = response_formats(stub)
    assert len(formats) == N
    for response_format in formats:
        assert response_format["type"] == "json_schema"
        assert response_format["json_schema"]["name"] == "Destination"
        assert response_format["json_schema"]["schema"]["required"] == ["city"]
    # The selector's own call keeps its own format.
    [selection] = selector_requests(stub.requests)
    assert selection.body is not None
    assert "Destination" not in json.dumps(selection.body.get("response_format"))


async def test_json_schema_with_a_typeddict_gives_a_dict(stub: StubServer) -> None:
    result = await ask(stub, "json_schema", pick=0, schema=DestinationDict)
    assert result == {"city": chosen_city(stub, 0)}


async def test_json_mode_asks_for_a_json_object(stub: StubServer) -> None:
    result = await ask(stub, "json_mode", pick=1)
    assert isinstance(result, Destination)
    assert result.city == chosen_city(stub, 1)
    assert response_formats(stub) == [{"type": "json_object"}] * N


async def test_structured_output_streams_the_parsed_answer(stub: StubServer) -> None:
    script_json(stub, pick=0)
    chat = make_model(stub).with_structured_output(Destination, method="json_schema")
    parsed = [chunk async for chunk in chat.astream("Where?")]
    assert parsed and all(isinstance(p, Destination) for p in parsed)
    assert parsed[-1] == Destination(city=chosen_city(stub, 0))


async def test_include_raw_gives_the_chosen_message_too(stub: StubServer) -> None:
    script_json(stub, pick=1)
    chat = make_model(stub).with_structured_output(
        Destination, method="json_schema", include_raw=True
    )
    result = await chat.ainvoke("Where?")
    assert isinstance(result, dict)
    assert result["parsing_error"] is None
    raw = result["raw"]
    assert isinstance(raw, AIMessage) and turn_record(raw) is not None
    assert result["parsed"] == Destination.model_validate_json(str(raw.content))


async def test_a_reply_without_the_tool_call_is_an_error_not_none(stub: StubServer) -> None:
    # The provider ignored the forced tool: every candidate answers in prose.
    stub.script(chat_completion("I would rather not say."))
    chat = make_model(stub).with_structured_output(Destination)
    with pytest.raises(OutputParserException, match="no call of the 'Destination' tool"):
        await chat.ainvoke("Where?")
    raw = make_model(stub).with_structured_output(Destination, include_raw=True)
    result = await raw.ainvoke("Where?")
    assert isinstance(result, dict)
    assert result["parsed"] is None
    assert isinstance(result["parsing_error"], OutputParserException)


async def test_function_calling_with_a_dict_schema(stub: StubServer) -> None:
    stub.script(chat_completion(tool_calls=[tool_call("Destination", {"city": "Rome"})]))
    chat = make_model(stub).with_structured_output(Destination.model_json_schema())
    assert await chat.ainvoke("Where?") == {"city": "Rome"}
    for request in generator_requests(stub.requests):
        assert request.body is not None and request.body["tool_choice"] == "required"


def test_an_unknown_method_or_argument_is_a_configuration_error(stub: StubServer) -> None:
    model = make_model(stub)
    with pytest.raises(ConfigurationError, match="json_schema"):
        model.with_structured_output(Destination, method="xml")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="needs a schema"):
        model.with_structured_output(None, method="json_schema")
    with pytest.raises(ConfigurationError, match="unsupported arguments"):
        model.with_structured_output(Destination, tools=[])
    assert stub.requests == []
