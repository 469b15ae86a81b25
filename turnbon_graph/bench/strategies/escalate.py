"""Escalation over agent turns, the budget-forcing analogue: Turn-BoN that thinks harder
where its candidates disagree.

Each turn the trajectory proposes N candidates (one generator call). When their agreement
(the share of the successful candidates proposing the most common valid action,
`candidates.agreement`) is below `agree`, the turn is sampled again, N candidates with
more effort: `reasoning_effort` one step above the one the model works at, where the
model takes it (`_litellm.model_map.reasoning_efforts`), else the think-step-by-step variant
of the prompt (`STEP_BY_STEP`, added to the system prompt). The selector then picks among
the escalated candidates only: the first batch's disagreement is why they were asked
for, and they replace it (its candidates stay in the turn record,
`sampling.escalation`). The chosen one runs in the trajectory's own environment, as bon's
does; no value model is asked.

A turn costs one generator call of N and a selector call, and an escalated turn one more
generator call of N. Under a token budget a turn escalates only when the second call and
the selector's still fit (the record's `sampling.budget` says when one did not); below
that the plan narrows to fewer candidates, down to one, which agrees with itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from turnbon_graph._litellm.model_map import EFFORT_ORDER, Efforts, reasoning_efforts
from turnbon_graph.bench.episode import is_agent_failure
from turnbon_graph.bench.metering.budget import request_chars
from turnbon_graph.bench.strategies.registry import built_in
from turnbon_graph.bench.strategies.search import Search, Strategy, StrategySetup
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.strategies.trajectory import Trajectory
from turnbon_graph.bench.strategies.tree import TreeNode
from turnbon_graph.openai.messages import to_openai_messages
from turnbon_graph.records import EscalationRecord, Usage
from turnbon_graph.turn.candidates import agreement
from turnbon_graph.turn.engine import TurnEngine, turn_record
from turnbon_graph.turn.generator import CandidateGenerator
from turnbon_graph.turn.state import GeneratedTurn

STEP_BY_STEP = (
    "Before you act, think step by step: what the task asks for, what the work so far has "
    "shown, and what each possible next action would show or change. Then take the one "
    "next action that best moves the task forward."
)
"""The prompt variant of an escalated turn for a model that takes no reasoning effort,
added to the system prompt (or as one); a stub recognises it (`is_step_by_step_request`)."""

STEP_BY_STEP_EFFORT = "step by step"
"""How an escalation through `STEP_BY_STEP` is recorded (`EscalationRecord.effort`)."""


def step_by_step(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """`messages` (a transcript, the system prompt first if any) with `STEP_BY_STEP` at
    the end of the system prompt, or as one."""
    if messages and isinstance(messages[0], SystemMessage):
        content = messages[0].content
        added: str | list[str | dict[str, Any]] = (
            f"{content}\n\n{STEP_BY_STEP}"
            if isinstance(content, str)
            else [*content, {"type": "text", "text": STEP_BY_STEP}]
        )
        return [SystemMessage(added), *messages[1:]]
    return [SystemMessage(STEP_BY_STEP), *messages]


def is_step_by_step_request(messages: Sequence[Mapping[str, Any]]) -> bool:
    """Whether a chat request's `messages` are an escalated turn's step-by-step variant
    (for stubs that play along)."""
    first = messages[0] if messages else {}
    content = first.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return first.get("role") == "system" and isinstance(content, str) and STEP_BY_STEP in content


def effort_above(current: str | None, efforts: Efforts) -> str | None:
    """The `reasoning_effort` one step above `current` (None: the model's default) among
    the levels the model takes; None when it takes none or is at its strongest."""
    level = current if current in EFFORT_ORDER else efforts.default
    if level not in EFFORT_ORDER:
        return None
    rank = EFFORT_ORDER.index(level)
    return next((e for e in efforts.levels if EFFORT_ORDER.index(e) > rank), None)


def escalated_effort(generator: object) -> str | None:
    """The `reasoning_effort` an escalated turn asks every model of the generator's pool
    for: one step above each one's own (its completion settings', else its default),
    when every model takes one and the step is the same for all; else None (the
    step-by-step prompt). Model-map look-ups: call it off the event loop."""
    if not isinstance(generator, CandidateGenerator):
        return None
    steps = set()
    for spec in generator.specs:
        settings = {**generator.completion_kwargs, **spec.completion_kwargs}
        steps.add(effort_above(settings.get("reasoning_effort"), reasoning_efforts(spec.model)))
    return steps.pop() if len(steps) == 1 else None


class Escalate(Strategy):
    """Best-of-N that samples a turn again with more effort when its candidates disagree."""

    kind = built_in("escalate")
    forks = False

    def __init__(self, n: int, agree: float, effort: str | None) -> None:
        super().__init__(1, n)
        self.agree = agree
        self.effort = effort
        """The `reasoning_effort` of an escalated turn; None: the step-by-step prompt."""

    @classmethod
    async def build(cls, spec: StrategySpec, n: int, setup: StrategySetup) -> Strategy:
        """The escalated effort looked up in LiteLLM's model map, off the event loop."""
        assert spec.agree is not None  # the kind's default when not given
        effort = await asyncio.to_thread(escalated_effort, setup.engine.generator)
        return cls(n, spec.agree, effort)

    async def revise(
        self, search: Search, parent: Trajectory, turn: GeneratedTurn, engine: TurnEngine
    ) -> GeneratedTurn:
        """The turn again, with more effort, when its candidates disagree and the budget
        affords it; else the turn as it was."""
        share = agreement(turn.ok)
        if share >= self.agree:
            return turn
        transcript = engine.transcript(parent.messages)
        messages = transcript if self.effort else step_by_step(transcript)
        k = len(turn.candidates)
        ledger = search.ledger
        size = request_chars(to_openai_messages(messages), search.tools)
        estimate = ledger.estimate("generator", size, k, calls=1 if search.native_n else k)
        if k > 1:  # the selector's call still to come
            estimate += search.selector_cost(search.request_size(parent.messages), k)
        if not ledger.fits(estimate):
            turn.sampling.budget = (
                f"not escalated (agreement {share:.2f} < {self.agree:g}): the token budget "
                "cannot afford a second batch"
            )
            return turn
        extra = {"reasoning_effort": self.effort} if self.effort else None
        try:
            again = await search.generate(engine, messages, extra)
        except Exception as exc:
            if not is_agent_failure(exc):
                raise
            turn.sampling.stopped = f"the escalated batch failed: {type(exc).__name__}: {exc}"
            return turn
        again.sampling.escalation = EscalationRecord(
            agreement=share,
            threshold=self.agree,
            effort=f"reasoning_effort={self.effort}" if self.effort else STEP_BY_STEP_EFFORT,
            candidates=[c.to_record() for c in turn.candidates],
            usage=sum((c.usage for c in turn.candidates), Usage()),
        )
        return again

    def annotate(self, node: TreeNode, message: AIMessage) -> None:
        """The turn's agreement on its node, and how it escalated (with the first
        batch's tokens) when it did."""
        record = turn_record(message)
        if record is None:
            return
        escalation = record.sampling.escalation
        if escalation is None:
            node.agreement = record.agreement
            return
        node.agreement, node.escalated = escalation.agreement, escalation.effort
        node.tokens += escalation.usage.total_tokens
