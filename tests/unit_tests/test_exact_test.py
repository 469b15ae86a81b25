"""The sign-flip test behind every paired p-value: its counts against a direct
enumeration, the cases worked by hand, and its false-positive rate under a simulated
null, where the paired bootstrap's own p-value ran above its nominal level."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from turnbon_graph.bench.stats import exact
from turnbon_graph.bench.stats.bootstrap import bootstrap_differences
from turnbon_graph.bench.stats.exact import EXACT_TASKS, sign_flip_p_value


def enumerated(differences: list[float]) -> float:
    """The p-value by listing all 2^k sign assignments."""
    observed = abs(sum(differences))
    extreme = sum(
        abs(sum(s * d for s, d in zip(signs, differences, strict=True))) >= observed - 1e-9
        for signs in itertools.product((1, -1), repeat=len(differences))
    )
    return extreme / 2 ** len(differences)


def test_the_cases_worked_by_hand() -> None:
    assert sign_flip_p_value([0.5]) == 1.0  # one task can never be significant
    assert sign_flip_p_value([1.0, 0.5, 0.5]) == 0.25  # 2 of the 8 signings are as far
    assert sign_flip_p_value([1.0] * 5) == 2 / 32  # five tasks: never below 0.05
    assert sign_flip_p_value([1.0] * 6) == 2 / 64
    assert sign_flip_p_value([0.0, 0.0]) == sign_flip_p_value([1.0, -1.0]) == 1.0


def test_every_count_matches_the_enumeration() -> None:
    rng = random.Random(3)
    values = [-1.0, -0.5, -1 / 3, 0.0, 0.25, 0.5, 1.0]
    for _ in range(300):
        differences = [rng.choice(values) for _ in range(rng.randint(1, 11))]
        assert sign_flip_p_value(differences) == pytest.approx(enumerated(differences))


def test_above_the_exact_size_a_monte_carlo_estimate_stays_close(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(5)
    differences = [rng.choice([-1.0, 0.5, 1.0]) for _ in range(EXACT_TASKS + 4)]
    estimate = sign_flip_p_value(differences)
    monkeypatch.setattr(exact, "EXACT_TASKS", EXACT_TASKS + 4)  # every signing counted
    counted = sign_flip_p_value(differences)
    # 100,000 draws: a standard error of at most 0.0016
    assert estimate == pytest.approx(counted, abs=0.006) and estimate != counted


@pytest.mark.parametrize("tasks", [3, 6, 12, 30])
def test_under_a_true_null_at_most_five_percent_are_called_different(tasks: int) -> None:
    # Each task has its own pass probability, the same for both settings; two trials
    # each. 2,000 simulated comparisons; the bound adds two Monte Carlo standard errors.
    rng = random.Random(tasks)
    runs, calls = 2000, 0
    for _ in range(runs):
        differences = []
        for _ in range(tasks):
            p = rng.random()
            a = sum(rng.random() < p for _ in range(2)) / 2
            b = sum(rng.random() < p for _ in range(2)) / 2
            differences.append(b - a)
        calls += bootstrap_differences(differences, resamples=10).p_value < 0.05
    assert calls / runs <= 0.05 + 2 * math.sqrt(0.05 * 0.95 / runs)
