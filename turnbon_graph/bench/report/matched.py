"""The report's comparison at one spend (`turnbon report --match-spend AMOUNT`): from a
sweep of widths, N and budgets, each strategy's setting whose mean realised spend per
episode is closest to the amount, and every two of those compared as the pairs at equal
budget are (`pairs.pairs_table`), a cap being no spend."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from turnbon_graph.bench.report.format import pct, ratio, table
from turnbon_graph.bench.report.pairs import pairs_table
from turnbon_graph.bench.report.spend import amount
from turnbon_graph.bench.report.strategies import (
    pass_interval,
    spend_interval,
    spend_unit,
    strategy_of,
)
from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.stats.pairs import SPEND_TOLERANCE, all_pairs
from turnbon_graph.bench.strategies.names import BudgetUnit
from turnbon_graph.bench.strategies.spec import StrategySpec

TITLE = "At matched spend"


def closest(
    order: Sequence[str],
    groups: Mapping[str, list[EpisodeResult]],
    target: float,
    unit: BudgetUnit,
    resamples: int,
    seed: int,
) -> dict[str, tuple[str, float]]:
    """Each strategy's setting whose mean spend per episode is nearest `target` (by ratio,
    either way), with that spend, in the run's order of strategies.

    Args:
        order: the settings, in the run's order.
        groups: each setting's episodes.
        target: the spend per episode to match, in `unit`.
        unit: what spend is counted in.
        resamples: bootstrap resamples of the spend's interval.
        seed: seeds the resampling.

    Returns:
        By strategy name, (setting, its mean spend); a strategy that spent nothing is
        left out.
    """
    best: dict[str, tuple[str, float]] = {}
    for setting in order:
        mean = spend_interval(groups[setting], unit, resamples, seed)[0]
        if mean <= 0:
            continue
        name = strategy_of(groups[setting][0]).name
        known = best.get(name)
        if known is None or abs(math.log(mean / target)) < abs(math.log(known[1] / target)):
            best[name] = (setting, mean)
    return best


def matched_section(
    order: Sequence[str],
    groups: Mapping[str, list[EpisodeResult]],
    target: float,
    resamples: int,
    seed: int,
) -> list[str]:
    """The section: a row per strategy's closest setting, then their pairs."""
    unit = spend_unit(strategy_of(groups[s][0]) for s in order)
    chosen = closest(order, groups, target, unit, resamples, seed)
    words = StrategySpec(budget_unit=unit).amount(target)
    rows = []
    for name, (setting, mean) in chosen.items():
        rate, low, high = pass_interval(groups[setting], resamples, seed)
        near = 1 / (1 + SPEND_TOLERANCE) <= mean / target <= 1 + SPEND_TOLERANCE
        rows.append(
            (
                name,
                setting,
                amount(mean, unit),
                ratio(mean / target, 2),
                "yes" if near else "no",
                pct(rate),
                f"[{pct(low)}, {pct(high)}]",
            )
        )
    settings = [setting for setting, _ in chosen.values()]
    pairs = all_pairs(
        settings, groups, resamples=resamples, seed=seed, family=lambda _: f"~{words}"
    )
    return [
        f"### {TITLE}: {words} per episode",
        "",
        f"Each strategy's setting whose mean realised spend per episode is closest to "
        f"{words} (`--match-spend`), whatever its cap, width or N; near: within "
        f"1/{1 + SPEND_TOLERANCE:g} to {1 + SPEND_TOLERANCE:g} of it. A strategy with no "
        "setting near it needs a wider sweep (`turnbon bench` takes several --width, -n "
        "and --token-budget values). Then every two of them, compared as the pairs at "
        "equal budget are: a pair that did not spend alike is not called different.",
        "",
        *table(
            [
                "Strategy",
                "Setting",
                "Spend / episode",
                "Of the target",
                "Near",
                "Pass rate",
                "95% CI",
            ],
            rows,
            left=2,
        ),
        "",
        *(pairs_table(pairs, family="Spend") if pairs else []),
        "",
    ]
