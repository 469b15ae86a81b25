"""The selection rules of beam search and particle filtering (`bench.strategies.selection`)
and the budget's shares (`bench.strategies.budget.Ledger`), alone."""

from __future__ import annotations

import math
import random

import pytest

from turnbon_graph.bench.metering.budget import Estimates, Ledger, Meter
from turnbon_graph.bench.strategies.selection import (
    Entry,
    particle_weights,
    resample,
    top_width,
)
from turnbon_graph.records import Usage

LIVE, FINISHED = False, True


def test_a_finished_low_valued_path_never_evicts_a_higher_valued_live_one() -> None:
    # The rule it replaces kept every finished path and cut the live ones to the width
    # left: here the give-up (1) would have taken a slot and the live 3 been pruned.
    pool = [Entry(1.0, FINISHED), Entry(3.0, LIVE), Entry(8.0, LIVE)]
    assert top_width(pool, 2) == [2, 1]
    assert top_width(pool, 1) == [2]
    assert top_width(pool, 3) == [2, 1, 0]


def test_a_finished_high_valued_path_keeps_its_place_and_ends_the_search() -> None:
    pool = [Entry(10.0, FINISHED), Entry(3.0, LIVE), Entry(9.0, FINISHED)]
    kept = top_width(pool, 2)
    assert kept == [0, 2]
    assert all(pool[p].finished for p in kept)  # the top W all finished: the search stops
    assert top_width(pool, 3) == [0, 2, 1]  # room for the live one: it goes on


def test_ties_go_to_the_finished_then_the_earlier_and_unscored_rank_last() -> None:
    pool = [Entry(5.0, LIVE), Entry(None, LIVE), Entry(5.0, FINISHED), Entry(0.0, LIVE)]
    assert top_width(pool, 4) == [2, 0, 3, 1]
    assert top_width([Entry(None, FINISHED), Entry(0.0, LIVE)], 1) == [1]


def test_particle_weights_are_a_softmax_over_scores_normalised_to_one() -> None:
    weights = particle_weights([Entry(8.0, LIVE), Entry(3.0, LIVE)], temperature=1.0)
    assert sum(weights) == pytest.approx(1.0)
    # exp(0.8) / exp(0.3): not exp(8 - 3) = 148, as a softmax over the raw 0-10 scores
    assert weights[0] / weights[1] == pytest.approx(math.exp(0.5))
    sharp = particle_weights([Entry(8.0, LIVE), Entry(3.0, LIVE)], temperature=0.1)
    assert sharp[0] / sharp[1] == pytest.approx(math.exp(5.0))
    # copies multiply; an unscored particle weighs as a score of 0; scores are clipped
    doubled = particle_weights([Entry(5.0, FINISHED, copies=2), Entry(5.0, LIVE)], 1.0)
    assert doubled == pytest.approx([2 / 3, 1 / 3])
    edges = particle_weights([Entry(None, LIVE), Entry(0.0, LIVE), Entry(12.0, LIVE)], 1.0)
    assert edges[0] == pytest.approx(edges[1])
    assert edges[2] / edges[1] == pytest.approx(math.e)


def test_resampling_keeps_finished_particles_in_the_pool() -> None:
    pool = [Entry(10.0, FINISHED), Entry(1.0, LIVE), Entry(1.0, LIVE)]
    drawn = resample(pool, 3, temperature=0.01, rng=random.Random(0))
    assert drawn == {0: 3}  # greedy: every draw is the finished particle, which stays
    flat = resample(pool, 300, temperature=1.0, rng=random.Random(0))
    assert sum(flat.values()) == 300 and set(flat) == {0, 1, 2}
    assert flat[0] > flat[1] and flat[0] > flat[2]
    assert resample([], 3, 1.0, random.Random(0)) == {}


def test_calls_of_a_step_share_what_is_left_and_never_add_up_to_more() -> None:
    ledger = Ledger(1000, Meter("tokens"), Estimates(first_ratio=0.25))
    ledger.expect(300.0)
    first = ledger.allowance(100.0)
    second = ledger.allowance(200.0)
    assert first == pytest.approx(1000 / 3) and second == pytest.approx(2000 / 3)
    assert ledger.left == pytest.approx(0.0)
    third = ledger.allowance(50.0)  # not in the step's plan: nothing is left for it
    assert third == 0.0
    assert ledger.max_tokens("generator", second - 40, answers=2) == math.floor((2000 / 3 - 40) / 2)
    ledger.release(first)
    ledger.add("generator", Usage(calls=1, prompt_tokens=80, completion_tokens=100), 320)
    assert ledger.amount == 180 and ledger.left == pytest.approx(1000 - 180 - second)
    ledger.release(second)
    ledger.release(third)
    assert ledger.left == pytest.approx(820)


def test_estimates_are_learned_from_the_calls_and_start_from_the_first_prompt() -> None:
    estimates = Estimates(first_ratio=0.3)
    assert estimates.ratio("value") == 0.3 and estimates.completion("generator") == 0.0
    estimates.learn("generator", Usage(calls=1, prompt_tokens=50, completion_tokens=90), 200, 3)
    assert estimates.ratio("generator") == 0.25 and estimates.ratio("value") == 0.25
    assert estimates.completion("generator") == 30.0
    assert estimates.completion("rollout") == 30.0  # a rollout's calls are the generator's
    for completion in range(1, 11):
        estimates.learn(
            "value", Usage(calls=1, prompt_tokens=10, completion_tokens=completion), 100, 1
        )
    assert estimates.completion("value") == 9.0  # the 90th percentile of the answers
    ledger = Ledger(100, Meter("completion"), estimates)
    assert ledger.estimate("value", 1000, 2) == 18.0  # completion tokens count, prompts do not


def test_a_dollar_budget_prices_each_kind_of_call() -> None:
    meter = Meter("usd", {"generator": (1e-6, 4e-6), "value": (2e-6, 8e-6)})
    assert meter.amount("generator", 1000, 100) == pytest.approx(0.0014)
    assert meter.amount("rollout", 1000, 100) == pytest.approx(0.0014)  # the generator's
    assert meter.spent("value", Usage(prompt_tokens=1000, completion_tokens=100)) == (
        pytest.approx(0.0028)
    )
    assert meter.spent("value", Usage(prompt_tokens=1, cost_usd=0.5)) == 0.5  # LiteLLM's
