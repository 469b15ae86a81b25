"""What each setting spent, in `turnbon report`: the realised spend per episode in the unit
its budget counts, with its spread, and the split by kind of call, environment steps,
forks, and the value model's failures (`spend.summarise_spend`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from turnbon_graph.bench.report.format import DASH, number, pct, short, table, tokens
from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.spend import SpendSummary, summarise_spend
from turnbon_graph.bench.strategies.names import BudgetUnit

UNITS = {"tokens": "tokens", "completion": "completion tokens", "usd": "USD"}


def amount(value: float | None, unit: BudgetUnit) -> str:
    """An amount in `unit`, as the tables show it."""
    if value is None:
        return DASH
    return f"${value:.4f}" if unit == "usd" else tokens(value)


def failures(summary: SpendSummary) -> str:
    """Failed and unusable value answers of all asked: `3 + 1 of 40`."""
    if not summary.value_calls:
        return DASH
    return f"{summary.value_failed} + {summary.value_unparsed} of {summary.value_calls}"


def spend_section(order: Sequence[str], groups: Mapping[str, list[EpisodeResult]]) -> list[str]:
    """The realised spend and its split, a row per setting."""
    summaries = {s: summarise_spend(groups[s]) for s in order}
    realised = [
        (
            setting,
            UNITS[s.unit],
            amount(s.budget, s.unit),
            amount(s.mean, s.unit),
            amount(s.sd, s.unit),
            f"{amount(s.low, s.unit)} to {amount(s.high, s.unit)}",
            pct(s.mean / s.budget) if s.budget else DASH,
        )
        for setting, s in summaries.items()
    ]
    split = [
        (
            setting,
            tokens(s.generator),
            tokens(s.selector),
            tokens(s.value),
            tokens(s.rollout),
            number(s.steps, 1),
            number(s.forks, 1),
            failures(s),
            DASH if s.steps is None else str(s.refused),
        )
        for setting, s in summaries.items()
    ]
    lines = [
        "### Spend",
        "",
        "What an episode spent in the unit its budget counts (`--budget-unit`): the mean "
        "over episodes with its standard deviation and range, and the mean as a share of "
        "the budget. Estimates learned from the run's calls plan each step, and every "
        "call's `max_tokens` is clamped to its share of what is left, so no episode "
        "spends over its budget.",
        "",
        *table(
            ["Setting", "Unit", "Budget", "Spent / episode", "SD", "Range", "Of the budget"],
            realised,
            left=2,
        ),
        "",
        "By kind, per episode: prompt plus completion tokens of the generator's calls, the "
        "selector's, the value model's and lookahead's rollouts' (together, the tokens "
        "per episode of the table above), the actions executed in an environment and "
        "the forks "
        f"made ({DASH}: not recorded). Value failures: failed calls + answers unusable "
        "after the re-ask, of the values asked for (a failed value leaves its "
        "trajectory unscored). Refused: calls the budget could not afford.",
        "",
        *table(
            [
                "Setting",
                "Generator",
                "Selector",
                "Value",
                "Rollout",
                "Environment steps",
                "Forks",
                "Value failures",
                "Refused",
            ],
            split,
        ),
        "",
    ]
    broken = [(s, x) for s, x in summaries.items() if x.value_failed + x.value_unparsed]
    for setting, summary in broken:
        lines += [
            f"> **{setting}:** {failures(summary)} value answers failed or were unusable; "
            f"the first: {short(summary.value_error or 'no message')}",
            "",
        ]
    return lines
