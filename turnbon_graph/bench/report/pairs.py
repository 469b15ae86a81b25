"""The report's all-pairs comparison of the settings at equal budget (`pairs`): a table
of every pair with its paired bootstrap and its Holm-Bonferroni adjusted p-value."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from turnbon_graph.bench.report.format import DASH, interval, p_value, pp, table
from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.stats.pairs import ALPHA, all_pairs

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
    rows = []
    for pair in pairs:
        result = pair.result
        if result is None:
            none = (DASH, "no task in common", DASH, DASH, DASH, "0")
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
                p_value(pair.adjusted),
                "yes" if pair.significant else "no",
                str(result.tasks),
            )
        )
    found = sum(p.significant for p in pairs)
    return [
        f"### {TITLE}",
        "",
        f"Every two settings of one budget, B minus A in mean pass rate (percentage "
        f"points) over the tasks both ran, by the paired bootstrap ({resamples:,} "
        f"resamples of tasks, seed {seed}); settings of different budgets are not "
        f"compared. With {len(pairs)} comparisons, some raw p-value would fall below "
        f"{ALPHA:g} by chance alone far more often than {ALPHA:.0%} of the time, so each "
        "p-value is also given adjusted by Holm-Bonferroni: the raw p-values sorted "
        "from the smallest, the i-th of m multiplied by m - i + 1, each at least the one "
        "before, capped at 1 (a bootstrap p of 0 counts as 1/resamples). A pair is "
        f"significant when its adjusted p is below {ALPHA:g}: then the chance of any "
        f"false call in the table is at most {ALPHA:.0%}. The intervals are each pair's "
        f"own 95% interval, unadjusted. {found} of {len(pairs)} pairs differ.",
        "",
        *table(
            ["Budget", "A", "B", "B - A", "95% CI", "p-value", "Holm p", "Significant", "Tasks"],
            rows,
            left=3,
        ),
        "",
    ]
