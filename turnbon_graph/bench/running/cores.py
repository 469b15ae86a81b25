"""Whether a run asks more CPUs than the host has.

A run of `--concurrency C` episodes, each of a task that asks up to `cpus` (a terminal
task's `[environment] cpus`), wants C x cpus cores. On fewer, episodes share cores: each
runs slower than it would alone, its timeouts come sooner in work done, and its
wall-clock numbers are not comparable with a run that had the cores. The rule: keep
C x cpus at most the host's cores (`os.cpu_count()`), or say that the run was
oversubscribed. An environment says what a task asks through `task_cpus(task_id)`; one
that does not (its episodes wait on a model, not on cores) is never warned about.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # only the standard library at run time: turnbon_local reads host_cores
    from turnbon_graph.bench.environment import Environment


def oversubscription(
    environment: Environment, task_ids: Sequence[str], concurrency: int
) -> str | None:
    """The warning for a run that asks more cores than the host has, or None.

    Args:
        environment: the run's environment.
        task_ids: the tasks the run takes.
        concurrency: the episodes at once.

    Returns:
        One line to print on stderr, or None when the host has the cores.
    """
    cpus_of = getattr(environment, "task_cpus", None)
    if not callable(cpus_of):
        return None
    cpus = max((float(cpus_of(t)) for t in task_ids), default=1.0)
    cores = host_cores()
    wanted = concurrency * cpus
    if wanted <= cores:
        return None
    fits = max(int(cores // cpus), 1)
    return (
        f"--concurrency {concurrency} x up to {cpus:g} CPU a task asks {wanted:g} cores of "
        f"this host's {cores}: episodes share cores, run slower than alone and hit their "
        f"timeouts sooner; --concurrency {fits} fits"
    )


def host_cores() -> int:
    """The cores this process may run on (its CPU affinity, else the machine's count)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1
