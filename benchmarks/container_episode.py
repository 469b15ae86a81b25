"""How long a container episode's steps take, under the engine this machine has.

Runs `--runs` episodes of the offline test task `tests/tb2_tasks/hello-file` (FROM the
base image `make setup-podman` builds) and times each step: the start (the image built
from cached layers, the storage volume, the container), one command (`true`), the
reference solution, a fork (the container committed, a new one started from it, the
working directory streamed into its volume; the fork then closed), `verify()` (tests/
copied in, test.sh run, the reward read) and `close()` (container, volume, image and host
folder removed). The first episode also
sweeps what dead runs left, so it is left out of the medians.

    python benchmarks/container_episode.py            # 6 episodes
    python benchmarks/container_episode.py --runs 11
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
from pathlib import Path

from turnbon_terminal import ContainerEpisode, TerminalEnvironment

TASK = Path(__file__).resolve().parents[1] / "tests" / "tb2_tasks" / "hello-file"
STEPS = ("start", "command", "solution", "fork", "verify", "close")


async def measure(runs: int) -> dict[str, list[float]]:
    env = TerminalEnvironment(TASK)
    spec = env.tasks()[0]
    times: dict[str, list[float]] = {step: [] for step in STEPS}
    for trial in range(runs):
        began = time.monotonic()
        episode = await env.start(spec, trial)
        assert isinstance(episode, ContainerEpisode)
        times["start"].append(time.monotonic() - began)
        began = time.monotonic()
        await episode.run("true")
        times["command"].append(time.monotonic() - began)
        began = time.monotonic()
        await episode.run_solution()
        times["solution"].append(time.monotonic() - began)
        began = time.monotonic()
        fork = await episode.fork()
        times["fork"].append(time.monotonic() - began)
        await fork.close()
        began = time.monotonic()
        verdict = await episode.verify()
        times["verify"].append(time.monotonic() - began)
        assert verdict.passed, verdict
        began = time.monotonic()
        await episode.close()
        times["close"].append(time.monotonic() - began)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6)
    args = parser.parse_args()
    times = asyncio.run(measure(max(args.runs, 2)))
    print(f"{args.runs - 1} episodes (the first left out: it also sweeps)")
    for step, values in times.items():
        kept = values[1:]
        print(
            f"{step:>8}: median {statistics.median(kept):.2f} s "
            f"(min {min(kept):.2f}, max {max(kept):.2f})"
        )


if __name__ == "__main__":
    main()
