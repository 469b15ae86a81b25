"""Matched spend: what an episode's search spent, by kind of call, in the unit its budget
counts (`--budget-unit`: prompt plus completion tokens, completion tokens, or dollars),
and what its next calls may spend.

Steps are planned on estimates learned from the calls already made in the run
(`Estimates`, shared by the episodes of a setting, kept in the run folder: `stored`), or
frozen from a pilot run's: prompt tokens per character of each kind of
request, from the first prompt (counted by the model's tokenizer) until a call of the
kind came back; completion tokens per answer, the 90th percentile of the recent answers
(none before the first answer); and the characters a step adds to a trajectory. No fixed
prior stands in for what was not seen yet: every call is clamped instead. Its
`max_tokens` is what its share of what is left affords (`Ledger.allowance`: calls of a
step share it in proportion to their estimates), so an episode's calls never add up to
more than its budget, whatever the model answers, as long as a prompt is no larger than
estimated. A call whose prompt alone would not fit is refused (`BudgetRefused`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from turnbon_graph.bench.strategies.names import BudgetUnit
from turnbon_graph.errors import TurnBoNError
from turnbon_graph.records import Usage

Kind = Literal["generator", "selector", "value", "rollout"]
KINDS: tuple[Kind, ...] = ("generator", "selector", "value", "rollout")
RECENT = 200
"""Answers, prompts and steps the estimates remember (the latest)."""
QUANTILE = 0.9
"""The estimates are this quantile of what was seen: most calls cost no more."""
UNCOUNTED_RATIO = 0.25
"""Tokens per character when the model's tokenizer could not count the first prompt."""
REFUSED = "the token budget cannot afford this call"
"""How a refused call's error begins (`BudgetRefused`)."""


class BudgetRefused(TurnBoNError):
    """A call was not made: not even its prompt fits in what the episode has left."""


def request_chars(messages: Sequence[Any], tools: Any = None) -> int:
    """The size of a request in characters of its JSON (OpenAI-format messages and tool
    schemas): what the estimates are learned in and applied to."""
    size = len(json.dumps(list(messages), default=str))
    return size + (len(json.dumps(tools, default=str)) if tools else 0)


def quantile(values: Sequence[float], q: float = QUANTILE) -> float:
    """The `q` quantile of `values` (nearest rank, from above)."""
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)]


def remember(values: list[float], value: float) -> None:
    """Adds `value` to `values`, keeping the most recent `RECENT` only."""
    values.append(value)
    del values[:-RECENT]


def estimated_as(kind: Kind) -> Kind:
    """A rollout's calls are the generator's, at N=1: they are estimated together."""
    return "generator" if kind == "rollout" else kind


@dataclass
class Estimates:
    """What a setting's calls cost so far, learned from each one that came back: shared by
    the episodes of one setting of a run (on Ray, of a worker), never across settings."""

    first_ratio: float | None = None
    """Tokens per character of the run's first prompt, by the model's tokenizer."""
    ratios: dict[str, list[float]] = field(default_factory=dict)
    completions: dict[str, list[float]] = field(default_factory=dict)
    steps: list[float] = field(default_factory=list)
    frozen: bool = False
    """Taken from a pilot run (`turnbon bench --estimates`) and never learned from: the
    setting's episodes then plan alike in whatever order they finish."""

    def ratio(self, kind: Kind) -> float:
        """Prompt tokens per character of a request of `kind`: its own once seen, else
        any kind's, else the first prompt's."""
        seen = self.ratios.get(estimated_as(kind))
        if seen:
            return quantile(seen)
        every = [r for rs in self.ratios.values() for r in rs]
        if every:
            return quantile(every)
        return self.first_ratio if self.first_ratio is not None else UNCOUNTED_RATIO

    def completion(self, kind: Kind) -> float:
        """Completion tokens an answer of `kind` is estimated at (0 before one was seen)."""
        seen = self.completions.get(estimated_as(kind))
        return quantile(seen) if seen else 0.0

    @property
    def growth(self) -> float:
        """Characters a step is estimated to add to a trajectory (0 before one was seen)."""
        return quantile(self.steps) if self.steps else 0.0

    def learn(self, kind: Kind, usage: Usage, size: int, answers: int) -> None:
        """A call (or calls) of `kind` on a request of `size` characters came back with
        `answers` completions and `usage`."""
        if self.frozen:
            return
        key = estimated_as(kind)
        if size > 0 and usage.prompt_tokens:
            ratio = usage.prompt_tokens / max(usage.calls, 1) / size
            remember(self.ratios.setdefault(key, []), ratio)
        if answers and usage.calls:
            remember(self.completions.setdefault(key, []), usage.completion_tokens / answers)

    def grew(self, size: int) -> None:
        """A step added `size` characters to a trajectory."""
        if not self.frozen:
            remember(self.steps, size)


@dataclass
class Meter:
    """What a budget counts, as a price per prompt and per completion token of each kind
    of call: 1 and 1 for tokens, 0 and 1 for completion tokens, LiteLLM's prices of the
    kind's model for dollars (`prices`, looked up before the episode starts)."""

    unit: BudgetUnit = "tokens"
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)

    def rates(self, kind: Kind) -> tuple[float, float]:
        if self.unit == "tokens":
            return 1.0, 1.0
        if self.unit == "completion":
            return 0.0, 1.0
        return self.prices.get(kind, self.prices.get("generator", (0.0, 0.0)))

    def amount(self, kind: Kind, prompt: float, completion: float) -> float:
        rate_in, rate_out = self.rates(kind)
        return prompt * rate_in + completion * rate_out

    def spent(self, kind: Kind, usage: Usage) -> float:
        """What a call's `usage` counts (dollars: LiteLLM's cost where it has one)."""
        if self.unit == "usd" and usage.cost_usd is not None:
            return usage.cost_usd
        return self.amount(kind, usage.prompt_tokens, usage.completion_tokens)


@dataclass
class Ledger:
    """An episode's spend, its budget, and the share of it each call may take."""

    budget: float | None = None
    meter: Meter = field(default_factory=Meter)
    estimates: Estimates = field(default_factory=Estimates)
    spent: dict[Kind, Usage] = field(default_factory=lambda: {k: Usage() for k in KINDS})
    amount: float = 0.0
    """What the calls that came back count, in the meter's unit."""
    reserved: float = 0.0
    """The allowances of the calls in flight."""
    pending: float = 0.0
    """The estimates of the step's calls not made yet (`expect`)."""
    steps: int = 0
    """Actions executed in an environment: tool calls run (rollouts' too)."""
    forks: int = 0
    """Environments forked."""
    refused: int = 0
    """Calls refused for the budget."""
    prompt_tokens_a_call_each: int = 0

    @property
    def total(self) -> int:
        """Prompt plus completion tokens of every call."""
        return sum(u.total_tokens for u in self.spent.values())

    @property
    def left(self) -> float:
        """What is left, counting the calls in flight as spending their allowances."""
        return math.inf if self.budget is None else self.budget - self.amount - self.reserved

    def fits(self, estimate: float) -> bool:
        return estimate <= self.left

    def estimate(self, kind: Kind, size: float, answers: int = 1, *, calls: int = 1) -> float:
        """What `calls` calls of `kind` on requests of `size` characters, with `answers`
        completions in all, are estimated to cost (an answer at least one token)."""
        estimates = self.estimates
        prompt = calls * estimates.ratio(kind) * size
        return self.meter.amount(kind, prompt, answers * max(estimates.completion(kind), 1.0))

    @property
    def growth(self) -> float:
        return self.estimates.growth

    def expect(self, estimate: float) -> None:
        """A step estimated at `estimate` begins: its calls share what is left."""
        self.pending = estimate

    def allowance(self, estimate: float) -> float:
        """What a call estimated at `estimate` may spend, reserved until `release`: its
        share of what is left beside the step's calls still to come."""
        if self.budget is None:
            return math.inf
        others = max(self.pending - estimate, 0.0)
        self.pending = others
        free = max(self.left, 0.0)
        share = free * estimate / (estimate + others) if estimate + others > 0 else free
        self.reserved += share
        return share

    def release(self, allowance: float) -> None:
        if self.budget is not None:
            self.reserved -= allowance

    def max_tokens(self, kind: Kind, room: float, answers: int) -> int:
        """The completion tokens an answer may take when `room` is what the call's
        answers may spend."""
        _, rate_out = self.meter.rates(kind)
        if rate_out <= 0:
            return 2**31 - 1
        return max(math.floor(room / rate_out / max(answers, 1)), 0)

    def add(self, kind: Kind, usage: Usage, size: int, answers: int = 1) -> None:
        """A call of `kind` came back: its spend counted, the estimates learned from it."""
        self.spent[kind] = self.spent[kind] + usage
        self.amount += self.meter.spent(kind, usage)
        self.estimates.learn(kind, usage, size, answers)

    def grew(self, size: int, executed: bool) -> None:
        """A step added `size` characters to its trajectory; `executed`: it ran tool
        calls in an environment (an answer runs nothing)."""
        self.steps += int(executed)
        self.estimates.grew(size)
