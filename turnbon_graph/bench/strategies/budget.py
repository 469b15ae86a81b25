"""Matched compute: what an episode's search spent, by kind of call, and whether the next
step fits its token budget (`--token-budget`: prompt plus completion tokens of generator,
selector and value calls together).

A call's cost is known only once it returns, so a step is planned on estimates learned
from the episode's own calls: tokens per character of each kind of request (the most
seen), and completion tokens per candidate or answer (the most seen). Before the first
call of a kind the estimates are cautious: a third of a token per character and
`FIRST_COMPLETION` tokens. A search narrows, then falls back to one trajectory with one
candidate, then stops, rather than start a step it cannot afford by these estimates.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage

from turnbon_graph.records import Usage

Kind = Literal["generator", "selector", "value"]
KINDS: tuple[Kind, ...] = ("generator", "selector", "value")

FIRST_RATIO = 1 / 3
"""Tokens per character assumed before a kind of call has been seen."""
FIRST_COMPLETION: dict[Kind, int] = {"generator": 256, "selector": 128, "value": 128}
"""Completion tokens a candidate (generator) or an answer assumed before one was seen."""
FIRST_GROWTH = 4000
"""Characters one step (action and observation) is assumed to add before one was seen."""


def characters(messages: Sequence[BaseMessage], extra: Any = None) -> int:
    """The size of a request, in characters of its text and tool calls (and `extra`,
    such as the tool schemas): the measure the estimates are learned in."""
    size = len(json.dumps(extra)) if extra is not None else 0
    for message in messages:
        size += len(str(message.content))
        if isinstance(message, AIMessage) and message.tool_calls:
            size += len(json.dumps([c["args"] for c in message.tool_calls], default=str))
    return size


@dataclass
class Ledger:
    """An episode's spend and the estimates learned from it."""

    budget: int | None = None
    spent: dict[Kind, Usage] = field(default_factory=lambda: {k: Usage() for k in KINDS})
    prompt_tokens_a_call_each: int = 0
    reserved: float = 0.0
    """Estimated tokens of calls in flight that reserved them (`reserve`)."""
    _ratio: dict[Kind, float] = field(default_factory=dict)
    _completion: dict[Kind, float] = field(default_factory=dict)
    _growth: int = 0

    @property
    def total(self) -> int:
        return sum(u.total_tokens for u in self.spent.values())

    @property
    def left(self) -> float:
        return math.inf if self.budget is None else self.budget - self.total - self.reserved

    def fits(self, estimate: float) -> bool:
        return estimate <= self.left

    def reserve(self, estimate: float) -> bool:
        """Whether a call estimated at `estimate` fits, counting the calls in flight; if
        so it is reserved until `release`, so calls made at once never add up to more."""
        if not self.fits(estimate):
            return False
        self.reserved += estimate
        return True

    def release(self, estimate: float) -> None:
        """A reserved call came back (and was added) or was not made."""
        self.reserved -= estimate

    def add(self, kind: Kind, usage: Usage, size: int, answers: int = 1) -> None:
        """A call (or calls) of `kind` on a request of `size` characters came back with
        `answers` completions and `usage`."""
        self.spent[kind] = self.spent[kind] + usage
        calls = max(usage.calls, 1)
        if size > 0 and usage.prompt_tokens:
            ratio = usage.prompt_tokens / calls / size
            self._ratio[kind] = max(self._ratio.get(kind, 0.0), ratio)
        if usage.completion_tokens:
            each = usage.completion_tokens / max(answers, 1)
            self._completion[kind] = max(self._completion.get(kind, 0.0), each)

    def grew(self, size: int) -> None:
        """A step added `size` characters to a trajectory."""
        self._growth = max(self._growth, size)

    def estimate(self, kind: Kind, size: int, answers: int = 1, *, calls: int = 1) -> float:
        """What `calls` calls of `kind` on a request of `size` characters, with `answers`
        completions in all, are estimated to cost."""
        ratio = self._ratio.get(kind, FIRST_RATIO)
        completion = self._completion.get(kind, FIRST_COMPLETION[kind])
        return math.ceil(calls * ratio * size + answers * completion)

    @property
    def growth(self) -> int:
        """Characters a step is estimated to add to a trajectory."""
        return self._growth or FIRST_GROWTH
