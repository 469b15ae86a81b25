"""The exploration/exploitation decomposition of "Test-Time Scaling in the Wild"
(Equation 4, Tables 15 and 30, Figure 3), over a setting's verified leaves.

A *task-level point* is one setting on one task, over its trials (the paper's points are
one generator, value model and task each). Per point:

- naive oracle: the share of trials in which some finished leaf passed. It is the paper's
  naive oracle (the best leaf observed, no bias correction), and it counts finished
  leaves only: a trajectory the search pruned while it was still live was never verified,
  so a passing one among them is missed and the oracle is a lower bound;
- realised: the share of trials whose chosen leaf passed;
- mu: the BoN N=1 pass rate on the task, the single-sample mean, from the run's own
  N=1 setting (`single_sample`); without one, mu and h are undefined;
- h = (realised - mu) / (oracle - mu), undefined where oracle equals mu;
- rho_v: Spearman between the leaves' values and verdicts over the task's leaves.

Per setting, as the paper aggregates: oracle, realised and mu are the means over tasks,
h is (realised - mu) / (oracle - mu) of those means (its Table 15), and rho_v is the mean
of the task-level rho_v where defined (its Table 30, "computed at task level before
aggregation"). The task-level (rho_v, h) points are what its Figure 3 plots.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence

from pydantic import BaseModel, Field

from turnbon_graph.analysis.rollouts.statistics import headroom, spearman
from turnbon_graph.bench.running.runs import EpisodeResult
from turnbon_graph.bench.stats.metrics import per_task
from turnbon_graph.bench.strategies.record import Leaf
from turnbon_graph.bench.strategies.spec import StrategySpec


class TaskPoint(BaseModel):
    """One setting on one task, over the trials whose leaves were verified."""

    task: str
    trials: int
    oracle: float
    """The share of trials in which some leaf passed (the naive oracle)."""
    realised: float | None
    """The share of trials whose chosen leaf passed; None when no chosen leaf was judged."""
    mu: float | None = None
    """The task's BoN N=1 pass rate; None without an N=1 setting that ran the task."""
    h: float | None = None
    """(realised - mu) / (oracle - mu); None where undefined."""
    rho_v: float | None = None
    """Spearman between the task's leaves' values and verdicts; None with fewer than two
    scored leaves or no spread on a side."""


class Exploration(BaseModel):
    """A setting's decomposition: its task-level points and their aggregates."""

    episodes: int
    """Episodes with at least one verified leaf."""
    leaves: int
    """Verified leaves in all."""
    oracle: float | None = None
    """The naive oracle, averaged over tasks."""
    realised: float | None = None
    """The realised pass rate, averaged over tasks."""
    mu: float | None = None
    """The BoN N=1 pass rate, averaged over the same tasks; None without an N=1 setting."""
    h: float | None = None
    """Headroom capture of the setting: (realised - mu) / (oracle - mu) of the means."""
    h_tasks: int = 0
    """Task-level points whose own h is defined (the figure's points)."""
    rho_v: float | None = None
    """The task-level rho_v, averaged where defined."""
    rho_tasks: int = 0
    """Task-level points whose rho_v is defined."""
    verify_s: float | None = None
    """Mean verifier seconds per episode spent on its leaves other than the chosen one."""
    points: list[TaskPoint] = Field(default_factory=list)


def leaves_of(result: EpisodeResult) -> list[Leaf] | None:
    """The episode's leaves: a search's as recorded; a plain bon attempt's one trajectory,
    when the verifier judged it; None when unknown (a search row written before leaves
    were recorded).

    Args:
        result: one episode's result.

    Returns:
        The leaves, an empty list for an attempt the verifier did not judge, or None.
    """
    if result.search is not None:
        return result.search.leaves
    if result.strategy is not None and result.strategy.searches:
        return None
    if result.outcome not in ("pass", "wrong_submission"):
        return []
    return [Leaf(node="", passed=result.passed, ended="final answer", chosen=True)]


def single_sample(groups: Mapping[str, Sequence[EpisodeResult]]) -> list[EpisodeResult] | None:
    """The run's BoN N=1 setting (plain bon, one candidate a turn; one without a token
    budget first): what mu is measured on; None when the run has none.

    Args:
        groups: the run's episodes by setting.

    Returns:
        That setting's episodes, or None.
    """
    singles = [
        (spec.token_budget is not None, list(results))
        for results in groups.values()
        if results
        and results[0].n == 1
        and (spec := results[0].strategy or StrategySpec()).name == StrategySpec().name
    ]
    return min(singles, key=lambda item: item[0])[1] if singles else None


def exploration(
    results: Iterable[EpisodeResult], single: Iterable[EpisodeResult] | None = None
) -> Exploration | None:
    """The decomposition of `results` (one setting's episodes).

    Args:
        results: one setting's episode results.
        single: the run's BoN N=1 episodes (`single_sample`), for mu and h; None: mu
            and h are undefined.

    Returns:
        The decomposition, or None when none of the episodes recorded its leaves.
    """
    known = [(r, leaves) for r in results if (leaves := leaves_of(r)) is not None]
    if not known:
        return None
    mus = {t: c / n for t, (n, c) in per_task(single).items()} if single is not None else {}
    by_task: dict[str, list[list[Leaf]]] = defaultdict(list)
    for result, leaves in known:
        judged = [leaf for leaf in leaves if leaf.passed is not None]
        if judged:
            by_task[result.task].append(judged)
    points = [_point(task, trials, mus.get(task)) for task, trials in sorted(by_task.items())]
    oracle = _mean([p.oracle for p in points])
    realised = _mean([p.realised for p in points if p.realised is not None])
    # Only an N=1 setting that ran every one of these tasks gives a like-for-like mean.
    task_mus = [p.mu for p in points]
    mu = _mean([m for m in task_mus if m is not None]) if None not in task_mus else None
    rhos = [p.rho_v for p in points if p.rho_v is not None]
    searched = [r.search for r, _ in known if r.search is not None]
    return Exploration(
        episodes=sum(len(trials) for trials in by_task.values()),
        leaves=sum(len(leaves) for trials in by_task.values() for leaves in trials),
        oracle=oracle,
        realised=realised,
        mu=mu,
        h=headroom(realised, oracle, mu),
        h_tasks=sum(1 for p in points if p.h is not None),
        rho_v=_mean(rhos),
        rho_tasks=len(rhos),
        verify_s=_mean([s.verify_s for s in searched]),
        points=points,
    )


def _point(task: str, trials: Sequence[Sequence[Leaf]], mu: float | None) -> TaskPoint:
    chosen = [float(bool(c.passed)) for leaves in trials for c in leaves if c.chosen]
    oracle = _mean([float(any(leaf.passed for leaf in leaves)) for leaves in trials])
    assert oracle is not None  # every trial has a judged leaf
    realised = _mean(chosen)
    scored = [(leaf.value, float(bool(leaf.passed))) for ls in trials for leaf in ls]
    pairs = [(v, p) for v, p in scored if v is not None]
    return TaskPoint(
        task=task,
        trials=len(trials),
        oracle=oracle,
        realised=realised,
        mu=mu,
        h=headroom(realised, oracle, mu),
        rho_v=spearman([v for v, _ in pairs], [p for _, p in pairs]),
    )


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


class LineFit(BaseModel):
    """A least-squares line y = slope * x + intercept, and its R^2."""

    slope: float
    intercept: float
    r2: float | None
    """The share of y's variance the line explains; None when y does not vary."""


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> LineFit | None:
    """The ordinary least-squares line through (xs, ys), as the paper fits h on rho_v
    (its Figure 3: y = 1.198 x - 0.011, R^2 = 0.66).

    Args:
        xs: the points' x (rho_v).
        ys: their y (h).

    Returns:
        The line, or None with fewer than two points or no spread in x.
    """
    count = len(xs)
    if count < 2 or count != len(ys):
        return None
    mean_x, mean_y = sum(xs) / count, sum(ys) / count
    sxx = sum((x - mean_x) ** 2 for x in xs)
    if sxx == 0:
        return None
    sxy = sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = mean_y - slope * mean_x
    syy = sum((y - mean_y) ** 2 for y in ys)
    residual = sum((y - slope * x - intercept) ** 2 for x, y in zip(xs, ys, strict=True))
    return LineFit(slope=slope, intercept=intercept, r2=1 - residual / syy if syy else None)
