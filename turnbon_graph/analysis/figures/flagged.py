"""The paper's Table 3 as a dot chart: the share of trajectories the LLM judge flagged
per rubric and setting, against the baseline, from `analysis.judge.flagged_shares`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from turnbon_graph.analysis.figures.canvas import (
    SIGNIFICANT,
    light_grid,
    star_handle,
    unique_labels,
)
from turnbon_graph.bench.report.plots import BASELINE_COLOR, setting_colors

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from turnbon_graph.analysis.judge import FlaggedShare

__all__ = ["plot_flagged"]


def plot_flagged(shares: Sequence[FlaggedShare], *, alpha: float = 0.05) -> Figure:
    """Table 3 as a dot chart: per rubric (rows, in the order given), the share of judged
    trajectories the judge flagged in the baseline (grey) and in each other setting, a
    line from the baseline to it, and a star where the paired-bootstrap difference from
    the baseline has p < `alpha`. Lower is better. A reward-hacking style rubric judged
    on passing attempts only says "(passing)"."""
    from matplotlib.ticker import PercentFormatter

    if not shares:
        raise ValueError("plot_flagged needs shares: flagged_shares(...) gave none")
    rubrics = unique_labels(s.rubric for s in shares)
    settings = unique_labels(s.setting for s in shares)
    baseline = shares[0].baseline
    others = [s for s in settings if s != baseline]
    colors = setting_colors(settings, baseline)
    cell = {(s.rubric, s.setting): s for s in shares}
    titles = {
        s.rubric: s.title + (" (passing)" if s.applies_to == "passed" else "") for s in shares
    }
    figure, (ax,) = light_grid(1, 1, width=7.0, height=1.3 + 0.3 * len(rubrics))
    ax.grid(axis="y", visible=False)
    ax.grid(axis="x", alpha=0.3, zorder=0)
    dodge = 0.3 / max(1, len(others))
    for y, rubric in enumerate(rubrics):
        base_share = next(
            (
                s.baseline_share
                for s in shares
                if s.rubric == rubric and s.baseline_share is not None
            ),
            None,
        )
        if base_share is not None:
            ax.scatter([base_share], [y], color=BASELINE_COLOR, s=36, zorder=3, label=baseline)
        for i, setting in enumerate(others):
            row = cell.get((rubric, setting))
            if row is None or row.share is None:
                continue
            offset = (i - (len(others) - 1) / 2) * dodge if len(others) > 1 else 0.0
            if base_share is not None:
                ax.plot(
                    [base_share, row.share],
                    [y, y + offset],
                    color=colors[setting],
                    alpha=0.5,
                    linewidth=1.5,
                    zorder=2,
                )
            ax.scatter(
                [row.share], [y + offset], color=colors[setting], s=36, zorder=3, label=setting
            )
            if row.p_value is not None and row.p_value < alpha:
                ax.annotate(
                    SIGNIFICANT,
                    (row.share, y + offset),
                    # on the far side from the baseline's dot, off the line between them
                    xytext=(-12 if base_share is not None and row.share < base_share else 6, -4),
                    textcoords="offset points",
                    fontsize=12,
                    fontweight="bold",
                    color=colors[setting],
                )
    ax.set_yticks(range(len(rubrics)), [titles[r] for r in rubrics])
    ax.set_ylim(len(rubrics) - 0.5, -0.5)  # the first rubric on top, as in the table
    ax.set_xlim(-0.02, 1.02)
    ax.xaxis.set_major_formatter(PercentFormatter(xmax=1, decimals=0))
    ax.set_xlabel("share of judged trajectories flagged (lower is better)")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles, strict=True))
    figure.legend(
        [*unique.values(), star_handle()],
        [*unique, f"vs {baseline}: p < {alpha:g}"],
        loc="outside lower center",
        ncols=len(unique) + 1,
        frameon=False,
    )
    figure.suptitle("Behaviours flagged by the LLM judge (Table 3)")
    return figure
