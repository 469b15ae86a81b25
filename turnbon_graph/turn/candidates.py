"""Candidates of one turn, their canonical actions, and how much they agree."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage

from turnbon_graph.errors import CallFailure
from turnbon_graph.records import CandidateRecord, Usage


@dataclass
class Candidate:
    """One proposed next action, or the failure that stands in its place."""

    index: int
    """The candidate's slot in generation order (0..N-1), stable whatever order the calls
    finish in."""
    model: str
    """The model that proposed it."""
    message: AIMessage | None = None
    """The proposed message, None for a failed call. It keeps the private reasoning in
    `additional_kwargs`; nothing derived from a candidate for the selector reads it."""
    error: str | None = None
    """Why the call failed, secrets redacted; None when it succeeded."""
    failure: CallFailure | None = None
    """How its call failed (status, Retry-After, the upstream's words), when it did."""
    usage: Usage = field(default_factory=Usage)
    """What its call cost (its share, when one call made several candidates)."""
    latency_s: float = 0.0
    """Seconds its call took, waiting for a slot and retries included."""
    votes: int = 1
    """How many generated candidates propose this action when the turn shows a selector
    each distinct action once (`dedupe`), else 1."""
    ignore_args: tuple[str, ...] = ()
    """Argument names left out of the canonical action (a timeout value, say)."""
    cancelled: bool = False
    """Early commit stopped waiting for it; its call was cancelled."""
    deployment: str | None = None
    """The `litellm.Router` deployment that served it (its `model_info` id), if routed."""
    native_n: bool = False
    """It came from one call that asked for several candidates with `n` (`native_n`)."""

    @property
    def ok(self) -> bool:
        """Its call succeeded: it has a `message`."""
        return self.message is not None

    @property
    def valid(self) -> bool:
        """Succeeded, and every tool call's arguments parsed. An invalid candidate (its
        calls in `message.invalid_tool_calls`) has nothing to run: it is chosen only when
        every candidate is invalid."""
        return self.message is not None and not self.message.invalid_tool_calls

    @property
    def action(self) -> str:
        """The canonical action; only defined for successful candidates."""
        if self.message is None:
            raise ValueError(f"candidate {self.index} failed ({self.error}); it has no action")
        return canonical_action(self.message, self.ignore_args)

    def to_record(self) -> CandidateRecord:
        """The candidate as its turn record keeps it.

        Returns:
            Its text, tool calls (valid and invalid), finish reason, error, usage and
                latency; the message's private reasoning is left out.
        """
        message = self.message
        return CandidateRecord(
            index=self.index,
            model=self.model,
            content=candidate_text(message.content) if message is not None else None,
            tool_calls=[
                {"name": call["name"], "args": call["args"], "id": call.get("id")}
                for call in message.tool_calls
            ]
            if message is not None
            else [],
            invalid_tool_calls=[
                {
                    "name": call.get("name"),
                    "args": call.get("args"),
                    "id": call.get("id"),
                    "error": call.get("error"),
                }
                for call in message.invalid_tool_calls
            ]
            if message is not None
            else [],
            finish_reason=message.response_metadata.get("finish_reason")
            if message is not None
            else None,
            error=self.error,
            usage=self.usage,
            usage_estimated=self.native_n,
            latency_s=round(self.latency_s, 6),
            deployment=self.deployment,
        )


def candidate_text(content: str | list[Any]) -> str:
    """Plain text of a message's content, whatever its block structure."""
    if isinstance(content, str):
        return content
    parts = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and block.get("type") == "text":
            parts.append(str(block.get("text", "")))
    return "".join(parts)


def canonical_action(message: AIMessage, ignore_args: Sequence[str] = ()) -> str:
    """A string equal for two messages exactly when they would do the same thing.

    Tool calls compare by name and arguments (keys sorted; call ids and the top-level
    arguments named in `ignore_args` left out). A reply without tool calls is a final
    answer and compares by its whitespace-normalised text.

    Args:
        message: a candidate's message.
        ignore_args: top-level argument names to leave out of every tool call's
            arguments (the `ignore_args` option).

    Returns:
        `tools:` and the calls as JSON, `invalid:` and the unparseable calls, or `text:`
            and the normalised text.
    """
    if message.tool_calls:
        calls = [
            {
                "name": call["name"],
                "args": {k: v for k, v in call["args"].items() if k not in ignore_args},
            }
            for call in message.tool_calls
        ]
        return "tools:" + json.dumps(calls, sort_keys=True, ensure_ascii=False)
    if message.invalid_tool_calls:
        invalid: list[dict[str, Any]] = [
            {"name": call.get("name"), "args": call.get("args")}
            for call in message.invalid_tool_calls
        ]
        return "invalid:" + json.dumps(invalid, sort_keys=True, ensure_ascii=False)
    return "text:" + " ".join(candidate_text(message.content).split())


def electable(candidates: Sequence[Candidate]) -> list[int]:
    """Positions in `candidates` that may be chosen: the valid ones, or the successful
    (all invalid) ones when none is valid. Failed candidates never are."""
    valid = [p for p, c in enumerate(candidates) if c.valid]
    return valid or [p for p, c in enumerate(candidates) if c.ok]


def group_by_action(candidates: Sequence[Candidate]) -> dict[str, list[int]]:
    """Positions in `candidates` (electable ones only) grouped by canonical action,
    in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for position in electable(candidates):
        groups.setdefault(candidates[position].action, []).append(position)
    return groups


def vote_counts(candidates: Sequence[Candidate]) -> dict[str, int]:
    """Votes per canonical action of the electable candidates (a candidate counts `votes`
    times), first-seen order."""
    counts: Counter[str] = Counter()
    for position in electable(candidates):
        counts[candidates[position].action] += candidates[position].votes
    return dict(counts)


def agreement(candidates: Sequence[Candidate]) -> float:
    """Share of the successful candidates' votes for the plurality valid action (0.0
    when none is valid): an invalid candidate agrees with nothing, not even its twin."""
    counts = vote_counts([c for c in candidates if c.valid])
    total = sum(c.votes for c in candidates if c.ok)
    return max(counts.values(), default=0) / total if total else 0.0


def _ranked_groups(candidates: Sequence[Candidate]) -> list[tuple[int, list[int]]]:
    """(votes, positions) per action, most votes first; equal votes keep first-seen order."""
    counts = vote_counts(candidates)
    groups = group_by_action(candidates)
    return sorted(((counts[a], p) for a, p in groups.items()), key=lambda g: -g[0])


def plurality_position(candidates: Sequence[Candidate]) -> int:
    """Position of the first candidate of the most-voted action (ties: the earliest)."""
    ranked = _ranked_groups(candidates)
    if not ranked:
        raise ValueError("no successful candidate to vote over")
    return ranked[0][1][0]


def fallback_choice(candidates: Sequence[Candidate]) -> tuple[int, str]:
    """Majority when one action has a strict plurality of two or more votes, else the first
    (electable) candidate."""
    ranked = _ranked_groups(candidates)
    if ranked[0][0] >= 2 and (len(ranked) == 1 or ranked[0][0] > ranked[1][0]):
        return ranked[0][1][0], "majority"
    return electable(candidates)[0], "first"


def candidate_to_state(candidate: Candidate) -> dict[str, Any]:
    """A checkpointable form: plain values and the message itself (LangGraph serialises it)."""
    return {
        "index": candidate.index,
        "model": candidate.model,
        "message": candidate.message,
        "error": candidate.error,
        "usage": candidate.usage.model_dump(),
        "latency_s": candidate.latency_s,
        "votes": candidate.votes,
        "ignore_args": list(candidate.ignore_args),
        "cancelled": candidate.cancelled,
        "deployment": candidate.deployment,
        "native_n": candidate.native_n,
    }


def candidate_from_state(data: dict[str, Any]) -> Candidate:
    """A candidate back from its checkpointed form (`candidate_to_state`)."""
    return Candidate(
        index=data["index"],
        model=data["model"],
        message=data.get("message"),
        error=data.get("error"),
        usage=Usage.model_validate(data.get("usage") or {}),
        latency_s=data.get("latency_s", 0.0),
        votes=data.get("votes", 1),
        ignore_args=tuple(data.get("ignore_args", ())),
        cancelled=data.get("cancelled", False),
        deployment=data.get("deployment"),
        native_n=data.get("native_n", False),
    )
