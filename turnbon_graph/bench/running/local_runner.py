"""The benchmark runner on this event loop: a run's episodes concurrently, in this process.

Episodes run up to `BenchConfig.concurrency` at once, each in its own environment episode
(its own working directory, tools and verifier), with a progress bar. Only one episode's
line is written at a time, each once its episode is over (`plan.record_episode`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

from turnbon_graph.bench.environment import Environment, TaskSpec
from turnbon_graph.bench.running.plan import (
    BenchConfig,
    plan_run,
    record_episode,
    run_setting_episode,
    save_estimates,
)
from turnbon_graph.bench.running.progress import Progress
from turnbon_graph.bench.running.runs import EpisodeResult, Setting, read_episodes


async def run_locally(
    environment: Environment,
    config: BenchConfig,
    run_dir: Path,
    *,
    tasks: Sequence[str] | None = None,
    progress: bool = True,
) -> list[EpisodeResult]:
    """`run_benchmark` here, on this event loop; every episode result of the run."""
    plan = plan_run(environment, config, run_dir, tasks)
    engines = plan.engines
    bar = Progress(total=len(plan.todo), enabled=progress)
    limit = asyncio.Semaphore(config.concurrency)
    lock = asyncio.Lock()

    async def one(task: TaskSpec, trial: int, setting: Setting) -> None:
        async with limit:
            engine = engines.get(setting.n)  # none for a reference agent
            result = await run_setting_episode(
                environment, engine, config, task, trial, setting, run_dir
            )
        async with lock:
            record_episode(run_dir, result, bar)
            await save_estimates(run_dir, config)

    try:
        await asyncio.gather(*(one(*episode) for episode in plan.todo))
    finally:
        bar.close()
    return read_episodes(run_dir)
