"""The runner on a real local Ray instance: the same run folder as the local runner,
resuming an interrupted run, a killed worker (of bench and of rollouts), the cluster-wide
limit, and a two-node cluster on this machine."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.container_tasks import needs_podman, tb2_task
from tests.counter_env import CounterEnvironment
from tests.helpers import episode_lines, requests_in_flight
from tests.integration_tests.test_runner import config, counting_model
from turnbon_graph.bench.running.limits import SlotBook
from turnbon_graph.bench.running.ray_runner import RayOptions, RegisteredEnvironment
from turnbon_graph.bench.running.runner import BenchConfig, run_benchmark
from turnbon_graph.bench.running.runs import EPISODES_FILE, EpisodeResult, read_episodes, read_turns
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.testing import StubResponse, StubServer
from turnbon_terminal import TerminalEnvironment

needs_ray = pytest.mark.skipif(
    importlib.util.find_spec("ray") is None,
    reason="Ray is not installed (the ray extra: make setup-test)",
)
BOUND_S = 300
"""A hang guard for a test on Ray (starting workers takes seconds on a busy machine)."""
TARGETS = {f"t{i}": 5 for i in range(6)} | {"unlucky": 13}


RUN_MARK = "TURNBON_RAY_TEST_RUN"
"""An environment variable a test sets on what starts Ray: every process started from it
(raylet, GCS, workers) inherits it, however it is re-parented when its parent exits."""


def processes_of(mark: str) -> list[str]:
    """The live processes (not this one) whose environment has `RUN_MARK=mark`: pid and
    command line of each (read from /proc: Linux, as Ray's CI is)."""
    if not Path("/proc/self/environ").exists():
        pytest.skip("needs /proc to list processes by their environment")
    needle = f"{RUN_MARK}={mark}".encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            if needle not in (proc / "environ").read_bytes().split(b"\0"):
                continue  # a zombie's environ reads empty: it has exited
            command = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to read
            continue
        found.append(f"{proc.name} {command.strip()}")
    return found


def left_behind(mark: str, grace_s: float = 30.0) -> list[str]:
    """`processes_of(mark)` once they had `grace_s` to exit (a hang guard: shutting Ray down
    is asynchronous, a killed process takes a moment to go)."""
    deadline = time.monotonic() + grace_s
    while (found := processes_of(mark)) and time.monotonic() < deadline:
        time.sleep(0.5)
    return found


@pytest.fixture(scope="module")
def ray_instance() -> Iterator[Any]:
    """One local Ray instance for the module's tests; the runner joins it. Shut down after
    them, and then none of its processes may be left."""
    import ray

    mark = uuid.uuid4().hex
    with pytest.MonkeyPatch.context() as patch:  # only Ray's processes inherit the mark
        patch.setenv(RUN_MARK, mark)
        ray.init(num_cpus=2, include_dashboard=False, configure_logging=False)
    assert processes_of(mark)  # the mark reached Ray's processes (raylet, GCS)
    try:
        yield ray
    finally:
        ray.shutdown()
    assert left_behind(mark) == [], "the tests' Ray instance left processes behind"


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
    keys = [r.key for r in episode_lines(tmp_path)]
    assert len(keys) == len(set(keys)) == len(results) == 28  # none lost, none twice
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
    keys = [r.key for r in episode_lines(tmp_path)]
    assert len(keys) == len(set(keys)) == len(results) == 12
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


RAY_TASKS = ["largest-file", "greet-script", "sales-total", "word-frequency"]


@needs_ray
def test_turnbon_bench_ray_runs_the_local_runners_episodes_resumes_and_leaves_no_ray_behind(
    tmp_path: Path,
) -> None:
    command = [sys.executable, "-m", "turnbon_graph.cli", "bench", "--env", "terminal",
               "--model", "stub", "--n", "1", "2", "--trials", "1",
               "--task", *RAY_TASKS]  # fmt: skip
    on_ray = [*command, "--ray", "--run", str(tmp_path / "ray")]
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    mark = uuid.uuid4().hex
    seen: set[str] = set()  # the command lines of the processes the Ray run started
    with (
        (tmp_path / "ray.out").open("w") as out,
        (tmp_path / "ray.err").open("w") as err,
        subprocess.Popen(
            on_ray, stdout=out, stderr=err, env={**env, RUN_MARK: mark}, cwd=tmp_path
        ) as driver,
        subprocess.Popen(  # the same command without --ray, meanwhile
            [*command, "--run", str(tmp_path / "local")],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path,
        ) as local,
    ):  # fmt: skip
        deadline = time.monotonic() + BOUND_S
        while driver.poll() is None and time.monotonic() < deadline:
            seen.update(line.split(" ", 1)[1] for line in processes_of(mark))
            time.sleep(0.5)
        driver.wait(timeout=1)
        local.wait(timeout=BOUND_S)
    assert local.returncode == 0
    assert driver.returncode == 0, (tmp_path / "ray.err").read_text()[-2000:]
    assert "8 episodes · N=1: " in (tmp_path / "ray.out").read_text()
    # The run started a Ray instance and ended it: nothing it started is left.
    assert any("raylet" in c for c in seen) and any(c.startswith("ray::") for c in seen)
    assert left_behind(mark) == []

    rows, expected = episode_lines(tmp_path / "ray"), episode_lines(tmp_path / "local")
    assert len(rows) == len({r.key for r in rows}) == len(expected) == 8
    assert {r.key for r in rows} == {r.key for r in expected}
    assert all(r.worker and r.worker.node and r.worker.pid != driver.pid for r in rows)
    assert all(r.worker and r.worker.pid == local.pid and not r.worker.node for r in expected)

    # The same command again redoes nothing (and starts no Ray instance).
    before = (tmp_path / "ray" / EPISODES_FILE).read_bytes()
    again = subprocess.run(
        on_ray, capture_output=True, text=True, env=env, timeout=BOUND_S, cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert "Resuming: 8 of 8 episode(s) in " in again.stdout and "nothing to run" in again.stdout
    assert (tmp_path / "ray" / EPISODES_FILE).read_bytes() == before

    report = subprocess.run(
        [sys.executable, "-m", "turnbon_graph.cli", "report", str(tmp_path / "ray")],
        capture_output=True, text=True, env=env, timeout=BOUND_S, cwd=tmp_path,
    )  # fmt: skip
    assert report.returncode == 0, report.stderr[-2000:]
    text = (tmp_path / "ray" / "report" / "report.md").read_text(encoding="utf-8")
    assert "| Settings | N=1 (baseline), N=2 |" in text


@needs_ray
def test_turnbon_bench_ray_runs_search_strategies_with_each_tree_from_its_worker(
    tmp_path: Path,
) -> None:
    from tests.integration_tests.test_strategies import check_tree, tree

    command = [sys.executable, "-m", "turnbon_graph.cli", "bench", "--env", "terminal",
               "--model", "stub", "--strategy", "bon", "beam", "-n", "2", "--value", "stub",
               "--token-budget", "4000", "--trials", "1", "--task", *RAY_TASKS[:2]]  # fmt: skip
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    runs = {where: tmp_path / where for where in ("ray", "local")}
    done = {
        where: subprocess.run(
            [*command, "--run", str(run), *(["--ray"] if where == "ray" else [])],
            capture_output=True,
            text=True,
            env=env,
            timeout=BOUND_S,
            cwd=tmp_path,
        )
        for where, run in runs.items()
    }
    for where, finished in done.items():
        assert finished.returncode == 0, f"{where}: {finished.stderr[-2000:]}"
    rows, expected = episode_lines(runs["ray"]), episode_lines(runs["local"])
    assert {r.key for r in rows} == {r.key for r in expected} and len(rows) == 4
    assert {r.strategy.name for r in rows if r.strategy} == {"bon", "beam"}
    for row in rows:
        assert row.worker and row.worker.node  # run on a Ray worker
        assert row.tokens is not None and row.tokens <= 4000
        nodes = tree(runs["ray"], row)  # written by the driver from the worker's answer
        check_tree(nodes)
        assert tree(runs["local"], row)  # as the local runner writes one (the stub's draws
        # depend on the order of concurrent calls, so the two searches may differ)
        # the turns file came back too (observations differ: each episode's own uid, times)
        assert len(observations(runs["ray"], row)) == row.turns > 0


@needs_ray
def test_turnbon_rollouts_ray_runs_the_episodes_on_workers_within_one_shared_budget(
    ray_instance: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from turnbon_graph.analysis.rollouts import ROLLOUTS_FILE, read_reports
    from turnbon_graph.cli import main

    # Unbudgeted, these two episodes start 5 rollouts (3 and 2) at turn 1; the cap holds
    # for the run, so the workers, each running one episode, start 3 between them.
    command = ["rollouts", "--env", "terminal", "--model", "stub", "--task", "largest-file",
               "greet-script", "-n", "3", "--turns", "1", "--max-rollouts", "3", "--ray",
               "--run", str(tmp_path)]  # fmt: skip
    assert main(command) == 0
    reports = read_reports(tmp_path)
    assert sorted(r.task for r in reports) == ["greet-script", "largest-file"]
    assert all(r.worker and r.worker.node and r.worker.pid != os.getpid() for r in reports)
    assert len({r.worker.pid for r in reports if r.worker}) == 2  # side by side
    assert sum(len(t.rollouts) for r in reports for t in r.turns) == 3
    skipped = [s.reason for r in reports for t in r.turns for s in t.skipped]
    skipped += [s.reason for r in reports for s in r.skipped_turns if s.reason != "unanimous"]
    assert skipped and all(reason == "rollout budget spent (3 of 3)" for reason in skipped)

    # The same command again runs nothing.
    before = (tmp_path / ROLLOUTS_FILE).read_bytes()
    capsys.readouterr()
    assert main(command) == 0
    assert "Resuming: 2 episode(s) already in" in capsys.readouterr().out
    assert (tmp_path / ROLLOUTS_FILE).read_bytes() == before


@needs_ray
def test_turnbon_bench_on_a_two_node_cluster_runs_episodes_on_both_nodes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from ray.cluster_utils import Cluster

    # Two Ray nodes of one CPU each on this machine (Ray's own test cluster: a head and a
    # second raylet that joins it), so the two workers, one CPU each, land one per node.
    mark = uuid.uuid4().hex
    with monkeypatch.context() as patch:  # only the cluster's processes inherit the mark
        patch.setenv(RUN_MARK, mark)
        cluster: Any = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
        try:
            second = cluster.add_node(num_cpus=1)
        except BaseException:
            cluster.shutdown()
            raise
    nodes = {cluster.head_node.node_id, second.node_id}
    try:
        # An address that is not "local": workers load the environment from their own
        # install and each serves its own stub (`--model stub` off the driver's machine).
        command = [sys.executable, "-m", "turnbon_graph.cli", "bench", "--env", "terminal",
                   "--model", "stub", "--n", "1", "2", "--trials", "1", "--task", *RAY_TASKS,
                   "--ray", cluster.address, "--run", str(tmp_path / "run")]  # fmt: skip
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
        done = subprocess.run(
            command, capture_output=True, text=True, env=env, timeout=BOUND_S, cwd=tmp_path
        )
        assert done.returncode == 0, done.stderr[-2000:]
    finally:
        cluster.shutdown()
    assert left_behind(mark) == [], "the test cluster left processes behind"

    rows = episode_lines(tmp_path / "run")
    assert len(rows) == len({r.key for r in rows}) == 8
    assert {r.worker.node for r in rows if r.worker} == nodes  # both nodes ran episodes
    # The workers' stubs answered: no episode ended on a failed call.
    assert all(r.outcome != "agent_error" and r.turns for r in rows), [r.outcome for r in rows]


@needs_ray
def test_turnbon_rollouts_ray_with_a_worker_killed_mid_run_reports_every_episode_once(
    tmp_path: Path,
) -> None:
    from turnbon_graph.analysis.rollouts import ROLLOUTS_FILE, read_reports

    tasks = [*RAY_TASKS, "csv-to-json", "find-duplicates"]
    command = [sys.executable, "-m", "turnbon_graph.cli", "rollouts", "--env", "terminal",
               "--model", "stub", "--task", *tasks, "-n", "3", "--turns", "2", "--ray",
               "--run", str(tmp_path)]  # fmt: skip
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    with (
        (tmp_path / "err.txt").open("w") as err,
        subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=err, env=env) as driver,
    ):
        deadline = time.monotonic() + BOUND_S
        while not (tmp_path / ROLLOUTS_FILE).exists() or not read_reports(tmp_path):
            assert driver.poll() is None and time.monotonic() < deadline, "no report came"
            time.sleep(0.1)
        # That worker was handed its next episode as its first report came back: it dies
        # with an episode in flight, which goes back to the queue.
        worker = read_reports(tmp_path)[0].worker
        assert worker is not None
        os.kill(worker.pid, signal.SIGKILL)
        driver.wait(timeout=BOUND_S)
    assert driver.returncode == 0, (tmp_path / "err.txt").read_text()[-2000:]
    reports = read_reports(tmp_path)
    assert sorted(r.task for r in reports) == sorted(tasks)  # each once, none lost
    # The two first workers and the one that replaced the killed one.
    assert len({r.worker.pid for r in reports if r.worker}) >= 3


@needs_ray
@needs_podman
async def test_a_terminal_environment_goes_to_the_workers_as_its_settings(
    ray_instance: Any, tmp_path: Path
) -> None:
    # Passed as the object (not RegisteredEnvironment): it pickles as its arguments and
    # each worker rebuilds it, its sandbox host and engine its own; both workers start
    # containers of one image, built once.
    tasks = tmp_path / "tasks"
    tb2_task(tasks, "hello-a")
    tb2_task(tasks, "hello-b")
    environment = TerminalEnvironment(tasks, command_timeout=30)
    environment.tasks()
    config = BenchConfig(model="oracle", agent="oracle", n_values=[1], concurrency=2)
    async with asyncio.timeout(BOUND_S):
        rows = await run_benchmark(
            environment, config, tmp_path / "run", progress=False, ray=RayOptions(workers=2)
        )
    assert sorted((r.task, r.setting, r.outcome, r.reward) for r in rows) == [
        ("hello-a", "oracle", "pass", 1.0),
        ("hello-b", "oracle", "pass", 1.0),
    ]
    assert all(r.worker is not None and r.worker.pid != os.getpid() for r in rows)


@needs_ray
async def test_an_environment_that_cannot_pickle_is_refused_before_ray_starts(
    tmp_path: Path,
) -> None:
    environment = CounterEnvironment(TARGETS)
    environment.guard = threading.Lock()  # type: ignore[attr-defined]
    config = BenchConfig(model="oracle", agent="oracle", n_values=[1])
    with pytest.raises(
        ConfigurationError, match=r"cannot go to Ray workers .*RegisteredEnvironment"
    ):
        await run_benchmark(environment, config, tmp_path / "run", progress=False, ray="local")
    assert not (tmp_path / "run").exists()  # nothing written, Ray never started
