"""The paper's Figure 4 (selector preference per behaviour against chance) and Figure 5
(length of the picked, unpicked and baseline actions), from `analysis.preference`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from turnbon_graph.analysis.figures.canvas import (
    light_grid,
    star_handle,
    star_marker,
    unique_labels,
)
from turnbon_graph.bench.report.plots import (
    BASELINE_COLOR,
    PALETTE,
    legend_color,
    percent_axis,
    setting_colors,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from turnbon_graph.analysis.preference import BehaviourPreference, LengthComparison

__all__ = ["BEHAVIOUR_TITLES", "plot_lengths", "plot_preference"]

BEHAVIOUR_TITLES = {
    "edits_file": "Edits a file",
    "tests_last_edit": "Tests its last edit",
    "runs_test": "Runs a test or check",
    "file_ops": "File operations",
    "installs_package": "Installs a package",
    "read_only": "Only reads or inspects",
    "loops": "Loops on a command",
    "declares_complete": "Declares the task complete",
}
"""The paper's names of the behaviours (Table 4); others are shown by their id."""

_LENGTH_LABELS = {
    "reasoning_tokens": ("Reasoning tokens", "reasoning tokens per turn"),
    "command_chars": ("Command characters", "command characters per turn"),
}
_PICKED_COLOR = PALETTE[0]


# ----------------------------------------------------------------------------- Figure 4


def plot_preference(
    results: Sequence[BehaviourPreference], *, alpha: float = 0.05, columns: int = 4
) -> Figure:
    """Figure 4: one panel per behaviour, settings along x; the solid line is the share of
    turns whose pick shows the behaviour, the dashed one the share a random pick would
    show (chance). A star marks a gap whose sign-flip p-value (over tasks) is below `alpha`."""
    from matplotlib.ticker import MaxNLocator

    if not results:
        raise ValueError("plot_preference needs results: behaviour_preference(...) gave none")
    behaviours = unique_labels(r.behaviour for r in results)
    settings = unique_labels(r.setting for r in results)
    cell = {(r.behaviour, r.setting): r for r in results}
    turns = {r.setting: r.turns for r in results}
    columns = max(1, min(columns, len(behaviours)))
    rows = math.ceil(len(behaviours) / columns)
    figure, axes = light_grid(rows, columns, width=3.1, height=2.7)
    xs = list(range(len(settings)))
    # One y-scale for every panel, so the panels compare at a glance.
    top = max((max(r.picked_share, r.chance_share) for r in results), default=0.0)
    ylim = min(1.08, max(0.1, top * 1.3 + 0.03))
    for ax, behaviour in zip(axes, behaviours, strict=False):
        picked = [_share(cell.get((behaviour, s)), "picked") for s in settings]
        chance = [_share(cell.get((behaviour, s)), "chance") for s in settings]
        ax.vlines(xs, chance, picked, color=_PICKED_COLOR, alpha=0.25, linewidth=4, zorder=1)
        ax.plot(xs, picked, "-o", color=_PICKED_COLOR, linewidth=2, label="picked", zorder=3)
        ax.plot(
            xs,
            chance,
            "--o",
            color=_PICKED_COLOR,
            markerfacecolor="white",
            linewidth=1.5,
            label="chance",
            zorder=3,
        )
        for x, setting in enumerate(settings):
            result = cell.get((behaviour, setting))
            if result is None:
                continue
            high = max(result.picked_share, result.chance_share)
            if result.p_value < alpha:
                star_marker(ax, x, high)
        ax.set_title(BEHAVIOUR_TITLES.get(behaviour, behaviour.replace("_", " ")), fontsize=10)
        ax.set_xticks(xs, settings)
        ax.set_xlim(-0.5, len(settings) - 0.5)
        ax.set_ylim(0, ylim)
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 5, 10]))  # whole percents
        percent_axis(ax)
    for ax in axes[len(behaviours) :]:
        ax.set_visible(False)
    for ax in axes[::columns]:
        ax.set_ylabel("share of turns")
    for position, ax in enumerate(axes[: len(behaviours)]):
        if position % columns:  # the shared scale is read off the first panel of a row
            ax.tick_params(labelleft=False)
    figure.legend(
        handles=[*axes[0].lines[:2], star_handle()],
        labels=["picked by the selector", "chance (random pick)", f"gap p < {alpha:g}"],
        loc="outside lower center",
        ncols=3,
        frameon=False,
    )
    counted = ", ".join(f"{s}: {turns[s]} turns" for s in settings)
    figure.suptitle(f"Selector preference per behaviour (Figure 4; {counted})")
    return figure


def _share(result: BehaviourPreference | None, which: str) -> float:
    if result is None:
        return math.nan
    return result.picked_share if which == "picked" else result.chance_share


# ----------------------------------------------------------------------------- Figure 5


def plot_lengths(comparisons: Sequence[LengthComparison], *, alpha: float = 0.05) -> Figure:
    """Figure 5: one panel per measure (reasoning tokens, command characters per turn),
    per setting three bars: the picked candidate, the mean of the unpicked ones and the
    baseline's executed action. A star over the unpicked or baseline bar marks a
    difference from the picked one with p < `alpha`. A panel whose values are all zero
    says so (a generator that reports no reasoning tokens draws no bars)."""
    from matplotlib.patches import Patch

    if not comparisons:
        raise ValueError("plot_lengths needs comparisons: length_comparison(...) gave none")
    measures = unique_labels(c.metric for c in comparisons)
    settings = unique_labels(c.setting for c in comparisons)
    base = comparisons[0].baseline_setting
    colors = setting_colors([base, *settings], base)
    figure, axes = light_grid(1, len(measures), width=5.2, height=4.2)
    width = 0.26
    for ax, measure in zip(axes, measures, strict=True):
        rows = {c.setting: c for c in comparisons if c.metric == measure}
        values: list[float] = []
        for x, setting in enumerate(settings):
            row = rows.get(setting)
            if row is None:
                continue
            color = colors[setting]
            bars = (
                (-width, row.picked, None, color, False),
                (0.0, row.unpicked, row.vs_unpicked, color, True),
                (width, row.baseline, row.vs_baseline, BASELINE_COLOR, False),
            )
            for offset, value, test, fill, hatched in bars:
                if value is None:
                    continue
                values.append(value)
                ax.bar(
                    x + offset,
                    value,
                    width=width,
                    color=fill,
                    alpha=0.45 if hatched else 1.0,
                    hatch="//" if hatched else None,
                    edgecolor="white",
                    zorder=2,
                )
                if test is not None and test.p_value < alpha:
                    star_marker(ax, x + offset, value)
        title, ylabel = _LENGTH_LABELS.get(measure, (measure, measure))
        ax.set_title(title)
        ax.set_ylabel(ylabel)
        ax.set_xticks(range(len(settings)), settings)
        ax.set_xlim(-0.6, len(settings) - 0.4)
        ax.set_xlabel("setting")
        ax.margins(y=0.15)
        if not any(values):
            ax.set_ylim(0, 1)
            ax.text(
                0.5,
                0.5,
                f"all zero: no {title.lower()} recorded",
                transform=ax.transAxes,
                ha="center",
                va="center",
                color="#666666",
            )
    swatch = legend_color(settings, colors)
    figure.legend(
        handles=[
            Patch(facecolor=swatch, label="picked"),
            Patch(facecolor=swatch, alpha=0.45, hatch="//", edgecolor="white", label="unpicked"),
            Patch(facecolor=BASELINE_COLOR, label=f"baseline ({base})"),
            star_handle(),
        ],
        labels=["picked", "unpicked (mean)", f"baseline ({base})", f"vs picked: p < {alpha:g}"],
        loc="outside lower center",
        ncols=4,
        frameon=False,
    )
    figure.suptitle("Length of the actions per turn (Figure 5)")
    return figure
