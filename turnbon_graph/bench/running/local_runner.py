"""The benchmark runner on this event loop: a run's episodes concurrently, in this process.

Episodes run up to `BenchConfig.concurrency` at once, each in its own environment episode
(its own working directory, tools and verifier), with a progress bar. Only one episode's
line is written at a time, each once its episode is over (`plan.record_episode`).
"""

from __future__ import annotations

import asyncio

from turnbon_graph.bench.environment import TaskSpec
from turnbon_graph.bench.running.plan import (
    RunPlan,
    record_episode,
    run_setting_episode,
    save_estimates,
)
from turnbon_graph.bench.running.progress import Progress
from turnbon_graph.bench.running.runs import EpisodeResult, Setting, read_episodes


async def run_locally(plan: RunPlan, *, progress: bool = True) -> list[EpisodeResult]:
    """`run_benchmark` here, on this event loop: the plan's episodes; every episode result
    of the run."""
    run_dir, config = plan.run_dir, plan.config
    bar = Progress(total=len(plan.todo), enabled=progress)
    limit = asyncio.Semaphore(config.concurrency)
    lock = asyncio.Lock()

    async def one(task: TaskSpec, trial: int, setting: Setting) -> None:
        async with limit:
            engine = plan.engines.get(setting.n)  # none for a reference agent
            result = await run_setting_episode(
                plan.environment, engine, config, task, trial, setting, run_dir
            )
        async with lock:
            record_episode(run_dir, result, bar)
            await save_estimates(run_dir, config)

    try:
        await asyncio.gather(*(one(*episode) for episode in plan.todo))
    finally:
        bar.close()
    return read_episodes(run_dir)
