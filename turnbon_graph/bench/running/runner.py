"""`turnbon bench`: run every task of an environment, for each N and trial, into a run folder.

`run_benchmark` is the entry point and only chooses where the episodes run: here, on this
event loop (`local_runner`), or on Ray workers (`ray_runner`). Both plan and record the
run the same way (`plan`), so the run folder is the same either way: every turn is
appended to the episode's turns file as it happens and an episode's result line is
written last, so a killed run resumes by skipping exactly the episodes that have one.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from turnbon_graph.bench.environment import Environment
from turnbon_graph.bench.running.local_runner import run_locally
from turnbon_graph.bench.running.plan import BenchConfig, plan_run
from turnbon_graph.bench.running.runs import EpisodeResult

if TYPE_CHECKING:
    from turnbon_graph.bench.running.ray_runner import RayOptions

__all__ = ["BenchConfig", "run_benchmark"]


async def run_benchmark(
    environment: Environment,
    config: BenchConfig,
    run_dir: Path,
    *,
    tasks: Sequence[str] | None = None,
    progress: bool = True,
    ray: str | RayOptions | None = None,
) -> list[EpisodeResult]:
    """Runs what the run folder does not have yet; returns every episode result of the run.

    Args:
        environment: where the tasks and their episodes come from.
        config: the run: model, settings (N and selectors, or strategies), trials,
            concurrency.
        run_dir: the run folder; a rerun with the same arguments resumes it.
        tasks: task ids to run; None: every task of `environment`.
        progress: show a progress bar.
        ray: None runs the episodes here, on this event loop; a Ray address ("local"
            starts a Ray instance on this machine's cores, "auto" or "host:port" joins a
            cluster) or a `RayOptions` runs them on Ray workers
            (`turnbon_graph.bench.running.ray_runner`), into the same run folder.

    Returns:
        Every episode result of the run, those of earlier runs into the folder included.

    Raises:
        ConfigurationError: a task id is unknown, the folder holds a run with other
            settings, or `ray` is asked for without Ray installed.
    """
    if ray is None:
        plan = plan_run(environment, config, run_dir, tasks)
        return await run_locally(plan, progress=progress)
    from turnbon_graph.bench.running.ray_runner import run_on_ray  # Ray only when a run asks for it

    return await run_on_ray(environment, config, run_dir, tasks=tasks, progress=progress, ray=ray)
