"""The measures of branch rollouts against hand-computed cases: Spearman's rho with
ties, headroom capture, summaries over turns, the budget's choice of turns and the plan's
cost estimate."""

from __future__ import annotations

import math

import pytest

from turnbon_graph.analysis.rollouts import (
    BranchTurn,
    CandidateValue,
    RolloutBudget,
    UsageProfile,
    average_ranks,
    estimate_cost,
    format_plan,
    headroom,
    spearman,
    summarise,
)
from turnbon_graph.bench.environment import TaskSpec
from turnbon_graph.records import LatencySplit, TurnRecord, Usage, UsageSplit


def test_spearman_ranks_ties_by_their_average() -> None:
    assert average_ranks([3.0, 1.0, 3.0, 2.0]) == [3.5, 1.0, 3.5, 2.0]
    assert spearman([1, 2, 3], [10, 20, 30]) == pytest.approx(1.0)
    assert spearman([1, 2, 3], [3, 2, 1]) == pytest.approx(-1.0)
    # ranks x: 1, 2.5, 2.5, 4; y: 1, 2, 3, 4 -> cov 4.5 / sqrt(4.5 * 5)
    assert spearman([1, 5, 5, 9], [1, 2, 3, 4]) == pytest.approx(4.5 / math.sqrt(4.5 * 5))
    assert spearman([1, 1, 1], [0, 1, 0]) is None  # a constant side has no ranking
    assert spearman([1], [1]) is None
    with pytest.raises(ValueError, match="pairs"):
        spearman([1, 2], [1])


def test_headroom_is_undefined_without_headroom() -> None:
    assert headroom(1.0, 1.0, 0.25) == 1.0
    assert headroom(0.25, 1.0, 0.25) == 0.0
    assert headroom(0.0, 0.5, 0.25) == -1.0
    assert headroom(1.0, 1.0, 1.0) is None and headroom(None, 1.0, 0.5) is None


def test_summaries_average_complete_turns_and_pool_rho() -> None:
    def turn(
        number: int, values: list[float | None], picked: int, scores: list[float]
    ) -> BranchTurn:
        branch = BranchTurn(
            task="t",
            trial=0,
            turn=number,
            turn_id=str(number),
            picked=picked,
            candidates=[
                CandidateValue(index=i, action=str(i), value=v, score=s)
                for i, (v, s) in enumerate(zip(values, scores, strict=True))
            ],
        )
        branch.measure()
        return branch

    turns = [
        turn(1, [1.0, 0.0], 0, [2.0, 1.0]),  # h 1, rho 1
        turn(2, [0.5, 0.5], 1, [1.0, 2.0]),  # oracle == mu: h and rho undefined
        turn(3, [0.0, 1.0, None], 1, [1.0, 2.0, 3.0]),  # incomplete: left out
    ]
    assert [t.h for t in turns] == [1.0, None, 1.0] and not turns[2].complete
    summary = summarise(turns)
    assert (summary.turns, summary.complete_turns, summary.h_turns) == (3, 2, 1)
    assert summary.mean_h == 1.0 and summary.mean_oracle == 0.75 and summary.mean_mu == 0.5
    assert summary.mean_realised == 0.75
    assert summary.rho_v_mean == 1.0 and summary.rho_v_turns == 1
    # pooled pairs (2, 1), (1, 0), (1, .5), (2, .5): ranks x 3.5 1.5 1.5 3.5, y 4 1 2.5 2.5
    assert summary.rho_v == pytest.approx(3 / math.sqrt(4 * 4.5))


def test_the_budget_chooses_turns_reproducibly() -> None:
    spec = TaskSpec(id="t", instruction="x", max_turns=30)
    budget = RolloutBudget(sample_turns=3, horizon=10, seed=7)
    chosen = budget.chosen_turns(spec, 0)
    assert chosen is not None and len(chosen) == 3 and chosen <= set(range(1, 11))
    assert budget.chosen_turns(spec, 0) == chosen
    assert RolloutBudget(turns=[2, 5]).chosen_turns(spec, 0) == {2, 5}
    assert RolloutBudget().chosen_turns(spec, 0) is None
    with pytest.raises(ValueError, match="not both"):
        RolloutBudget(turns=[1], sample_turns=2)
    with pytest.raises(ValueError, match="start at 1"):
        RolloutBudget(turns=[0])


def test_the_plan_states_the_cost_before_starting() -> None:
    def record(tokens: int) -> TurnRecord:
        usage = Usage(calls=4, prompt_tokens=tokens * 3 // 4, completion_tokens=tokens // 4)
        return TurnRecord(
            turn_id="x",
            n_requested=4,
            n_ok=4,
            selected_index=0,
            selector="first",
            agreement=1.0,
            candidates=[],
            usage=UsageSplit(generator=usage),
            latency_s=LatencySplit(),
        )

    # two recorded episodes of 4 turns, 1000 tokens a call
    profile = UsageProfile.from_records([record(4000)] * 8, episodes=2)
    assert (profile.episode_turns, profile.tokens_per_turn, profile.usd_per_token) == (
        4,
        1000,
        None,
    )
    budget = RolloutBudget(rollouts=2)
    estimate = estimate_cost(budget, n=4, profile=profile, episodes=3)
    # every turn of 4: 3 x 4 x 4 x 2 = 96 rollouts, running max(4 - t, 1) = 3, 2, 1, 1 turns
    assert estimate.rollouts == 96 and estimate.continuation_turns == 1.75
    assert estimate.tokens == 96 * 1750 and not estimate.limited_by
    capped = estimate_cost(
        RolloutBudget(turns=[1, 9], rollouts=2, max_tokens=10_000), n=4, profile=profile
    )
    assert capped.turns_per_episode == 1 and capped.rollouts == 8  # turn 9 is past the end
    assert capped.tokens == 10_000 and capped.limited_by == ["max_tokens=10000"]
    text = format_plan(capped)
    assert "1 episode(s) x 1 turn(s) x 4 candidates x 2 rollout(s) -> at most 8 rollouts" in text
    assert "~3.0 turn(s) at ~1,000 tokens a turn: ~10,000 tokens" in text
    assert "Capped by max_tokens=10000" in text
    sampled = estimate_cost(RolloutBudget(sample_turns=2, horizon=8), n=2, profile=profile)
    assert sampled.turns_per_episode == 1.0  # half of the 8 drawn-from turns happen
