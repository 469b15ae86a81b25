"""All-pairs comparisons of a run's settings at equal budget: every two settings of one
token budget (and unit), compared by the paired bootstrap over the tasks both ran
(`metrics.paired_bootstrap`: B minus A in mean pass rate), with the p-values of the whole
family adjusted by Holm-Bonferroni (`bootstrap.holm`), so that calling a difference
significant when its adjusted p is below `ALPHA` keeps the chance of any false call among
all the pairs at most `ALPHA`. Settings of different budgets are not compared: their
spend differs by design."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations

from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.stats import metrics
from turnbon_graph.bench.stats.bootstrap import holm
from turnbon_graph.bench.strategies.spec import StrategySpec

ALPHA = 0.05
"""The family-wise error rate the adjusted p-values are read at."""


@dataclass(frozen=True)
class PairComparison:
    """Setting B against setting A at one budget, with the family's adjusted p-value."""

    budget: str
    """The budget both ran at, as a label shows it (`2000`, `$0.05`); empty: unbounded."""
    a: str
    """Setting A, the earlier in the run's order."""
    b: str
    """Setting B: the difference is B minus A."""
    result: metrics.PairedComparison | None
    """B minus A with its interval and raw p; None when they share no task."""
    adjusted: float | None = None
    """The Holm-Bonferroni adjusted p-value over every pair of the family."""

    @property
    def significant(self) -> bool:
        """Whether B and A differ at the family's `ALPHA`, after the adjustment."""
        return self.adjusted is not None and self.adjusted < ALPHA


def budget_of(results: Sequence[EpisodeResult]) -> str:
    """The budget a setting's episodes ran at.

    Args:
        results: the setting's episodes (all of one strategy and budget).

    Returns:
        Its amount in its unit (`2000 tokens`, `$0.05`); empty without a budget.
    """
    spec = results[0].strategy or StrategySpec()
    return spec.amount(spec.token_budget) if spec.token_budget is not None else ""


def all_pairs(
    order: Sequence[str],
    groups: Mapping[str, list[EpisodeResult]],
    *,
    resamples: int = 10_000,
    seed: int = 0,
) -> list[PairComparison]:
    """Every two settings of one budget, in the run's order, each paired by task, the
    raw p-values adjusted together. A bootstrap p of 0 enters the adjustment as
    1/resamples, the least the resampling can tell apart from 0.

    Args:
        order: the settings, in the run's order.
        groups: each setting's episodes.
        resamples: bootstrap resamples of each pair.
        seed: seeds the resampling.

    Returns:
        The pairs, budget by budget; a pair of no common task has no result.
    """
    by_budget: dict[str, list[str]] = {}
    for setting in order:
        by_budget.setdefault(budget_of(groups[setting]), []).append(setting)
    found = []
    for budget, settings in by_budget.items():
        for a, b in combinations(settings, 2):
            try:
                result = metrics.paired_bootstrap(
                    groups[a], groups[b], resamples=resamples, seed=seed
                )
            except ValueError:  # no task in common
                result = None
            found.append(PairComparison(budget, a, b, result))
    tested = [p for p in found if p.result is not None]
    raw = [p.result.p_value for p in tested if p.result is not None]
    adjusted = dict(zip(map(id, tested), holm(raw), strict=True))
    return [PairComparison(p.budget, p.a, p.b, p.result, adjusted.get(id(p))) for p in found]
