"""One sweep three ways: the local runner, Ray on this machine, Ray with one worker.

The sweep is `turnbon bench`'s: every task of a small environment for N=1 and N=4 and
each trial, into a run folder, on a loopback stub in a process of its own. Each episode
takes `--steps` tool turns whose candidates differ (so the LLM selector runs at N=4),
then answers. The three ways run one after another, each into a fresh run folder; Ray
starts once, after the local runs (its start-up is not timed; starting the worker actors,
each importing LiteLLM, is). Two workloads: turn-bound (50 ms calls, every episode at
once: the client's CPU sets the pace) and a CPU-light heavy tail (log-normal calls of
median 0.5 s, 16 episodes at once: Ray's overhead against an episode's length). Reports
turns/s, its ratio to the local runner, and CPU per turn: every process's CPU on the
machine but the stub's (driver, workers, Ray's own), so run it on an otherwise idle
machine.

    python benchmarks/bench_scale.py                  # 96 tasks x 2 trials x N=1,4
    python benchmarks/bench_scale.py --tasks 24       # shorter: worker start-up weighs more
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from child_process import Process, answer  # beside this script
from langchain_core.tools import BaseTool, tool

from turnbon_graph.bench.environment import TaskSpec, Verdict
from turnbon_graph.bench.running.ray_runner import RayOptions, import_ray
from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)


class StepEpisode:
    def __init__(self) -> None:
        self.steps = 0

        @tool
        def step(note: str) -> str:
            """Record a step."""
            self.steps += 1
            return f"noted {note}"

        self._tools: list[BaseTool] = [step]

    @property
    def tools(self) -> Sequence[BaseTool]:
        return self._tools

    async def verify(self) -> Verdict:
        return Verdict(passed=self.steps > 0)

    async def close(self) -> None:
        pass


class StepEnvironment:
    """Tasks that each take a few tool turns (pickled by value to the Ray workers)."""

    name = "steps"

    def __init__(self, count: int) -> None:
        self.count = count

    def tasks(self) -> Sequence[TaskSpec]:
        return [TaskSpec(id=f"t{i}", instruction=f"task {i}") for i in range(self.count)]

    async def start(self, task: TaskSpec, trial: int) -> StepEpisode:
        return StepEpisode()


def policy(steps: int, latency: float, tail: float, seed: int = 0) -> Any:
    """Tool turns until `steps`, then an answer; each call waits `latency`, or with
    `tail` a log-normal draw of that median (sigma `tail`, at most 20x the median)."""
    counter = itertools.count()
    draws = random.Random(seed)

    def answer(request: CapturedRequest) -> StubResponse:
        if is_selector_request(request):
            body = chat_completion(json.dumps({"reason": "r", "selected_index": 0}))
        elif sum(m["role"] == "tool" for m in (request.body or {})["messages"]) >= steps:
            body = chat_completion("done")
        else:
            body = chat_completion(tool_calls=[tool_call("step", {"note": str(next(counter))})])
        delay = min(latency * draws.lognormvariate(0, tail), 20 * latency) if tail else latency
        return StubResponse(body=body, delay=delay)

    return answer


def serve(steps: int, latency: float, tail: float) -> None:
    """The stub in a process of its own (so that it takes no CPU from the runner under
    test): prints its URL, serves until stdin closes."""
    with StubServer() as stub:
        stub.script(policy(steps, latency, tail))
        answer(stub.base_url)
        sys.stdin.read()


def busy_cpu_s() -> float:
    """CPU seconds this machine has spent busy since boot (every process, /proc/stat)."""
    with open("/proc/stat") as stat:
        fields = [int(v) for v in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def sweep(
    args: argparse.Namespace, base_url: str, ray: RayOptions | None, concurrency: int
) -> float:
    """One sweep's wall time, after checking every episode finished and passed."""
    config = BenchConfig(
        model="openai/stub",
        n_values=[1, 4],
        trials=args.trials,
        concurrency=concurrency,
        engine_options={"completion_kwargs": {"api_base": base_url, "api_key": "sk-scale"}},
    )
    with tempfile.TemporaryDirectory(prefix="bench-scale-") as run:
        started = time.perf_counter()
        results = await run_benchmark(
            StepEnvironment(args.tasks), config, Path(run), progress=False, ray=ray
        )
        wall = time.perf_counter() - started
    expected = args.tasks * args.trials * 2
    if len(results) != expected or any(r.outcome != "pass" for r in results):
        failed = next((r for r in results if r.outcome != "pass"), None)
        raise SystemExit(
            f"the sweep did not finish cleanly: {len(results)}/{expected} episodes, "
            f"first failure: {failed and (failed.outcome, failed.error)}"
        )
    return wall


WORKLOADS = {
    # name: (latency, tail sigma, episodes at once; None: all). With every episode at once
    # the client's CPU, not the stub, sets the pace; 16 at once leaves the CPU mostly idle.
    "turn-bound (50 ms calls, every episode at once)": (0.05, 0.0, None),
    "CPU-light heavy tail (log-normal calls, median 0.5 s, sigma 1; 16 at once)": (0.5, 1.0, 16),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=96)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3, help="tool turns per episode")
    parser.add_argument("--serve", nargs=3, type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(int(args.serve[0]), args.serve[1], args.serve[2])
        return
    ray = import_ray()
    episodes = args.tasks * args.trials * 2
    turns = episodes * (args.steps + 1)
    print(
        f"{episodes} episodes ({args.tasks} tasks x {args.trials} trials x N=1,4), "
        f"{args.steps + 1} turns each, {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.1f}, {time.strftime('%Y-%m-%d %H:%M')}"
    )
    stubs = {
        name: Process(
            [sys.executable, __file__, "--serve", str(args.steps), str(latency), str(tail)]
        )
        for name, (latency, tail, _) in WORKLOADS.items()
    }
    urls = {name: stub.first_line() for name, stub in stubs.items()}
    ways = {"local runner": None, "Ray, this machine": RayOptions()}
    ways["Ray, 1 worker"] = RayOptions(workers=1)
    rows: dict[tuple[str, str], tuple[float, float]] = {}
    try:
        for name, options in ways.items():
            if options is not None and not ray.is_initialized():  # after the local runs
                ray.init(num_cpus=os.cpu_count(), include_dashboard=False, configure_logging=False)
            for workload, stub in stubs.items():
                cpu, stub_cpu = busy_cpu_s(), process_cpu_s(stub.pid)
                at_once = WORKLOADS[workload][2] or episodes
                wall = asyncio.run(sweep(args, urls[workload], options, at_once))
                # every process's CPU but the stub's: the driver, the workers, Ray's own
                rows[workload, name] = (
                    wall,
                    busy_cpu_s() - cpu - (process_cpu_s(stub.pid) - stub_cpu),
                )
    finally:
        ray.shutdown()
        for stub in stubs.values():
            stub.close()
    for workload in WORKLOADS:
        print(workload)
        print(f"  {'':<18} {'wall s':>7} {'turns/s':>8} {'vs local':>9} {'CPU ms/turn':>12}")
        base = turns / rows[workload, "local runner"][0]
        for name in ways:
            wall, used = rows[workload, name]
            print(
                f"  {name:<18} {wall:7.2f} {turns / wall:8.1f} {turns / wall / base:8.2f}x "
                f"{used / turns * 1000:12.1f}"
            )


if __name__ == "__main__":
    main()
