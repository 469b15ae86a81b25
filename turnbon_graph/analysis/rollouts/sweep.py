"""Branch rollouts over an environment's tasks, as `turnbon rollouts` runs them: what an
earlier attempt left in the run folder (a rerun resumes), the plan and its cost, then
each remaining episode in turn (`turnbon_graph.analysis.rollouts.branch_rollouts`), its
report appended to the run folder as it finishes."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turnbon_graph.analysis.rollouts.budget import (
    RolloutBudget,
    Spend,
    UsageProfile,
    estimate_cost,
    format_plan,
)
from turnbon_graph.analysis.rollouts.live import branch_rollouts
from turnbon_graph.analysis.rollouts.models import RolloutReport, read_reports, write_report
from turnbon_graph.bench.environment import Environment, TaskSpec
from turnbon_graph.errors import ConfigurationError

if TYPE_CHECKING:
    from turnbon_graph.selectors.base import Selector
    from turnbon_graph.turn.engine import TurnEngine


def selector_label(selector: str | Selector | None, model: str) -> str:
    """The name the engine's selector will have (an LLM selector is `llm:<model id>`), so
    a rerun can tell its own reports before building the engine."""
    if selector is None or isinstance(selector, str):
        return f"llm:{selector or model}"
    return selector.name


@dataclass
class RolloutProgress:
    """What the run folder holds of one rollouts command, and the episodes still to run."""

    earlier: list[RolloutReport]
    todo: list[tuple[TaskSpec, int]]
    skipped: int
    """Episodes already reported, skipped by this run."""

    def spend(self) -> Spend:
        """The earlier reports' rollouts and tokens: they count toward the budget's caps."""
        return Spend(
            rollouts=sum(len(t.rollouts) for r in self.earlier for t in r.turns),
            tokens=sum(r.tokens for r in self.earlier),
        )


def reports_of(
    run_dir: Path, environment: str, n: int, selector: str, budget: RolloutBudget
) -> list[RolloutReport]:
    """The reports in `run_dir` that the same command made (same environment, N,
    selector and budget)."""
    return [
        r
        for r in read_reports(run_dir)
        if (r.environment, r.n, r.selector, r.budget) == (environment, n, selector, budget)
    ]


def progress(
    run_dir: Path,
    environment: Environment,
    tasks: Sequence[TaskSpec],
    trials: int,
    *,
    n: int,
    selector: str,
    budget: RolloutBudget,
) -> RolloutProgress:
    """The episodes of `tasks` x `trials` that `run_dir` has no report of yet."""
    earlier = reports_of(run_dir, environment.name, n, selector, budget)
    done = {(r.task, r.trial) for r in earlier}
    todo = [
        (task, trial) for task in tasks for trial in range(trials) if (task.id, trial) not in done
    ]
    return RolloutProgress(earlier, todo, len(tasks) * trials - len(todo))


def plan(
    budget: RolloutBudget,
    n: int,
    todo: Sequence[tuple[TaskSpec, int]],
    tasks: Sequence[TaskSpec],
    profile: Path | None,
) -> str:
    """What the run will start, at most: rollouts, and tokens when `profile` (a bench run
    folder of this model) is given."""
    max_turns = max(t.max_turns for t in tasks)
    if profile is not None:
        try:
            usage = UsageProfile.from_run(profile)
        except (FileNotFoundError, ValueError) as exc:
            raise ConfigurationError(
                f"--profile {profile}: {exc}; pass a `turnbon bench` run folder with "
                "finished episodes"
            ) from None
        estimate = estimate_cost(
            budget, n=n, profile=usage, episodes=len(todo), max_turns=max_turns
        )
        return format_plan(estimate)
    # Without a recorded run the episode length is unknown: count up to the turn limit.
    usage = UsageProfile(episode_turns=max_turns, tokens_per_turn=0)
    e = estimate_cost(budget, n=n, profile=usage, episodes=len(todo), max_turns=max_turns)
    every = budget.turns is None and budget.sample_turns is None
    lines = [
        f"Branch rollouts: {e.episodes} episode(s) x {e.turns_per_episode:g} turn(s) x "
        f"{e.candidates} candidates x {e.rollouts_per_candidate} rollout(s) -> at most "
        f"{e.rollouts} rollouts"
        + (f" (if every episode lasts the tasks' limit of {max_turns} turns)" if every else ""),
        "Tokens: not estimated without a recorded run; --profile RUN (a `turnbon bench` run "
        "folder of this model) estimates them.",
    ]
    if e.limited_by:
        lines.append(
            f"Capped by {', '.join(e.limited_by)}: no new rollout starts once it is spent."
        )
    return "\n".join(lines)


async def branch_all(
    environment: Environment,
    engine: TurnEngine,
    todo: Sequence[tuple[TaskSpec, int]],
    budget: RolloutBudget,
    spend: Spend,
    *,
    concurrency: int,
    run_dir: Path,
) -> None:
    """Each episode in turn, its report appended to the run folder as it finishes."""
    bar = ReportProgress(len(todo), spend)
    try:
        for task, trial in todo:
            report = await branch_rollouts(
                environment,
                engine,
                task,
                trial=trial,
                budget=budget,
                concurrency=concurrency,
                spend=spend,
            )
            bar.record(run_dir, report)
    finally:
        bar.close()


class ReportProgress:
    """A tqdm bar of the episodes, with the turns branched, the rollouts and the tokens in
    its postfix (counted from `earlier`, the spend before this run); `record` writes a
    finished episode's report to the run folder and counts it."""

    def __init__(self, total: int, earlier: Spend) -> None:
        from tqdm.auto import tqdm

        self._bar: Any = tqdm(total=total, unit="episode", dynamic_ncols=True)
        self._branched = 0
        self._rollouts, self._tokens = earlier.rollouts, earlier.tokens

    def record(self, run_dir: Path, report: RolloutReport) -> None:
        write_report(run_dir, report)
        self._branched += len(report.turns)
        self._rollouts += sum(len(t.rollouts) for t in report.turns)
        self._tokens += report.tokens
        self._bar.set_postfix(
            branched_turns=self._branched,
            rollouts=self._rollouts,
            tokens=self._tokens,
            refresh=False,
        )
        self._bar.update(1)

    def close(self) -> None:
        self._bar.close()
