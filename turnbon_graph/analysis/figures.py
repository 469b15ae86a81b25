"""Figures of the analyses: the paper's Figures 4 and 5 and Table 3, and the companion
study's exploration/exploitation measures (oracle, realised, mu, headroom capture h and
verifier correlation rho_v) from branch rollouts.

Figures 2 and 3 and Tables 1 and 2 are drawn by `turnbon_graph.bench.plots` (the plots of
`turnbon report`); this module draws what that one cannot, from the result objects of
`turnbon_graph.analysis`:

    plot_preference(behaviour_preference(...))      Figure 4
    plot_lengths(length_comparison(...))            Figure 5
    plot_flagged(flagged_shares(...))               Table 3
    plot_oracle_realised(read_reports(run))         study Figure 2: oracle vs realised
    plot_headroom(read_reports(run))                h per branched turn, per selector
    plot_h_vs_rho(read_reports(run))                study Figure 3 (left): h against rho_v

Each function returns a matplotlib `Figure` on an Agg canvas and shows nothing (no
pyplot): in a notebook the figure is displayed as the cell's value, elsewhere
`figure.savefig(path)`. matplotlib (the `plots` extra) is imported inside the functions.
A star marks a difference whose paired-bootstrap p-value is below `alpha`.
"""

from __future__ import annotations

import math
import textwrap
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from turnbon_graph.analysis.rollouts import RolloutReport, RolloutSummary, summarise
from turnbon_graph.bench.plots import (
    _PALETTE,
    BASELINE_COLOR,
    _jitter,
    _percent_axis,
    setting_colors,
)

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    from turnbon_graph.analysis.judge import FlaggedShare
    from turnbon_graph.analysis.preference import BehaviourPreference, LengthComparison

__all__ = [
    "BEHAVIOUR_TITLES",
    "SIGNIFICANT",
    "plot_flagged",
    "plot_h_vs_rho",
    "plot_headroom",
    "plot_lengths",
    "plot_oracle_realised",
    "plot_preference",
    "rollout_label",
    "rollout_summaries",
]

SIGNIFICANT = "*"
"""The mark drawn next to a difference with p < alpha (its text artist has this text)."""

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
_PICKED_COLOR = _PALETTE[0]
_H_RANGE = (-0.15, 1.15)  # always shown: 0 (random pick) and 1 (the best pick)


# ----------------------------------------------------------------------------- Figure 4


def plot_preference(
    results: Sequence[BehaviourPreference], *, alpha: float = 0.05, columns: int = 4
) -> Figure:
    """Figure 4: one panel per behaviour, settings along x; the solid line is the share of
    turns whose pick shows the behaviour, the dashed one the share a random pick would
    show (chance). A star marks a gap whose paired-bootstrap p-value is below `alpha`."""
    from matplotlib.ticker import MaxNLocator

    if not results:
        raise ValueError("plot_preference needs results: behaviour_preference(...) gave none")
    behaviours = _unique(r.behaviour for r in results)
    settings = _unique(r.setting for r in results)
    cell = {(r.behaviour, r.setting): r for r in results}
    turns = {r.setting: r.turns for r in results}
    columns = max(1, min(columns, len(behaviours)))
    rows = math.ceil(len(behaviours) / columns)
    figure, axes = _grid(rows, columns, width=3.1, height=2.7)
    xs = list(range(len(settings)))
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
        top = 0.0
        for x, setting in enumerate(settings):
            result = cell.get((behaviour, setting))
            if result is None:
                continue
            high = max(result.picked_share, result.chance_share)
            top = max(top, high)
            if result.p_value < alpha:
                _star(ax, x, high)
        ax.set_title(BEHAVIOUR_TITLES.get(behaviour, behaviour.replace("_", " ")), fontsize=10)
        ax.set_xticks(xs, settings)
        ax.set_xlim(-0.5, len(settings) - 0.5)
        ax.set_ylim(0, min(1.08, max(0.1, top * 1.3 + 0.03)))
        ax.yaxis.set_major_locator(MaxNLocator(nbins=5, steps=[1, 2, 5, 10]))  # whole percents
        _percent_axis(ax)
    for ax in axes[len(behaviours) :]:
        ax.set_visible(False)
    for ax in axes[::columns]:
        ax.set_ylabel("share of turns")
    figure.legend(
        handles=[*axes[0].lines[:2], _star_handle()],
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
    measures = _unique(c.metric for c in comparisons)
    settings = _unique(c.setting for c in comparisons)
    base = comparisons[0].baseline_setting
    colors = setting_colors([base, *settings], base)
    figure, axes = _grid(1, len(measures), width=5.2, height=4.2)
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
                    _star(ax, x + offset, value)
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
    figure.legend(
        handles=[
            Patch(facecolor="#888888", label="picked"),
            Patch(facecolor="#888888", alpha=0.45, hatch="//", label="unpicked (mean)"),
            Patch(facecolor=BASELINE_COLOR, label=f"baseline ({base})"),
            _star_handle(),
        ],
        labels=["picked", "unpicked (mean)", f"baseline ({base})", f"vs picked: p < {alpha:g}"],
        loc="outside lower center",
        ncols=4,
        frameon=False,
    )
    figure.suptitle("Length of the actions per turn (Figure 5)")
    return figure


# ----------------------------------------------------------------------------- Table 3


def plot_flagged(shares: Sequence[FlaggedShare], *, alpha: float = 0.05) -> Figure:
    """Table 3 as a dot chart: per rubric (rows, in the order given), the share of judged
    trajectories the judge flagged in the baseline (grey) and in each other setting, a
    line from the baseline to it, and a star where the paired-bootstrap difference from
    the baseline has p < `alpha`. Lower is better. A reward-hacking style rubric judged
    on passing attempts only says "(passing)"."""
    from matplotlib.ticker import PercentFormatter

    if not shares:
        raise ValueError("plot_flagged needs shares: flagged_shares(...) gave none")
    rubrics = _unique(s.rubric for s in shares)
    settings = _unique(s.setting for s in shares)
    baseline = shares[0].baseline
    others = [s for s in settings if s != baseline]
    colors = setting_colors(settings, baseline)
    cell = {(s.rubric, s.setting): s for s in shares}
    titles = {
        s.rubric: s.title + (" (passing)" if s.applies_to == "passed" else "") for s in shares
    }
    figure, (ax,) = _grid(1, 1, width=7.0, height=1.3 + 0.3 * len(rubrics))
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
        [*unique.values(), _star_handle()],
        [*unique, f"vs {baseline}: p < {alpha:g}"],
        loc="outside lower center",
        ncols=len(unique) + 1,
        frameon=False,
    )
    figure.suptitle("Behaviours flagged by the LLM judge (Table 3)")
    return figure


# ----------------------------------------------------------------------------- rollouts


def rollout_label(report: RolloutReport, reports: Sequence[RolloutReport] = ()) -> str:
    """The group a report belongs to in the rollout figures: its selector, with N when
    the reports differ in N and the environment when they differ in environment."""
    label = report.selector
    if len({r.n for r in reports}) > 1:
        label += f" N={report.n}"
    if len({r.environment for r in reports}) > 1:
        label = f"{report.environment}: {label}"
    return label


def rollout_summaries(reports: Sequence[RolloutReport]) -> dict[str, RolloutSummary]:
    """`summarise` over the branched turns of each group (`rollout_label`), in the order
    the groups first appear."""
    groups: dict[str, list[RolloutReport]] = {}
    for report in reports:
        groups.setdefault(rollout_label(report, reports), []).append(report)
    return {
        label: summarise(t for r in members for t in r.turns) for label, members in groups.items()
    }


def plot_oracle_realised(reports: Sequence[RolloutReport]) -> Figure:
    """Per selector (and N), over the complete branched turns: the mean oracle (full
    bar: the best candidate's value, exploration), the mean realised value (hatched: the
    picked candidate's, exploitation) and the mean mu (black line: a random pick), as
    in the companion study's Figure 2, with the mean headroom capture h above."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if not reports:
        raise ValueError("plot_oracle_realised needs rollout reports (RUN/rollouts.jsonl)")
    summaries = rollout_summaries(reports)
    labels = list(summaries)
    colors = setting_colors(labels, baseline="")
    figure, (ax,) = _grid(1, 1, width=max(5.5, 1.5 * len(labels) + 2), height=4.4)
    for x, label in enumerate(labels):
        summary = summaries[label]
        if summary.mean_oracle is None:
            continue
        color = colors[label]
        ax.bar(x, summary.mean_oracle, width=0.6, color=color, alpha=0.3, zorder=2)
        if summary.mean_realised is not None:
            ax.bar(
                x,
                summary.mean_realised,
                width=0.6,
                facecolor="none",
                edgecolor=color,
                hatch="//",
                linewidth=1.5,
                zorder=3,
            )
        if summary.mean_mu is not None:
            ax.hlines(summary.mean_mu, x - 0.34, x + 0.34, color="black", linewidth=2, zorder=4)
        h = "h undefined" if summary.mean_h is None else f"mean h = {summary.mean_h:.2f}"
        ax.annotate(
            h,
            (x, max(summary.mean_oracle, summary.mean_realised or 0.0)),
            xytext=(0, 4),
            textcoords="offset points",
            ha="center",
            fontsize=9,
        )
    ax.set_xticks(
        range(len(labels)),
        [f"{_wrap(label)}\n({summaries[label].complete_turns} turns)" for label in labels],
    )
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_ylim(0, 1.12)
    _percent_axis(ax)
    ax.set_xlabel("selector")
    ax.set_ylabel("value (mean pass of its rollouts)")
    ax.set_title("Oracle vs realised value of the turn's candidates (complete turns)")
    figure.legend(
        handles=[
            Patch(facecolor="#888888", alpha=0.3, label="oracle: the best candidate"),
            Patch(facecolor="none", edgecolor="#444444", hatch="//", label="realised: the pick"),
            Line2D([], [], color="black", linewidth=2, label="mu: a random pick"),
        ],
        loc="outside lower center",
        ncols=3,
        frameon=False,
    )
    return figure


def plot_headroom(reports: Sequence[RolloutReport]) -> Figure:
    """Headroom capture h = (realised - mu) / (oracle - mu) of every complete branched
    turn where it is defined. Left: h by the turn's position in its episode, one colour
    per selector (the line joins the mean per position). Right: per selector, every
    turn's h and their mean (diamond). 1 is the best pick, 0 a random one's value."""
    if not reports:
        raise ValueError("plot_headroom needs rollout reports (RUN/rollouts.jsonl)")
    points: dict[str, list[tuple[int, float]]] = {}
    complete: dict[str, int] = {}
    for report in reports:
        label = rollout_label(report, reports)
        points.setdefault(label, [])
        complete.setdefault(label, 0)
        for turn in report.turns:
            if not turn.complete:
                continue
            complete[label] += 1
            if turn.h is not None:
                points[label].append((turn.turn, turn.h))
    labels = list(points)
    colors = setting_colors(labels, baseline="")
    figure, (by_turn, by_selector) = _grid(1, 2, width=5.6, height=4.2)
    dodge = 0.5 / max(1, len(labels))
    positions: set[int] = set()
    lowest, highest = _H_RANGE
    for i, label in enumerate(labels):
        pairs = points[label]
        if not pairs:
            continue
        offset = (i - (len(labels) - 1) / 2) * dodge
        color = colors[label]
        positions.update(t for t, _ in pairs)
        lowest = min(lowest, *(h for _, h in pairs))
        highest = max(highest, *(h for _, h in pairs))
        by_turn.scatter(
            [t + offset for t, _ in pairs],
            [h for _, h in pairs],
            color=color,
            s=18,
            alpha=0.7,
            zorder=3,
            label=label,
        )
        means = _means_by(pairs)
        by_turn.plot([t + offset for t in means], list(means.values()), color=color, linewidth=1.5)
        values = [h for _, h in pairs]
        jitter = _jitter(len(values), 0.15, seed=i)
        by_selector.scatter([i + j for j in jitter], values, color=color, s=18, alpha=0.7, zorder=3)
        mean = sum(values) / len(values)
        by_selector.scatter(
            [i], [mean], marker="D", s=60, color=color, edgecolors="black", zorder=4
        )
        by_selector.annotate(
            f"{mean:.2f}", (i, mean), xytext=(10, -3), textcoords="offset points", fontsize=9
        )
    pad = 0.05 * (highest - lowest)
    for ax in (by_turn, by_selector):
        ax.axhline(1.0, color="#2ca02c", linestyle="--", linewidth=1, zorder=1)
        ax.axhline(0.0, color=BASELINE_COLOR, linestyle=":", linewidth=1, zorder=1)
        ax.set_ylim(lowest - pad, highest + pad)
        ax.set_ylabel("headroom capture h")
    if positions:
        by_turn.set_xticks(sorted(positions))
        by_turn.set_xlim(min(positions) - 0.5, max(positions) + 0.5)
        figure.legend(loc="outside lower center", ncols=min(4, len(labels)), frameon=False)
    by_turn.set_xlabel("turn of the episode")
    by_turn.set_title("h per branched turn (1: best pick, 0: random)")
    by_selector.set_xticks(
        range(len(labels)),
        [f"{_wrap(label)}\n({len(points[label])} of {complete[label]} turns)" for label in labels],
    )
    by_selector.set_xlim(-0.6, len(labels) - 0.4)
    by_selector.set_xlabel("selector (turns where h is defined)")
    by_selector.set_title("h per selector (diamond: mean)")
    return figure


def plot_h_vs_rho(reports: Sequence[RolloutReport]) -> Figure:
    """The companion study's Figure 3 (left): per complete branched turn with both
    defined, headroom capture h against verifier correlation rho_v (Spearman between the
    selector's scores and the candidates' values), with the identity line the study
    predicts (h ~ rho_v). Only scoring selectors record scores: without any turn that
    has both, the panel says so."""
    figure, (ax,) = _grid(1, 1, width=5.2, height=4.6)
    points: dict[str, list[tuple[float, float]]] = {}
    for report in reports:
        for turn in report.turns:
            if turn.complete and turn.h is not None and turn.rho_v is not None:
                label = rollout_label(report, reports)
                points.setdefault(label, []).append((turn.rho_v, turn.h))
    colors = setting_colors(list(points), baseline="")
    ax.plot([-1, 1], [-1, 1], color="#888888", linestyle="--", linewidth=1, label="h = rho_v")
    for label, pairs in points.items():
        ax.scatter(
            [r for r, _ in pairs], [h for _, h in pairs], color=colors[label], s=24, label=label
        )
    if not points:
        ax.text(
            0.5,
            0.5,
            "no turn with both h and rho_v\n(rho_v needs a scoring selector)",
            transform=ax.transAxes,
            ha="center",
            va="center",
            color="#666666",
        )
    ax.set_xlim(-1.05, 1.05)
    ax.set_xlabel("verifier correlation rho_v (Spearman: scores vs values)")
    ax.set_ylabel("headroom capture h")
    ax.set_title("h against rho_v per branched turn")
    ax.legend(frameon=False, fontsize=8)
    return figure


# ----------------------------------------------------------------------------- helpers


def _unique(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def _wrap(label: str, width: int = 16) -> str:
    """A selector name on short lines for a tick label (`llm:openai/x` after the colon)."""
    if len(label) <= width:
        return label
    head, colon, tail = label.partition(":")
    parts = [head + colon, tail] if colon and tail else [label]
    return "\n".join(
        textwrap.fill(part, width, break_long_words=False, break_on_hyphens=False) for part in parts
    )


def _means_by(pairs: Sequence[tuple[int, float]]) -> dict[int, float]:
    grouped: dict[int, list[float]] = {}
    for key, value in pairs:
        grouped.setdefault(key, []).append(value)
    return {key: sum(v) / len(v) for key, v in sorted(grouped.items())}


def _grid(rows: int, columns: int, *, width: float, height: float) -> tuple[Figure, list[Axes]]:
    """`plots._figure` for a grid of panels of the given size (inches each)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width * columns, height * rows), dpi=120, layout="constrained")
    FigureCanvasAgg(figure)  # rendering stays on Agg whatever the backend
    axes = list(figure.subplots(rows, columns, squeeze=False).flat)
    for ax in axes:
        ax.grid(axis="y", alpha=0.3, zorder=0)
        ax.spines[["top", "right"]].set_visible(False)
    return figure, axes


def _star(ax: Axes, x: float, y: float) -> None:
    ax.annotate(
        SIGNIFICANT,
        (x, y),
        xytext=(0, 3),
        textcoords="offset points",
        ha="center",
        fontsize=13,
        fontweight="bold",
    )


def _star_handle() -> Line2D:
    """A legend entry for the significance star."""
    from matplotlib.lines import Line2D

    return Line2D([], [], linestyle="none", marker="$*$", markersize=9, color="black")
