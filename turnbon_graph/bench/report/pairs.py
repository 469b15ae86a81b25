"""The report's all-pairs comparison of the settings at equal budget (`pairs`): a table
of every pair with its bootstrap interval, its exact sign-flip p-value, that p-value
adjusted by Holm-Bonferroni, and the tasks a difference of its size would need."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from turnbon_graph.bench.report.format import (
    DASH,
    NEEDED_EXPLAINED,
    NEEDED_HEADER,
    interval,
    needed,
    p_value,
    pp,
    ratio,
    table,
)
from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.stats.pairs import ALPHA, SPEND_TOLERANCE, PairComparison, all_pairs

TITLE = "All pairs at equal budget"


def pairs_section(
    order: Sequence[str],
    groups: Mapping[str, list[EpisodeResult]],
    resamples: int,
    seed: int,
) -> list[str]:
    """The section, when some budget has two settings or more; else nothing."""
    pairs = all_pairs(order, groups, resamples=resamples, seed=seed)
    if not pairs:
        return []
    found = sum(p.significant for p in pairs)
    matched = sum(p.matched for p in pairs)
    return [
        f"### {TITLE}",
        "",
        f"Every two settings of one budget, B minus A in mean pass rate (percentage "
        f"points) over the tasks both ran: its 95% bootstrap interval ({resamples:,} "
        f"resamples of tasks, seed {seed}) and the p-value of the exact sign-flip test "
        f"over tasks; settings of different budgets are not compared. With {len(pairs)} "
        f"comparisons, some raw p-value would fall below {ALPHA:g} by chance alone far "
        f"more often than {ALPHA:.0%} of the time, so each p-value is also given adjusted "
        "by Holm-Bonferroni: the raw p-values sorted from the smallest, the i-th of m "
        "multiplied by m - i + 1, each at least the one before, capped at 1. A pair is "
        f"significant when its adjusted p is below {ALPHA:g}: then the chance of any "
        f"false call in the table is at most {ALPHA:.0%}. The intervals are each pair's "
        f"own 95% interval, unadjusted. Spend B / A: B's mean realised spend per episode "
        "over A's, in the budget's unit. A cap is not spend: a pair whose ratio is outside "
        f"1/{1 + SPEND_TOLERANCE:g} to {1 + SPEND_TOLERANCE:g} did not spend alike, is left "
        "out of the adjustment and is never called significant (not matched): its "
        f"difference is the strategies' at one cap, not at one spend. {NEEDED_EXPLAINED} "
        f"{matched} of {len(pairs)} pairs spent alike; {found} differ.",
        "",
        *pairs_table(pairs),
        "",
    ]


def pairs_table(pairs: Sequence[PairComparison], family: str = "Budget") -> list[str]:
    """The table of `pairs`: each with its difference, interval, raw and adjusted p, spend
    ratio, verdict and the tasks a difference of its size needs; `family` heads the
    column of what the pairs were formed within."""
    rows = []
    for pair in pairs:
        result = pair.result
        if result is None:
            none = (DASH, "no task in common", DASH, DASH, DASH, DASH, "0", DASH)
            rows.append((pair.budget or DASH, pair.a, pair.b, *none))
            continue
        rows.append(
            (
                pair.budget or DASH,
                pair.a,
                pair.b,
                pp(result.difference),
                interval(result.ci_low, result.ci_high),
                p_value(result.p_value),
                DASH if pair.adjusted is None else p_value(pair.adjusted),
                ratio(pair.spend_ratio, 2),
                "yes" if pair.significant else ("no" if pair.matched else "not matched"),
                str(result.tasks),
                needed(result.tasks_needed),
            )
        )
    return table(
        [
            family,
            "A",
            "B",
            "B - A",
            "95% CI",
            "p-value",
            "Holm p",
            "Spend B / A",
            "Significant",
            "Tasks",
            NEEDED_HEADER,
        ],
        rows,
        left=3,
    )
