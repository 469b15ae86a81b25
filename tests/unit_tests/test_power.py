"""The tasks a difference needs, against a hand computation."""

from __future__ import annotations

from turnbon_graph.bench.stats.bootstrap import bootstrap_differences
from turnbon_graph.bench.stats.power import FEWEST_TASKS, tasks_for_power


def test_the_tasks_needed_are_the_normal_approximation_by_hand() -> None:
    # Mean 0.25, sample SD sqrt(4 * 0.0625 / 3) = 0.288675; z_0.975 + z_0.8 =
    # 1.959964 + 0.841621 = 2.801585; (2.801585 * 0.288675 / 0.25)^2 = 10.465: 11 tasks.
    assert tasks_for_power([0.5, 0.0, 0.5, 0.0]) == 11
    # Half the spread: a quarter of the tasks, 2.62, raised to the exact test's floor.
    assert tasks_for_power([0.375, 0.125, 0.375, 0.125]) == FEWEST_TASKS == 6
    # Mean 0.05, SD sqrt(4 * 0.45^2 / 3) = 0.519615: (SD / mean)^2 = 108, times
    # 2.801585^2 = 7.84888: 847.68, so 848 tasks.
    assert tasks_for_power([0.5, -0.4, 0.5, -0.4]) == 848


def test_no_difference_needs_no_tasks_and_a_constant_one_the_fewest() -> None:
    assert tasks_for_power([0.0, 0.0, 0.0]) is None and tasks_for_power([]) is None
    assert tasks_for_power([0.5]) == tasks_for_power([0.5, 0.5, 0.5]) == FEWEST_TASKS


def test_the_bootstrap_result_carries_it() -> None:
    result = bootstrap_differences([0.5, 0.0, 0.5, 0.0], resamples=100)
    assert result.tasks_needed == 11
