"""All-pairs comparisons of a run's settings at equal budget: every two settings of one
token budget (and unit), compared by the paired bootstrap over the tasks both ran
(`metrics.paired_bootstrap`: B minus A in mean pass rate), with the p-values of the whole
family adjusted by Holm-Bonferroni (`bootstrap.holm`), so that calling a difference
significant when its adjusted p is below `ALPHA` keeps the chance of any false call among
all the pairs at most `ALPHA`. Settings of different budgets are not compared: their
spend differs by design. A cap is not spend, so each pair also has the ratio of what the
two really spent per episode (in the budget's unit); a pair whose ratio is outside
1 +/- `SPEND_TOLERANCE` did not spend alike, is left out of the adjusted family and is
never called significant: its difference is the strategies' at one cap, not at one
spend."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from itertools import combinations

from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.spend import spent
from turnbon_graph.bench.stats import metrics
from turnbon_graph.bench.stats.bootstrap import holm
from turnbon_graph.bench.strategies.spec import StrategySpec

ALPHA = 0.05
"""The family-wise error rate the adjusted p-values are read at."""
SPEND_TOLERANCE = 0.25
"""Two settings spent alike when the larger mean spend per episode is at most this much
above the smaller."""


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
    """The Holm-Bonferroni adjusted p-value over the family's pairs of matched spend;
    None for a pair outside it."""
    spend_ratio: float | None = None
    """B's mean spend per episode over A's, in the budget's unit; None when A spent 0."""

    @property
    def matched(self) -> bool:
        """Whether B and A spent alike (within `SPEND_TOLERANCE` of each other)."""
        ratio = self.spend_ratio
        return ratio is not None and 1 / (1 + SPEND_TOLERANCE) <= ratio <= 1 + SPEND_TOLERANCE

    @property
    def significant(self) -> bool:
        """Whether B and A differ at the family's `ALPHA`, after the adjustment (a pair of
        unmatched spend never does)."""
        return self.matched and self.adjusted is not None and self.adjusted < ALPHA


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
    family: Callable[[Sequence[EpisodeResult]], str] = budget_of,
) -> list[PairComparison]:
    """Every two settings of one budget, in the run's order, each paired by task, the raw
    p-values of the pairs that spent alike adjusted together.

    Args:
        order: the settings, in the run's order.
        groups: each setting's episodes.
        resamples: bootstrap resamples of each pair.
        seed: seeds the resampling.
        family: what makes settings comparable (their budget, by default): pairs are
            made within each value of it, and labelled with it.

    Returns:
        The pairs, budget by budget; a pair of no common task has no result.
    """
    by_budget: dict[str, list[str]] = {}
    for setting in order:
        by_budget.setdefault(family(groups[setting]), []).append(setting)
    found = []
    for budget, settings in by_budget.items():
        for a, b in combinations(settings, 2):
            try:
                result = metrics.paired_bootstrap(
                    groups[a], groups[b], resamples=resamples, seed=seed
                )
            except ValueError:  # no task in common
                result = None
            found.append(PairComparison(budget, a, b, result, None, spend_ratio(groups, a, b)))
    tested = [p for p in found if p.result is not None and p.matched]
    raw = [p.result.p_value for p in tested if p.result is not None]
    adjusted = dict(zip(map(id, tested), holm(raw), strict=True))
    return [replace(p, adjusted=adjusted.get(id(p))) for p in found]


def spend_ratio(groups: Mapping[str, list[EpisodeResult]], a: str, b: str) -> float | None:
    """B's mean spend per episode over A's, in the unit of A's budget (tokens without one);
    1 when neither spent anything (rows that recorded no spend), None when only A did not.

    Args:
        groups: each setting's episodes.
        a: setting A.
        b: setting B.

    Returns:
        The ratio, or None.
    """
    spec = groups[a][0].strategy or StrategySpec()
    unit = spec.budget_unit

    def mean(setting: str) -> float:
        return sum(spent(r, unit) for r in groups[setting]) / len(groups[setting])

    base, other = mean(a), mean(b)
    if base == 0:
        return 1.0 if other == 0 else None
    return other / base
