"""The exploration/exploitation decomposition against hand-computed cases: the paper's
h = (realised - mu) / (oracle - mu) with mu from the run's BoN N=1 setting, per
task-level point and aggregated as the paper aggregates, and the fitted line of its
Figure 3."""

from __future__ import annotations

import pytest

from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.stats.decomposition import (
    exploration,
    fit_line,
    single_sample,
)
from turnbon_graph.bench.strategies.record import Leaf, SearchRecord
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.records import UsageSplit

BEAM = StrategySpec(name="beam", width=2)


def plain(task: str, trial: int, passed: bool, n: int = 1) -> EpisodeResult:
    return EpisodeResult(
        task=task,
        trial=trial,
        setting=f"N={n}",
        n=n,
        outcome="pass" if passed else "wrong_submission",
        turns=3,
        usage=UsageSplit(),
        duration_s=1.0,
        strategy=StrategySpec(),
    )


def searched(task: str, trial: int, leaves: list[tuple[float, bool, bool]]) -> EpisodeResult:
    """A beam episode whose leaves are (value, passed, chosen)."""
    chosen = next(passed for _, passed, picked in leaves if picked)
    return EpisodeResult(
        task=task,
        trial=trial,
        setting="beam W=2 N=2",
        n=2,
        outcome="pass" if chosen else "wrong_submission",
        turns=3,
        usage=UsageSplit(),
        duration_s=1.0,
        strategy=BEAM,
        search=SearchRecord(
            leaves=[
                Leaf(node=f"n{i}", value=v, passed=p, ended="final answer", chosen=c)
                for i, (v, p, c) in enumerate(leaves)
            ]
        ),
    )


# Task a: N=1 passes 1 of 4 (mu 0.25). The search: in trial 0 a passing leaf exists and
# is chosen, in trial 1 a passing leaf exists and is not chosen (oracle 1, realised 0.5).
# Task b: N=1 passes 2 of 4 (mu 0.5); both trials have only failing leaves (oracle 0,
# realised 0).
SINGLE = [plain("a", t, t == 0) for t in range(4)] + [plain("b", t, t < 2) for t in range(4)]
SEARCH = [
    searched("a", 0, [(9.0, True, True), (2.0, False, False)]),
    searched("a", 1, [(8.0, False, True), (7.0, True, False), (1.0, False, False)]),
    searched("b", 0, [(5.0, False, True), (4.0, False, False)]),
    searched("b", 1, [(3.0, False, True)]),
]


def test_each_task_level_point_is_the_papers_h_with_the_n1_pass_rate_as_mu() -> None:
    split = exploration(SEARCH, SINGLE)
    assert split is not None
    a, b = split.points
    assert (a.task, a.trials, a.oracle, a.realised, a.mu) == ("a", 2, 1.0, 0.5, 0.25)
    assert a.h == pytest.approx((0.5 - 0.25) / (1.0 - 0.25))
    # Task a's leaves by value: 9 pass, 8 fail, 7 pass, 2 fail, 1 fail. Ranks of the
    # values 5,4,3,2,1; of the verdicts (ties averaged) 4.5,2,4.5,2,2: Spearman is the
    # Pearson of those ranks.
    rv, rp = [5, 4, 3, 2, 1], [4.5, 2, 4.5, 2, 2]
    mv, mp = sum(rv) / 5, sum(rp) / 5
    cov = sum((x - mv) * (y - mp) for x, y in zip(rv, rp, strict=True))
    sv = sum((x - mv) ** 2 for x in rv) ** 0.5
    sp = sum((y - mp) ** 2 for y in rp) ** 0.5
    assert a.rho_v == pytest.approx(cov / (sv * sp))
    assert (b.oracle, b.realised, b.mu) == (0.0, 0.0, 0.5)
    assert b.h == pytest.approx((0.0 - 0.5) / (0.0 - 0.5))  # both below mu: 1, as defined
    assert b.rho_v is None  # every leaf of b failed: no spread in the verdicts


def test_the_setting_aggregates_as_the_paper_does() -> None:
    split = exploration(SEARCH, SINGLE)
    assert split is not None
    # Means over tasks, then h of the means (Table 15); rho_v averaged where defined.
    oracle, realised, mu = (1.0 + 0.0) / 2, (0.5 + 0.0) / 2, (0.25 + 0.5) / 2
    assert (split.oracle, split.realised, split.mu) == (oracle, realised, mu)
    assert split.h == pytest.approx((realised - mu) / (oracle - mu))
    assert split.rho_v == split.points[0].rho_v and split.rho_tasks == 1
    assert (split.episodes, split.leaves, split.h_tasks) == (4, 8, 2)


def test_without_an_n1_setting_mu_and_h_are_undefined() -> None:
    split = exploration(SEARCH)
    assert split is not None
    assert split.mu is None and split.h is None and split.h_tasks == 0
    assert split.oracle == 0.5  # the rest does not need mu
    assert exploration(SEARCH, SINGLE[:4]).mu is None  # N=1 never ran task b


def test_the_single_sample_setting_is_plain_bon_at_n1_an_unbudgeted_one_first() -> None:
    budgeted = StrategySpec(token_budget=100)
    four = [plain("a", 0, True, n=4)]
    capped = [plain("a", 0, False).model_copy(update={"strategy": budgeted})]
    assert single_sample({"N=4": four, "beam": SEARCH}) is None
    assert single_sample({"capped": capped, "N=4": four}) == capped
    assert single_sample({"capped": capped, "N=1": SINGLE}) == SINGLE


def test_the_fitted_line_is_least_squares() -> None:
    # y = 2x + 1 exactly, then a point off the line.
    fit = fit_line([0.0, 1.0, 2.0], [1.0, 3.0, 5.0])
    assert fit is not None and (fit.slope, fit.intercept, fit.r2) == (2.0, 1.0, 1.0)
    # Points (0,0), (1,0), (2,3): mean x 1, mean y 1; Sxy = 3, Sxx = 2: slope 1.5,
    # intercept -0.5; residuals 0.5, -1, 0.5: SSE 1.5 of Syy 6, R^2 0.75.
    fit = fit_line([0.0, 1.0, 2.0], [0.0, 0.0, 3.0])
    assert fit is not None
    assert (fit.slope, fit.intercept, fit.r2) == pytest.approx((1.5, -0.5, 0.75))
    assert fit_line([1.0], [1.0]) is None and fit_line([1.0, 1.0], [0.0, 1.0]) is None


def test_the_figure_draws_the_points_the_identity_and_the_fit() -> None:
    pytest.importorskip("matplotlib")
    from turnbon_graph.bench.report.strategy_plots import headroom_against_rho_figure

    split = exploration(SEARCH, SINGLE)
    assert split is not None
    other = [p.model_copy(update={"rho_v": 0.2, "h": 0.1}) for p in split.points]
    figure = headroom_against_rho_figure({"beam": split.points, "other": other})
    (ax,) = figure.axes
    scattered = [c.get_offsets().tolist() for c in ax.collections]
    assert scattered == [[[split.points[0].rho_v, split.points[0].h]], [[0.2, 0.1], [0.2, 0.1]]]
    labels = [line.get_label() for line in ax.lines]
    assert labels[0] == "h = rho_v" and labels[1].startswith("fit: h = ")
    identity = ax.lines[0]
    assert list(identity.get_xdata()) == list(identity.get_ydata())


def test_the_earlier_path_in_metrics_still_works_with_a_warning() -> None:
    from turnbon_graph.bench.stats import decomposition, metrics

    with pytest.warns(DeprecationWarning, match="moved to turnbon_graph.bench.stats.decomp"):
        assert metrics.exploration is decomposition.exploration
    with pytest.raises(AttributeError):
        _ = metrics.no_such_name
