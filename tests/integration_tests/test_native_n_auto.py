"""`native_n="auto"`: one call with `n=N` for a single model id whose provider LiteLLM
says takes `n`; separate calls for a `ModelSpec` pool, and from the first turn on which the
endpoint refused or ignored `n`."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from tests.helpers import generator_requests, stub_engine
from turnbon_graph import FirstSelector, TurnEngine, turn_record
from turnbon_graph.client import LiteLLMClient
from turnbon_graph.config import TurnConfig
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.generate import CandidateGenerator, ModelSpec
from turnbon_graph.testing import CapturedRequest, StubServer, chat_completion, choice, error

ASK = [HumanMessage("list the files")]


def honours_n(request: CapturedRequest) -> dict[str, Any]:
    n = int((request.body or {}).get("n") or 1)
    return chat_completion(choices=[choice(f"answer {i}", index=i) for i in range(n)])


def sent_n(stub: StubServer) -> list[Any]:
    return [(r.body or {}).get("n") for r in generator_requests(stub.requests)]


async def next_turn_asks_one_by_one(stub: StubServer, engine: TurnEngine, n: int) -> None:
    """The engine's next turn, on an endpoint that now honours `n`, still calls one by one."""
    stub.reset()
    stub.script(honours_n)
    record = turn_record(await engine.run(ASK))
    assert sent_n(stub) == [None] * n
    assert record is not None and record.sampling.native_n is False


async def test_auto_asks_once_with_n_where_the_endpoint_honours_it(stub: StubServer) -> None:
    stub.script(honours_n)
    engine = stub_engine(stub, n=4, native_n="auto", selector=FirstSelector())
    message = await engine.run(ASK)
    assert sent_n(stub) == [4]
    record = turn_record(message)
    assert record is not None and record.n_ok == 4
    assert record.usage.generator.calls == 1  # one call's usage, counted once
    assert record.sampling.native_n is True  # the record says which path the turn took


async def test_auto_makes_separate_calls_for_a_model_spec(stub: StubServer) -> None:
    stub.script(honours_n)
    engine = stub_engine(stub, [ModelSpec(model="openai/stub", n=1)], n=4, native_n="auto")
    record = turn_record(await engine.run(ASK))
    assert sent_n(stub) == [None] * 4
    assert record is not None and record.sampling.native_n is False


async def test_auto_stops_asking_for_n_once_the_endpoint_ignores_it(stub: StubServer) -> None:
    stub.script(lambda r: chat_completion(f"answer {len(stub.requests)}"))  # one choice, always
    engine = stub_engine(stub, n=4, native_n="auto", selector=FirstSelector())
    first = turn_record(await engine.run(ASK))
    assert first is not None and first.n_ok == 4  # the missing three came from single calls
    assert sent_n(stub) == [4, None, None, None]
    await next_turn_asks_one_by_one(stub, engine, 4)


async def test_auto_stops_asking_for_n_once_the_endpoint_refuses_it(stub: StubServer) -> None:
    stub.route(lambda r: "n" in (r.body or {}), error(400, "n is not supported here"))
    stub.script(honours_n)
    engine = stub_engine(stub, n=3, native_n="auto", selector=FirstSelector())
    await engine.run(ASK)
    assert sent_n(stub) == [3, None, None, None]
    await next_turn_asks_one_by_one(stub, engine, 3)


async def test_true_keeps_asking_for_n(stub: StubServer) -> None:
    stub.script(lambda r: chat_completion(f"answer {len(stub.requests)}"))
    engine = stub_engine(stub, n=3, native_n=True, selector=FirstSelector())
    await engine.run(ASK)
    await engine.run(ASK)
    assert sent_n(stub) == [3, None, None, 3, None, None]


def test_native_n_takes_true_false_or_auto() -> None:
    assert TurnConfig(native_n="auto").native_n == "auto"
    with pytest.raises(ValueError):
        TurnConfig(native_n="sometimes")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        CandidateGenerator("openai/stub", LiteLLMClient(), native_n="sometimes")  # type: ignore[arg-type]
