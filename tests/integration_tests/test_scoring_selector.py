"""Pointwise scoring in a real turn: an LLM judge with a rubric, and a reward function
(BoN+ORM); scores in the record, min_score rejection, and every failure path."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from tests.judges import (
    ASK,
    COMMANDS,
    Model,
    engine,
    judge_options,
    script_fresh_batches,
    script_generator,
    shown_commands,
    system_prompt,
    user_prompt,
)
from turnbon_graph import ConfigurationError, TurnRecord, turn_record
from turnbon_graph.selectors import ScoringSelector
from turnbon_graph.testing import CapturedRequest, StubServer, error, is_selector_request

SCORES: dict[str, float] = {"ls": 2, "pytest -x": 9, "cat a.py": 5, "git status": 1}


def score(value: float, reason: str = "scripted") -> str:
    return json.dumps({"reason": reason, "score": value})


def by_command(table: dict[str, float]) -> Model:
    def decide(request: CapturedRequest) -> str:
        (command,) = shown_commands(request)
        return score(table[command])

    return Model(decide)


def chosen(record: TurnRecord) -> str:
    return str(record.candidates[record.selected_index].tool_calls[0]["args"]["command"])


async def test_judge_scores_each_candidate_on_its_own(stub: StubServer) -> None:
    script_generator(stub)
    model = by_command(SCORES)
    stub.route(is_selector_request, model)
    selector = ScoringSelector(
        "openai/judge", rubric="Prefer running the tests.", **judge_options(stub)
    )
    record = turn_record(await engine(stub, selector).run(ASK))
    assert record is not None and record.fallback is None
    assert record.selector == "score:openai/judge" and chosen(record) == "pytest -x"
    assert record.scores == [2, 9, 5, 1]
    assert sorted(shown_commands(r)[0] for r in model.requests) == sorted(COMMANDS)
    assert all("Prefer running the tests." in system_prompt(r) for r in model.requests)
    assert "PRIVATE" not in json.dumps([r.body for r in model.requests])
    answer = json.loads(record.selector_answer or "")
    assert [a["score"] for a in answer] == [2, 9, 5, 1]
    assert record.usage.selector.calls == 4
    assert record.usage.selector.prompt_tokens == model.prompt_tokens
    assert record.usage.selector.completion_tokens == model.completion_tokens


async def test_equal_scores_go_to_the_earliest(stub: StubServer) -> None:
    script_generator(stub)
    stub.route(
        is_selector_request, by_command({"ls": 3, "pytest -x": 7, "cat a.py": 7, "git status": 7})
    )
    record = turn_record(
        await engine(stub, ScoringSelector("openai/judge", **judge_options(stub))).run(ASK)
    )
    assert record is not None and record.selected_index == 1


async def test_an_unusable_score_is_asked_again_then_left_out(stub: StubServer) -> None:
    script_generator(stub)

    def decide(request: CapturedRequest) -> str:
        (command,) = shown_commands(request)
        return score(42) if command == "pytest -x" else score(SCORES[command])

    model = Model(decide)
    stub.route(is_selector_request, model)
    record = turn_record(
        await engine(stub, ScoringSelector("openai/judge", **judge_options(stub))).run(ASK)
    )
    assert record is not None and record.fallback is None
    assert record.scores == [2, None, 5, 1] and chosen(record) == "cat a.py"
    retried = [r for r in model.requests if r.body and len(r.body["messages"]) == 4]
    (retry,) = [r.body for r in retried if r.body]
    assert "out of range 0..10" in retry["messages"][3]["content"]
    error_text = json.loads(record.selector_answer or "")[1]["error"]
    assert error_text == "invalid answer: score 42 is out of range 0..10"
    assert record.usage.selector.calls == 5 == model.calls


async def test_no_score_at_all_falls_back(stub: StubServer) -> None:
    script_generator(stub, ["ls", "pytest", "pytest", "cat x"])
    stub.route(is_selector_request, error(400, "judge is down"))
    record = turn_record(
        await engine(stub, ScoringSelector("openai/judge", **judge_options(stub))).run(ASK)
    )
    assert record is not None and record.fallback is not None
    assert record.fallback.startswith("no candidate could be scored (the selector call failed")
    assert "judge is down" in record.fallback and record.fallback.endswith("majority")
    assert record.scores == [None, None, None, None] and chosen(record) == "pytest"


async def test_min_score_rejects_a_weak_batch_once(stub: StubServer) -> None:
    script_fresh_batches(stub)
    model = Model(
        lambda r: score(3 if "step 0" in user_prompt(r) or "step 1" in user_prompt(r) else 8)
    )
    stub.route(is_selector_request, model)
    selector = ScoringSelector("openai/judge", min_score=6, **judge_options(stub))
    record = turn_record(await engine(stub, selector, n=2).run(ASK))
    assert record is not None and record.resamples == 1 and record.fallback is None
    assert record.scores == [None, None, 8, 8] and record.selected_index == 2
    assert record.usage.selector.calls == 4


# --------------------------------------------------------------------------- reward


async def test_a_reward_function_scores_without_any_selector_call(stub: StubServer) -> None:
    script_generator(stub)
    seen: list[tuple[int, AIMessage]] = []

    def prefers_tests(messages: Sequence[BaseMessage], candidate: AIMessage) -> float:
        seen.append((len(messages), candidate))
        return 1.0 if "pytest" in candidate.tool_calls[0]["args"]["command"] else 0.25

    record = turn_record(await engine(stub, ScoringSelector(reward=prefers_tests)).run(ASK))
    assert record is not None
    assert record.selector == "reward:prefers_tests" and chosen(record) == "pytest -x"
    assert record.scores == [0.25, 1.0, 0.25, 0.25]
    assert not [r for r in stub.requests if is_selector_request(r)]
    assert record.usage.selector.calls == 0
    # The reward never sees private reasoning.
    assert all("reasoning_content" not in m.additional_kwargs for _, m in seen)
    assert {n for n, _ in seen} == {1}


async def test_an_async_reward_and_one_that_raises(stub: StubServer) -> None:
    script_generator(stub)

    async def model_reward(messages: Sequence[BaseMessage], candidate: AIMessage) -> float:
        command = candidate.tool_calls[0]["args"]["command"]
        if command == "pytest -x":
            raise RuntimeError("reward server timed out")
        return float(len(command))

    record = turn_record(await engine(stub, ScoringSelector(reward=model_reward)).run(ASK))
    assert record is not None and record.fallback is None
    assert record.scores == [2.0, None, 8.0, 10.0] and chosen(record) == "git status"
    answer = json.loads(record.selector_answer or "")
    assert answer[1]["error"] == "the reward raised RuntimeError: reward server timed out"


async def test_a_reward_that_always_raises_falls_back(stub: StubServer) -> None:
    script_generator(stub)

    def broken(messages: Sequence[BaseMessage], candidate: AIMessage) -> float:
        raise ValueError("no reward model loaded")

    record = turn_record(await engine(stub, ScoringSelector(reward=broken)).run(ASK))
    assert record is not None and record.fallback is not None
    assert "no reward model loaded" in record.fallback and record.selected_index == 0


async def test_a_reward_below_min_score_rejects_then_falls_back(stub: StubServer) -> None:
    script_fresh_batches(stub)
    selector = ScoringSelector(reward=lambda messages, candidate: 0.1, min_score=0.5)
    record = turn_record(await engine(stub, selector, n=2).run(ASK))
    assert record is not None and record.resamples == 1
    assert record.fallback == "the selector rejected every candidate twice; fell back to first"
    assert record.scores == [None, None, 0.1, 0.1]


async def test_a_reward_returning_no_number_is_a_configuration_error(stub: StubServer) -> None:
    script_generator(stub)
    selector = ScoringSelector(reward=lambda messages, candidate: "high")  # type: ignore[arg-type, return-value]
    with pytest.raises(ConfigurationError, match="must return a number"):
        await engine(stub, selector).run(ASK)
