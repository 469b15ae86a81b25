"""Branch rollouts on Ray (`turnbon rollouts --ray`): each episode, with all its rollouts,
on a Ray worker; the reports written here.

An episode's forks copy its working directory, so an episode and its rollouts run on one
worker: each worker runs one episode at a time, `concurrency` rollouts at once, and the
workers run their episodes side by side. The driver (this process) plans the run as the
local path does (`sweep.progress`: what the run folder already has is skipped) and is the
only writer of `rollouts.jsonl`, so resuming with `--run DIR` and Ctrl-C behave as they do
locally. The budget's caps (`--max-rollouts`, `--max-tokens`) hold for the whole run: the
workers count against one `Spend` held by a Ray actor (`LedgerOnRay`), started from what
the earlier reports spent. A worker that dies loses no finished report; its episode is run
again from the start (the rollouts it had started stay counted against the caps). The
workers, the cluster limits and the dead-worker handling are the benchmark runner's
(`turnbon_graph.bench.running.ray_runner`).
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import TYPE_CHECKING, Any

from turnbon_graph.analysis.rollouts.budget import Ledger, LedgerOnRay, RolloutBudget, Spend
from turnbon_graph.analysis.rollouts.live import branch_rollouts
from turnbon_graph.analysis.rollouts.models import RolloutReport
from turnbon_graph.analysis.rollouts.sweep import ReportProgress
from turnbon_graph.bench.environment import Environment, TaskSpec
from turnbon_graph.bench.running.ray_runner import (
    RayOptions,
    WorkerPool,
    import_ray,
    ray_session,
    worker_engine,
    worker_options,
)

if TYPE_CHECKING:
    from turnbon_graph.bench.running.limits import ClusterLimit
    from turnbon_graph.selectors.base import Selector
    from turnbon_graph.turn.generator import ModelPool


class RolloutWorker:
    """A Ray async actor's state: the environment and one engine; `run` is one episode's
    branch rollouts, its report as JSON."""

    def __init__(
        self,
        environment: Environment,
        engine: tuple[ModelPool, int, str | Selector | None, dict[str, Any]],
        budget: RolloutBudget,
        spend: Ledger,
        concurrency: int,
        stub: bool,
        limit: ClusterLimit | None,
    ) -> None:
        self._stack = ExitStack()
        self.environment = environment
        model, n, selector, engine_options = engine
        options = worker_options(environment, engine_options, stub, self._stack)
        self.engine = worker_engine(model, n, selector, options, limit)
        self.budget = budget
        self.spend = spend
        self.concurrency = concurrency

    async def run(self, task: TaskSpec, trial: int) -> str:
        report = await branch_rollouts(
            self.environment,
            self.engine,
            task,
            trial=trial,
            budget=self.budget,
            concurrency=self.concurrency,
            spend=self.spend,
        )
        return report.model_dump_json()


async def branch_all_on_ray(
    environment: Environment,
    engine: tuple[ModelPool, int, str | Selector | None, dict[str, Any]],
    todo: Sequence[tuple[TaskSpec, int]],
    budget: RolloutBudget,
    spend: Spend,
    *,
    concurrency: int,
    run_dir: Path,
    ray: str | RayOptions = "local",
) -> None:
    """`sweep.branch_all` on Ray workers (see the module). `engine`: the `TurnEngine.
    from_options` model, N, selector and options each worker builds its engine from;
    `spend`: what earlier reports of the run spent."""
    options = ray if isinstance(ray, RayOptions) else RayOptions(address=ray)
    ray_module = import_ray()
    if not todo:
        return
    async with ray_session(ray_module, options.address):
        ledger = ray_module.remote(Spend).remote(spend.rollouts, spend.tokens)
        worker_args = (environment, engine, budget, LedgerOnRay(ledger), concurrency)
        pool = WorkerPool(ray_module, RolloutWorker, (*worker_args, options.worker_stub), options)
        bar = ReportProgress(len(todo), spend)

        async def record(answer: str) -> None:
            bar.record(run_dir, RolloutReport.model_validate_json(answer))

        try:
            await pool.run(todo, record)
        finally:
            bar.close()
            pool.close()
            ray_module.kill(ledger, no_restart=True)
