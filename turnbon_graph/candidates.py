"""Candidates of one turn, their canonical actions, and how much they agree."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage

from turnbon_graph.records import CandidateRecord, Usage


@dataclass
class Candidate:
    """One proposed next action, or the failure that stands in its place.

    `index` is the candidate's slot in generation order (0..N-1), stable whatever
    order the calls finish in. `message` keeps the private reasoning in
    `additional_kwargs`; nothing derived from a candidate for the selector reads it.
    """

    index: int
    model: str
    message: AIMessage | None = None
    error: str | None = None
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.message is not None

    @property
    def action(self) -> str:
        """The canonical action; only defined for successful candidates."""
        if self.message is None:
            raise ValueError(f"candidate {self.index} failed ({self.error}); it has no action")
        return canonical_action(self.message)

    def to_record(self) -> CandidateRecord:
        message = self.message
        return CandidateRecord(
            index=self.index,
            model=self.model,
            content=_text(message.content) if message is not None else None,
            tool_calls=[
                {"name": call["name"], "args": call["args"], "id": call.get("id")}
                for call in message.tool_calls
            ]
            if message is not None
            else [],
            finish_reason=message.response_metadata.get("finish_reason")
            if message is not None
            else None,
            error=self.error,
            usage=self.usage,
            latency_s=round(self.latency_s, 6),
        )


def _text(content: str | list[Any]) -> str:
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


def canonical_action(message: AIMessage) -> str:
    """A string equal for two messages exactly when they would do the same thing.

    Tool calls compare by name and arguments (keys sorted; call ids ignored). A reply
    without tool calls is a final answer and compares by its whitespace-normalised text.
    """
    if message.tool_calls:
        calls = [{"name": call["name"], "args": call["args"]} for call in message.tool_calls]
        return "tools:" + json.dumps(calls, sort_keys=True, ensure_ascii=False)
    if message.invalid_tool_calls:
        invalid: list[dict[str, Any]] = [
            {"name": call.get("name"), "args": call.get("args")}
            for call in message.invalid_tool_calls
        ]
        return "invalid:" + json.dumps(invalid, sort_keys=True, ensure_ascii=False)
    return "text:" + " ".join(_text(message.content).split())


def group_by_action(candidates: Sequence[Candidate]) -> dict[str, list[int]]:
    """Positions in `candidates` (successful ones only) grouped by canonical action,
    in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for position, candidate in enumerate(candidates):
        if candidate.ok:
            groups.setdefault(candidate.action, []).append(position)
    return groups


def agreement(candidates: Sequence[Candidate]) -> float:
    """Share of successful candidates that propose the plurality action (0.0 when none)."""
    counts = Counter(c.action for c in candidates if c.ok)
    total = sum(counts.values())
    return max(counts.values()) / total if total else 0.0


def plurality_position(candidates: Sequence[Candidate]) -> int:
    """Position of the first candidate of the largest action group (ties: the earliest)."""
    groups = group_by_action(candidates)
    if not groups:
        raise ValueError("no successful candidate to vote over")
    best = max(groups.values(), key=len)  # max keeps the first of equal-sized groups
    return best[0]


def fallback_choice(candidates: Sequence[Candidate]) -> tuple[int, str]:
    """Majority when one action has a strict plurality of two or more, else the first."""
    groups = sorted(group_by_action(candidates).values(), key=len, reverse=True)
    if len(groups[0]) >= 2 and (len(groups) == 1 or len(groups[0]) > len(groups[1])):
        return groups[0][0], "majority"
    return 0, "first"


def candidate_to_state(candidate: Candidate) -> dict[str, Any]:
    """A checkpointable form: plain values and the message itself (LangGraph serialises it)."""
    return {
        "index": candidate.index,
        "model": candidate.model,
        "message": candidate.message,
        "error": candidate.error,
        "usage": candidate.usage.model_dump(),
        "latency_s": candidate.latency_s,
    }


def candidate_from_state(data: dict[str, Any]) -> Candidate:
    return Candidate(
        index=data["index"],
        model=data["model"],
        message=data.get("message"),
        error=data.get("error"),
        usage=Usage.model_validate(data.get("usage") or {}),
        latency_s=data.get("latency_s", 0.0),
    )
