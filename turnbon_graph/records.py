"""The turn record: what every chosen message carries, and where traces go.

Everything here is JSON-serialisable so a record survives any parent state schema,
checkpointing and export. Records never hold request headers or API keys.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, Field

RECORD_KEY = "turnbon"
"""Key of the turn record in the chosen message's `response_metadata`."""


class Usage(BaseModel):
    """Token counts as the provider reported them, and cost where LiteLLM prices the model."""

    calls: int = 0
    """Model calls counted (a call with `n` counts once)."""
    prompt_tokens: int = 0
    """Input tokens."""
    completion_tokens: int = 0
    """Output tokens, reasoning included."""
    reasoning_tokens: int = 0
    """Output tokens spent on private reasoning (part of `completion_tokens`)."""
    cached_tokens: int = 0
    """Prompt tokens served from the provider's prompt cache (part of `prompt_tokens`)."""
    cost_usd: float | None = None
    """US dollars by LiteLLM's `completion_cost`; None where the model is not priced."""

    @property
    def total_tokens(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        if self.cost_usd is None and other.cost_usd is None:
            cost = None
        else:
            cost = (self.cost_usd or 0.0) + (other.cost_usd or 0.0)
        return Usage(
            calls=self.calls + other.calls,
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            cost_usd=cost,
        )


def split_usage(usage: Usage, weights: Sequence[int]) -> list[Usage]:
    """One call's `usage` shared out in proportion to `weights` (each candidate's own
    completion tokens): every count in whole tokens, by largest remainder, so the shares
    add up to `usage` exactly; the call itself counted once, on the first share."""
    total = sum(max(w, 1) for w in weights)
    shares = [max(w, 1) / total for w in weights]
    counts = {
        name: _apportion(getattr(usage, name), shares)
        for name in ("prompt_tokens", "completion_tokens", "reasoning_tokens", "cached_tokens")
    }
    costs: list[float | None] = [None] * len(shares)
    if usage.cost_usd is not None:
        priced = [usage.cost_usd * share for share in shares[:-1]]
        costs = [*priced, usage.cost_usd - sum(priced)]  # the last takes the rounding
    return [
        Usage(
            calls=usage.calls if k == 0 else 0,
            cost_usd=costs[k],
            **{name: parts[k] for name, parts in counts.items()},
        )
        for k in range(len(shares))
    ]


def _apportion(amount: int, shares: Sequence[float]) -> list[int]:
    exact = [amount * share for share in shares]
    parts = [int(x) for x in exact]
    by_remainder = sorted(range(len(exact)), key=lambda k: exact[k] - parts[k], reverse=True)
    for k in by_remainder[: amount - sum(parts)]:
        parts[k] += 1
    return parts


class UsageSplit(BaseModel):
    """A turn's usage, split between who spent it."""

    generator: Usage = Field(default_factory=Usage)
    """The candidates' calls."""
    selector: Usage = Field(default_factory=Usage)
    """The selector's calls (none when the candidates agreed)."""

    @property
    def total(self) -> Usage:
        """Generator and selector together: what the turn spent."""
        return self.generator + self.selector


class LatencySplit(BaseModel):
    """A turn's seconds, per phase."""

    generate: float = 0.0
    """Seconds `generate` took, every batch included."""
    select: float = 0.0
    """Seconds `select` took: the selector's calls, and a resample's."""


class CandidateRecord(BaseModel):
    """One candidate as the record keeps it: its action, never its private reasoning."""

    index: int
    """Its slot in generation order (0..N-1)."""
    model: str
    """The model that proposed it."""
    content: str | None = None
    """Its text; None for a failed call."""
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    """Its tool calls: `{name, args, id}`."""
    invalid_tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    """Calls whose arguments could not be parsed: `{name, args (the raw string), id,
    error}`. A candidate with any is invalid: chosen only when every candidate is."""
    finish_reason: str | None = None
    """The provider's finish reason (`stop`, `tool_calls`, `length`, ...)."""
    error: str | None = None
    """Why its call failed, secrets redacted; None when it succeeded."""
    usage: Usage = Field(default_factory=Usage)
    """What its call cost."""
    usage_estimated: bool = False
    """Its `usage` is its share of one call's usage (a call with `n`: the provider
    reports one usage), split by each candidate's completion tokens; the shares of a
    turn add up to what the provider reported."""
    latency_s: float = 0.0
    """Seconds its call took, retries included."""
    deployment: str | None = None
    """The `litellm.Router` deployment that served it (its `model_info` id), if routed."""


class EscalationRecord(BaseModel):
    """A turn that was sampled again with more effort (the `escalate` strategy) because
    its first candidates disagreed: the turn's `candidates` are the second batch's, these
    the first's."""

    agreement: float
    """The first batch's agreement (the share of its most common action)."""
    threshold: float
    """The agreement below which a turn escalates (`--agree`)."""
    effort: str
    """How the second batch was asked: `reasoning_effort=<level>`, or `step by step` (the
    prompt variant, for a model that takes no reasoning effort)."""
    candidates: list[CandidateRecord] = Field(default_factory=list)
    usage: Usage = Field(default_factory=Usage)
    """The first batch's generator usage (the turn's `usage.generator` is the second's)."""


class SamplingRecord(BaseModel):
    """How the turn sampled: calls launched per batch, and why it stopped."""

    calls: int = 0
    """Candidate calls launched in all."""
    batches: list[int] = Field(default_factory=list)
    """Calls launched per batch (one batch unless `adaptive`)."""
    stopped: str | None = None
    """Why sampling ended early (agreement, cap, ...); None when every batch ran to the end."""
    cancelled: list[int] = Field(default_factory=list)
    """Candidates whose calls early commit cancelled (their usage is unknown: not counted)."""
    budget: str | None = None
    """Why a budget cut the number of candidates, or None."""
    native_n: bool | None = None
    """Whether candidates came from one call asking for several with `n` (`native_n`)
    rather than one call each; None in records written before this field."""
    separate_calls: str | None = None
    """Why candidates came from one call each where one call with `n` might have served
    ("early commit takes candidates as they arrive", "a pool of several models", ...);
    None when one call served them, and in records written before this field."""
    escalation: EscalationRecord | None = None
    """Why and how the turn was sampled again with more effort (`escalate`); None when
    it was not."""


class TurnRecord(BaseModel):
    """Everything about one Turn-BoN turn; `selected_index` indexes `candidates`."""

    turn_id: str
    """A random id, in the turn's progress events too."""
    n_requested: int
    """Candidates the turn launched."""
    n_ok: int
    """Candidates whose calls succeeded."""
    selected_index: int
    """The chosen candidate's `index` (generation order)."""
    selector: str
    """Who chose: the selector's name, or `unanimous`/`single` (the candidates agreed,
    no selector call), `agreement` (adaptive sampling committed) or `invalid` (no
    candidate's tool calls parsed)."""
    fallback: str | None = None
    """Why the choice fell back to a rule (the selector failed or rejected every
    candidate), and to which; None when it did not."""
    permutation: list[int] | None = None
    """Candidate indices in the order the selector was shown them."""
    selector_answer: str | None = None
    """The selector's own answer, as it gave it (a model selector's reply text)."""
    agreement: float
    """Share of the successful candidates proposing the plurality action."""
    candidates: list[CandidateRecord]
    """Every candidate, failed ones included, in generation order."""
    usage: UsageSplit
    """Tokens and cost, generator and selector apart."""
    latency_s: LatencySplit
    """Seconds, generate and select apart."""
    scores: list[float | None] | None = None
    """A scoring selector's score per candidate (generation order), or None."""
    synthesized: dict[str, Any] | None = None
    """The action a selector wrote itself ({content, tool_calls}), executed instead of
    `candidates[selected_index]`, which it was built from; None when a candidate ran."""
    resamples: int = 0
    """How often every candidate was rejected and the turn sampled a fresh batch."""
    sampling: SamplingRecord = Field(default_factory=SamplingRecord)
    """How the turn sampled: calls, batches, and why it stopped or took fewer."""

    def to_json(self) -> dict[str, Any]:
        """The record as plain JSON values.

        Returns:
            What the chosen message carries in `response_metadata["turnbon"]` and a trace
                line holds; `TurnRecord.model_validate` reads it back.
        """
        return self.model_dump(mode="json")

    @property
    def prompt_tokens_a_call_each(self) -> int:
        """The generator's prompt tokens had every candidate been a call of its own: a
        call with `n` bills its prompt once for all its candidates."""
        shared = [c for c in self.candidates if c.usage_estimated]
        own = sum(c.usage.prompt_tokens for c in self.candidates if not c.usage_estimated)
        return own + sum(c.usage.prompt_tokens for c in shared) * len(shared)


def turns_usage(records: Sequence[TurnRecord]) -> UsageSplit:
    """What an episode's turns cost, generator and selector apart."""
    return UsageSplit(
        generator=sum((r.usage.generator for r in records), Usage()),
        selector=sum((r.usage.selector for r in records), Usage()),
    )


def prompt_tokens_a_call_each(records: Sequence[TurnRecord]) -> int | None:
    """The episode's generator prompt tokens had every candidate been a call of its own
    (`TurnRecord.prompt_tokens_a_call_each`); None without records."""
    return sum(r.prompt_tokens_a_call_each for r in records) if records else None


@runtime_checkable
class TraceSink(Protocol):
    """Receives one record per turn, after the choice is made."""

    def write(self, record: TurnRecord) -> None:
        """Takes one turn's record. Called on the turn's event loop: keep it quick, or
        give the sink an `async def awrite(record)` as well, which a turn awaits instead.

        Args:
            record: the turn's record, as the chosen message carries it.
        """
        ...


async def write_trace(sink: TraceSink, record: TurnRecord) -> None:
    """Hands `record` to `sink`: through its `awrite` where it has one, else `write`."""
    awrite = getattr(sink, "awrite", None)
    if awrite is not None:
        await awrite(record)
    else:
        sink.write(record)


class JSONLTraceSink:
    """Appends one JSON line per turn to a file; safe to share between concurrent turns."""

    def __init__(self, path: str | Path) -> None:
        """A sink on `path`.

        Args:
            path: the JSON-lines file to append to; it and its folder are made as
                needed.
        """
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()

    def write(self, record: TurnRecord) -> None:
        """Appends `record` to the file as one JSON line.

        Args:
            record: the turn's record.
        """
        line = json.dumps(record.to_json(), ensure_ascii=False)
        with self._lock, self.path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")

    async def awrite(self, record: TurnRecord) -> None:
        """Appends `record` as `write` does, in a worker thread: a slow disk or a full
        pipe never stalls the event loop.

        Args:
            record: the turn's record.
        """
        await asyncio.to_thread(self.write, record)

    def __repr__(self) -> str:
        return f"JSONLTraceSink({str(self.path)!r})"
