"""Candidate generation through LiteLLM's real HTTP path against the loopback stub."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from tests.helpers import stub_engine
from turnbon_graph import AllCandidatesFailedError, TurnEngine, turn_record
from turnbon_graph.selectors import FirstSelector
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    choice,
    error,
    tool_call,
)

ASK = [HumanMessage("list the files")]


def engine(stub: StubServer, n: int = 4, **options: Any) -> TurnEngine:
    """An engine on the path of one call per candidate (what pools, early commit and
    endpoints without `n` take); the one-call path is test_native_n_auto.py's."""
    options.setdefault("selector", FirstSelector())
    options.setdefault("max_retries", 0)
    options.setdefault("native_n", False)
    return stub_engine(stub, n=n, **options)


def numbered(request: CapturedRequest) -> dict[str, Any]:
    """A distinct tool call per request, so that no turn is unanimous by accident."""
    return chat_completion(tool_calls=[tool_call("shell", {"command": f"echo {time.monotonic()}"})])


async def test_n_concurrent_calls_carry_messages_and_tools(stub: StubServer) -> None:
    stub.script(numbered)
    tools = [{"type": "function", "function": {"name": "shell", "parameters": {"type": "object"}}}]
    message = await engine(stub, n=5).run(ASK, tools=tools)
    requests = stub.requests
    assert len(requests) == 5
    for request in requests:
        assert request.body is not None
        assert request.body["messages"] == [{"role": "user", "content": "list the files"}]
        assert request.body["tools"][0]["function"]["name"] == "shell"
        assert "n" not in request.body
    assert message.tool_calls[0]["name"] == "shell"


async def test_k_of_n_failures_are_recorded_and_the_turn_goes_on(stub: StubServer) -> None:
    stub.script(
        error(500, "upstream exploded"),
        chat_completion("not json {", finish_reason="stop"),
        StubResponse(body="{this is not json"),
        chat_completion(tool_calls=[tool_call("shell", {"command": "ls"})]),
        repeat_last=True,
    )
    message = await engine(stub, n=4, max_concurrency=1).run(ASK)
    record = turn_record(message)
    assert record is not None
    assert record.n_requested == 4 and record.n_ok == 2
    failed = [c for c in record.candidates if c.error]
    assert len(failed) == 2
    assert any("upstream exploded" in (c.error or "") for c in failed)
    assert all(c.content is None and c.tool_calls == [] for c in failed)


async def test_all_failing_raises_naming_model_and_last_error(stub: StubServer) -> None:
    stub.script(error(503, "service melted"))
    with pytest.raises(AllCandidatesFailedError) as caught:
        await engine(stub, n=3).run(ASK)
    text = str(caught.value)
    assert "openai/stub" in text and "service melted" in text and "3" in text
    assert caught.value.model == "openai/stub"


async def test_retryable_errors_are_retried_honouring_retry_after(stub: StubServer) -> None:
    stub.script(error(429, "slow down", retry_after=0.4), chat_completion("ok"))
    message = await engine(stub, n=1, max_retries=2).run(ASK)
    assert message.content == "ok"
    first, second = stub.requests
    # The client waited at least what Retry-After asked (its own backoff would be shorter).
    assert second.received_at - first.received_at >= 0.35


async def test_server_errors_and_dropped_connections_are_retried(stub: StubServer) -> None:
    stub.script(error(502), StubResponse(drop=True), chat_completion("third time"))
    message = await engine(stub, n=1, max_retries=2).run(ASK)
    assert message.content == "third time"
    assert len(stub.requests) == 3


async def test_client_errors_are_not_retried(stub: StubServer) -> None:
    stub.script(error(400, "bad request body"))
    with pytest.raises(AllCandidatesFailedError, match="bad request body"):
        await engine(stub, n=1, max_retries=3).run(ASK)
    assert len(stub.requests) == 1


async def test_a_timeout_fails_that_candidate_only(stub: StubServer) -> None:
    stub.script(StubResponse(body=chat_completion("too late"), delay=3.0), numbered)
    message = await engine(stub, n=3, timeout=0.5).run(ASK)
    record = turn_record(message)
    assert record is not None and record.n_ok == 2
    (late,) = [c for c in record.candidates if c.error]
    assert "timeout" in (late.error or "").lower() or "timed out" in (late.error or "").lower()


async def test_max_concurrency_caps_calls_in_flight(stub: StubServer) -> None:
    delay = 0.25
    stub.script(lambda r: StubResponse(body=numbered(r), delay=delay))
    await engine(stub, n=6, max_concurrency=2).run(ASK)
    arrivals = sorted(r.received_at for r in stub.requests)
    # At each arrival, count requests that arrived earlier and cannot have been answered yet.
    in_flight = [sum(1 for s in arrivals if s <= t < s + delay) for t in arrivals]
    assert max(in_flight) == 2


async def test_rate_limit_spaces_requests(stub: StubServer) -> None:
    stub.script(numbered)
    await engine(stub, n=3, rate_limit=4).run(ASK)  # 4/s: all three fit in one second
    await engine(stub, n=3, rate_limit=2).run(ASK)  # 2/s: the third waits for the window
    arrivals = [r.received_at for r in stub.requests]
    assert arrivals[5] - arrivals[3] >= 0.9


async def test_native_n_makes_one_call(stub: StubServer) -> None:
    def three_choices(request: CapturedRequest) -> dict[str, Any]:
        assert request.body is not None
        n = request.body["n"]
        return chat_completion(
            choices=[
                choice(tool_calls=[tool_call("shell", {"command": f"ls {i}"})], index=i)
                for i in range(n)
            ],
            usage={"prompt_tokens": 20, "completion_tokens": 30, "total_tokens": 50},
        )

    stub.script(three_choices)
    message = await engine(stub, n=3, native_n=True).run(ASK)
    assert len(stub.requests) == 1 and stub.requests[0].body["n"] == 3  # type: ignore[index]
    record = turn_record(message)
    assert record is not None and record.n_ok == 3
    assert record.usage.generator.prompt_tokens == 20
    assert record.usage.generator.completion_tokens == 30


async def test_native_n_falls_back_to_separate_calls_when_refused(stub: StubServer) -> None:
    stub.route(
        lambda r: r.body is not None and "n" in r.body, error(400, "n is not supported here")
    )
    stub.script(numbered)
    message = await engine(stub, n=3, native_n=True).run(ASK)
    bodies = [r.body or {} for r in stub.requests]
    assert bodies[0].get("n") == 3
    assert [b.get("n") for b in bodies[1:]] == [None, None, None]
    record = turn_record(message)
    assert record is not None and record.n_ok == 3


async def test_candidates_arrive_as_they_finish(stub: StubServer) -> None:
    gen = engine(stub, n=2).generator
    # A process's first LiteLLM call does its one-off setup before it sends, and that time
    # lands in whichever candidate's latency ran it (run alone under load, the fast one's
    # came out longer than the slow one's): pay for it before the timed turn.
    [_ async for _ in gen.stream([HumanMessage("warm up")], 1)]
    stub.script(
        StubResponse(body=chat_completion("slow"), delay=1.5),
        StubResponse(body=chat_completion("fast"), delay=0.0),
    )
    arrived = [c async for c in gen.stream([HumanMessage("x")], 2)]
    # Which of the two concurrent requests reaches the stub first (and so gets the slow
    # reply) is up to the scheduler; what must hold is that the fast one is yielded first.
    assert [c.message.content for c in arrived if c.message] == ["fast", "slow"]
    assert sorted(c.index for c in arrived) == [0, 1]
    assert arrived[0].latency_s < arrived[1].latency_s


async def test_cancelling_a_turn_cancels_every_call_in_flight(stub: StubServer) -> None:
    stub.script(StubResponse(body=chat_completion("never"), delay=10.0))
    before = asyncio.all_tasks()
    turn = asyncio.create_task(engine(stub, n=4).run(ASK))
    for _ in range(500):  # wait until all four requests are at the stub
        if len(stub.requests) == 4:
            break
        await asyncio.sleep(0.02)
    turn.cancel()
    with pytest.raises(asyncio.CancelledError):
        await turn
    leftover = asyncio.all_tasks() - before - {asyncio.current_task()}
    assert not [t for t in leftover if not t.done()]
    for _ in range(200):  # the stub sees every connection close (generous wait, not a bound)
        if stub.disconnects == 4:
            break
        await asyncio.sleep(0.02)
    assert stub.disconnects == 4


async def test_private_reasoning_stays_on_the_message_only(stub: StubServer) -> None:
    stub.script(chat_completion("answer", reasoning_content="THINKING-HARD"))
    message = await engine(stub, n=1).run(ASK)
    assert message.additional_kwargs["reasoning_content"] == "THINKING-HARD"
    record = turn_record(message)
    assert record is not None and "THINKING-HARD" not in json.dumps(record.to_json())


async def test_malformed_tool_arguments_become_invalid_tool_calls(stub: StubServer) -> None:
    bad = {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{oops"}}
    stub.script(chat_completion(tool_calls=[bad]))
    message = await engine(stub, n=1).run(ASK)
    assert message.tool_calls == []
    assert message.invalid_tool_calls[0]["name"] == "shell"


async def test_a_retry_after_longer_than_the_cap_fails_the_call_at_once(
    stub: StubServer,
) -> None:
    stub.script(error(429, "come back later", retry_after=120), chat_completion("ok"))
    with pytest.raises(AllCandidatesFailedError, match="retry after 120 s, longer than the 60 s"):
        await engine(stub, n=1, max_retries=2).run(ASK)
    assert len(stub.requests) == 1  # not waited out, not retried
