"""The companion study's exploration/exploitation figures from branch rollouts: oracle
vs realised value (its Figure 2), headroom capture h per turn and per selector, and h
against verifier correlation rho_v (its Figure 3, left), grouped by `rollout_label`."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import TYPE_CHECKING

from turnbon_graph.analysis.figures.canvas import light_grid
from turnbon_graph.analysis.rollouts import RolloutReport, RolloutSummary, summarise
from turnbon_graph.bench.report.plots import (
    BASELINE_COLOR,
    jitter_offsets,
    percent_axis,
    setting_colors,
)

if TYPE_CHECKING:
    from matplotlib.figure import Figure

__all__ = [
    "plot_h_vs_rho",
    "plot_headroom",
    "plot_oracle_realised",
    "rollout_label",
    "rollout_summaries",
]

_H_RANGE = (-0.15, 1.15)  # always shown: 0 (random pick) and 1 (the best pick)


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
    figure, (ax,) = light_grid(1, 1, width=max(5.5, 1.5 * len(labels) + 2), height=4.4)
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
    percent_axis(ax)
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
    figure, (by_turn, by_selector) = light_grid(1, 2, width=5.6, height=4.2)
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
        jitter = jitter_offsets(len(values), 0.15, seed=i)
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
    figure, (ax,) = light_grid(1, 1, width=5.2, height=4.6)
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
