"""The metrics against hand-computed cases."""

from __future__ import annotations

import pytest

from turnbon_graph.bench.environment import Outcome
from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.stats.metrics import (
    consistency_at_k,
    consistency_curve,
    cost_table,
    outcome_shares,
    paired_bootstrap,
    pass_at_k,
    pass_at_k_curve,
    turns_to_solve,
)
from turnbon_graph.records import Usage, UsageSplit


def episode(
    task: str,
    trial: int,
    outcome: Outcome,
    setting: str = "N=1",
    turns: int = 10,
    gen: int = 100,
    sel: int = 0,
) -> EpisodeResult:
    return EpisodeResult(
        task=task,
        trial=trial,
        setting=setting,
        n=int(setting.split("=")[1]),
        outcome=outcome,
        turns=turns,
        usage=UsageSplit(
            generator=Usage(completion_tokens=gen, prompt_tokens=1000),
            selector=Usage(completion_tokens=sel, prompt_tokens=5000),
        ),
        duration_s=1.0,
    )


def test_pass_at_k_hand_computed() -> None:
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(1 - 3 / 6)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)
    assert pass_at_k(4, 0, 4) == 0.0
    assert pass_at_k(4, 2, 3) == 1.0  # any 3 of 4 include a pass
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 0)


def test_consistency_hand_computed() -> None:
    assert consistency_at_k(4, 3, 2) == pytest.approx(3 / 6)
    assert consistency_at_k(4, 4, 4) == 1.0
    assert consistency_at_k(4, 3, 4) == 0.0
    assert consistency_at_k(4, 2, 1) == pytest.approx(0.5)


def two_tasks() -> list[EpisodeResult]:
    a = [episode("a", t, "pass" if t < 2 else "wrong_submission", turns=8 + t) for t in range(4)]
    b = [episode("b", t, "pass", turns=20) for t in range(4)]
    return a + b


def test_curves_average_over_tasks() -> None:
    curve = pass_at_k_curve(two_tasks())
    assert curve[1] == pytest.approx((0.5 + 1.0) / 2)
    assert curve[2] == pytest.approx((5 / 6 + 1.0) / 2)
    assert curve[4] == pytest.approx(1.0)
    consistency = consistency_curve(two_tasks())
    assert consistency[1] == pytest.approx(0.75)
    assert consistency[2] == pytest.approx((1 / 6 + 1.0) / 2)
    assert consistency[4] == pytest.approx(0.5)


def test_outcome_shares_and_turns_to_solve() -> None:
    results = [*two_tasks(), episode("c", 0, "time_limit"), episode("c", 1, "agent_error")]
    shares = outcome_shares(results)
    assert shares["pass"] == pytest.approx(6 / 10)
    assert shares["wrong_submission"] == pytest.approx(2 / 10)
    assert shares["time_limit"] == shares["agent_error"] == pytest.approx(1 / 10)
    assert sum(shares.values()) == pytest.approx(1.0)
    assert turns_to_solve(results) == {"a": 8.5, "b": 20.0}


def test_cost_table_is_relative_to_the_baseline() -> None:
    base = [episode("a", t, "pass", "N=1", turns=60, gen=100) for t in range(2)]
    bon = [episode("a", t, "pass", "N=4", turns=40, gen=300, sel=60) for t in range(2)]
    rows = {row.setting: row for row in cost_table(base + bon)}
    assert rows["N=1"].total_vs_baseline == pytest.approx(1.0)
    assert rows["N=4"].average_turns == 40
    assert rows["N=4"].generator_tokens == 300 and rows["N=4"].selector_tokens == 60
    assert rows["N=4"].total_vs_baseline == pytest.approx(3.6)
    assert [r.setting for r in cost_table(base + bon)] == ["N=1", "N=4"]


def test_paired_bootstrap_on_clear_and_null_differences() -> None:
    base = [episode(t, 0, "wrong_submission") for t in "abcdefgh"]
    better = [episode(t, 0, "pass", "N=4") for t in "abcdefgh"]
    clear = paired_bootstrap(base, better, resamples=2000)
    assert clear.difference == 1.0 and clear.ci_low == clear.ci_high == 1.0
    # the sign-flip test: 2 of the 2^8 signings are as far from 0
    assert clear.p_value == 2 / 2**8 and clear.tasks == 8
    mixed = [
        episode(t, 0, "pass" if t in "abcd" else "wrong_submission", "N=4") for t in "abcdefgh"
    ]
    shuffled = [episode(t, 0, "pass" if t in "efgh" else "wrong_submission") for t in "abcdefgh"]
    null = paired_bootstrap(shuffled, mixed, resamples=2000)
    assert null.difference == 0.0
    assert null.ci_low < 0 < null.ci_high and null.p_value > 0.5
    with pytest.raises(ValueError, match="share no task"):
        paired_bootstrap(base, [episode("z", 0, "pass", "N=4")])
