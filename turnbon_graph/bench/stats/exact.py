"""The p-value of paired differences, from Fisher's randomisation (sign-flip) test.

Under the null hypothesis each task's difference was as likely to come out with either
sign, so the p-value is the share of the 2^k ways of signing the k differences whose sum
is at least as far from 0 as the observed one. Every assignment is counted up to
`EXACT_TASKS` tasks (the two halves' sums, met in the middle); above that a Monte Carlo
estimate that counts the observed assignment, which keeps the test's level. Its
false-positive rate is at most alpha at any number of tasks, where the paired
bootstrap's p-value is not (it is 0 whenever every task differs the same way, one task
included). With k tasks no p-value is below 2 / 2^k: fewer than 6 tasks can never make a
difference significant at 0.05.
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Sequence

__all__ = ["EXACT_TASKS", "MONTE_CARLO_RESAMPLES", "sign_flip_p_value"]

EXACT_TASKS = 32
"""Up to this many (nonzero) differences every sign assignment is counted."""
MONTE_CARLO_RESAMPLES = 100_000
"""Random sign assignments drawn above `EXACT_TASKS`."""
RELATIVE_TOLERANCE = 1e-9
"""Sums this close to the observed one count as equal: the same numbers added in another
order can differ in their last bits."""


def signed_sums(values: Sequence[float]) -> list[float]:
    """The sums of `values` under each of their 2^len sign assignments."""
    sums = [0.0]
    for value in values:
        sums = [s + value for s in sums] + [s - value for s in sums]
    return sums


def sign_flip_p_value(differences: Sequence[float], *, seed: int = 0) -> float:
    """The two-sided p-value of the mean of `differences` (one per task) being 0.

    Args:
        differences: one paired difference per task.
        seed: seeds the Monte Carlo draw above `EXACT_TASKS` tasks.

    Returns:
        The share of sign assignments at least as extreme as the observed one; 1.0 when
        every difference is 0.
    """
    diffs = [d for d in differences if d != 0.0]  # a zero's sign changes nothing
    if not diffs:
        return 1.0
    observed = abs(sum(diffs))
    tolerance = RELATIVE_TOLERANCE * len(diffs) * max(abs(d) for d in diffs)
    if observed <= tolerance:
        return 1.0  # a sum of 0 is as extreme as every assignment's
    threshold = observed - tolerance
    if len(diffs) > EXACT_TASKS:
        rng = random.Random(seed)
        extreme = sum(
            abs(sum(d if rng.random() < 0.5 else -d for d in diffs)) >= threshold
            for _ in range(MONTE_CARLO_RESAMPLES)
        )
        return (extreme + 1) / (MONTE_CARLO_RESAMPLES + 1)
    half = len(diffs) // 2
    left, right = signed_sums(diffs[:half]), sorted(signed_sums(diffs[half:]))
    extreme = 0
    for a in left:  # a + b >= threshold, or a + b <= -threshold (disjoint: threshold > 0)
        extreme += len(right) - bisect.bisect_left(right, threshold - a)
        extreme += bisect.bisect_right(right, -threshold - a)
    return extreme / (len(left) * len(right))
