"""`GeneratedTurn`: a turn's candidates between its generate and select phases.

The graph checkpoints it between its two nodes (`to_state`/`from_state`), so a selector
that pauses the graph, or a crash, never costs a regeneration; a resample extends it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from turnbon_graph.records import SamplingRecord
from turnbon_graph.turn.candidates import (
    Candidate,
    candidate_from_state,
    candidate_to_state,
    electable,
)


@dataclass
class GeneratedTurn:
    """The candidates of one turn, between the generate and select phases."""

    turn_id: str
    n_requested: int
    candidates: list[Candidate]
    latency_s: float
    tools: list[dict[str, Any]] | None = None
    extra: dict[str, Any] | None = None
    """The request settings, kept so that a resample asks the same question."""
    rejected: int = 0
    """How many candidates at the front of `candidates` a selector already rejected."""
    committed: int | None = None
    """Position in `ok` that adaptive sampling committed to (no selector call), or None."""
    sampling: SamplingRecord = field(default_factory=SamplingRecord)

    @property
    def ok(self) -> list[Candidate]:
        """Successful candidates still in the running (not rejected), in generation order:
        the valid ones, or the invalid ones when none is valid (`candidates.electable`)."""
        live = [c for c in self.candidates[self.rejected :] if c.ok]
        return [live[p] for p in electable(live)]

    def committed_position(self) -> int | None:
        """Adaptive sampling's commit as a position in `ok`, or None (no commit, a
        rejection since, or it named a candidate that is not electable). Sampling counts
        positions among every successful candidate, invalid ones included."""
        if self.committed is None or self.rejected:
            return None
        target = [c for c in self.candidates if c.ok][self.committed]
        return next((p for p, c in enumerate(self.ok) if c is target), None)

    def to_state(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "n_requested": self.n_requested,
            "candidates": [candidate_to_state(c) for c in self.candidates],
            "latency_s": self.latency_s,
            "tools": self.tools,
            "extra": self.extra,
            "rejected": self.rejected,
            "committed": self.committed,
            "sampling": self.sampling.model_dump(),
        }

    @classmethod
    def from_state(cls, data: dict[str, Any]) -> GeneratedTurn:
        return cls(
            turn_id=data["turn_id"],
            n_requested=data["n_requested"],
            candidates=[candidate_from_state(c) for c in data["candidates"]],
            latency_s=data["latency_s"],
            tools=data.get("tools"),
            extra=data.get("extra"),
            rejected=data.get("rejected", 0),
            committed=data.get("committed"),
            sampling=SamplingRecord.model_validate(data.get("sampling") or {}),
        )

    def resampled(self, fresh: GeneratedTurn) -> GeneratedTurn:
        """This turn with every current candidate rejected and `fresh`'s appended after
        them (re-indexed so indices stay unique)."""
        offset = len(self.candidates)
        for candidate in fresh.candidates:
            candidate.index += offset
        return GeneratedTurn(
            turn_id=self.turn_id,
            n_requested=self.n_requested + fresh.n_requested,
            candidates=[*self.candidates, *fresh.candidates],
            latency_s=self.latency_s + fresh.latency_s,
            tools=self.tools,
            extra=self.extra,
            rejected=offset,
            sampling=self.sampling.model_copy(
                update={
                    "calls": self.sampling.calls + fresh.sampling.calls,
                    "batches": [*self.sampling.batches, *fresh.sampling.batches],
                }
            ),
        )
