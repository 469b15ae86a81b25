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
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import ExitStack, asynccontextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from turnbon_graph._extras import install_hint
from turnbon_graph.bench.agents import is_reference
from turnbon_graph.bench.environment import Environment, TaskSpec
from turnbon_graph.bench.running.limits import ClusterLimit, SlotBook, limit_engine
from turnbon_graph.bench.running.plan import (
    BenchConfig,
    plan_run,
    record_episode,
    run_setting_episode,
)
from turnbon_graph.bench.running.progress import Progress
from turnbon_graph.bench.running.runs import (
    EpisodeResult,
    Setting,
    read_episodes,
    tree_path,
    turns_path,
)
from turnbon_graph.bench.running.workers_env import RegisteredEnvironment, refuse_unpicklable
from turnbon_graph.errors import ConfigurationError, TurnBoNError
from turnbon_graph.turn.engine import TurnEngine

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


def on_ray_as_asked(
    args: Any, environment: Environment
) -> tuple[RegisteredEnvironment, RayOptions]:
    """What a command's `--ray ADDRESS` makes of its run (`args`: its parsed flags, with
    `env`, `tasks`, `model` and `ray`): workers load the environment from their own
    install, and with `--model stub` off this machine each serves its own stub (the
    driver's is on this machine's loopback)."""
    from turnbon_graph.cli.flags.shared import environment_options
    from turnbon_graph.cli.flags.values import STUB_MODEL

    stub = args.model == STUB_MODEL and args.ray != "local"
    registered = RegisteredEnvironment(
        args.env, args.tasks, loaded=environment, options=environment_options(args)
    )
    options = RayOptions(
        address=args.ray,
        worker_stub=stub,
        max_concurrency=getattr(args, "cluster_max_concurrency", None),
        rate_limit=getattr(args, "cluster_rate_limit", None),
    )
    return registered, options


class WorkerLostError(TurnBoNError):
    """An episode's workers died `max_attempts` times: the run stops (a rerun resumes)."""


def import_ray() -> Any:
    """The `ray` module, or a ConfigurationError that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ConfigurationError(f"the Ray runner needs Ray: {install_hint('ray')}") from exc
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
    await asyncio.to_thread(refuse_unpicklable, ray_module, environment)
    plan = plan_run(environment, config, run_dir, tasks)
    if not plan.todo:
        return read_episodes(run_dir)
    async with ray_session(ray_module, options.address):
        worker_args = (environment, config, options.worker_stub)
        pool = WorkerPool(ray_module, EpisodeWorker, worker_args, options, config.concurrency)
        bar = Progress(total=len(plan.todo), enabled=progress)

        async def record(answer: tuple[str, str, str | None]) -> None:
            result_json, turns, tree = answer
            result = EpisodeResult.model_validate_json(result_json)
            where = (run_dir, result.setting, result.task, result.trial)
            await asyncio.to_thread(_write, turns_path(*where), turns)
            if tree is not None:
                await asyncio.to_thread(_write, tree_path(*where), tree)
            record_episode(run_dir, result, bar)

        try:
            await pool.run(plan.todo, record)
        finally:
            bar.close()
            pool.close()
    return read_episodes(run_dir)


@asynccontextmanager
async def ray_session(ray: Any, address: str) -> AsyncIterator[None]:
    """This process connected to Ray at `address` (see `RayOptions.address`) for the
    block; a Ray instance or connection it started is shut down after it."""
    started = await connect(ray, address)
    try:
        yield
    finally:
        if started:
            await asyncio.to_thread(ray.shutdown)


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
        self, environment: Environment, config: BenchConfig, stub: bool, limit: ClusterLimit | None
    ) -> None:
        self._stack = ExitStack()
        self.environment = environment
        options = worker_options(environment, config.engine_options, stub, self._stack)
        if stub and config.value_kwargs is not None:  # --value stub: this worker's stub
            endpoint = options["completion_kwargs"]
            config = replace(config, value_kwargs={k: endpoint[k] for k in config.value_kwargs})
        self.config = config
        self.engines = {
            n: worker_engine(config.model, n, config.selector, options, limit)
            for n in sorted({s.n for s in config.settings})
            if not is_reference(config.agent)
        }
        self.scratch = Path(tempfile.mkdtemp(prefix="turnbon-ray-"))

    async def run(
        self, task: TaskSpec, trial: int, setting: Setting
    ) -> tuple[str, str, str | None]:
        """One episode of `setting` (a search's with its tree on this worker): its result
        as JSON, its turns file's text and its tree file's (None: it did not search)."""
        result = await run_setting_episode(
            self.environment,
            self.engines.get(setting.n),
            self.config,
            task,
            trial,
            setting,
            self.scratch,
        )
        where = (self.scratch, result.setting, task.id, trial)
        turns = await asyncio.to_thread(_take, turns_path(*where))
        tree = None
        if setting.search is not None:
            tree = await asyncio.to_thread(_take, tree_path(*where))
        return result.model_dump_json(), turns, tree

    def pid(self) -> int:
        return os.getpid()


def _take(path: Path) -> str:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    path.unlink(missing_ok=True)
    return text


def worker_options(
    environment: Environment, engine_options: dict[str, Any], stub: bool, stack: ExitStack
) -> dict[str, Any]:
    """A worker's engine options: as given, or with `stub` pointed at a loopback stub this
    process serves (the environment's stub policy, closed with `stack`)."""
    options = dict(engine_options)
    if not stub:
        return options
    from turnbon_graph.cli.models import start_stub

    endpoint = start_stub(environment, environment.name, stack, seed=options.get("seed"))
    options["completion_kwargs"] = {**options.get("completion_kwargs", {}), **endpoint}
    if options.get("selector_kwargs") is not None:
        options["selector_kwargs"] = {**options["selector_kwargs"], **endpoint}
    return options


def worker_engine(
    model: Any, n: int, selector: Any, options: dict[str, Any], limit: ClusterLimit | None
) -> TurnEngine:
    """A worker's engine for `n` candidates, its calls also held to the cluster `limit`."""
    engine = TurnEngine.from_options(model, n=n, selector=selector, **options)
    if limit is not None:
        limit_engine(engine, limit)
    return engine


@dataclass
class _Slot:
    """A worker place: its current actor and the episodes it holds."""

    name: str
    actor: Any
    busy: int = 0


class WorkerPool:
    """Worker actors of `worker_class`, each built as `worker_class(*worker_args, limit)`
    (`limit`: its side of the cluster limit, or None), replaced when one dies. `run` hands
    each item of its work to the least busy worker's `run(*item)`, `in_flight` at once
    across them (None: one per worker), and gives each answer to `record` in this
    process. An item whose worker died goes back in the queue (`max_attempts` times)."""

    def __init__(
        self,
        ray: Any,
        worker_class: type,
        worker_args: tuple[Any, ...],
        options: RayOptions,
        in_flight: int | None = None,
    ) -> None:
        self._ray = ray
        self._worker_args = worker_args
        self._options = options
        self._actor_class = ray.remote(worker_class)
        self._book: Any = None
        if options.max_concurrency is not None or options.rate_limit is not None:
            book_class = ray.remote(SlotBook).options(max_restarts=-1, max_task_retries=-1)
            self._book = book_class.remote(options.max_concurrency, options.rate_limit)
        count = options.workers or max(1, int(ray.cluster_resources().get("CPU", 1)))
        self._in_flight = in_flight or count
        # A worker may hold every item in flight (least busy first, but workers die).
        self._per_worker = in_flight or 1
        self._made = 0
        self._slots = [self._new_slot() for _ in range(count)]

    def _new_slot(self) -> _Slot:
        self._made += 1
        name = f"worker-{self._made}"
        limit = ClusterLimit(self._book, name) if self._book is not None else None
        actor = self._actor_class.options(
            num_cpus=1,
            max_concurrency=self._per_worker,
            max_restarts=0,
            runtime_env={"env_vars": WORKER_ENV},
        ).remote(*self._worker_args, limit)
        return _Slot(name, actor)

    async def run(
        self, todo: Sequence[tuple[Any, ...]], record: Callable[[Any], Awaitable[None]]
    ) -> None:
        queue = deque(enumerate(todo))
        attempts: dict[int, int] = {}
        flying: dict[asyncio.Future[Any], tuple[_Slot, Any, int, tuple[Any, ...]]] = {}
        try:
            while queue or flying:
                while queue and len(flying) < self._in_flight:
                    number, item = queue.popleft()
                    slot = min(self._slots, key=lambda s: s.busy)
                    slot.busy += 1
                    ref = slot.actor.run.remote(*item)
                    flying[asyncio.ensure_future(_awaited(ref))] = (slot, slot.actor, number, item)
                done, _ = await asyncio.wait(flying, return_when=asyncio.FIRST_COMPLETED)
                for future in done:
                    slot, actor, number, item = flying.pop(future)
                    slot.busy -= 1
                    try:
                        answer = future.result()
                    except self._ray.exceptions.RayActorError as exc:
                        attempt = attempts[number] = attempts.get(number, 1) + 1
                        self._lost(slot, actor, item, attempt, exc)
                        queue.appendleft((number, item))
                        continue
                    await record(answer)
        finally:
            for future in flying:
                future.cancel()

    def _lost(
        self, slot: _Slot, actor: Any, item: tuple[Any, ...], attempt: int, exc: BaseException
    ) -> None:
        """Replaces the dead worker (once); raises when `item` would start its `attempt`th
        time, more than `max_attempts`."""
        if attempt > self._options.max_attempts:
            task, trial, *n = item
            setting = f" N={n[0]}" if n else ""
            raise WorkerLostError(
                f"episode {task.id} trial {trial}{setting}: its worker died "
                f"{self._options.max_attempts} times (a rerun resumes); the last: {exc}"[:3000]
            ) from exc
        if slot.actor is actor:
            if self._book is not None:
                self._book.forget.remote(slot.name)
            replacement = self._new_slot()
            slot.name, slot.actor = replacement.name, replacement.actor

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
