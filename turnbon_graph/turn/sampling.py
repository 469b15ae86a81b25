"""How many candidates a turn samples, and when it stops waiting for them.

- `AdaptiveN`: TrACE's controller at the turn level (docs/references.md):
  sample a small batch; if the canonical actions agree enough, commit the plurality action
  without calling the selector; otherwise sample more, up to a cap, then select. Actions
  that call a tool marked as mutating need more agreeing candidates before a commit.
- `EarlyCommit` (hedging): once `min_candidates` have arrived and `grace_s` more seconds
  have passed, stop waiting; the stragglers' requests are cancelled (their connections
  closed).
- `Budget`: per-turn and per-episode caps on tokens and cost that step down gracefully,
  to fewer candidates and then to one; they never fail a run.

The decisions are pure functions of the candidates and records so far, so they are
tested without a model and a resumed thread decides as the original would have.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pydantic import BaseModel, ConfigDict, Field, model_validator

from turnbon_graph.records import RECORD_KEY, TurnRecord, Usage
from turnbon_graph.turn.candidates import Candidate, agreement, plurality_position


class AdaptiveN(BaseModel):
    """Agreement-driven sampling: commit early on easy turns, sample more on hard ones.

    The cap is the turn's `n`. `threshold` is the share of successful candidates that
    must propose the plurality action to commit it; `mutating_min` is how many
    successful candidates a commit needs when that action calls one of `mutating_tools`
    (so side effects get a larger sample than reads).
    """

    model_config = ConfigDict(frozen=True)

    first_batch: int = Field(2, ge=1)
    """Candidates sampled first; more come only when these do not agree enough."""
    step: int = Field(2, ge=1)
    """Candidates each later batch adds, up to the cap."""
    threshold: float = Field(0.75, gt=0.0, le=1.0)
    """Share of the successful candidates (0 to 1) that must propose the plurality action
    for it to be committed without a selector call."""
    mutating_tools: frozenset[str] = frozenset()
    """Names of the tools with side effects."""
    mutating_min: int = Field(4, ge=1)
    """Successful candidates a commit needs when the plurality action calls one of
    `mutating_tools` (at most the cap); any other action needs one."""

    def next_step(self, candidates: Sequence[Candidate], launched: int, cap: int) -> Step:
        """After a batch: commit the plurality, sample `size` more, or select at the cap.

        Args:
            candidates: every candidate of the turn so far, failed ones included.
            launched: how many candidate calls the turn has launched.
            cap: the most calls the turn may make (its `n`, or fewer under a `Budget`).

        Returns:
            The decision, with its `reason` for the turn record's `sampling.stopped`
                (`commit`, the plurality action's position among the successful
                candidates; `size`, how many more to sample; or neither, select now).
        """
        ok = [c for c in candidates if c.ok]
        if ok:
            share = agreement(ok)
            leader = ok[plurality_position(ok)]
            needed = self.mutating_min if calls_any(leader, self.mutating_tools) else 1
            if share >= self.threshold and len(ok) >= min(needed, cap):
                return Step(
                    commit=plurality_position(ok),
                    reason=f"agreement {share:.2f} >= {self.threshold:.2f} after {launched} calls",
                )
        if launched >= cap:
            return Step(reason=f"cap of {cap} calls reached; selecting")
        return Step(size=min(self.step, cap - launched))


@dataclass(frozen=True)
class Step:
    """What the adaptive controller decided: commit a position, sample `size`, or stop."""

    size: int = 0
    commit: int | None = None
    reason: str = ""


def calls_any(candidate: Candidate, tools: frozenset[str]) -> bool:
    """Whether the candidate's action calls one of `tools`."""
    message = candidate.message
    return message is not None and any(call["name"] in tools for call in message.tool_calls)


class EarlyCommit(BaseModel):
    """Stop waiting once `min_candidates` are in and `grace_s` seconds more have passed."""

    model_config = ConfigDict(frozen=True)

    min_candidates: int = Field(2, ge=1)
    """Successful candidates to wait for before the grace period starts."""
    grace_s: float = Field(0.0, ge=0.0)
    """Seconds to wait for more after that (0: select at once); then the stragglers'
    calls are cancelled."""


class Budget(BaseModel):
    """Caps on generator + selector usage, per turn and per episode (since the last human
    message). Before a turn, the candidates it may afford are estimated from the previous
    turns' records; below two it runs one candidate and no selector. Cost caps apply only
    where LiteLLM prices the model.

    Raises:
        pydantic.ValidationError: no cap is given, or one is not positive (as the
            `budget` option, a `ConfigurationError`).
    """

    model_config = ConfigDict(frozen=True)

    turn_tokens: int | None = Field(None, gt=0)
    """Tokens one turn may use, generator and selector together."""
    episode_tokens: int | None = Field(None, gt=0)
    """Tokens the turns since the last human message may use together."""
    turn_cost_usd: float | None = Field(None, gt=0)
    """US dollars one turn may cost."""
    episode_cost_usd: float | None = Field(None, gt=0)
    """US dollars the turns since the last human message may cost together."""

    @model_validator(mode="after")
    def _some_cap(self) -> Budget:
        caps = (self.turn_tokens, self.episode_tokens, self.turn_cost_usd, self.episode_cost_usd)
        if all(cap is None for cap in caps):
            raise ValueError("a Budget needs at least one cap")
        return self

    def affordable(self, n: int, messages: Sequence[BaseMessage]) -> tuple[int, str | None]:
        """How many candidates this turn may sample (1..n), and why fewer than n.

        Args:
            n: the turn's `n`, the most it samples.
            messages: the thread so far: the turn records on its messages since the last
                human message are what the estimate is made from.

        Returns:
            The number of candidates, and why it is below `n` (the turn record's
                `sampling.budget`) or None; `(n, None)` before the episode's first record.
        """
        records = episode_records(messages)
        if not records:
            return n, None  # nothing to estimate from yet
        spent = sum((r.usage.total for r in records), Usage())
        last = records[-1]
        tokens, cost = _generator_costs(last)
        selector = last.usage.selector
        # (left, the turn's fixed part, per candidate, the selector's, what)
        limits: list[tuple[float, float, float, float, str]] = []
        if self.turn_tokens is not None:
            limits.append((self.turn_tokens, *tokens, selector.total_tokens, "turn tokens"))
        if self.episode_tokens is not None:
            tokens_left = float(self.episode_tokens - spent.total_tokens)
            limits.append((tokens_left, *tokens, selector.total_tokens, "episode tokens"))
        if self.turn_cost_usd is not None and cost is not None:
            limits.append((self.turn_cost_usd, *cost, selector.cost_usd or 0.0, "turn cost"))
        if self.episode_cost_usd is not None and cost is not None:
            cost_left = self.episode_cost_usd - (spent.cost_usd or 0.0)
            limits.append((cost_left, *cost, selector.cost_usd or 0.0, "episode cost"))
        allowed: int = n
        reason: str | None = None
        for left, fixed, each, select, what in limits:
            if each <= 0:
                continue
            room = left - select - fixed
            fits = int(room // each) if room >= 2 * each else 1
            if fits < allowed:
                allowed, reason = max(1, fits), what
        if allowed < n:
            return allowed, f"budget ({reason}): {allowed} of {n} candidates"
        return n, None


def _generator_costs(
    record: TurnRecord,
) -> tuple[tuple[float, float], tuple[float, float] | None]:
    """What the turn's generator paid, as (fixed, per candidate), in tokens and in cost
    (None where the model is unpriced), to estimate the next turn by.

    A turn of separate calls paid each call whole, per candidate. A turn whose candidates
    came from one call with `n` paid the prompt once (fixed) and a completion each; its
    cost is not split between prompt and completion in the record, so it is estimated
    from above: the whole call fixed, and an nth of it more per candidate."""
    usage = record.usage.generator
    price = usage.cost_usd
    if any(c.usage_estimated for c in record.candidates):
        k = len(record.candidates)
        tokens = (float(usage.prompt_tokens), usage.completion_tokens / k)
        return tokens, (price, price / k) if price is not None else None
    calls = max(usage.calls, 1)
    per_call = (0.0, price / calls) if price is not None else None
    return (0.0, usage.total_tokens / calls), per_call


def episode_records(messages: Sequence[BaseMessage]) -> list[TurnRecord]:
    """Turn records since the last human message, oldest first."""
    records: list[TurnRecord] = []
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            break
        if isinstance(message, AIMessage) and RECORD_KEY in message.response_metadata:
            records.append(TurnRecord.model_validate(message.response_metadata[RECORD_KEY]))
    return records[::-1]
