"""How many tasks a paired comparison would need: the report's answer to "is this
difference real, or are there too few tasks to tell?".

For a mean per-task difference d with standard deviation s (over tasks), a two-sided
test at level alpha has power `power` with about n = ((z_{1-alpha/2} + z_power) s / d)^2
tasks (the normal approximation of the paired test's sample size). The exact sign-flip
test (`exact`) can never reach 0.05 with fewer than 6 tasks, whatever the difference, so
n is at least that. Per-task pass rates are bounded and few, so the count is a guide to
the order of magnitude, not a promise.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

__all__ = ["FEWEST_TASKS", "POWER", "tasks_for_power"]

POWER = 0.8
"""The chance of calling a real difference of the observed size significant."""
FEWEST_TASKS = 6
"""The fewest tasks whose sign-flip p-value can be below 0.05 (2 / 2^6 = 0.031)."""


def tasks_for_power(
    differences: Sequence[float], *, alpha: float = 0.05, power: float = POWER
) -> int | None:
    """The tasks a difference of the observed size needs to be found at `alpha` with
    `power`, by the normal approximation; at least `FEWEST_TASKS`.

    Args:
        differences: one per task (B minus A).
        alpha: the two-sided level.
        power: the wanted power.

    Returns:
        The number of tasks, or None when the mean difference is 0 (nothing to find).
    """
    if not differences:
        return None
    mean = statistics.fmean(differences)
    if mean == 0:
        return None
    spread = statistics.stdev(differences) if len(differences) > 1 else 0.0
    normal = statistics.NormalDist()
    z = normal.inv_cdf(1 - alpha / 2) + normal.inv_cdf(power)
    return max(math.ceil((z * spread / abs(mean)) ** 2), FEWEST_TASKS)
