"""Adaptive N, early commit, budgets, deduplication and ignored arguments, in real turns."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from tests.helpers import (
    generator_requests,
    selector_answer,
    selector_requests,
    stub_engine,
    stub_kwargs,
)
from turnbon_graph import AdaptiveN, Budget, EarlyCommit, TurnEngine, turn_record
from turnbon_graph._litellm.loading import load_litellm
from turnbon_graph.records import RECORD_KEY, TurnRecord
from turnbon_graph.selectors import LLMSelector
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)
from turnbon_graph.turn.state import GeneratedTurn

ASK = [HumanMessage("go")]


def shell(command: str, **args: Any) -> dict[str, Any]:
    return chat_completion(tool_calls=[tool_call("shell", {"command": command, **args})])


def engine(stub: StubServer, n: int = 8, **options: Any) -> TurnEngine:
    selector = LLMSelector("openai/judge", completion_kwargs=stub_kwargs(stub.base_url), seed=0)
    return stub_engine(stub, n=n, selector=selector, **options)


async def test_adaptive_commits_on_agreement_without_a_selector(stub: StubServer) -> None:
    stub.script(shell("ls"))
    record = turn_record(await engine(stub, adaptive=AdaptiveN(first_batch=2)).run(ASK))
    assert record is not None
    assert len(generator_requests(stub.requests)) == 2
    assert record.n_requested == 2 and record.sampling.batches == [2]
    assert record.selector == "unanimous"
    assert selector_requests(stub.requests) == []


async def test_adaptive_commits_the_plurality_at_the_threshold(stub: StubServer) -> None:
    stub.route(lambda r: not is_selector_request(r), shell("a"), shell("b"), shell("a"), shell("a"))
    adaptive = AdaptiveN(first_batch=2, step=2, threshold=0.75)
    record = turn_record(await engine(stub, adaptive=adaptive, max_concurrency=1).run(ASK))
    assert record is not None
    assert record.sampling.batches == [2, 2] and record.n_requested == 4
    assert record.selector == "agreement"
    assert record.sampling.stopped == "agreement 0.75 >= 0.75 after 4 calls"
    assert record.candidates[record.selected_index].tool_calls[0]["args"] == {"command": "a"}
    assert selector_requests(stub.requests) == []


async def test_adaptive_samples_to_the_cap_then_selects(stub: StubServer) -> None:
    counter = iter(range(100))
    stub.route(lambda r: not is_selector_request(r), lambda _: shell(f"c{next(counter)}"))
    stub.route(is_selector_request, selector_answer(0))
    adaptive = AdaptiveN(first_batch=2, step=3)
    record = turn_record(await engine(stub, n=8, adaptive=adaptive).run(ASK))
    assert record is not None
    assert record.sampling.batches == [2, 3, 3] and record.n_requested == 8
    assert record.sampling.stopped == "cap of 8 calls reached; selecting"
    assert record.selector == "llm:openai/judge" and len(selector_requests(stub.requests)) == 1


async def test_mutating_actions_need_more_agreeing_candidates(stub: StubServer) -> None:
    def respond(request: CapturedRequest) -> dict[str, Any]:
        return chat_completion(tool_calls=[tool_call("write_file", {"path": "x", "text": "y"})])

    stub.script(respond)
    adaptive = AdaptiveN(first_batch=2, step=2, mutating_tools=frozenset({"write_file"}))
    record = turn_record(await engine(stub, adaptive=adaptive).run(ASK))
    assert record is not None
    # Reads would commit after 2; a unanimous write still needed 4 candidates.
    assert record.sampling.batches == [2, 2] and record.selector == "unanimous"


async def test_early_commit_cancels_stragglers_for_real(stub: StubServer) -> None:
    stub.route(
        lambda r: not is_selector_request(r),
        shell("fast-a"),
        shell("fast-b"),
        StubResponse(body=shell("slow"), delay=60),
    )
    stub.route(is_selector_request, selector_answer(0))
    hedged = engine(stub, n=5, early_commit=EarlyCommit(min_candidates=2, grace_s=0.05))
    # Imported before the clock starts: run first in a process on a loaded machine, the
    # turn's own import of LiteLLM took longer than the timeout. The timeout stays well
    # under the stragglers' delay, so a turn that waited them out still fails here.
    await load_litellm()
    record = turn_record(await asyncio.wait_for(hedged.run(ASK), timeout=30))
    assert record is not None
    # The stub answers in arrival order, which need not be candidate order: the two fast
    # answers may have gone to any two candidates, and the other three must be cancelled.
    done = [c for c in record.candidates if c.index not in record.sampling.cancelled]
    cancelled = [c for c in record.candidates if c.index in record.sampling.cancelled]
    assert record.n_ok == 2 and len(cancelled) == 3
    assert sorted(c.tool_calls[0]["args"]["command"] for c in done) == ["fast-a", "fast-b"]
    assert all("cancelled by early commit" in (c.error or "") for c in cancelled)
    for _ in range(200):  # the stub sees the three connections close
        if stub.disconnects == 3:
            break
        await asyncio.sleep(0.02)
    assert stub.disconnects == 3


async def test_dedupe_shows_each_action_once_with_its_count(stub: StubServer) -> None:
    stub.route(
        lambda r: not is_selector_request(r),
        shell("ls"),
        shell("ls"),
        shell("pytest"),
        shell("ls"),
        repeat_last=False,
    )
    stub.route(is_selector_request, selector_answer(0))
    record = turn_record(await engine(stub, n=4, dedupe=True, max_concurrency=1).run(ASK))
    assert record is not None
    (request,) = selector_requests(stub.requests)
    user = (request.body or {})["messages"][1]["content"]
    assert user.count("<candidate index=") == 2
    assert "proposed by 3" in user
    assert record.permutation is not None and sorted(record.permutation) == [0, 2]
    assert record.selected_index == record.permutation[0]


async def test_ignored_arguments_make_a_turn_unanimous(stub: StubServer) -> None:
    stub.route(
        lambda r: not is_selector_request(r),
        shell("make", timeout=30),
        shell("make", timeout=60),
        repeat_last=True,
    )
    record = turn_record(
        await engine(stub, n=3, ignore_args=["timeout"], max_concurrency=1).run(ASK)
    )
    assert record is not None and record.selector == "unanimous"
    assert selector_requests(stub.requests) == []


def previous_turn(prompt: int, completion: int, calls: int, selector_tokens: int) -> AIMessage:
    """A chosen message from an earlier turn of the episode, as the state holds it."""
    record = {
        "turn_id": "t0",
        "n_requested": calls,
        "n_ok": calls,
        "selected_index": 0,
        "selector": "llm:openai/judge",
        "agreement": 0.5,
        "candidates": [],
        "usage": {
            "generator": {"calls": calls, "prompt_tokens": prompt, "completion_tokens": completion},
            "selector": {"calls": 1, "prompt_tokens": selector_tokens, "completion_tokens": 0},
        },
        "latency_s": {"generate": 0.1, "select": 0.1},
    }
    return AIMessage("", response_metadata={RECORD_KEY: record})


async def test_budget_steps_down_to_fewer_candidates_then_one(stub: StubServer) -> None:
    counter = iter(range(100))
    stub.route(lambda r: not is_selector_request(r), lambda _: shell(f"c{next(counter)}"))
    stub.route(is_selector_request, selector_answer(0))
    # Last turn: 4 calls of 100 tokens each, and a 50-token selector call (450 spent).
    history = [HumanMessage("go"), previous_turn(320, 80, 4, 50)]
    budgeted = engine(stub, n=4, budget=Budget(episode_tokens=450 + 50 + 250))
    record = turn_record(await budgeted.run(history))
    assert record is not None
    assert record.n_requested == 2  # 300 left: a 50-token selector + two 100-token calls
    assert record.sampling.budget == "budget (episode tokens): 2 of 4 candidates"

    stub.reset()
    stub.script(shell("ls"))
    broke = engine(stub, n=4, budget=Budget(episode_tokens=400))
    record = turn_record(await broke.run(history))
    assert record is not None
    assert record.n_requested == 1 and record.selector == "single"  # never fails the run
    assert len(stub.requests) == 1


def previous_one_call_turn(prompt: int, completion: int, k: int, selector: int) -> AIMessage:
    """An earlier turn whose k candidates came from one call with `n` (shares of it)."""
    message = previous_turn(prompt, completion, 1, selector)
    record = message.response_metadata[RECORD_KEY]
    share = {"prompt_tokens": prompt // k, "completion_tokens": completion // k}
    record["candidates"] = [
        {"index": i, "model": "openai/stub", "usage": share, "usage_estimated": True}
        for i in range(k)
    ]
    return message


async def test_a_budget_counts_a_one_call_turns_prompt_once(stub: StubServer) -> None:
    counter = iter(range(100))
    stub.route(lambda r: not is_selector_request(r), lambda _: shell(f"c{next(counter)}"))
    stub.route(is_selector_request, selector_answer(0))
    # Last turn: one call for 8 candidates, its prompt 1,000 tokens once and 50 completion
    # tokens each; a 50-token selector call (1,450 spent). Four more fit in 1,250: the
    # prompt once, four completions, the selector (a call each would have afforded one).
    history = [HumanMessage("go"), previous_one_call_turn(1000, 400, 8, 50)]
    budgeted = engine(stub, n=8, budget=Budget(episode_tokens=1450 + 50 + 1000 + 4 * 50))
    record = turn_record(await budgeted.run(history))
    assert record is not None
    assert record.n_requested == 4
    assert record.sampling.budget == "budget (episode tokens): 4 of 8 candidates"


async def test_the_record_and_state_round_trip_the_sampling(stub: StubServer) -> None:
    stub.route(lambda r: not is_selector_request(r), shell("a"), shell("b"), shell("a"), shell("a"))
    stub.route(is_selector_request, selector_answer(0))
    engine_ = engine(stub, n=4, adaptive=AdaptiveN(first_batch=2, step=2, threshold=0.75))
    turn = await engine_.generate(ASK)
    assert turn.sampling.batches == [2, 2]
    # The graph checkpoints the turn between its generate and select nodes.
    serde = JsonPlusSerializer()
    restored = GeneratedTurn.from_state(serde.loads_typed(serde.dumps_typed(turn.to_state())))
    assert restored.sampling == turn.sampling
    assert restored.committed == turn.committed
    assert [c.action for c in restored.candidates] == [c.action for c in turn.candidates]
    record = turn_record(await engine_.select(ASK, restored))
    assert record is not None
    assert TurnRecord.model_validate(json.loads(json.dumps(record.to_json()))) == record
    assert record.sampling == turn.sampling
    assert record.selector == "agreement"  # the commit survived the round trip


async def test_mixed_pool_with_per_model_counts_and_temperatures(stub: StubServer) -> None:
    from turnbon_graph import ModelSpec

    stub.script(shell("ls"))
    pool = [
        ModelSpec(model="openai/small", n=3, completion_kwargs={"temperature": 1.2}),
        "openai/large",
    ]
    engine_ = stub_engine(
        stub,
        pool,
        n=8,
        completion_kwargs={"temperature": 0.0},
        selector=LLMSelector("openai/judge", completion_kwargs=stub_kwargs(stub.base_url)),
    )
    record = turn_record(await engine_.run(ASK))
    assert record is not None
    assert [c.model for c in record.candidates] == ["openai/small"] * 3 + ["openai/large"] + [
        "openai/small"
    ] * 3 + ["openai/large"]
    sent = sorted(((r.body or {})["model"], (r.body or {})["temperature"]) for r in stub.requests)
    assert sent == [("large", 0.0)] * 2 + [("small", 1.2)] * 6
