"""What a setting's episodes spent: the realised spend in the unit its budget counts, with
its spread over episodes, and the split by kind of call (generator, selector, value,
rollout), environment steps and forks, with the value model's failures. `turnbon
report` shows it beside the strategies' comparison; matched compute is only as matched
as these numbers say."""

from __future__ import annotations

from collections.abc import Sequence
from statistics import pstdev

from pydantic import BaseModel

from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.stats.metrics import episode_tokens, usages
from turnbon_graph.bench.strategies.names import BudgetUnit
from turnbon_graph.bench.strategies.spec import StrategySpec


class SpendSummary(BaseModel):
    """One setting's spend, per episode."""

    unit: BudgetUnit
    budget: float | None
    episodes: int
    mean: float
    sd: float
    low: float
    high: float
    generator: float
    """Mean prompt plus completion tokens of the generator's calls (rollouts apart)."""
    selector: float
    value: float
    rollout: float
    steps: float | None
    """Mean actions executed in an environment; None when no row recorded them."""
    forks: float | None
    refused: int
    """Calls the budget refused, in all."""
    value_calls: int
    value_failed: int
    value_unparsed: int
    value_error: str | None
    """The first failed or unusable value's error."""


def spent(result: EpisodeResult, unit: BudgetUnit) -> float:
    """What the episode spent in `unit`: as its search recorded it, else from its usage."""
    search = result.search
    if search is not None and search.unit == unit:
        return search.spent
    if unit == "completion":
        return sum(u.completion_tokens for u in usages(result))
    if unit == "usd":
        return sum(u.cost_usd or 0.0 for u in usages(result))
    return episode_tokens(result)


def summarise_spend(results: Sequence[EpisodeResult]) -> SpendSummary:
    """The spend of one setting's episodes (all of one strategy and budget)."""
    spec = results[0].strategy or StrategySpec()
    unit = spec.budget_unit
    amounts = [spent(r, unit) for r in results]
    searched = [r.search for r in results if r.search is not None]
    count = len(results)

    def mean(values: Sequence[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    errors = [s.value_error for s in searched if s.value_error]
    return SpendSummary(
        unit=unit,
        budget=spec.token_budget,
        episodes=count,
        mean=mean(amounts),
        sd=pstdev(amounts) if count > 1 else 0.0,
        low=min(amounts),
        high=max(amounts),
        generator=mean([r.usage.generator.total_tokens for r in results]),
        selector=mean([r.usage.selector.total_tokens for r in results]),
        value=mean([r.value_usage.total_tokens if r.value_usage else 0 for r in results]),
        rollout=mean([r.search.rollout.total_tokens if r.search else 0 for r in results]),
        steps=mean([s.steps for s in searched]) if searched else None,
        forks=mean([s.forks for s in searched]) if searched else None,
        refused=sum(s.refused for s in searched),
        value_calls=sum(s.value_calls for s in searched),
        value_failed=sum(s.value_failed for s in searched),
        value_unparsed=sum(s.value_unparsed for s in searched),
        value_error=errors[0] if errors else None,
    )
