"""The LLM selector's "none acceptable", the pairwise tournament and the ensemble, each in a
real turn against the stub: the happy path, the record, and every failure path."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace

from tests.helpers import candidate
from tests.judges import (
    ASK,
    Model,
    engine,
    judge_options,
    pick,
    prefers,
    script_fresh_batches,
    script_generator,
    shown_commands,
    user_prompt,
)
from turnbon_graph import TurnRecord, turn_record
from turnbon_graph.selectors import EnsembleSelector, LLMSelector, TournamentSelector
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    error,
    is_selector_request,
)


def chosen(record: TurnRecord) -> str:
    return str(record.candidates[record.selected_index].tool_calls[0]["args"]["command"])


def assert_usage(record: TurnRecord, model: Model) -> None:
    assert record.usage.selector.calls == model.calls
    assert record.usage.selector.prompt_tokens == model.prompt_tokens
    assert record.usage.selector.completion_tokens == model.completion_tokens


# --------------------------------------------------------------------------- LLMSelector


async def test_llm_selector_may_reject_all_then_the_turn_resamples(stub: StubServer) -> None:
    script_fresh_batches(stub)
    model = Model(lambda r: pick(-1) if "step 0" in user_prompt(r) else pick(1))
    stub.route(is_selector_request, model)
    selector = LLMSelector(
        "openai/judge", allow_none=True, response_format=True, **judge_options(stub)
    )
    record = turn_record(await engine(stub, selector, n=3).run(ASK))
    assert record is not None
    assert record.resamples == 1 and len(record.candidates) == 6 and record.fallback is None
    assert record.selected_index in {3, 4, 5}
    first = model.requests[0]
    assert first.body is not None
    schema = first.body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["selected_index"]["enum"] == [0, 1, 2, -1]
    assert "answer -1" in user_prompt(first)
    assert_usage(record, model)


async def test_llm_selector_rejecting_twice_falls_back(stub: StubServer) -> None:
    script_fresh_batches(stub)
    model = Model(lambda _: pick(-1))
    stub.route(is_selector_request, model)
    selector = LLMSelector("openai/judge", allow_none=True, **judge_options(stub))
    record = turn_record(await engine(stub, selector, n=3).run(ASK))
    assert record is not None
    assert record.fallback == "the selector rejected every candidate twice; fell back to first"
    assert record.selected_index == 3 and model.calls == 2
    assert_usage(record, model)


async def test_without_allow_none_minus_one_is_out_of_range(stub: StubServer) -> None:
    script_generator(stub)
    stub.route(is_selector_request, Model(lambda _: pick(-1)))
    selector = LLMSelector("openai/judge", **judge_options(stub))
    record = turn_record(await engine(stub, selector).run(ASK))
    assert record is not None and record.resamples == 0
    assert record.fallback is not None and "out of range" in record.fallback
    assert "answer -1" not in user_prompt(stub.requests[-1])


# --------------------------------------------------------------------------- tournament


async def test_tournament_picks_the_champion_asking_each_pair_both_ways(stub: StubServer) -> None:
    script_generator(stub)
    model = Model(prefers("pytest -x", "cat a.py", "git status", "ls"))
    stub.route(is_selector_request, model)
    record = turn_record(
        await engine(stub, TournamentSelector("openai/judge", **judge_options(stub))).run(ASK)
    )
    assert record is not None
    assert chosen(record) == "pytest -x" and record.fallback is None
    assert record.selector == "tournament:openai/judge"
    # Single elimination over 4: 3 matches, each asked in both orders.
    pairs = [shown_commands(r) for r in model.requests]
    assert len(pairs) == 6 and all(len(p) == 2 for p in pairs)
    assert sorted(map(tuple, pairs)) == sorted(
        [
            ("ls", "pytest -x"),
            ("pytest -x", "ls"),
            ("cat a.py", "git status"),
            ("git status", "cat a.py"),
            ("pytest -x", "cat a.py"),
            ("cat a.py", "pytest -x"),
        ]
    )
    answer = json.loads(record.selector_answer or "")
    assert [len(r) for r in answer["rounds"]] == [2, 1]
    assert answer["rounds"][0][0] == {"pair": [0, 1], "votes": [1, 1], "winner": 1, "errors": []}
    assert answer["champion"] == 1
    assert_usage(record, model)


async def test_a_pair_the_orders_disagree_on_is_a_tie_to_the_earlier(stub: StubServer) -> None:
    script_generator(stub)
    model = Model(lambda _: pick(0))  # pure position bias: always the first shown
    stub.route(is_selector_request, model)
    record = turn_record(
        await engine(stub, TournamentSelector("openai/judge", **judge_options(stub))).run(ASK)
    )
    assert record is not None and record.fallback is None
    assert record.selected_index == 0
    answer = json.loads(record.selector_answer or "")
    assert answer["rounds"][0][1] == {"pair": [2, 3], "votes": [2, 3], "winner": 2, "errors": []}


async def test_a_tie_goes_to_the_action_more_candidates_proposed(stub: StubServer) -> None:
    stub.route(is_selector_request, Model(lambda _: pick(0)))
    selector = TournamentSelector("openai/judge", **judge_options(stub))
    pool = [candidate(0, "ls"), replace(candidate(1, "pytest -x"), votes=2)]
    selection = await selector.select(ASK, pool)
    assert selection.index == 1 and selection.fallback is None
    assert all("proposed by 2 candidates" in user_prompt(r) for r in stub.requests)


async def test_one_usable_order_decides_a_pair(stub: StubServer) -> None:
    script_generator(stub, ["ls", "pytest -x", "cat a.py"])

    def decide(request: CapturedRequest) -> str:
        shown = shown_commands(request)
        return "no idea" if shown[0] == "ls" else pick(0)

    model = Model(decide)
    stub.route(is_selector_request, model)
    record = turn_record(
        await engine(stub, TournamentSelector("openai/judge", **judge_options(stub)), n=3).run(ASK)
    )
    assert record is not None and record.fallback is None
    first = json.loads(record.selector_answer or "")["rounds"][0][0]
    assert first["pair"] == [0, 1] and first["votes"] == [None, 1] and first["winner"] == 1
    assert "invalid answer" in first["errors"][0]
    # "ls" first was asked twice (the retry); its bye partner "cat a.py" met the winner.
    assert model.calls == 2 + 1 + 2
    assert chosen(record) == "pytest -x"
    assert_usage(record, model)


async def test_tournament_with_every_call_failing_falls_back(stub: StubServer) -> None:
    script_generator(stub, ["ls", "pytest", "pytest", "cat x"])
    stub.route(is_selector_request, error(400, "judge is down"))
    record = turn_record(
        await engine(stub, TournamentSelector("openai/judge", **judge_options(stub))).run(ASK)
    )
    assert record is not None and record.fallback is not None
    assert "no comparison could be made" in record.fallback and "judge is down" in record.fallback
    assert record.fallback.endswith("majority") and chosen(record) == "pytest"
    assert record.usage.selector.calls == 0


async def test_tournament_rejecting_every_pair_resamples_then_falls_back(stub: StubServer) -> None:
    script_fresh_batches(stub)
    model = Model(lambda _: pick(-1))
    stub.route(is_selector_request, model)
    selector = TournamentSelector("openai/judge", allow_none=True, **judge_options(stub))
    record = turn_record(await engine(stub, selector, n=2).run(ASK))
    assert record is not None
    assert record.resamples == 1 and model.calls == 4
    assert record.fallback == "the selector rejected every candidate twice; fell back to first"
    assert json.loads(record.selector_answer or "")["champion"] is None
    assert_usage(record, model)


# --------------------------------------------------------------------------- ensemble


async def test_ensemble_votes_over_rotated_orders(stub: StubServer) -> None:
    script_generator(stub)
    model = Model(prefers("cat a.py"))
    stub.route(is_selector_request, model)
    selector = EnsembleSelector("openai/judge", k=3, seed=4, **judge_options(stub))
    record = turn_record(await engine(stub, selector).run(ASK))
    assert record is not None and record.fallback is None
    assert chosen(record) == "cat a.py" and record.selector == "ensemble:3xopenai/judge"
    orders = [shown_commands(r) for r in model.requests]
    assert len(orders) == 3 and len({tuple(o) for o in orders}) == 3
    # Each call shows the same cycle rotated: "cat a.py" sits in three different places.
    assert len({o.index("cat a.py") for o in orders}) == 3
    answer = json.loads(record.selector_answer or "")
    assert [v["choice"] for v in answer["votes"]] == [2, 2, 2]
    assert answer["tally"] == {"2": 3}
    assert record.permutation == answer["votes"][0]["order"]
    assert_usage(record, model)


async def test_ensemble_alternates_models_and_ties_go_to_the_earliest(stub: StubServer) -> None:
    script_generator(stub)
    model = Model(lambda _: pick(0))  # position bias: each call votes for its first shown
    stub.route(is_selector_request, model)
    selector = EnsembleSelector(["openai/judge-a", "openai/judge-b"], k=4, **judge_options(stub))
    record = turn_record(await engine(stub, selector).run(ASK))
    assert record is not None
    sent = [r.body["model"] for r in model.requests if r.body]
    assert sorted(sent) == ["judge-a", "judge-a", "judge-b", "judge-b"]
    assert record.selector == "ensemble:4xopenai/judge-a,openai/judge-b"
    # Four rotations of four: one vote each, a four-way tie, to the earliest candidate.
    assert record.selected_index == 0
    assert json.loads(record.selector_answer or "")["tally"] == {str(i): 1 for i in range(4)}


async def test_ensemble_failed_calls_do_not_vote(stub: StubServer) -> None:
    script_generator(stub)
    answers: Iterator[str | StubResponse] = iter([error(400, "judge down"), pick(3), pick(3)])
    stub.route(is_selector_request, Model(lambda _: next(answers)))
    selector = EnsembleSelector("openai/judge", k=3, **judge_options(stub))
    record = turn_record(await engine(stub, selector).run(ASK))
    assert record is not None and record.fallback is None
    votes = json.loads(record.selector_answer or "")["votes"]
    assert [v["choice"] is None for v in votes].count(True) == 1
    assert any("judge down" in (v.get("error") or "") for v in votes)
    assert record.usage.selector.calls == 2


async def test_ensemble_with_no_answer_falls_back(stub: StubServer) -> None:
    script_generator(stub)
    stub.route(is_selector_request, error(401, "bad judge key"))
    selector = EnsembleSelector("openai/judge", k=2, **judge_options(stub))
    record = turn_record(await engine(stub, selector).run(ASK))
    assert record is not None and record.fallback is not None
    assert record.fallback.startswith("no judge answered (the selector call failed")
    assert record.fallback.endswith("fell back to first") and record.selected_index == 0


async def test_ensemble_rejects_only_when_rejections_outvote_every_candidate(
    stub: StubServer,
) -> None:
    script_fresh_batches(stub)
    # First batch: two of three reject; second batch: one of three rejects.
    answers = iter([pick(-1), pick(-1), pick(0), pick(-1), pick(1), pick(1)])
    model = Model(lambda _: next(answers))
    stub.route(is_selector_request, model)
    selector = EnsembleSelector("openai/judge", k=3, allow_none=True, **judge_options(stub))
    record = turn_record(await engine(stub, selector, n=3).run(ASK))
    assert record is not None and record.resamples == 1 and record.fallback is None
    assert record.selected_index in {3, 4, 5}
    assert_usage(record, model)
