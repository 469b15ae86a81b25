"""What a turn asks of LiteLLM beyond its requests: costs priced from the price map,
LiteLLM's per-call logging and pricing skipped when nobody listens (and not when a
callback does), model-map look-ups made once per model."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from tests.helpers import selector_answer, stub_engine
from turnbon_graph import TurnEngine, turn_record
from turnbon_graph.openai.messages import to_openai_tools
from turnbon_graph.selectors import LLMSelector
from turnbon_graph.testing import (
    CapturedRequest,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

MODEL = "openai/gpt-4o-mini"  # priced in LiteLLM's map
ASK = [HumanMessage("list the files")]


def shell(command: str) -> str:
    """Run a shell command."""
    return command


SHELL = to_openai_tools([shell])[0]
GENERATOR_USAGE = {"prompt_tokens": 120, "completion_tokens": 30, "total_tokens": 150}


def scripted() -> Any:
    counter = itertools.count()

    def respond(request: CapturedRequest) -> dict[str, Any]:
        if is_selector_request(request):
            return selector_answer(0)  # 11 prompt, 7 completion tokens
        command = f"ls {next(counter)}"  # distinct: the selector is asked
        return chat_completion(
            tool_calls=[tool_call("shell", {"command": command})], usage=GENERATOR_USAGE
        )

    return respond


def engine_on(stub: StubServer, n: int = 8) -> TurnEngine:
    endpoint = {"api_base": stub.base_url, "api_key": "sk-test-key"}
    selector = LLMSelector(MODEL, completion_kwargs=endpoint, seed=0)
    return stub_engine(stub, MODEL, n=n, selector=selector)


def price(prompt: int, completion: int) -> float:
    import litellm  # in the test, not at collection: the library imports it off the loop

    cost = litellm.cost_per_token(model=MODEL, prompt_tokens=prompt, completion_tokens=completion)
    return float(sum(cost))


@pytest.fixture
def no_callbacks(monkeypatch: pytest.MonkeyPatch) -> Any:
    """LiteLLM's callback lists as a program that registered none has them, restored after;
    the module itself for the test."""
    import litellm

    for name in (
        "callbacks",
        "success_callback",
        "_async_success_callback",
        "input_callback",
        "failure_callback",
        "_async_failure_callback",
        "_async_input_callback",
    ):
        monkeypatch.setattr(litellm, name, [])
    return litellm


async def test_turn_cost_is_what_the_price_map_gives_for_its_tokens(
    stub: StubServer, no_callbacks: Any
) -> None:
    stub.script(scripted())
    record = turn_record(await engine_on(stub).run(ASK, tools=[SHELL]))
    assert record is not None and record.usage.selector.calls == 1
    assert record.usage.generator.prompt_tokens == 8 * 120
    assert record.usage.generator.cost_usd == pytest.approx(8 * price(120, 30))
    assert record.usage.selector.cost_usd == pytest.approx(price(11, 7))
    for candidate in record.candidates:
        assert candidate.usage.cost_usd == pytest.approx(price(120, 30))


async def test_an_unpriced_model_costs_none(stub: StubServer, no_callbacks: Any) -> None:
    stub.script(scripted())
    record = turn_record(await stub_engine(stub, n=2).run(ASK))
    assert record is not None and record.usage.generator.cost_usd is None


async def test_nobody_listening_skips_litellm_per_call_pricing(
    stub: StubServer, no_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    litellm = no_callbacks
    priced: list[Any] = []
    original = litellm.response_cost_calculator

    def counting(**kwargs: Any) -> Any:
        priced.append(kwargs.get("model"))
        return original(**kwargs)

    monkeypatch.setattr(litellm, "response_cost_calculator", counting)
    stub.script(scripted())
    record = turn_record(await engine_on(stub).run(ASK, tools=[SHELL]))
    assert record is not None and record.usage.generator.cost_usd is not None
    assert priced == []


async def test_a_registered_callback_sees_every_generator_and_selector_call(
    stub: StubServer, no_callbacks: Any
) -> None:
    from litellm.integrations.custom_logger import CustomLogger

    class Recorder(CustomLogger):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[dict[str, Any]] = []

        async def async_log_success_event(
            self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any
        ) -> None:
            self.calls.append(kwargs)

    recorder = Recorder()
    no_callbacks.callbacks = [recorder]  # restored by `no_callbacks`
    stub.script(scripted())
    record = turn_record(await engine_on(stub).run(ASK, tools=[SHELL]))
    assert record is not None and record.usage.selector.calls == 1
    for _ in range(500):  # LiteLLM logs on its worker, after the call returns
        if len(recorder.calls) >= 9:
            break
        await asyncio.sleep(0.01)
    selector_calls = [c for c in recorder.calls if "selector" in str(c.get("messages"))]
    assert len(recorder.calls) == 9 and len(selector_calls) == 1
    assert all(c.get("response_cost") for c in recorder.calls)  # LiteLLM priced them itself
    assert record.usage.generator.cost_usd == pytest.approx(8 * price(120, 30))


async def test_model_map_is_read_once_per_model(
    stub: StubServer, no_callbacks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    litellm = no_callbacks
    asked: list[str] = []
    for name in ("supports_function_calling", "supports_response_schema"):
        original = getattr(litellm, name)

        def counting(
            *args: Any, _original: Any = original, _name: str = name, **kwargs: Any
        ) -> Any:
            asked.append(_name)
            return _original(*args, **kwargs)

        monkeypatch.setattr(litellm, name, counting)
    stub.script(scripted())
    engine = engine_on(stub, n=4)
    for _ in range(3):
        await engine.run(ASK, tools=[SHELL])
    # At most one look-up each (none when an earlier test of this process made it).
    assert asked.count("supports_function_calling") <= 1
    assert asked.count("supports_response_schema") <= 1
