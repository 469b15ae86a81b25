"""The figures of the report's strategy comparison, drawn as `plots` draws the others
(matplotlib's object API on an Agg canvas, imported inside the functions): pass rate
against tokens per episode, one line per strategy over its budgets; and one episode's
search tree, its nodes coloured by fate."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from turnbon_graph.bench.plots import (
    PALETTE,
    TIMES,
    new_figure,
    percent_axis,
    save_figure,
    token_formatter,
)

if TYPE_CHECKING:
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


def plot_pass_against_tokens(
    lines: Mapping[str, Sequence[tuple[float, float, float | None]]], path: Path
) -> Path:
    """Pass rate against mean tokens per episode: one line per strategy through its
    budgets, each point marked with its budget."""
    figure, (ax,) = new_figure()
    for index, (label, points) in enumerate(lines.items()):
        color = PALETTE[index % len(PALETTE)]
        xs = [p[0] for p in points]
        ys = [p[1] for p in points]
        ax.plot(xs, ys, marker="o", linewidth=2, color=color, label=label)
        for x, y, budget in points:
            ax.annotate(
                "no bound" if budget is None else f"≤{budget:,g}",
                (x, y),
                xytext=(4, 4),
                textcoords="offset points",
                fontsize=8,
                color=color,
            )
    ax.set_ylim(-0.02, 1.08)
    percent_axis(ax)
    ax.xaxis.set_major_formatter(token_formatter())
    ax.set_xlabel("mean tokens per episode (generator + selector + value)")
    ax.set_ylabel("mean pass rate")
    ax.set_title("Pass rate against tokens, per strategy over token budgets")
    ax.legend(title="strategy", frameon=False, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return save_figure(figure, path)


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
