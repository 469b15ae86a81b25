"""The runner on a real local Ray instance: the same run folder as the local runner,
resuming an interrupted run, a killed worker, the cluster-wide limit."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.counter_env import CounterEnvironment
from tests.helpers import requests_in_flight
from tests.integration_tests.test_runner import config, counting_model
from turnbon_graph.bench.limits import SlotBook
from turnbon_graph.bench.ray_runner import RayOptions, RegisteredEnvironment
from turnbon_graph.bench.runner import run_benchmark
from turnbon_graph.bench.runs import EPISODES_FILE, EpisodeResult, read_episodes, read_turns
from turnbon_graph.testing import StubResponse, StubServer

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed (the ray extra: pip install 'turnbon-graph[ray]')",
)
BOUND_S = 300
"""A hang guard for a test on Ray (starting workers takes seconds on a busy machine)."""
TARGETS = {f"t{i}": 5 for i in range(6)} | {"unlucky": 13}


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[Any]:
    """One local Ray instance for the module's tests; the runner joins it."""
    import ray

    ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    try:
        yield ray
    finally:
        ray.shutdown()


def comparable(results: list[EpisodeResult]) -> list[dict[str, Any]]:
    rows = [r.model_dump(exclude={"duration_s", "worker"}) for r in results]
    return sorted(rows, key=lambda r: (r["setting"], r["task"], r["trial"]))


def observations(run: Path, result: EpisodeResult) -> list[Any]:
    return [line["observation"] for line in read_turns(run, *result.key)]


async def wait_for_rows(run: Path, count: int) -> list[EpisodeResult]:
    """The run's rows once it has `count` (polled: the run writes them from this loop)."""
    while True:
        rows = read_episodes(run)
        if len(rows) >= count:
            return rows
        await asyncio.sleep(0.02)


@needs_ray
async def test_a_ray_run_writes_what_the_local_runner_writes(
    ray_instance: Any, stub: StubServer, tmp_path: Path
) -> None:
    stub.script(counting_model)
    async with asyncio.timeout(BOUND_S):
        local = await run_benchmark(
            CounterEnvironment(TARGETS), config(stub), tmp_path / "local", progress=False
        )
        on_ray = await run_benchmark(
            CounterEnvironment(TARGETS),
            config(stub),
            tmp_path / "ray",
            progress=False,
            ray=RayOptions(workers=2),
        )
    assert len(on_ray) == len(local) == 2 * 7 * 2  # settings x tasks x trials, each once
    assert comparable(on_ray) == comparable(local)
    assert {r.outcome for r in on_ray} == {"pass", "wrong_submission"}
    for result in on_ray:
        assert observations(tmp_path / "ray", result) == observations(tmp_path / "local", result)
    settings = [json.loads((tmp_path / run / "run.json").read_text()) for run in ("local", "ray")]
    assert [{k: v for k, v in s.items() if k != "created"} for s in settings] == [
        {k: v for k, v in settings[0].items() if k != "created"}
    ] * 2
    # Who ran each: this process locally; Ray worker processes (on this node) on Ray.
    assert {r.worker.pid for r in local if r.worker} == {os.getpid()}
    workers = {r.worker.pid for r in on_ray if r.worker and r.worker.node}
    assert len(on_ray) == sum(1 for r in on_ray if r.worker and r.worker.node)
    assert os.getpid() not in workers and 1 <= len(workers) <= 2


@needs_ray
async def test_an_interrupted_ray_run_resumes_with_no_duplicate(
    ray_instance: Any, stub: StubServer, tmp_path: Path
) -> None:
    stub.script(lambda r: StubResponse(body=counting_model(r), delay=0.3))
    options = RayOptions(workers=2)
    async with asyncio.timeout(BOUND_S):
        run = asyncio.create_task(
            run_benchmark(
                CounterEnvironment(TARGETS),
                config(stub, concurrency=4),
                tmp_path,
                progress=False,
                ray=options,
            )
        )
        await wait_for_rows(tmp_path, 2)
        run.cancel()  # what Ctrl-C does to `asyncio.run`'s task
        with pytest.raises(asyncio.CancelledError):
            await run
        before = (tmp_path / EPISODES_FILE).read_text().splitlines()
        assert 2 <= len(before) < 28
        stub.script(counting_model)
        results = await run_benchmark(
            CounterEnvironment(TARGETS), config(stub), tmp_path, progress=False, ray=options
        )
    keys = [r.key for r in results]
    assert len(keys) == len(set(keys)) == 28  # none lost, none twice
    assert (tmp_path / EPISODES_FILE).read_text().splitlines()[: len(before)] == before


@needs_ray
async def test_a_worker_killed_mid_run_loses_no_episode(
    ray_instance: Any, stub: StubServer, tmp_path: Path
) -> None:
    stub.script(lambda r: StubResponse(body=counting_model(r), delay=0.3))
    targets = {f"t{i}": 5 for i in range(12)}
    async with asyncio.timeout(BOUND_S):
        run = asyncio.create_task(
            run_benchmark(
                CounterEnvironment(targets),
                config(stub, n_values=[1], trials=1, concurrency=4),
                tmp_path,
                progress=False,
                ray=RayOptions(workers=2),
            )
        )
        first = (await wait_for_rows(tmp_path, 1))[0]
        # The driver gave that worker its next episode before this test could look, so
        # the worker dies with episodes in flight.
        assert first.worker is not None
        os.kill(first.worker.pid, signal.SIGKILL)
        results = await run
    keys = [r.key for r in results]
    assert len(keys) == len(set(keys)) == 12
    assert all(r.outcome == "pass" for r in results)
    pids = {r.worker.pid for r in results if r.worker}
    assert len(pids) >= 3  # the two first workers and the one that replaced the killed one


@needs_ray
async def test_the_cluster_limit_holds_across_workers(
    ray_instance: Any, stub: StubServer, tmp_path: Path
) -> None:
    delay = 0.2
    stub.script(lambda r: StubResponse(body=counting_model(r), delay=delay))
    targets = {f"t{i}": 5 for i in range(4)}
    async with asyncio.timeout(BOUND_S):
        results = await run_benchmark(
            CounterEnvironment(targets),
            config(stub, n_values=[3], trials=1, concurrency=4),
            tmp_path / "capped",
            progress=False,
            ray=RayOptions(workers=2, max_concurrency=2),
        )
        assert len(results) == 4 and requests_in_flight(stub, delay) <= 2
        stub.reset()
        stub.script(lambda r: StubResponse(body=counting_model(r), delay=delay))
        await run_benchmark(
            CounterEnvironment(targets),
            config(stub, n_values=[3], trials=1, concurrency=4),
            tmp_path / "uncapped",
            progress=False,
            ray=RayOptions(workers=2),
        )
    assert requests_in_flight(stub, delay) > 2  # without the cluster limit, more at once


def most_arrivals_within(stub: StubServer, window: float) -> int:
    """The most requests that reached the stub within any `window` seconds."""
    arrivals = sorted(r.received_at for r in stub.requests)
    return max(sum(1 for s in arrivals if t <= s < t + window) for t in arrivals)


@needs_ray
async def test_the_cluster_rate_limit_holds_across_workers(
    ray_instance: Any, stub: StubServer, tmp_path: Path
) -> None:
    # The limiter grants at most `rate` requests in any second (a sliding window), so a
    # burst of `rate` at once is allowed. A grant reaches the stub a moment later (one
    # actor round trip, then the HTTP request); as long as that lag varies by less than a
    # second, any `window` seconds of arrivals hold at most rate * window + rate. A limit
    # that held per worker instead would let the 2 workers send twice that.
    rate, window = 6, 2.0
    stub.script(counting_model)  # answered at once: the limit is what paces the run
    targets = {f"t{i}": 5 for i in range(8)}
    async with asyncio.timeout(BOUND_S):
        results = await run_benchmark(
            CounterEnvironment(targets),
            config(stub, n_values=[3], trials=1, concurrency=8),
            tmp_path,
            progress=False,
            ray=RayOptions(workers=2, rate_limit=rate),
        )
    assert len(results) == 8 and all(r.outcome == "pass" for r in results)
    assert len({r.worker.pid for r in results if r.worker}) == 2  # both workers called
    assert len(stub.requests) == 8 * 2 * 3  # the 3 candidates agree: no selector call
    assert most_arrivals_within(stub, window) <= rate * window + rate


@needs_ray
async def test_a_registered_environment_is_loaded_on_each_worker(
    ray_instance: Any, stub: StubServer, tmp_path: Path
) -> None:
    environment = RegisteredEnvironment("terminal", None)
    stub.script(environment.stub_policy(seed=0))
    task = environment.tasks()[0].id
    async with asyncio.timeout(BOUND_S):
        (result,) = await run_benchmark(
            environment,
            config(stub, n_values=[1], trials=1),
            tmp_path,
            tasks=[task],
            progress=False,
            ray=RayOptions(workers=1, worker_stub=True),
        )
    assert result.worker is not None and result.worker.node is not None
    assert result.outcome in {"pass", "wrong_submission", "agent_error", "time_limit"}
    assert not stub.requests  # the worker played its own stub, not this process's


async def test_a_lease_given_back_before_it_is_granted_frees_its_slot() -> None:
    book = SlotBook(max_concurrency=1, rate_limit=None)
    assert await book.acquire("a", "w1")
    waiting = asyncio.create_task(book.acquire("b", "w1"))
    await asyncio.sleep(0)
    book.release("b")  # its caller was cancelled while it waited
    book.release("a")
    assert await waiting is False
    assert await book.acquire("c", "w2")  # the slot is free again
    assert book.stats() == {"held": 1, "peak": 1}


async def test_a_forgotten_workers_leases_are_given_back() -> None:
    book = SlotBook(max_concurrency=3, rate_limit=None)
    assert await book.acquire("a", "dead") and await book.acquire("b", "dead")
    assert book.forget("dead") == 2
    assert await book.acquire("c", "alive") and await book.acquire("d", "alive")
    assert await book.acquire("e", "dead") is False  # a late call of the dead worker
    assert book.stats()["held"] == 2 and await book.acquire("f", "alive")


@needs_ray
def test_turnbon_bench_ray_runs_the_sweep_on_a_local_ray_instance(tmp_path: Path) -> None:
    import subprocess
    import sys

    run = tmp_path / "run"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    done = subprocess.run(
        [sys.executable, "-m", "turnbon_graph.cli", "bench", "--env", "terminal",
         "--model", "stub", "--task", "largest-file", "--n", "1", "--trials", "2",
         "--ray", "--run", str(run)],
        capture_output=True, text=True, env=env, timeout=BOUND_S, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode in (0, 1), done.stderr[-2000:]
    rows = read_episodes(run)
    assert sorted(r.trial for r in rows) == [0, 1]
    assert all(r.worker is not None and r.worker.node for r in rows)  # Ray workers ran them
    assert "2 episodes" in done.stdout
