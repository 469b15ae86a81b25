"""The warning for a run that asks more cores than the host has."""

from __future__ import annotations

from typing import Any

from turnbon_graph.bench.running.cores import host_cores, oversubscription
from turnbon_terminal import TerminalEnvironment

CORES = host_cores()


class TwoCpuTasks:
    """An environment whose every task asks 2 CPUs."""

    def task_cpus(self, task_id: str) -> float:
        return 2.0


def test_a_run_within_the_hosts_cores_is_not_warned() -> None:
    shipped = TerminalEnvironment()  # every shipped task asks 1 CPU
    assert oversubscription(shipped, ["largest-file"], CORES) is None
    # an environment that does not say what its tasks ask waits on a model, not on cores
    assert oversubscription(object(), ["a", "b"], 10 * CORES) is None


def test_more_than_the_cores_says_by_how_much_and_what_fits() -> None:
    warning = oversubscription(TerminalEnvironment(), ["largest-file"], CORES + 1)
    assert warning == (
        f"--concurrency {CORES + 1} x up to 1 CPU a task asks {CORES + 1} cores of this "
        f"host's {CORES}: episodes share cores, run slower than alone and hit their "
        f"timeouts sooner; --concurrency {CORES} fits"
    )
    two: Any = TwoCpuTasks()
    warning = oversubscription(two, ["t"], CORES)
    assert warning is not None and f"asks {2 * CORES} cores" in warning
    assert warning.endswith(f"--concurrency {max(CORES // 2, 1)} fits")
