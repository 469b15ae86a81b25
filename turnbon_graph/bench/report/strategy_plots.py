"""The figures of the report's strategy comparison, drawn as `plots` draws the others
(matplotlib's object API on an Agg canvas, imported inside the functions): pass rate
against realised spend per episode, one line per strategy over its budgets, with
intervals and the caps marked; headroom capture against the value model's rank
correlation per task (the decomposition's figure); and one episode's search tree, its
nodes coloured by fate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from turnbon_graph.bench.report.plots import (
    PALETTE,
    TIMES,
    new_figure,
    percent_axis,
    save_figure,
    token_formatter,
)
from turnbon_graph.bench.stats.decomposition import TaskPoint, fit_line

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from turnbon_graph.bench.strategies.tree import TreeNode

FATE_COLORS = {
    "kept": "#1f77b4",
    "pruned": "#b0b0b0",
    "held": "#ff7f0e",
    "chosen": "#2ca02c",
    "rollout": "#c5b0d5",
}
LABEL_CHARS = 34
"""Characters of an action shown beside its node."""


@dataclass(frozen=True)
class SpendPoint:
    """One setting on the pass-rate-against-spend figure."""

    line: str
    """The line it is drawn on: its strategy at its N, whatever its budget."""
    spent: float
    """Mean spend per episode, in the figure's unit (each task's mean, averaged)."""
    spent_low: float
    spent_high: float
    """Its 95% bootstrap interval (tasks resampled); it always holds `spent`."""
    rate: float
    """Mean pass rate over tasks."""
    rate_low: float
    rate_high: float
    """Its 95% bootstrap interval (tasks resampled)."""
    budget: float | None
    """The cap its episodes ran under, in the figure's unit; None: none."""


LINE_STYLES = ("-", "--", ":", "-.")
"""Past the palette's colours, lines differ by style as well."""
BUDGET_MARKERS = ("o", "s", "^", "D", "v", "P", "X")
"""One marker per budget, the same on every line."""


def plot_pass_against_spend(points: Sequence[SpendPoint], path: Path, *, unit: str) -> Path:
    """Pass rate against realised spend per episode: a line per strategy through its
    budgets, each point with its pass rate's 95% interval (vertical) and its mean
    spend's 95% interval (horizontal; both bootstrap, tasks resampled), a marker per
    budget, and each budget's cap as a dashed vertical line (see `pass_against_spend_figure`)."""
    return save_figure(pass_against_spend_figure(points, unit=unit), path)


def pass_against_spend_figure(points: Sequence[SpendPoint], *, unit: str) -> Figure:
    """The figure of `plot_pass_against_spend`, undrawn (tests read its artists). The
    spend axis is logarithmic when it spans more than a factor of ten (a cap far above
    what was spent, say), so neither the points nor the caps are squeezed."""
    from matplotlib.lines import Line2D

    figure, (ax,) = new_figure()
    lines: dict[str, list[SpendPoint]] = {}
    for point in points:
        lines.setdefault(point.line, []).append(point)
    budgets = sorted({p.budget for p in points if p.budget is not None})
    markers = {b: BUDGET_MARKERS[i % len(BUDGET_MARKERS)] for i, b in enumerate(budgets)}
    for index, (label, members) in enumerate(lines.items()):
        color = PALETTE[index % len(PALETTE)]
        style = LINE_STYLES[(index // len(PALETTE)) % len(LINE_STYLES)]
        members = sorted(members, key=lambda p: (p.budget is None, p.budget or 0.0, p.spent))
        xs, ys = [p.spent for p in members], [p.rate for p in members]
        ax.plot(xs, ys, linestyle=style, linewidth=1.6, color=color, label=label, zorder=2)
        for point in members:
            ax.errorbar(
                [point.spent],
                [point.rate],
                xerr=[[point.spent - point.spent_low], [point.spent_high - point.spent]],
                yerr=[[point.rate - point.rate_low], [point.rate_high - point.rate]],
                fmt=markers.get(point.budget, "o") if point.budget is not None else "o",
                color=color,
                markersize=7,
                markeredgecolor="white",  # a point drawn over another stays apart
                markeredgewidth=0.8,
                elinewidth=1,
                capsize=2,
                zorder=3,
            )
    for budget in budgets:
        ax.axvline(budget, color="#555555", linestyle="--", linewidth=1, zorder=1)
        ax.annotate(
            f"cap {budget:,g}",
            (budget, 1.0),
            xycoords=("data", "axes fraction"),
            xytext=(-3, -3),
            textcoords="offset points",
            rotation=90,
            ha="right",
            va="top",
            fontsize=8,
            color="#555555",
        )
    spans = [v for p in points for v in (p.spent_low, p.spent, p.spent_high)] + budgets
    positive = [v for v in spans if v > 0]
    if positive and max(positive) > 10 * min(positive):
        ax.set_xscale("log")
        ax.set_xlim(min(positive) / 1.5, max(positive) * 1.5)
    ax.set_ylim(-0.02, 1.08)
    percent_axis(ax)
    if unit == "tokens":
        ax.xaxis.set_major_formatter(token_formatter())
    ax.set_xlabel(f"spend per episode ({UNIT_WORDS.get(unit, unit)}, mean; bars: 95% interval)")
    ax.set_ylabel("mean pass rate (bars: 95% interval)")
    ax.set_title("Pass rate against realised spend")
    # Beside the axes, where constrained layout makes room for them: with ten lines
    # inside, the legend would cover points.
    figure.legend(
        *ax.get_legend_handles_labels(),
        title="strategy",
        frameon=False,
        loc="outside right upper",
        fontsize=8,
    )
    if budgets:
        handles = [
            Line2D([], [], marker=m, linestyle="", color="#333333", label=f"{b:,g}")
            for b, m in markers.items()
        ]
        figure.legend(
            handles=handles,
            title="budget (cap)",
            frameon=False,
            loc="outside right lower",
            fontsize=8,
        )
    return figure


UNIT_WORDS = {"tokens": "tokens", "completion": "completion tokens", "usd": "US dollars"}


def tree_layout(nodes: Sequence[TreeNode]) -> dict[str, tuple[float, float]]:
    """(x, y) per node id: x its turn, y its place among the leaves below it (a parent
    midway between its children), so no two branches cross."""
    children: dict[str | None, list[str]] = {}
    for node in nodes:
        children.setdefault(node.parent, []).append(node.id)
    turn = {n.id: n.turn for n in nodes}
    places: dict[str, tuple[float, float]] = {}
    next_leaf = 0

    def place(node: str) -> float:
        nonlocal next_leaf
        below = children.get(node, [])
        if not below:
            y = float(next_leaf)
            next_leaf += 1
        else:
            ys = [place(child) for child in below]
            y = (min(ys) + max(ys)) / 2
        places[node] = (float(turn[node]), y)
        return y

    for root in children.get(None, []):
        place(root)
    return places


def plot_tree(nodes: Sequence[TreeNode], path: Path, *, title: str) -> Path:
    """One episode's search tree: a node per step at its turn, coloured by fate, labelled
    with its action and value; edges from parent to child."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

    places = tree_layout(nodes)
    turns = max((x for x, _ in places.values()), default=0)
    leaves = max((y for _, y in places.values()), default=0) + 1
    figure = Figure(
        figsize=(2.0 + 2.9 * (turns + 1), 1.8 + 0.42 * leaves), dpi=110, layout="constrained"
    )
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    ax.axis("off")
    for node in nodes:
        if node.parent is not None and node.parent in places:
            (x0, y0), (x1, y1) = places[node.parent], places[node.id]
            ax.plot([x0, x1], [y0, y1], color="#999999", linewidth=1, zorder=1)
    for node in nodes:
        x, y = places[node.id]
        color = FATE_COLORS.get(node.fate, "#333333")
        ax.scatter([x], [y], s=90, color=color, zorder=2, edgecolors="black")
        action = node.action
        action = action if len(action) <= LABEL_CHARS else action[: LABEL_CHARS - 1] + "…"
        label = action + (f"  v={node.value:g}" if node.value is not None else "")
        if node.copies:
            label += f"  {TIMES}{node.copies}"
        ax.annotate(label, (x, y), xytext=(7, -3), textcoords="offset points", fontsize=7)
    ax.set_xlim(-0.3, turns + 1.1)
    ax.set_ylim(leaves - 0.4, -0.6)
    for turn in range(int(turns) + 1):
        ax.annotate(f"turn {turn}", (turn, -0.6), ha="center", va="bottom", fontsize=8)
    ax.legend(
        handles=[
            Line2D([], [], marker="o", linestyle="", color=c, markeredgecolor="black", label=f)
            for f, c in FATE_COLORS.items()
            if any(n.fate == f for n in nodes)
        ],
        frameon=False,
        loc="lower left",
        bbox_to_anchor=(0.0, 1.0),
        ncols=5,
    )
    figure.suptitle(title, fontsize=10)
    return save_figure(figure, path)


def plot_headroom_against_rho(points: Mapping[str, Sequence[TaskPoint]], path: Path) -> Path:
    """Headroom capture h against the value model's rho_v, one point per setting and
    task, with the identity line (the paper's prediction, h = rho_v) and the
    least-squares line through all points: "Test-Time Scaling in the Wild", Figure 3
    (left). See `headroom_against_rho_figure`."""
    return save_figure(headroom_against_rho_figure(points), path)


def headroom_against_rho_figure(points: Mapping[str, Sequence[TaskPoint]]) -> Figure:
    """The figure of `plot_headroom_against_rho`, undrawn (tests read its artists): only
    the points whose h and rho_v are both defined."""
    figure, (ax,) = new_figure()
    xs: list[float] = []
    ys: list[float] = []
    for index, (setting, members) in enumerate(points.items()):
        drawn = [(p.rho_v, p.h) for p in members if p.rho_v is not None and p.h is not None]
        if not drawn:
            continue
        xs += [x for x, _ in drawn]
        ys += [y for _, y in drawn]
        ax.scatter(
            [x for x, _ in drawn],
            [y for _, y in drawn],
            color=PALETTE[index % len(PALETTE)],
            marker=BUDGET_MARKERS[(index // len(PALETTE)) % len(BUDGET_MARKERS)],
            label=setting,
            zorder=3,
        )
    span = [min([-1.0, *xs, *ys]), max([1.0, *xs, *ys])]
    ax.plot(span, span, color="#555555", linestyle="--", linewidth=1, label="h = rho_v")
    fit = fit_line(xs, ys)
    if fit is not None:
        r2 = "" if fit.r2 is None else f", R² = {fit.r2:.2f}"
        ax.plot(
            span,
            [fit.slope * x + fit.intercept for x in span],
            color="#d62728",
            linewidth=1.4,
            label=f"fit: h = {fit.slope:.2f} rho_v {fit.intercept:+.2f}{r2}",
        )
    ax.set_xlabel("rho_v (Spearman of value and verdict within a task)")
    ax.set_ylabel("h (headroom capture)")
    ax.set_title(f"h against rho_v ({len(xs)} task-level points)")
    figure.legend(frameon=False, loc="outside right upper", fontsize=8)
    return figure
