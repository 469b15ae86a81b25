"""ChatTurnBoN's usage against the stub: generator and selector tokens booked under
their own models, cached prompt tokens kept; and the model survives pickling."""

from __future__ import annotations

import itertools
import pickle
from collections.abc import Callable
from typing import Any

import cloudpickle
import pytest
from langchain_core.callbacks import get_usage_metadata_callback
from langchain_core.messages import AIMessage

from tests.helpers import selector_answer, selector_requests, stub_kwargs
from turnbon_graph import ChatTurnBoN, TurnRecord, turn_record
from turnbon_graph.records import Usage
from turnbon_graph.testing import CapturedRequest, StubServer, chat_completion, is_selector_request

N = 3
GENERATOR_USAGE = {
    "prompt_tokens": 50,
    "completion_tokens": 6,
    "total_tokens": 56,
    "prompt_tokens_details": {"cached_tokens": 32},
    "completion_tokens_details": {"reasoning_tokens": 2},
}
SELECTOR_USAGE = {
    "prompt_tokens": 200,
    "completion_tokens": 9,
    "total_tokens": 209,
    "prompt_tokens_details": {"cached_tokens": 128},
}


def script(stub: StubServer) -> None:
    """Distinct answers (so the selector is asked) from a provider that reports its
    model as "stub-2026" and serves part of each prompt from its cache."""
    counter = itertools.count()

    def generator(request: CapturedRequest) -> dict[str, Any]:
        return chat_completion(f"answer {next(counter)}", model="stub-2026", usage=GENERATOR_USAGE)

    answer = selector_answer(1)
    answer["usage"] = SELECTOR_USAGE
    stub.route(is_selector_request, answer)
    stub.script(generator)


def make_model(stub: StubServer, **options: Any) -> ChatTurnBoN:
    return ChatTurnBoN(
        model="openai/stub",
        n=N,
        selector="openai/judge",
        completion_kwargs=stub_kwargs(stub.base_url),
        selector_kwargs=stub_kwargs(stub.base_url),
        **options,
    )


def booked(prompt: int, completion: int, cached: int, reasoning: int) -> dict[str, Any]:
    return {
        "input_tokens": prompt,
        "output_tokens": completion,
        "total_tokens": prompt + completion,
        "input_token_details": {"cache_read": cached},
        "output_token_details": {"reasoning": reasoning},
    }


async def test_usage_is_booked_under_the_generator_and_the_selector_model(
    stub: StubServer,
) -> None:
    script(stub)
    with get_usage_metadata_callback() as callback:
        message = await make_model(stub).ainvoke("Which?")
    assert isinstance(message, AIMessage)
    generator = booked(50 * N, 6 * N, 32 * N, 2 * N)
    assert message.usage_metadata == generator
    assert message.response_metadata["model_name"] == "stub-2026"
    assert callback.usage_metadata == {
        "stub-2026": generator,
        "openai/judge": booked(200, 9, 128, 0),
    }
    record = turn_record(message)
    assert record is not None
    assert record.usage.generator.cached_tokens == 32 * N
    assert record.usage.selector.cached_tokens == 128


def test_sync_and_streamed_calls_book_the_same(stub: StubServer) -> None:
    script(stub)
    model = make_model(stub)
    with get_usage_metadata_callback() as invoked:
        model.invoke("Which?")
    with get_usage_metadata_callback() as streamed:
        chunks = list(model.stream("Which?"))
    assert invoked.usage_metadata == streamed.usage_metadata
    assert set(streamed.usage_metadata) == {"stub-2026", "openai/judge"}
    assert [c.usage_metadata is not None for c in chunks].count(True) == 1


async def test_no_selector_run_when_the_candidates_agree(stub: StubServer) -> None:
    stub.script(chat_completion("same", model="stub-2026", usage=GENERATOR_USAGE))
    with get_usage_metadata_callback() as callback:
        await make_model(stub).ainvoke("Which?")
    assert callback.usage_metadata == {"stub-2026": booked(50 * N, 6 * N, 32 * N, 2 * N)}
    assert selector_requests(stub.requests) == []


def test_cached_tokens_add_up_and_old_records_still_load() -> None:
    total = Usage(calls=1, prompt_tokens=10, cached_tokens=4) + Usage(
        calls=1, prompt_tokens=20, cached_tokens=8
    )
    assert total.cached_tokens == 12 and total.prompt_tokens == 30
    # A record written before `cached_tokens` existed.
    old = {"calls": 1, "prompt_tokens": 5, "completion_tokens": 1, "reasoning_tokens": 0}
    record = TurnRecord.model_validate(
        {
            "turn_id": "t",
            "n_requested": 1,
            "n_ok": 1,
            "selected_index": 0,
            "selector": "single",
            "agreement": 1.0,
            "candidates": [{"index": 0, "model": "m", "usage": old}],
            "usage": {"generator": old},
            "latency_s": {},
        }
    )
    assert record.usage.generator.cached_tokens == 0
    assert record.candidates[0].usage.cached_tokens == 0


Dumps = Callable[[Any], bytes]


@pytest.mark.parametrize("dumps", [pickle.dumps, cloudpickle.dumps], ids=["pickle", "cloudpickle"])
async def test_the_model_pickles_and_answers_after_unpickling(
    stub: StubServer, dumps: Dumps
) -> None:
    script(stub)
    # Concurrency cap and rate limit: the engine's client holds semaphores and a throttler.
    model = make_model(stub, max_concurrency=2, rate_limit=100.0)
    await model.ainvoke("Which?")  # a semaphore now exists for this loop
    engine = model.engine
    copy = pickle.loads(dumps(model))
    assert isinstance(copy, ChatTurnBoN)
    assert copy.n == N and copy.max_concurrency == 2
    message = await copy.ainvoke("Which?")
    assert isinstance(message, AIMessage)
    record = turn_record(message)
    assert record is not None and record.n_ok == N and record.selector == "llm:openai/judge"
    assert copy.engine is not engine
    # The key went along, as a secret: it reached the stub and no repr shows it.
    assert "sk-test-key" not in repr(copy)
    assert all(r.header("Authorization") == "Bearer sk-test-key" for r in stub.requests)
