"""`native_n="auto"`, the default: one call with `n=N` for a single model id whose
provider LiteLLM says takes `n`; separate calls for a `ModelSpec` pool, a mixed pool, early
commit and adaptive N (the record says why), and from the first turn on which the endpoint
refused or ignored `n`. One call's usage is the turn's, shared out among its candidates."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from tests.helpers import generator_requests, stub_engine
from turnbon_graph import AdaptiveN, EarlyCommit, TurnEngine, turn_record
from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph.config import TurnConfig
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.selectors import FirstSelector
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    choice,
    error,
    tool_call,
)
from turnbon_graph.turn.generator import CandidateGenerator, ModelSpec

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


def distinct_tool_calls(request: CapturedRequest) -> dict[str, Any]:
    """An endpoint that honours `n` with independent draws: a different action each."""
    n = int((request.body or {}).get("n") or 1)
    calls = [[tool_call("shell", {"command": "echo" + " one" * (5 * i + 1)})] for i in range(n)]
    return chat_completion(
        choices=[choice(None, calls[i], index=i) for i in range(n)],
        usage={"prompt_tokens": 1000, "completion_tokens": 400, "total_tokens": 1400},
    )


async def test_the_default_asks_once_for_all_n_and_keeps_the_calls_usage(stub: StubServer) -> None:
    stub.script(distinct_tool_calls)
    record = turn_record(await stub_engine(stub, n=8, selector=FirstSelector()).run(ASK))
    assert sent_n(stub) == [8]
    assert record is not None and record.n_ok == 8
    assert len({c.tool_calls[0]["args"]["command"] for c in record.candidates}) == 8
    assert record.sampling.native_n is True and record.sampling.separate_calls is None
    # The turn's usage is exactly the call's: the prompt once, the completions summed.
    generator = record.usage.generator
    assert (generator.calls, generator.prompt_tokens, generator.completion_tokens) == (1, 1000, 400)
    # Each candidate's share follows its own completion tokens, marked as an estimate.
    assert all(c.usage_estimated for c in record.candidates)
    completions = [c.usage.completion_tokens for c in record.candidates]
    assert completions == sorted(completions) and completions[0] < completions[-1]
    # A call per candidate would have sent, and billed, the prompt 8 times.
    assert record.prompt_tokens_a_call_each == 8 * 1000


@pytest.mark.parametrize(
    ("options", "why"),
    [
        ({"early_commit": EarlyCommit(min_candidates=2)}, "early commit"),
        ({"adaptive": AdaptiveN(first_batch=2)}, "adaptive N"),
        ({"native_n": False}, "native_n=False"),
    ],
)
async def test_what_needs_a_call_each_takes_one_and_says_why(
    stub: StubServer, options: dict[str, Any], why: str
) -> None:
    stub.script(distinct_tool_calls)
    engine = stub_engine(stub, n=4, selector=FirstSelector(), **options)
    record = turn_record(await engine.run(ASK))
    assert None in sent_n(stub) and 4 not in sent_n(stub)
    assert record is not None and record.sampling.native_n is False
    assert record.sampling.separate_calls is not None and why in record.sampling.separate_calls
    assert not any(c.usage_estimated for c in record.candidates)
    assert record.prompt_tokens_a_call_each == record.usage.generator.prompt_tokens


async def test_a_mixed_pool_takes_a_call_each_and_says_why(stub: StubServer) -> None:
    stub.script(distinct_tool_calls)
    engine = stub_engine(stub, ["openai/stub", "openai/other"], n=4, selector=FirstSelector())
    record = turn_record(await engine.run(ASK))
    assert sent_n(stub) == [None] * 4
    assert record is not None and record.sampling.separate_calls == "a pool of several models"


async def test_a_failed_call_with_n_does_not_stop_auto_asking_with_n(stub: StubServer) -> None:
    stub.script(error(503, "overloaded"), distinct_tool_calls)
    engine = stub_engine(stub, n=3, selector=FirstSelector(), max_retries=0)
    await engine.run(ASK)  # the n call failed: this turn's candidates came one call each
    assert sent_n(stub) == [3, None, None, None]
    stub.reset()
    stub.script(distinct_tool_calls)
    await engine.run(ASK)  # an outage is not a refusal: the next turn asks with n again
    assert sent_n(stub) == [3]
