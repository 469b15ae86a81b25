"""The measures of branch rollouts: headroom capture h and Spearman's rho_v (average
ranks for ties). `BranchTurn.measure` fills each turn's from these, and `summarise`
aggregates them over turns."""

from __future__ import annotations

from collections.abc import Sequence


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
