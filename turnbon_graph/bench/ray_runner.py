"""The benchmark runner on Ray: the episodes on Ray async actors, the run folder here.

The driver (this process) plans the run exactly as the local runner does (`plan_run`),
hands each episode to the least busy worker, and writes what comes back: the episode's
turns file, then its line in episodes.jsonl, with the same progress bar. So the run folder,
resuming with `--run DIR` and Ctrl-C behave as with the local runner. Each worker is an
async actor holding its own engines (its own client, connection pool and per-process
limits) and runs many episodes at once on its event loop; it writes turns to a scratch
folder of its own machine and returns them with the result.

A worker that dies (its process killed, its node lost) costs no episode: its episodes in
flight go back to the queue and a new worker takes its place; an episode is retried at
most `RayOptions.max_attempts` times. Only the driver writes the run folder, so an episode
is never recorded twice. Ray is imported only here, and only when a run asks for it.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from collections import deque
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from turnbon_graph.bench.environment import Environment, Episode, TaskSpec
from turnbon_graph.bench.limits import ClusterLimit, SlotBook, limit_engine
from turnbon_graph.bench.runner import (
    BenchConfig,
    Progress,
    Todo,
    plan_run,
    record_episode,
    run_episode,
)
from turnbon_graph.bench.runs import EpisodeResult, read_episodes, setting_label, turns_path
from turnbon_graph.errors import ConfigurationError, TurnBoNError
from turnbon_graph.turn import TurnEngine

INSTALL_HINT = "pip install 'turnbon-graph[ray]'"
WORKER_ENV = {"RAY_USE_UVLOOP": "0"}
"""Workers run asyncio's own event loop, as the local runner does: Ray's default, uvloop,
refuses the subprocess options (user, group, umask) the terminal sandbox starts with."""


@dataclass(frozen=True)
class RayOptions:
    """Where and how a run goes on Ray (`run_benchmark(..., ray=RayOptions(...))`; a bare
    address string is `RayOptions(address=...)`)."""

    address: str = "local"
    """"local": start a Ray instance on this machine's cores for the run; "auto": join the
    cluster this machine is part of; "host:port" or "ray://host:port": join that one. When
    this process is already connected to Ray (`ray.init` ran), the run uses that."""
    workers: int | None = None
    """Worker actors (one CPU each); None: one per CPU of the cluster."""
    max_concurrency: int | None = None
    """Calls in flight across the whole cluster (one `SlotBook` actor); None: no cluster
    cap, only each worker's own (the engine's `max_concurrency`, per process)."""
    rate_limit: float | None = None
    """Requests a second across the whole cluster; None: only each worker's own."""
    worker_stub: bool = False
    """Each worker serves its own loopback stub (the environment's `stub_policy`, seeded
    by the engine's seed) and calls it, for `--model stub` on a cluster whose workers
    cannot reach the driver's loopback. Off: the engine options' endpoint as given (a stub
    the driver serves on loopback is reachable on a single-machine cluster)."""
    max_attempts: int = 3
    """Times an episode is started before a run gives up on it when workers keep dying."""


class RegisteredEnvironment:
    """An installed environment (`turnbon.environments` entry point `name`, built from
    `spec`) that pickles as just its name and spec: each Ray worker loads it from the
    package installed on its own machine (the terminal environment's tasks and sandbox
    are that machine's). `loaded`: the instance this process already has, if any."""

    def __init__(self, name: str, spec: str | None, loaded: Environment | None = None) -> None:
        self._recipe = (name, spec)
        self._loaded = loaded

    @property
    def loaded(self) -> Environment:
        if self._loaded is None:
            from turnbon_graph.bench.registry import load_environment

            self._loaded = load_environment(*self._recipe)
        return self._loaded

    @property
    def name(self) -> str:
        return self.loaded.name

    def tasks(self) -> Sequence[TaskSpec]:
        return self.loaded.tasks()

    async def start(self, task: TaskSpec, trial: int) -> Episode:
        return await self.loaded.start(task, trial)

    def __getattr__(self, attribute: str) -> Any:
        """The environment's other attributes (its `stub_policy`, ...)."""
        if attribute.startswith("_"):
            raise AttributeError(attribute)
        return getattr(self.loaded, attribute)

    def __reduce__(self) -> tuple[Any, tuple[str, str | None]]:
        return (RegisteredEnvironment, self._recipe)


class WorkerLostError(TurnBoNError):
    """An episode's workers died `max_attempts` times: the run stops (a rerun resumes)."""


def import_ray() -> Any:
    """The `ray` module, or a ConfigurationError that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigurationError(f"the Ray runner needs Ray: {INSTALL_HINT}") from exc
    return ray


async def run_on_ray(
    environment: Environment,
    config: BenchConfig,
    run_dir: Path,
    *,
    tasks: Sequence[str] | None = None,
    progress: bool = True,
    ray: str | RayOptions = "local",
) -> list[EpisodeResult]:
    """`run_benchmark` on Ray workers (see the module); every episode result of the run."""
    options = ray if isinstance(ray, RayOptions) else RayOptions(address=ray)
    ray_module = import_ray()
    plan = plan_run(environment, config, run_dir, tasks)
    if not plan.todo:
        return read_episodes(run_dir)
    started = await connect(ray_module, options.address)
    try:
        pool = WorkerPool(ray_module, environment, config, options)
        bar = Progress(total=len(plan.todo), enabled=progress)
        try:
            await pool.run(plan.todo, run_dir, bar)
        finally:
            bar.close()
            pool.close()
    finally:
        if started:
            await asyncio.to_thread(ray_module.shutdown)
    return read_episodes(run_dir)


async def connect(ray: Any, address: str) -> bool:
    """Connects this process to Ray (off the event loop: starting Ray takes seconds);
    True when it started a connection the run must end."""
    if ray.is_initialized():
        return False
    kwargs: dict[str, Any] = {"include_dashboard": False, "configure_logging": False}
    if address == "local":
        kwargs["num_cpus"] = os.cpu_count() or 1
    await asyncio.to_thread(ray.init, address=address, **kwargs)
    return True


class EpisodeWorker:
    """A Ray async actor's state: the environment, one engine per N, a scratch folder."""

    def __init__(
        self, environment: Environment, config: BenchConfig, limit: ClusterLimit | None, stub: bool
    ) -> None:
        self._stack = ExitStack()
        self.environment = environment
        options = dict(config.engine_options)
        if stub:
            options = _on_own_stub(environment, options, self._stack)
        self.engines = {
            n: TurnEngine.from_options(config.model, n=n, selector=config.selector, **options)
            for n in config.n_values
        }
        if limit is not None:
            for engine in self.engines.values():
                limit_engine(engine, limit)
        self.scratch = Path(tempfile.mkdtemp(prefix="turnbon-ray-"))

    async def run(self, task: TaskSpec, trial: int, n: int) -> tuple[str, str]:
        """One episode: its result as JSON and its turns file's text."""
        engine = self.engines[n]
        result = await run_episode(self.environment, engine, task, trial, n, self.scratch)
        path = turns_path(self.scratch, setting_label(n), task.id, trial)
        turns = await asyncio.to_thread(_take, path)
        return result.model_dump_json(), turns

    def pid(self) -> int:
        return os.getpid()


def _take(path: Path) -> str:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    path.unlink(missing_ok=True)
    return text


def _on_own_stub(
    environment: Environment, options: dict[str, Any], stack: ExitStack
) -> dict[str, Any]:
    """`options` pointed at a loopback stub this process serves (closed with `stack`)."""
    from turnbon_graph.cli.models import start_stub

    endpoint = start_stub(environment, environment.name, stack, seed=options.get("seed"))
    options["completion_kwargs"] = {**options.get("completion_kwargs", {}), **endpoint}
    if options.get("selector_kwargs") is not None:
        options["selector_kwargs"] = {**options["selector_kwargs"], **endpoint}
    return options


@dataclass
class _Slot:
    """A worker place: its current actor and the episodes it holds."""

    name: str
    actor: Any
    busy: int = 0


class WorkerPool:
    """The worker actors, replaced when one dies; `run` keeps `concurrency` episodes in
    flight across them."""

    def __init__(
        self, ray: Any, environment: Environment, config: BenchConfig, options: RayOptions
    ) -> None:
        self._ray = ray
        self._environment = environment
        self._config = config
        self._options = options
        self._actor_class = ray.remote(EpisodeWorker)
        self._book: Any = None
        if options.max_concurrency is not None or options.rate_limit is not None:
            book_class = ray.remote(SlotBook).options(max_restarts=-1, max_task_retries=-1)
            self._book = book_class.remote(options.max_concurrency, options.rate_limit)
        count = options.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._made = 0
        self._slots = [self._new_slot() for _ in range(count)]

    def _new_slot(self) -> _Slot:
        self._made += 1
        name = f"worker-{self._made}"
        limit = ClusterLimit(self._book, name) if self._book is not None else None
        actor = self._actor_class.options(
            num_cpus=1,
            max_concurrency=max(self._config.concurrency, 1),
            max_restarts=0,
            runtime_env={"env_vars": WORKER_ENV},
        ).remote(self._environment, self._config, limit, self._options.worker_stub)
        return _Slot(name, actor)

    async def run(self, todo: list[Todo], run_dir: Path, bar: Progress) -> None:
        queue = deque(todo)
        attempts: dict[tuple[str, int, int], int] = {}
        flying: dict[asyncio.Future[Any], tuple[_Slot, Any, Todo]] = {}
        try:
            while queue or flying:
                while queue and len(flying) < self._config.concurrency:
                    item = queue.popleft()
                    task, trial, n = item
                    slot = min(self._slots, key=lambda s: s.busy)
                    slot.busy += 1
                    ref = slot.actor.run.remote(task, trial, n)
                    flying[asyncio.ensure_future(_awaited(ref))] = (slot, slot.actor, item)
                done, _ = await asyncio.wait(flying, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    slot, actor, item = flying.pop(future)
                    slot.busy -= 1
                    try:
                        result_json, turns = future.result()
                    except self._ray.exceptions.RayActorError as exc:
                        self._lost(slot, actor, item, attempts, exc)
                        queue.appendleft(item)
                        continue
                    await self._record(run_dir, result_json, turns, bar)
        finally:
            for future in flying:
                future.cancel()

    def _lost(
        self,
        slot: _Slot,
        actor: Any,
        item: Todo,
        attempts: dict[tuple[str, int, int], int],
        exc: BaseException,
    ) -> None:
        """Replaces the dead worker (once) and counts the episode's attempt."""
        task, trial, n = item
        key = (task.id, trial, n)
        attempts[key] = attempts.get(key, 1) + 1
        if attempts[key] > self._options.max_attempts:
            raise WorkerLostError(
                f"episode {task.id} trial {trial} N={n}: its worker died "
                f"{self._options.max_attempts} times (a rerun resumes); the last: {exc}"[:3000]
            ) from exc
        if slot.actor is actor:
            if self._book is not None:
                self._book.forget.remote(slot.name)
            replacement = self._new_slot()
            slot.name, slot.actor = replacement.name, replacement.actor

    async def _record(self, run_dir: Path, result_json: str, turns: str, bar: Progress) -> None:
        result = EpisodeResult.model_validate_json(result_json)
        path = turns_path(run_dir, result.setting, result.task, result.trial)
        await asyncio.to_thread(_write, path, turns)
        record_episode(run_dir, result, bar)

    def close(self) -> None:
        for slot in self._slots:
            self._ray.kill(slot.actor, no_restart=True)
        if self._book is not None:
            self._ray.kill(self._book, no_restart=True)

    @property
    def book(self) -> Any:
        """The cluster limiter's actor handle (None without cluster limits)."""
        return self._book


async def _awaited(ref: Any) -> Any:
    return await ref


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
