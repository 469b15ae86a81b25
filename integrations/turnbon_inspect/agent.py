"""Turn-BoN as an Inspect agent: N candidates from the eval's model, a selector's choice,
and only the chosen tool calls run, with the eval's tools in the eval's sandbox.

`turn_bon()` is a model for `react()` (`react(model=turn_bon(n=4), tools=[bash()])`);
`turn_bon_agent()` is that loop standing alone, for `inspect eval --solver
turnbon_inspect/turn_bon_agent -S n=4`, on the task's own tools. Every call goes through
Inspect's `Model.generate`, so the sample's token, message and time limits, its retries
and its log see the candidates and the selector alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from inspect_ai.agent import Agent, AgentPrompt, AgentState, AgentSubmit, agent, react
from inspect_ai.log import transcript
from inspect_ai.model import ChatCompletionChoice, ModelOutput, get_model
from inspect_ai.tool import Tool
from inspect_ai.util import span, store

from turnbon_graph.bench.readers.inspect_logs import TURNS_KEY
from turnbon_graph.config import TurnConfig
from turnbon_graph.records import TurnRecord, UsageSplit
from turnbon_graph.selectors import (
    FirstSelector,
    LLMSelector,
    MajorityVoteSelector,
    RandomSelector,
    Selector,
)
from turnbon_graph.turn.engine import TurnEngine, turn_record
from turnbon_inspect.source import InspectModelClient, InspectSource, as_langchain

__all__ = ["SELECTORS", "TURNS_KEY", "turn_bon", "turn_bon_agent", "turn_summary"]

SELECTORS = ("llm", "first", "random", "majority")
"""The selectors an eval can name: `llm`, the paper's selector asked through the
`selector_role` model; the others choose by rule, with no model call."""
EVENT_SOURCE = "turn-bon"
"""The `source` of each turn's info event in the transcript."""


def _rule(name: str, seed: int | None) -> Selector | None:
    """The selector a rule names, made once for the agent; None for `llm`."""
    rules: dict[str, Callable[[], Selector]] = {
        "first": FirstSelector,
        "random": lambda: RandomSelector(seed),
        "majority": MajorityVoteSelector,
    }
    return rules[name]() if name in rules else None


def _llm_selector(role: str, seed: int | None) -> tuple[Selector, InspectModelClient]:
    """The paper's selector on the role's model (the eval's model without one), asked
    in the running sample, and the client its calls go through."""
    judge = get_model(role=role, default=get_model())
    client = InspectModelClient(judge)
    return LLMSelector(str(judge), client=client, seed=seed, response_format=False), client


def _registered(name: str) -> str:
    """The agent's registry name, `turnbon_inspect/<name>` however it was installed.
    Inspect prefixes the package itself for a module in site-packages, but not for an
    editable install of turnbon-graph, whose distribution is named otherwise."""
    from inspect_ai._util.package import get_installed_package_name

    installed = get_installed_package_name(_registered) is not None
    return name if installed else f"{__package__}/{name}"


@agent(name=_registered("turn_bon"))
def turn_bon(
    n: int = 4,
    selector: str = "llm",
    selector_role: str = "selector",
    seed: int | None = None,
    dedupe: bool = False,
) -> Agent:
    """The model of a `react()` loop, one Turn-BoN turn a call.

    Args:
        n: candidates per turn: one call with `num_choices=n` where the provider takes
            it, else `n` calls.
        selector: `llm` (the paper's selector prompt, asked through the `selector_role`
            model), `first`, `random` or `majority`.
        selector_role: the Inspect model role the `llm` selector asks
            (`--model-role selector=...`); without it, the eval's model.
        seed: seeds the order the candidates are shown in (and `random`).
        dedupe: show the selector each distinct action once, with its count.

    Returns:
        An agent taking `(state, tools)`, as `react(model=...)` calls it.

    Raises:
        ValueError: `n` below 1, or an unknown `selector`.
    """
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a whole number of candidates, at least 1; got {n!r}")
    if selector not in SELECTORS:
        raise ValueError(f"selector must be one of {', '.join(SELECTORS)}; got {selector!r}")
    config = TurnConfig(n=n, seed=seed, dedupe=dedupe)
    rule = _rule(selector, seed)
    without_n: set[str] = set()

    async def execute(state: AgentState, tools: list[Tool]) -> AgentState:
        model = get_model()
        source = InspectSource(model, list(state.messages), list(tools), without_n)
        chooser, client = (rule, None) if rule is not None else _llm_selector(selector_role, seed)
        engine = TurnEngine(generator=source, selector=chooser, config=config)
        async with span("turn-bon", type="turnbon"):
            messages = await as_langchain(state.messages)
            chosen = await engine.run(messages)
            if client is not None and client.limit is not None:
                raise client.limit  # the selector's call went over the sample's limit
            record = turn_record(chosen)
            assert record is not None
            # the offered selectors choose a candidate; none writes an action of its own
            message = source.chosen(record.selected_index)
            _log(record)
        state.messages.append(message)
        state.output = ModelOutput(
            model=str(model),
            choices=[ChatCompletionChoice(message=message, stop_reason=_stop(message))],
        )
        return state

    return execute


@agent(name=_registered("turn_bon_agent"))
def turn_bon_agent(
    n: int = 4,
    selector: str = "llm",
    selector_role: str = "selector",
    seed: int | None = None,
    dedupe: bool = False,
    tools: Sequence[Tool] | None = None,
    prompt: str | None = None,
    submit: bool = True,
) -> Agent:
    """Turn-BoN standing alone: `react()` with `turn_bon()` as its model.

    Args:
        n: candidates per turn.
        selector: `llm`, `first`, `random` or `majority` (as `turn_bon`).
        selector_role: the model role the `llm` selector asks.
        seed: seeds the shown order and `random`.
        dedupe: show the selector each distinct action once.
        tools: the tools the agent calls; None: the running task's own (its
            `use_tools(...)`), so `inspect eval --solver` keeps the eval's tools.
        prompt: react's instructions; None: react's default.
        submit: end with react's `submit()` tool (False: end when the model calls no tool).

    Returns:
        The agent.
    """
    model = turn_bon(n=n, selector=selector, selector_role=selector_role, seed=seed, dedupe=dedupe)

    async def execute(state: AgentState) -> AgentState:
        loop = react(
            model=model,
            tools=list(tools) if tools is not None else _task_tools(),
            submit=AgentSubmit() if submit else False,
            prompt=AgentPrompt() if prompt is None else prompt,
        )
        return await loop(state)

    return execute


def _task_tools() -> list[Tool]:
    """The running sample's tools. Inspect hands an agent run as a solver only its
    messages, so they are read from the sample's state (pinned Inspect; tested)."""
    from inspect_ai.solver._task_state import sample_state

    state = sample_state()
    return list(state.tools) if state is not None else []


def _stop(message: Any) -> Any:
    return "tool_calls" if message.tool_calls else "stop"


def _log(record: TurnRecord) -> None:
    """The turn in the sample's transcript (what `inspect view` shows) and its record in
    the sample's store (what `turnbon report` reads)."""
    kept: list[Any] = store().get(TURNS_KEY, [])
    store().set(TURNS_KEY, [*kept, record.to_json()])
    transcript().info(turn_summary(record, len(kept) + 1), source=EVENT_SOURCE)


def turn_summary(record: TurnRecord, turn: int) -> dict[str, Any]:
    """What a reader of the transcript wants of a turn: each candidate's action, who
    chose which and why, and the tokens of each role."""
    return {
        "turn": turn,
        "n": record.n_requested,
        "candidates": [
            {"index": c.index, "error": c.error}
            if c.error is not None
            else {"index": c.index, "content": c.content, "tool_calls": c.tool_calls}
            for c in record.candidates
        ],
        "selected_index": record.selected_index,
        "selector": record.selector,
        "reason": _reason(record.selector_answer),
        "fallback": record.fallback,
        "tokens": _tokens(record.usage),
    }


def _tokens(usage: UsageSplit) -> dict[str, int]:
    return {
        "generator": usage.generator.total_tokens,
        "selector": usage.selector.total_tokens,
    }


def _reason(answer: str | None) -> str | None:
    """The `reason` of an LLM selector's JSON answer, if it gave one."""
    try:
        reason = json.loads(answer or "").get("reason")
    except (ValueError, AttributeError):
        return None
    return str(reason) if reason else None
