"""A paired comparison over tasks: the mean of per-task differences (setting B minus
setting A, or observed minus expected), its bootstrap confidence interval (tasks
resampled) and a two-sided p-value from the exact sign-flip test (`exact`), which keeps
its level where the bootstrap's own p-value does not.
The report, the strategies' comparison and the analyses (selector preference, the judge's
shares) test their differences with it; `metrics.paired_bootstrap` pairs two settings'
pass rates by task. `holm` adjusts the p-values of a family of comparisons (all pairs:
`pairs`)."""

from __future__ import annotations

import random
from collections.abc import Sequence

from pydantic import BaseModel

from turnbon_graph.bench.stats.exact import sign_flip_p_value
from turnbon_graph.bench.stats.power import tasks_for_power


class BootstrapResult(BaseModel):
    """The mean of per-task differences, its confidence interval and a two-sided p-value."""

    tasks: int
    """Tasks resampled."""
    difference: float
    """The mean of the per-task differences."""
    ci_low: float
    """The confidence interval's lower end."""
    ci_high: float
    """The confidence interval's upper end."""
    p_value: float
    """Two-sided, from the sign-flip (randomisation) test of the differences
    (`exact.sign_flip_p_value`): exact up to 32 tasks."""
    tasks_needed: int | None = None
    """The tasks a difference of this size needs to be found at 0.05 with 80% power
    (`power.tasks_for_power`); None when the difference is 0."""


def bootstrap_differences(
    differences: Sequence[float],
    *,
    resamples: int = 10_000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Paired bootstrap over tasks: `differences` holds one value per task (setting B
    minus setting A, or observed minus expected); tasks are resampled with replacement.

    Args:
        differences: one value per task.
        resamples: bootstrap resamples.
        seed: seeds the resampling.
        confidence: the confidence interval's level.

    Returns:
        The mean difference, its interval and p-value.

    Raises:
        ValueError: no differences, or `resamples` below 1.
    """
    if not differences:
        raise ValueError("no per-task differences to resample: nothing to pair")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    diffs = list(differences)
    rng = random.Random(seed)
    k = len(diffs)
    samples = sorted(sum(rng.choices(diffs, k=k)) / k for _ in range(resamples))
    tail = (1 - confidence) / 2
    return BootstrapResult(
        tasks=k,
        difference=sum(diffs) / k,
        ci_low=samples[int(tail * (resamples - 1))],
        ci_high=samples[int((1 - tail) * (resamples - 1))],
        p_value=sign_flip_p_value(diffs, seed=seed),
        tasks_needed=tasks_for_power(diffs),
    )


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the order given: the m p-values sorted from
    the smallest, the i-th (from 1) multiplied by m - i + 1, each raised to at least the
    one before it, capped at 1. Calling a difference significant when its adjusted p is
    below alpha keeps the chance of any false call across all m at most alpha, whatever
    the tests' dependence (Holm, 1979).

    Args:
        p_values: one per comparison of the family.

    Returns:
        The adjusted p-values, in the order of `p_values`.
    """
    m = len(p_values)
    adjusted = [0.0] * m
    running = 0.0
    for rank, position in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        running = max(running, min(1.0, (m - rank) * p_values[position]))
        adjusted[position] = running
    return adjusted
