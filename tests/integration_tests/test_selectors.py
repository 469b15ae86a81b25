"""Selectors inside a real turn: the LLM selector's request, answers, retries and fallbacks."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import HumanMessage

from tests.helpers import (
    generator_requests,
    selector_answer,
    selector_requests,
    stub_engine,
    stub_kwargs,
)
from turnbon_graph import TurnEngine, TurnRecord, turn_record
from turnbon_graph.selectors import LLMSelector, MajorityVoteSelector, RandomSelector
from turnbon_graph.testing import (
    StubServer,
    chat_completion,
    error,
    is_selector_request,
    tool_call,
)

ASK = [HumanMessage("fix the failing test")]
COMMANDS = ["ls", "pytest -x", "cat a.py", "git status"]


def script_generator(stub: StubServer, commands: list[str]) -> None:
    """Generator calls answer `commands` in arrival order; the selector route is separate."""
    stub.route(
        lambda r: not is_selector_request(r),
        *[
            chat_completion(
                tool_calls=[tool_call("shell", {"command": c})],
                reasoning_content=f"PRIVATE REASONING {i}",
            )
            for i, c in enumerate(commands)
        ],
    )


def llm_engine(stub: StubServer, n: int = 4, seed: int = 3, **selector_options: Any) -> TurnEngine:
    selector = LLMSelector(
        "openai/judge", completion_kwargs=stub_kwargs(stub.base_url), seed=seed, **selector_options
    )
    # max_concurrency=1: arrival order = script order, so commands map to indices
    return stub_engine(stub, n=n, selector=selector, max_concurrency=1)


def chosen_command(record: TurnRecord) -> str:
    return str(record.candidates[record.selected_index].tool_calls[0]["args"]["command"])


async def test_answer_maps_back_through_the_shuffled_order(stub: StubServer) -> None:
    script_generator(stub, COMMANDS)
    stub.route(is_selector_request, selector_answer(2))
    # Seed 1 shows these four candidates in the order 3, 2, 0, 1: no candidate keeps its
    # place, so an answer taken as a generation index would pick the wrong one.
    message = await llm_engine(stub, seed=1).run(ASK)
    record = turn_record(message)
    assert record is not None and record.permutation is not None
    assert sorted(record.permutation) == [0, 1, 2, 3]
    assert record.permutation[2] != 2
    # The selector saw candidate permutation[2] third; that is the one returned.
    assert record.selected_index == record.permutation[2]
    assert message.tool_calls[0]["args"]["command"] == chosen_command(record)
    assert record.selector == "llm:openai/judge" and record.fallback is None
    # ...and it is the one the request showed at display index 2.
    (request,) = selector_requests(stub.requests)
    assert request.body is not None
    user = request.body["messages"][1]["content"]
    third_block = user.split('<candidate index="2">\n')[1].split("\n</candidate>")[0]
    assert json.loads(third_block)["tool_calls"][0]["args"]["command"] == chosen_command(record)


async def test_selector_request_is_two_messages_with_every_action_and_no_reasoning(
    stub: StubServer,
) -> None:
    script_generator(stub, COMMANDS)
    stub.route(is_selector_request, selector_answer(0))
    await llm_engine(stub).run(ASK)
    (request,) = selector_requests(stub.requests)
    assert request.body is not None
    messages = request.body["messages"]
    assert [m["role"] for m in messages] == ["system", "user"]
    user = messages[1]["content"]
    assert all(json.dumps(c) in user for c in COMMANDS)
    assert "PRIVATE REASONING" not in json.dumps(request.body)
    assert "selected_index" in user
    assert request.body["model"] == "judge"


async def test_response_format_is_sent_when_enabled(stub: StubServer) -> None:
    script_generator(stub, COMMANDS)
    stub.route(is_selector_request, selector_answer(1))
    await llm_engine(stub, response_format=True).run(ASK)
    (request,) = selector_requests(stub.requests)
    assert request.body is not None
    schema = request.body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["selected_index"]["enum"] == [0, 1, 2, 3]
    stub.reset()
    script_generator(stub, COMMANDS)
    stub.route(is_selector_request, selector_answer(1))
    await llm_engine(stub, response_format=False).run(ASK)
    assert "response_format" not in (selector_requests(stub.requests)[0].body or {})


async def test_invalid_answer_is_asked_again_with_the_error_stated(stub: StubServer) -> None:
    script_generator(stub, COMMANDS)
    stub.route(is_selector_request, chat_completion("I like the second one"), selector_answer(1))
    message = await llm_engine(stub).run(ASK)
    record = turn_record(message)
    assert record is not None and record.fallback is None
    _, second = selector_requests(stub.requests)
    assert second.body is not None
    retry = second.body["messages"]
    assert len(retry) == 4 and retry[2] == {"role": "assistant", "content": "I like the second one"}
    assert "could not be used" in retry[3]["content"] and "selected_index" in retry[3]["content"]
    assert record.usage.selector.calls == 2


async def test_twice_invalid_falls_back_to_majority(stub: StubServer) -> None:
    script_generator(stub, ["ls", "pytest", "pytest", "cat x"])
    stub.route(is_selector_request, chat_completion("not json"), chat_completion('{"x": 1}'))
    record = turn_record(await llm_engine(stub).run(ASK))
    assert record is not None
    assert chosen_command(record) == "pytest"
    assert record.fallback is not None
    assert "invalid answer" in record.fallback and record.fallback.endswith("majority")


async def test_out_of_range_twice_falls_back_to_first_without_plurality(stub: StubServer) -> None:
    script_generator(stub, COMMANDS)
    stub.route(is_selector_request, selector_answer(9))
    record = turn_record(await llm_engine(stub).run(ASK))
    assert record is not None
    assert record.selected_index == 0
    assert record.fallback is not None
    assert "out of range" in record.fallback and record.fallback.endswith("first")


async def test_refusal_falls_back_and_is_recorded(stub: StubServer) -> None:
    script_generator(stub, COMMANDS)
    stub.route(is_selector_request, chat_completion(None, refusal="I won't judge this"))
    record = turn_record(await llm_engine(stub).run(ASK))
    assert record is not None and record.fallback is not None
    assert "refused" in record.fallback


async def test_selector_call_failure_falls_back(stub: StubServer) -> None:
    script_generator(stub, COMMANDS)
    stub.route(is_selector_request, error(401, "bad judge key"))
    record = turn_record(await llm_engine(stub).run(ASK))
    assert record is not None and record.fallback is not None
    assert "selector call failed" in record.fallback and "bad judge key" in record.fallback


async def test_unanimous_turn_calls_no_selector(stub: StubServer) -> None:
    script_generator(stub, ["ls", "ls", "ls", "ls"])
    record = turn_record(await llm_engine(stub).run(ASK))
    assert record is not None
    assert record.selector == "unanimous" and record.agreement == 1.0
    assert selector_requests(stub.requests) == []
    assert record.usage.selector.calls == 0


async def test_usage_totals_equal_what_the_stub_reported(stub: StubServer) -> None:
    usages = [(100 + i, 10 + i) for i in range(4)]
    stub.route(
        lambda r: not is_selector_request(r),
        *[
            chat_completion(
                tool_calls=[tool_call("shell", {"command": c})],
                usage={"prompt_tokens": p, "completion_tokens": k, "total_tokens": p + k},
            )
            for c, (p, k) in zip(COMMANDS, usages, strict=True)
        ],
    )
    stub.route(
        is_selector_request,
        chat_completion("nope", usage={"prompt_tokens": 500, "completion_tokens": 5}),
        chat_completion(
            json.dumps({"reason": "r", "selected_index": 0}),
            usage={"prompt_tokens": 600, "completion_tokens": 6},
        ),
    )
    record = turn_record(await llm_engine(stub).run(ASK))
    assert record is not None
    assert record.usage.generator.prompt_tokens == sum(p for p, _ in usages)
    assert record.usage.generator.completion_tokens == sum(k for _, k in usages)
    assert record.usage.generator.calls == 4
    assert record.usage.selector.prompt_tokens == 1100
    assert record.usage.selector.completion_tokens == 11
    assert [c.usage.prompt_tokens for c in record.candidates] == [p for p, _ in usages]
    assert record.usage.generator.cost_usd is None  # the stub model is not priced


async def test_priced_models_get_a_cost(stub: StubServer) -> None:
    stub.script(chat_completion("hi", model="gpt-4o-mini"))
    engine = stub_engine(stub, "openai/gpt-4o-mini", n=1)
    record = turn_record(await engine.run(ASK))
    assert record is not None
    cost = record.usage.generator.cost_usd
    assert cost is not None and cost > 0


async def test_majority_and_random_selectors_in_a_turn(stub: StubServer) -> None:
    script_generator(stub, ["ls", "pytest", "cat x", "pytest"])
    engine = stub_engine(stub, n=4, selector=MajorityVoteSelector(), max_concurrency=1)
    record = turn_record(await engine.run(ASK))
    assert record is not None and record.selector == "majority"
    assert chosen_command(record) == "pytest" and record.selected_index == 1

    picks = []
    for seed in (1, 1):
        stub.reset()
        script_generator(stub, COMMANDS)
        random_engine = stub_engine(
            stub, n=4, selector=RandomSelector(seed=seed), max_concurrency=1
        )
        record = turn_record(await random_engine.run(ASK))
        assert record is not None and record.selector == "random"
        picks.append(record.selected_index)
    assert picks[0] == picks[1]
    assert len(generator_requests(stub.requests)) == 4


async def test_max_reason_chars_bounds_the_reason_in_the_schema(stub: StubServer) -> None:
    script_generator(stub, COMMANDS)
    stub.route(is_selector_request, selector_answer(1))
    await llm_engine(stub, response_format=True, max_reason_chars=160).run(ASK)
    (request,) = selector_requests(stub.requests)
    schema = (request.body or {})["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["reason"]["maxLength"] == 160


async def test_a_chat_model_as_the_selector_asks_through_that_model(stub: StubServer) -> None:
    from langchain_openai import ChatOpenAI

    script_generator(stub, COMMANDS)
    stub.route(is_selector_request, selector_answer(1))
    judge = ChatOpenAI(model="judge-chat", base_url=stub.base_url, api_key="sk-judge")
    engine = stub_engine(stub, n=4, selector=judge, seed=1, max_concurrency=1)
    record = turn_record(await engine.run(ASK))
    assert record is not None and record.selector == "llm:openai-chat:judge-chat"
    assert record.fallback is None and record.permutation is not None
    assert record.selected_index == record.permutation[1]
    (request,) = selector_requests(stub.requests)
    assert request.header("authorization") == "Bearer sk-judge"
    assert (request.body or {})["model"] == "judge-chat"
    assert record.usage.selector.calls == 1
