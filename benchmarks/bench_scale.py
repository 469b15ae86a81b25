"""One sweep three ways: the local runner, Ray on this machine, Ray with one worker.

The sweep is `turnbon bench`'s: every task of a small environment for N=1 and N=4 and
each trial, into a run folder, on the loopback stub answering every call after
`--latency` (50 ms). Each episode takes `--steps` tool turns whose candidates differ (so
the LLM selector runs at N=4), then answers. The three ways run in one process, one after
another, each into a fresh run folder; Ray starts once before the first Ray run (its
start-up is not timed; starting the worker actors is). Reports episodes/s and the ratios.

    python benchmarks/bench_scale.py                  # 24 tasks x 2 trials x N=1,4
    python benchmarks/bench_scale.py --tasks 40 --concurrency 40
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from langchain_core.tools import BaseTool, tool

from turnbon_graph.bench.environment import TaskSpec, Verdict
from turnbon_graph.bench.ray_runner import RayOptions, import_ray
from turnbon_graph.bench.runner import BenchConfig, run_benchmark
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


def policy(steps: int, latency: float) -> Any:
    counter = itertools.count()

    def answer(request: CapturedRequest) -> StubResponse:
        if is_selector_request(request):
            body = chat_completion(json.dumps({"reason": "r", "selected_index": 0}))
        elif sum(m["role"] == "tool" for m in (request.body or {})["messages"]) >= steps:
            body = chat_completion("done")
        else:
            body = chat_completion(tool_calls=[tool_call("step", {"note": str(next(counter))})])
        return StubResponse(body=body, delay=latency)

    return answer


async def sweep(args: argparse.Namespace, base_url: str, ray: RayOptions | None) -> float:
    config = BenchConfig(
        model="openai/stub",
        n_values=[1, 4],
        trials=args.trials,
        concurrency=args.concurrency,
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=24)
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3, help="tool turns per episode")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per call")
    parser.add_argument("--concurrency", type=int, default=20, help="episodes at once")
    args = parser.parse_args()
    ray = import_ray()
    episodes = args.tasks * args.trials * 2
    with StubServer() as stub:
        stub.script(policy(args.steps, args.latency))
        rows: dict[str, float] = {"local runner": asyncio.run(sweep(args, stub.base_url, None))}
        ray.init(num_cpus=os.cpu_count(), include_dashboard=False, configure_logging=False)
        try:
            ways = {"Ray, this machine": RayOptions(), "Ray, 1 worker": RayOptions(workers=1)}
            for name, options in ways.items():
                rows[name] = asyncio.run(sweep(args, stub.base_url, options))
        finally:
            ray.shutdown()
    print(
        f"{episodes} episodes ({args.tasks} tasks x {args.trials} trials x N=1,4), "
        f"{args.steps + 1} turns each, {args.latency * 1000:g} ms a call, "
        f"{args.concurrency} at once, {os.cpu_count()} cores"
    )
    base = episodes / rows["local runner"]
    for name, wall in rows.items():
        rate = episodes / wall
        print(f"  {name:<18} {wall:7.2f} s  {rate:6.2f} episodes/s  {rate / base:5.2f}x local")


if __name__ == "__main__":
    main()
