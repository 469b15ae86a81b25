"""The analysis figures (Figures 4 and 5, Table 3, oracle/realised and headroom) drawn
from hand-built result objects: what each figure shows is read back from its artists."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import LineCollection, PathCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.text import Annotation

from turnbon_graph.analysis.figures import (
    SIGNIFICANT,
    plot_flagged,
    plot_h_vs_rho,
    plot_headroom,
    plot_lengths,
    plot_oracle_realised,
    plot_preference,
    rollout_label,
    rollout_summaries,
)
from turnbon_graph.analysis.judge import FlaggedShare
from turnbon_graph.analysis.preference import BehaviourPreference, LengthComparison
from turnbon_graph.analysis.rollouts import (
    BranchTurn,
    CandidateValue,
    RolloutBudget,
    RolloutReport,
)
from turnbon_graph.bench.stats.metrics import BootstrapResult

# ----------------------------------------------------------------------------- helpers


def visible_axes(figure: Figure) -> list[Axes]:
    return [ax for ax in figure.axes if ax.get_visible()]


def stars(ax: Axes) -> list[tuple[float, float]]:
    """Where the significance marks of a panel point (data coordinates)."""
    marks = [t for t in ax.texts if isinstance(t, Annotation) and t.get_text() == SIGNIFICANT]
    return [(float(m.xy[0]), float(m.xy[1])) for m in marks]


def floats(values: Any) -> list[float]:
    """An artist's data (lists or arrays) as plain floats."""
    return [float(v) for v in np.asarray(values, dtype=float).ravel()]


def offsets(collection: PathCollection) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in np.asarray(collection.get_offsets(), dtype=float)]


def bars(ax: Axes) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle)]


def tick_labels(ax: Axes, axis: str = "x") -> list[str]:
    ticks = ax.get_xticklabels() if axis == "x" else ax.get_yticklabels()
    return [t.get_text() for t in ticks]


def renders(figure: Figure) -> None:
    """The figure draws to a PNG (catches layout and artist errors at draw time)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    assert buffer.getvalue().startswith(b"\x89PNG")


def pref(setting: str, behaviour: str, picked: float, chance: float, p: float) -> Any:
    return BehaviourPreference(
        setting=setting,
        n=int(setting[2:]),
        behaviour=behaviour,
        turns=40,
        informative_turns=20,
        tasks=10,
        picked_share=picked,
        chance_share=chance,
        gap=picked - chance,
        task_gap=picked - chance,
        ci_low=-0.1,
        ci_high=0.3,
        p_value=p,
        resamples=100,
        synthesized_turns=0,
        rule_turns=0,
        resampled_turns=0,
    )


def test(difference: float, p: float) -> BootstrapResult:
    return BootstrapResult(tasks=10, difference=difference, ci_low=0, ci_high=0, p_value=p)


test.__test__ = False  # type: ignore[attr-defined]  # a builder, not a test


def length(
    setting: str,
    metric: str,
    picked: float,
    unpicked: float | None,
    baseline: float | None,
    p_unpicked: float = 0.5,
    p_baseline: float = 0.5,
) -> LengthComparison:
    return LengthComparison(
        setting=setting,
        n=int(setting[2:]),
        metric=metric,  # type: ignore[arg-type]
        turns=30,
        tasks=10,
        picked=picked,
        unpicked_turns=30,
        unpicked=unpicked,
        baseline_setting="N=1",
        baseline_turns=25 if baseline is not None else 0,
        baseline=baseline,
        vs_unpicked=None if unpicked is None else test(picked - unpicked, p_unpicked),
        vs_baseline=None if baseline is None else test(picked - baseline, p_baseline),
        resamples=100,
        synthesized_turns=0,
        rule_turns=0,
        resampled_turns=0,
    )


def share(rubric: str, setting: str, value: float | None, p: float | None = None, **kw: Any) -> Any:
    return FlaggedShare(
        rubric=rubric,
        title=kw.pop("title", rubric.title()),
        applies_to=kw.pop("applies_to", "all"),
        setting=setting,
        judged=20,
        flagged=0 if value is None else round(20 * value),
        unknown=0,
        share=value,
        baseline="N=1",
        baseline_share=kw.pop("base", None),
        p_value=p,
        difference=None if p is None else 0.1,
        **kw,
    )


def turn(
    values: Sequence[float | None],
    picked: int,
    *,
    number: int = 1,
    scores: Sequence[float] | None = None,
    complete: bool = True,
) -> BranchTurn:
    """A branched turn measured by the library's own `BranchTurn.measure`."""
    candidates = [
        CandidateValue(
            index=i,
            action=f"$ cmd {i}",
            value=v,
            rollouts=2 if v is not None else 0,
            score=None if scores is None else scores[i],
        )
        for i, v in enumerate(values)
    ]
    branch = BranchTurn(
        task="t", trial=0, turn=number, turn_id=f"id{number}", candidates=candidates, picked=picked
    )
    branch.measure()
    assert branch.complete == complete
    return branch


def report(selector: str, turns: list[BranchTurn], n: int = 3) -> RolloutReport:
    return RolloutReport(
        environment="terminal",
        task="t",
        trial=0,
        selector=selector,
        n=n,
        continuation="openai/stub",
        budget=RolloutBudget(),
        outcome="pass",
        turns=turns,
    )


# ----------------------------------------------------------------------------- Figure 4


def test_preference_has_a_panel_per_behaviour_with_picked_and_chance_lines() -> None:
    results = [
        pref("N=4", "edits_file", 0.40, 0.20, p=0.001),
        pref("N=8", "edits_file", 0.50, 0.20, p=0.20),
        pref("N=4", "read_only", 0.05, 0.30, p=0.01),
        pref("N=8", "read_only", 0.10, 0.25, p=0.06),
        pref("N=4", "custom_tag", 0.10, 0.10, p=1.0),
        pref("N=8", "custom_tag", 0.10, 0.10, p=1.0),
    ]
    figure = plot_preference(results, columns=2)
    panels = visible_axes(figure)
    assert len(figure.axes) == 4 and len(panels) == 3  # a 2x2 grid, the fourth hidden
    assert [ax.get_title() for ax in panels] == [
        "Edits a file",
        "Only reads or inspects",
        "custom tag",
    ]
    edits = panels[0]
    solid, dashed = edits.lines
    assert solid.get_linestyle() == "-" and dashed.get_linestyle() == "--"
    assert floats(solid.get_ydata()) == [0.40, 0.50]
    assert floats(dashed.get_ydata()) == [0.20, 0.20]
    assert tick_labels(edits) == ["N=4", "N=8"]
    # p < 0.05 gets a star over that setting's higher point, the others none.
    assert stars(edits) == [(0, 0.40)]
    assert stars(panels[1]) == [(0, 0.30)]
    assert stars(panels[2]) == []
    assert "N=4: 40 turns" in figure.get_suptitle()
    renders(figure)


def test_preference_stars_follow_alpha() -> None:
    results = [pref("N=4", "loops", 0.4, 0.2, p=0.01)]
    assert len(stars(plot_preference(results).axes[0])) == 1
    assert stars(plot_preference(results, alpha=0.005).axes[0]) == []


def test_preference_without_results_says_so() -> None:
    with pytest.raises(ValueError, match="behaviour_preference"):
        plot_preference([])


# ----------------------------------------------------------------------------- Figure 5


def test_lengths_draw_picked_unpicked_and_baseline_bars_per_setting() -> None:
    comparisons = [
        length("N=4", "reasoning_tokens", 0.0, 0.0, 0.0),
        length("N=4", "command_chars", 120.0, 60.0, 90.0, p_unpicked=0.001, p_baseline=0.3),
        length("N=8", "reasoning_tokens", 0.0, 0.0, None),
        length("N=8", "command_chars", 150.0, None, None),
    ]
    figure = plot_lengths(comparisons)
    reasoning, chars = visible_axes(figure)
    assert reasoning.get_title() == "Reasoning tokens"
    assert chars.get_ylabel() == "command characters per turn"
    # N=4: picked, unpicked, baseline; N=8: picked only (no unpicked, no baseline).
    heights = [b.get_height() for b in bars(chars)]
    assert heights == [120.0, 60.0, 90.0, 150.0]
    hatched = [b.get_hatch() for b in bars(chars)]
    assert hatched == [None, "//", None, None]
    assert tick_labels(chars) == ["N=4", "N=8"]
    # The star sits on the unpicked bar of N=4 (p=0.001), not on its baseline (p=0.3).
    ((x, y),) = stars(chars)
    assert y == 60.0 and x == pytest.approx(0.0)
    # Reasoning tokens are all zero: the panel says so instead of drawing flat bars.
    notes = [t.get_text() for t in reasoning.texts]
    assert "all zero: no reasoning tokens recorded" in notes
    assert not any("all zero" in t.get_text() for t in chars.texts)
    assert "baseline (N=1)" in [t.get_text() for t in figure.legends[0].get_texts()]
    renders(figure)


def test_lengths_without_comparisons_says_so() -> None:
    with pytest.raises(ValueError, match="length_comparison"):
        plot_lengths([])


# ----------------------------------------------------------------------------- Table 3


def test_flagged_is_a_dot_chart_of_rubrics_baseline_vs_settings() -> None:
    shares = [
        share("looping", "N=1", 0.5, base=0.5),
        share("looping", "N=4", 0.2, p=0.01, base=0.5),
        share("looping", "N=8", 0.3, p=0.2, base=0.5),
        share("testing", "N=1", 0.4, base=0.4, title="Insufficient testing"),
        share("testing", "N=4", None, base=0.4, title="Insufficient testing"),  # none judged
        share("testing", "N=8", 0.45, p=0.04, base=0.4, title="Insufficient testing"),
        share("reward_hacking", "N=1", 0.1, base=0.1, applies_to="passed"),
        share("reward_hacking", "N=4", 0.1, p=1.0, base=0.1, applies_to="passed"),
    ]
    figure = plot_flagged(shares)
    (ax,) = figure.axes
    assert tick_labels(ax, "y") == ["Looping", "Insufficient testing", "Reward_Hacking (passing)"]
    low, high = ax.get_ylim()
    assert low > high  # the first rubric on top, as in the table
    points = [
        (tuple(floats(c.get_facecolor()[0])), *offsets(c)[0])
        for c in ax.collections
        if isinstance(c, PathCollection)
    ]
    # 3 baseline dots + N=4 twice (its testing share is None) + N=8 twice.
    assert len(points) == 7
    colours: dict[tuple[float, ...], list[tuple[float, int]]] = {}
    for colour, x, y in points:
        colours.setdefault(colour, []).append((round(float(x), 2), round(float(y))))
    assert sorted(len(v) for v in colours.values()) == [2, 2, 3]
    baseline = next(v for v in colours.values() if len(v) == 3)
    assert baseline == [(0.5, 0), (0.4, 1), (0.1, 2)]
    # Stars: looping at N=4 (p=0.01) and testing at N=8 (p=0.04), not the others.
    assert sorted(round(x, 2) for x, _ in stars(ax)) == [0.2, 0.45]
    labels = [t.get_text() for t in figure.legends[0].get_texts()]
    assert labels[:3] == ["N=1", "N=4", "N=8"] and "p < 0.05" in labels[3]
    renders(figure)


# ----------------------------------------------------------------------------- rollouts


def rollout_reports() -> list[RolloutReport]:
    return [
        report(
            "llm:judge",
            [
                turn([1.0, 0.0, 0.5], picked=0),  # oracle 1, mu .5, realised 1: h 1
                turn([0.5, 0.5, 0.5], picked=1, number=2),  # no headroom: h undefined
                turn([1.0, None, 0.0], picked=0, number=3, complete=False),  # not counted
            ],
        ),
        report(
            "first",
            [
                turn([0.0, 1.0, 0.5], picked=0),  # oracle 1, mu .5, realised 0: h -1
                turn([0.0, 1.0, 1.0], picked=1, number=2),  # oracle 1, mu 2/3, realised 1: h 1
            ],
        ),
    ]


def test_oracle_realised_bars_per_selector() -> None:
    reports = rollout_reports()
    summaries = rollout_summaries(reports)
    assert list(summaries) == ["llm:judge", "first"]
    assert summaries["llm:judge"].complete_turns == 2
    figure = plot_oracle_realised(reports)
    (ax,) = figure.axes
    heights = [round(b.get_height(), 4) for b in bars(ax)]
    # llm: oracle mean (1 + .5) / 2, realised (1 + .5) / 2; first: oracle 1, realised .5.
    assert heights == [0.75, 0.75, 1.0, 0.5]
    assert [b.get_hatch() for b in bars(ax)] == [None, "//", None, "//"]
    mu_levels = [
        round(float(segment[0][1]), 4)
        for c in ax.collections
        if isinstance(c, LineCollection)
        for segment in c.get_segments()
    ]
    assert mu_levels == [0.5, round((0.5 + 2 / 3) / 2, 4)]
    texts = [t.get_text() for t in ax.texts]
    # mean h of llm over its h-defined turn: 1; of first: (-1 + 1) / 2 = 0.
    assert texts == ["mean h = 1.00", "mean h = 0.00"]
    assert tick_labels(ax) == ["llm:judge\n(2 turns)", "first\n(2 turns)"]
    renders(figure)


def test_headroom_points_per_turn_and_selector() -> None:
    figure = plot_headroom(rollout_reports())
    by_turn, by_selector = figure.axes
    scattered = [c for c in by_turn.collections if isinstance(c, PathCollection)]
    assert [len(offsets(c)) for c in scattered] == [1, 2]  # llm 1 defined h, first 2
    assert sorted(y for _, y in offsets(scattered[1])) == [-1.0, 1.0]
    references = sorted(
        floats(line.get_ydata())[0] for line in by_turn.lines if line.get_linestyle() in ("--", ":")
    )
    assert references == [0.0, 1.0]
    assert tick_labels(by_selector) == ["llm:judge\n(1 of 2 turns)", "first\n(2 of 2 turns)"]
    assert [t.get_text() for t in by_selector.texts] == ["1.00", "0.00"]
    assert by_turn.get_ylim()[0] < -1.0  # h below -1 is kept in view
    renders(figure)


def test_h_against_rho_v_only_where_scores_exist() -> None:
    empty = plot_h_vs_rho(rollout_reports())
    assert "needs a scoring selector" in " ".join(t.get_text() for t in empty.axes[0].texts)
    scored = report(
        "score:judge",
        [turn([0.0, 1.0, 0.5], picked=1, scores=[1.0, 9.0, 5.0])],  # rho 1, h 1
    )
    figure = plot_h_vs_rho([*rollout_reports(), scored])
    (ax,) = figure.axes
    (points,) = [c for c in ax.collections if isinstance(c, PathCollection)]
    assert offsets(points) == [(1.0, 1.0)]
    assert not ax.texts
    renders(figure)


def test_rollout_label_names_n_and_environment_only_when_they_differ() -> None:
    a = report("first", [], n=4)
    b = report("first", [], n=8)
    assert rollout_label(a, [a]) == "first"
    assert rollout_label(a, [a, b]) == "first N=4"
    c = b.model_copy(update={"environment": "bfcl"})
    assert rollout_label(c, [a, c]) == "bfcl: first N=8"


def test_rollout_figures_need_reports() -> None:
    with pytest.raises(ValueError, match=r"rollouts\.jsonl"):
        plot_oracle_realised([])
    with pytest.raises(ValueError, match=r"rollouts\.jsonl"):
        plot_headroom([])


# ----------------------------------------------------------------------------- legends, scales


def test_preference_panels_share_one_y_scale() -> None:
    results = [
        pref("N=4", "edits_file", 0.60, 0.20, p=0.001),
        pref("N=4", "loops", 0.02, 0.05, p=0.5),
        pref("N=4", "read_only", 0.10, 0.08, p=0.5),
    ]
    panels = visible_axes(plot_preference(results, columns=3))
    limits = {ax.get_ylim() for ax in panels}
    assert len(limits) == 1  # a 2% panel beside a 60% one reads on the same scale
    ((low, high),) = limits
    assert low == 0 and high >= 0.6


def test_length_legend_swatches_have_the_colour_of_the_bars() -> None:
    comparisons = [length("N=4", "command_chars", 120.0, 60.0, 90.0)]
    figure = plot_lengths(comparisons)
    (chars,) = visible_axes(figure)
    picked, unpicked, base = bars(chars)
    handles = figure.legends[0].legend_handles
    assert handles[0].get_facecolor() == picked.get_facecolor()
    assert handles[1].get_facecolor() == unpicked.get_facecolor()
    assert handles[2].get_facecolor() == base.get_facecolor()


def test_token_cost_legend_swatches_have_the_colour_of_the_bars() -> None:
    from turnbon_graph.bench.report.plots import TokenBar, setting_colors, token_cost_figure

    token_bars = [TokenBar("N=1", 10, 0, 20, 0, 1.0), TokenBar("N=4", 40, 8, 80, 30, 4.8)]
    figure = token_cost_figure(token_bars, colors=setting_colors(["N=1", "N=4"]))
    left = figure.axes[0]
    n4_generator = bars(left)[1]  # generator bars first (N=1, N=4), then the selector's
    n4_selector = bars(left)[3]
    generator, selector = left.get_legend().legend_handles
    assert generator.get_facecolor() == n4_generator.get_facecolor()
    assert selector.get_facecolor() == n4_selector.get_facecolor()
    assert selector.get_hatch() == n4_selector.get_hatch() == "//"
