"""What the analysis figures share: a grid of panels on an Agg canvas, the significance
star and its legend entry, and labels in first-seen order. matplotlib is imported inside
the functions."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure
    from matplotlib.lines import Line2D

__all__ = ["SIGNIFICANT"]

SIGNIFICANT = "*"
"""The mark drawn next to a difference with p < alpha (its text artist has this text)."""


def unique_labels(values: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(values))


def light_grid(
    rows: int, columns: int, *, width: float, height: float
) -> tuple[Figure, list[Axes]]:
    """`plots.new_figure` for a grid of panels of the given size (inches each)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width * columns, height * rows), dpi=120, layout="constrained")
    FigureCanvasAgg(figure)  # rendering stays on Agg whatever the backend
    axes = list(figure.subplots(rows, columns, squeeze=False).flat)
    for ax in axes:
        ax.grid(axis="y", alpha=0.3, zorder=0)
        ax.spines[["top", "right"]].set_visible(False)
    return figure, axes


def star_marker(ax: Axes, x: float, y: float) -> None:
    ax.annotate(
        SIGNIFICANT,
        (x, y),
        xytext=(0, 3),
        textcoords="offset points",
        ha="center",
        fontsize=13,
        fontweight="bold",
    )


def star_handle() -> Line2D:
    """A legend entry for the significance star."""
    from matplotlib.lines import Line2D

    return Line2D([], [], linestyle="none", marker="$*$", markersize=9, color="black")
