"""The strategies' figure, pass rate against realised spend, drawn from hand-made points:
every setting on it with its interval, each budget's cap marked, and with 10 settings
every label readable (inside the figure, no two overlapping); read back from its
artists."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import pytest
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure
from matplotlib.text import Text

from turnbon_graph.bench.report.strategy_plots import (
    SpendPoint,
    pass_against_spend_figure,
    plot_pass_against_spend,
)

STRATEGIES = ["bon N=3", "beam W=2 N=3", "particle W=3 N=1", "lookahead H=1 N=3", "fusion N=3"]
BUDGETS = (2000.0, 8000.0)


def ten_settings() -> list[SpendPoint]:
    """Five strategies at two budgets: 10 settings, some of them on top of each other
    (the same pass rate, close spend), as a real run makes them."""
    points = []
    for index, line in enumerate(STRATEGIES):
        for budget in BUDGETS:
            spent = 80.0 + 40 * index + budget / 400
            rate = 1.0 if index % 2 else 0.75 + 0.05 * index
            points.append(
                SpendPoint(
                    line=line,
                    spent=spent,
                    spent_low=spent * 0.6,
                    spent_high=spent * 1.5,
                    rate=rate,
                    rate_low=max(rate - 0.2, 0.0),
                    rate_high=min(rate + 0.1, 1.0),
                    budget=budget,
                )
            )
    return points


def test_every_setting_has_its_intervals_and_every_cap_is_marked() -> None:
    figure = pass_against_spend_figure(ten_settings(), unit="tokens")
    (ax,) = figure.axes
    strategy, budget = figure.legends
    assert [t.get_text() for t in strategy.get_texts()] == STRATEGIES
    assert [t.get_text() for t in budget.get_texts()] == ["2,000", "8,000"]
    caps = [line for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert sorted(float(line.get_xdata()[0]) for line in caps) == list(BUDGETS)
    labels = sorted(t.get_text() for t in ax.texts)
    assert labels == ["cap 2,000", "cap 8,000"]
    bars = [c for c in ax.collections if isinstance(c, LineCollection)]
    assert len(bars) == 2 * 10  # a vertical and a horizontal interval per setting
    assert ax.get_xscale() == "log"  # the caps are far beyond what the stub spends
    assert ax.get_xlim()[1] > max(BUDGETS)  # every cap on the axes


def drawn_texts(figure: Figure) -> list[Text]:
    """The texts the figure shows: its legends', its axes' titles, labels and
    annotations, and the labels of the ticks within the axes' limits."""
    (ax,) = figure.axes
    texts = [t for legend in figure.legends for t in [legend.get_title(), *legend.get_texts()]]
    texts += [ax.title, ax.xaxis.label, ax.yaxis.label, *ax.texts]
    for axis, (low, high) in ((ax.xaxis, ax.get_xlim()), (ax.yaxis, ax.get_ylim())):
        for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
            if low <= tick.get_loc() <= high and tick.label1.get_visible():
                texts.append(tick.label1)
    return texts


def ten_strategies() -> list[SpendPoint]:
    """Ten strategies at one budget: ten lines, more than the palette has colours."""
    lines = [f"{name} W={w} N=3" for name in ("beam", "particle") for w in range(2, 7)]
    return [
        SpendPoint(line, 50.0 * (k + 1), 40.0 * (k + 1), 70.0 * (k + 1), 0.5, 0.3, 0.7, 4000.0)
        for k, line in enumerate(lines)
    ]


@pytest.mark.parametrize(
    "points", [ten_settings(), ten_strategies()], ids=["5 strategies x 2 budgets", "10 strategies"]
)
def test_with_ten_settings_every_label_is_readable(
    tmp_path: Path, points: list[SpendPoint]
) -> None:
    """Inside the figure, and no two labels on top of each other; ten lines differ."""
    figure = pass_against_spend_figure(points, unit="tokens")
    handles = figure.legends[0].legend_handles
    styles = {(h.get_color(), h.get_linestyle()) for h in handles}  # type: ignore[union-attr]
    assert len(handles) == len(styles) == len({p.line for p in points})
    figure.canvas.draw()
    renderer = figure.canvas.get_renderer()  # type: ignore[attr-defined]
    whole = figure.bbox
    texts = [t for t in drawn_texts(figure) if t.get_text().strip()]
    assert len(texts) > 20  # legends, caps, titles, ticks
    boxes = {id(t): t.get_window_extent(renderer) for t in texts}
    for text in texts:
        box = boxes[id(text)]
        assert whole.x0 - 1 <= box.x0 and box.x1 <= whole.x1 + 1, text.get_text()
        assert whole.y0 - 1 <= box.y0 and box.y1 <= whole.y1 + 1, text.get_text()
    for one, other in combinations(texts, 2):
        assert not boxes[id(one)].overlaps(boxes[id(other)]), (one.get_text(), other.get_text())
    path = plot_pass_against_spend(points, tmp_path / "figure.png", unit="tokens")
    assert path.stat().st_size > 10_000


@pytest.mark.parametrize(("unit", "words"), [("usd", "US dollars"), ("tokens", "tokens")])
def test_the_spend_axis_says_its_unit(unit: str, words: str) -> None:
    point = SpendPoint("bon N=2", 0.01, 0.008, 0.02, 0.5, 0.3, 0.7, 0.05)
    (ax,) = pass_against_spend_figure([point], unit=unit).axes
    assert words in ax.get_xlabel() and ax.get_xscale() == "linear"


def test_a_skewed_spend_is_drawn_with_its_mean_inside_its_interval(tmp_path: Path) -> None:
    # Ten tasks, nine spending 10 tokens and one 10,000: the mean (1,009) lies above the
    # 90th percentile (10), where the old bars (10th to 90th percentile) put a negative
    # width and matplotlib refused to draw the report's figure.
    from turnbon_graph.bench.report.strategies import spend_points
    from turnbon_graph.bench.running.runs import EpisodeResult
    from turnbon_graph.bench.strategies.spec import StrategySpec

    spec = StrategySpec(name="beam", token_budget=20_000)
    results = [
        EpisodeResult(
            task=f"t{k}",
            trial=0,
            setting="beam 20000",
            n=3,
            outcome="pass",
            turns=1,
            duration_s=1.0,
            strategy=spec,
            tokens=10_000 if k == 0 else 10,
        )
        for k in range(10)
    ]
    (point,), unit = spend_points(["beam 20000"], {"beam 20000": results}, 2000, 0)
    assert unit == "tokens" and point.spent == pytest.approx(1009.0)
    assert point.spent_low <= point.spent <= point.spent_high
    assert point.spent_high > point.spent  # the one expensive task can be drawn again
    assert plot_pass_against_spend([point], tmp_path / "skewed.png", unit=unit).is_file()
