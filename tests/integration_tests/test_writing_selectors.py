"""Selectors that write the action: fusion (one call over all candidates) and refine
(pick, then critique and revise once), in real turns against the stub."""

from __future__ import annotations

import json
import re
from typing import Any

from tests.judges import (
    ASK,
    Model,
    engine,
    judge_options,
    pick,
    prompt_is,
    script_fresh_batches,
    script_generator,
    shown_commands,
    user_prompt,
)
from turnbon_graph import TurnRecord, turn_record
from turnbon_graph.selectors import (
    FusionSelector,
    LLMSelector,
    MajorityVoteSelector,
    RefineSelector,
)
from turnbon_graph.selectors.fusion import FUSION_SYSTEM_PROMPT
from turnbon_graph.selectors.llm import SELECTOR_SYSTEM_PROMPT
from turnbon_graph.selectors.refine import REFINE_SYSTEM_PROMPT
from turnbon_graph.testing import StubServer, error


def action(*commands: str, content: str = "", tool: str = "shell", **extra: Any) -> str:
    calls = [{"name": tool, "args": {"command": c}} for c in commands]
    return json.dumps({"reason": "scripted", "content": content, "tool_calls": calls, **extra})


def fusion(stub: StubServer, **options: Any) -> FusionSelector:
    return FusionSelector("openai/fuser", seed=1, **judge_options(stub), **options)


def chosen(record: TurnRecord) -> str:
    return str(record.candidates[record.selected_index].tool_calls[0]["args"]["command"])


# --------------------------------------------------------------------------- fusion


async def test_fusion_writes_the_action_that_runs(stub: StubServer) -> None:
    script_generator(stub)
    model = Model(lambda _: action("pytest -x a.py"))
    stub.route(prompt_is(FUSION_SYSTEM_PROMPT), model)
    message = await engine(stub, fusion(stub)).run(ASK)
    record = turn_record(message)
    assert record is not None and record.fallback is None
    assert record.selector == "fusion:openai/fuser"
    (call,) = message.tool_calls
    assert call["name"] == "shell" and call["args"] == {"command": "pytest -x a.py"}
    # A fresh id, shaped like the provider's own ("call_" and 24 characters here).
    assert call["id"] not in {c.tool_calls[0]["id"] for c in record.candidates}
    assert re.fullmatch(r"call_[A-Za-z0-9]{24}", call["id"] or "")
    assert record.synthesized == {
        "content": "",
        "tool_calls": [{"name": "shell", "args": {"command": "pytest -x a.py"}, "id": call["id"]}],
    }
    assert chosen(record) == "pytest -x"  # the candidate it is closest to
    assert "reasoning_content" not in message.additional_kwargs
    (request,) = model.requests
    assert sorted(shown_commands(request)) == sorted(
        c.tool_calls[0]["args"]["command"] for c in record.candidates
    )
    assert record.permutation is not None and sorted(record.permutation) == [0, 1, 2, 3]
    assert "PRIVATE" not in json.dumps(request.body)
    assert record.usage.selector.calls == 1
    assert record.usage.selector.prompt_tokens == model.prompt_tokens


async def test_fusion_reproducing_a_candidate_runs_that_candidate(stub: StubServer) -> None:
    script_generator(stub)
    stub.route(prompt_is(FUSION_SYSTEM_PROMPT), Model(lambda _: action("cat a.py")))
    message = await engine(stub, fusion(stub)).run(ASK)
    record = turn_record(message)
    assert record is not None and record.synthesized is None and chosen(record) == "cat a.py"
    assert message.additional_kwargs["reasoning_content"] == "PRIVATE REASONING 2"
    assert message.tool_calls[0]["id"] == record.candidates[2].tool_calls[0]["id"]


async def test_fusion_may_write_a_final_answer(stub: StubServer) -> None:
    script_generator(stub)
    stub.route(prompt_is(FUSION_SYSTEM_PROMPT), Model(lambda _: action(content="All done.")))
    message = await engine(stub, fusion(stub)).run(ASK)
    assert message.content == "All done." and message.tool_calls == []
    record = turn_record(message)
    assert record is not None and record.synthesized == {"content": "All done.", "tool_calls": []}


async def test_an_unknown_tool_is_asked_again_with_the_problem_stated(stub: StubServer) -> None:
    script_generator(stub)
    answers = iter([action("rm -rf /", tool="sudo"), action("make test")])
    model = Model(lambda _: next(answers))
    stub.route(prompt_is(FUSION_SYSTEM_PROMPT), model)
    message = await engine(stub, fusion(stub)).run(ASK)
    record = turn_record(message)
    assert record is not None and record.fallback is None
    assert message.tool_calls[0]["args"] == {"command": "make test"}
    retry = model.requests[1].body
    assert retry is not None and len(retry["messages"]) == 4
    assert 'tool "sudo" is not one the candidates use' in retry["messages"][3]["content"]
    assert record.usage.selector.calls == 2


async def test_fusion_invalid_twice_falls_back(stub: StubServer) -> None:
    script_generator(stub, ["ls", "pytest", "pytest", "cat x"])
    bad = json.dumps(
        {"reason": "r", "content": "", "tool_calls": [{"name": "shell", "args": {"cmd": "ls"}}]}
    )
    stub.route(prompt_is(FUSION_SYSTEM_PROMPT), Model(lambda _: bad))
    record = turn_record(await engine(stub, fusion(stub)).run(ASK))
    assert record is not None and record.fallback is not None
    assert 'argument(s) ["cmd"] that no candidate passes' in record.fallback
    assert record.fallback.endswith("majority") and chosen(record) == "pytest"
    assert record.synthesized is None and record.usage.selector.calls == 2


async def test_fusion_empty_or_unparsable_answers_fall_back(stub: StubServer) -> None:
    script_generator(stub)
    answers = iter([action(), "the second one, clearly"])
    stub.route(prompt_is(FUSION_SYSTEM_PROMPT), Model(lambda _: next(answers)))
    record = turn_record(await engine(stub, fusion(stub)).run(ASK))
    assert record is not None and record.fallback is not None
    assert record.fallback.startswith("invalid answer: it is not a JSON object")
    assert record.fallback.endswith("first") and record.selected_index == 0


async def test_fusion_call_failure_falls_back(stub: StubServer) -> None:
    script_generator(stub)
    stub.route(prompt_is(FUSION_SYSTEM_PROMPT), error(401, "bad fuser key"))
    record = turn_record(await engine(stub, fusion(stub)).run(ASK))
    assert record is not None and record.fallback is not None
    assert "selector call failed" in record.fallback and "bad fuser key" in record.fallback


async def test_fusion_may_reject_every_candidate(stub: StubServer) -> None:
    script_fresh_batches(stub)
    model = Model(
        lambda r: action(none_acceptable=True) if "step 0" in user_prompt(r) else action("step 3")
    )
    stub.route(prompt_is(FUSION_SYSTEM_PROMPT), model)
    record = turn_record(await engine(stub, fusion(stub, allow_none=True), n=2).run(ASK))
    assert record is not None and record.resamples == 1 and record.fallback is None
    assert record.selected_index == 3 and record.synthesized is None
    assert "none_acceptable" in user_prompt(model.requests[0])


async def test_fusion_sends_a_non_strict_schema_with_the_tool_names(stub: StubServer) -> None:
    script_generator(stub)
    model = Model(lambda _: action("ls -la"))
    stub.route(prompt_is(FUSION_SYSTEM_PROMPT), model)
    await engine(stub, fusion(stub, response_format=True)).run(ASK)
    body = model.requests[0].body
    assert body is not None
    spec = body["response_format"]["json_schema"]
    assert spec["strict"] is False
    assert spec["schema"]["properties"]["tool_calls"]["items"]["properties"]["name"]["enum"] == [
        "shell"
    ]


# --------------------------------------------------------------------------- refine


async def test_refine_revises_the_inner_pick(stub: StubServer) -> None:
    script_generator(stub)
    judge = Model(lambda r: pick(shown_commands(r).index("pytest -x")))
    refiner = Model(lambda _: action("pytest -x -q"))
    stub.route(prompt_is(SELECTOR_SYSTEM_PROMPT), judge)
    stub.route(prompt_is(REFINE_SYSTEM_PROMPT), refiner)
    selector = RefineSelector("openai/refiner", "openai/judge", seed=2, **judge_options(stub))
    message = await engine(stub, selector).run(ASK)
    record = turn_record(message)
    assert record is not None and record.fallback is None
    assert record.selector == "refine:openai/refiner(llm:openai/judge)"
    assert chosen(record) == "pytest -x"  # the candidate it was built from
    assert message.tool_calls[0]["args"] == {"command": "pytest -x -q"}
    assert record.synthesized is not None
    assert record.synthesized["tool_calls"][0]["args"] == {"command": "pytest -x -q"}
    (request,) = refiner.requests
    assert shown_commands(request) == ["pytest -x"]
    assert request.body is not None and request.body["model"] == "refiner"
    assert judge.requests[0].body is not None and judge.requests[0].body["model"] == "judge"
    answer = json.loads(record.selector_answer or "")
    assert set(answer) == {"selected_by", "refinement"}
    assert record.usage.selector.calls == 2
    assert record.usage.selector.prompt_tokens == judge.prompt_tokens + refiner.prompt_tokens
    assert record.permutation is not None  # the inner selector's


async def test_refine_keeping_the_action_runs_the_candidate(stub: StubServer) -> None:
    script_generator(stub)
    stub.route(prompt_is(REFINE_SYSTEM_PROMPT), Model(lambda r: action(*shown_commands(r))))
    selector = RefineSelector("openai/refiner", MajorityVoteSelector(), **judge_options(stub))
    message = await engine(stub, selector).run(ASK)
    record = turn_record(message)
    assert record is not None and record.synthesized is None and record.fallback is None
    assert record.selector == "refine:openai/refiner(majority)" and record.selected_index == 0
    assert message.additional_kwargs["reasoning_content"] == "PRIVATE REASONING 0"
    assert record.usage.selector.calls == 1


async def test_refine_failure_keeps_the_inner_choice(stub: StubServer) -> None:
    script_generator(stub)
    stub.route(prompt_is(SELECTOR_SYSTEM_PROMPT), Model(lambda _: pick(1)))
    stub.route(prompt_is(REFINE_SYSTEM_PROMPT), Model(lambda _: action("x", tool="python")))
    inner = LLMSelector("openai/judge", shuffle=False, **judge_options(stub))
    selector = RefineSelector("openai/refiner", inner, **judge_options(stub))
    record = turn_record(await engine(stub, selector).run(ASK))
    assert record is not None and record.synthesized is None
    assert record.fallback == (
        'invalid answer: tool "python" is not one the candidates use (use one of ["shell"]); '
        "kept the choice of llm:openai/judge"
    )
    assert chosen(record) == "pytest -x" and record.usage.selector.calls == 3


async def test_refine_passes_a_rejection_on_unrefined(stub: StubServer) -> None:
    script_fresh_batches(stub)
    stub.route(
        prompt_is(SELECTOR_SYSTEM_PROMPT),
        Model(lambda r: pick(-1) if "step 0" in user_prompt(r) else pick(0)),
    )
    refiner = Model(lambda r: action(*shown_commands(r)))
    stub.route(prompt_is(REFINE_SYSTEM_PROMPT), refiner)
    inner = LLMSelector("openai/judge", allow_none=True, shuffle=False, **judge_options(stub))
    selector = RefineSelector("openai/refiner", inner, **judge_options(stub))
    record = turn_record(await engine(stub, selector, n=2).run(ASK))
    assert record is not None and record.resamples == 1 and record.fallback is None
    assert record.selected_index == 2 and len(refiner.requests) == 1
    assert record.usage.selector.calls == 3
