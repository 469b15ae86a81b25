"""The measures of branch rollouts: headroom capture h, Spearman's rho_v (average ranks
for ties), and the aggregates over branched turns (`summarise`, `RolloutSummary`). The
per-turn oracle, realised and mu are filled by `BranchTurn.measure` from these."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from pydantic import BaseModel

if TYPE_CHECKING:
    from turnbon_graph.analysis.rollouts.models import BranchTurn


class RolloutSummary(BaseModel):
    """Aggregates over branched turns (complete ones; see `BranchTurn.complete`)."""

    turns: int
    complete_turns: int
    h_turns: int
    """Complete turns where h is defined (oracle > mu and a picked value)."""
    mean_h: float | None = None
    mean_oracle: float | None = None
    mean_realised: float | None = None
    mean_mu: float | None = None
    rho_v: float | None = None
    """Spearman over every (score, value) pair of the complete turns, pooled."""
    rho_v_mean: float | None = None
    """Mean of the per-turn rho_v where defined (the study's per-task convention)."""
    rho_v_turns: int = 0
    rollouts: int = 0
    skipped_rollouts: int = 0
    tokens: int = 0


def headroom(realised: float | None, oracle: float | None, mu: float | None) -> float | None:
    """(realised - mu) / (oracle - mu); None when undefined (oracle == mu, or a missing
    value): with no headroom there is nothing to capture."""
    if realised is None or oracle is None or mu is None or oracle == mu:
        return None
    return (realised - mu) / (oracle - mu)


def average_ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of the ranks they span."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    ranks = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for position in range(start, end + 1):
            ranks[order[position]] = (start + end) / 2 + 1
        start = end + 1
    return ranks


def spearman(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rank correlation (Pearson over average ranks, so ties are handled);
    None with fewer than two pairs or when either side is constant."""
    if len(x) != len(y):
        raise ValueError(f"spearman needs pairs: {len(x)} x values, {len(y)} y values")
    if len(x) < 2:
        return None
    rx, ry = average_ranks(x), average_ranks(y)
    mx, my = sum(rx) / len(rx), sum(ry) / len(ry)
    cov = sum((a - mx) * (b - my) for a, b in zip(rx, ry, strict=True))
    vx = sum((a - mx) ** 2 for a in rx)
    vy = sum((b - my) ** 2 for b in ry)
    if vx == 0 or vy == 0:
        return None
    return float(cov / (vx * vy) ** 0.5)


def _mean(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def summarise(turns: Iterable[BranchTurn]) -> RolloutSummary:
    """The aggregates over branched turns (of one episode or many)."""
    turns = list(turns)
    complete = [t for t in turns if t.complete]
    per_turn_rho = [t.rho_v for t in complete if t.rho_v is not None]
    pairs = [
        (c.score, c.value)
        for t in complete
        for c in t.candidates
        if c.ok and c.score is not None and c.value is not None
    ]
    return RolloutSummary(
        turns=len(turns),
        complete_turns=len(complete),
        h_turns=sum(t.h is not None for t in complete),
        mean_h=_mean(t.h for t in complete),
        mean_oracle=_mean(t.oracle for t in complete),
        mean_realised=_mean(t.realised for t in complete),
        mean_mu=_mean(t.mu for t in complete),
        rho_v=spearman([s for s, _ in pairs], [v for _, v in pairs]),
        rho_v_mean=_mean(per_turn_rho),
        rho_v_turns=len(per_turn_rho),
        rollouts=sum(len(t.rollouts) for t in turns),
        skipped_rollouts=sum(len(t.skipped) for t in turns),
        tokens=sum(r.tokens for t in turns for r in t.rollouts),
    )
