"""`TerminalEnvironment`: the `turnbon_graph.bench.environment.Environment` of terminal tasks."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import warnings
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar, cast

from langchain_core.tools import BaseTool

from turnbon_graph.bench.copying import copy_tree
from turnbon_graph.bench.environment import TaskSpec, Verdict
from turnbon_graph.errors import ConfigurationError, ResourceLimitError
from turnbon_terminal.container import LIFETIME_MARGIN_S, ContainerHost
from turnbon_terminal.container_episode import ContainerEpisode
from turnbon_terminal.errors import (
    DockerRequiredError,
    SandboxError,
    SetupScriptError,
    TaskFormatError,
)
from turnbon_terminal.limits import Limits, MiB
from turnbon_terminal.sandbox import CommandResult, Sandbox, SandboxHost, SandboxSettings
from turnbon_terminal.settings import SandboxKind
from turnbon_terminal.shell_tool import ShellTool
from turnbon_terminal.stub_policy import StubPolicy
from turnbon_terminal.tasks import (
    SETUP_SCRIPT,
    DockerTaskSkipped,
    TerminalTask,
    inline_task,
    load_tasks,
    read_task_text,
)
from turnbon_terminal.verifier import VerifierPython, run_verifier

T = TypeVar("T")

VERIFIER_MARGIN_S = 2.0
"""Our own verifier timeout ends this much before the runner's, so a slow verifier
comes back as a verdict with an error rather than as the runner's timeout."""


class TerminalEpisode:
    """One attempt at one task: a sandbox, the `shell` tool, the verifier."""

    def __init__(self, task: TerminalTask, sandbox: Sandbox, python: VerifierPython) -> None:
        self.task = task
        self.sandbox = sandbox
        self._python = python
        self._tools: list[BaseTool] = [ShellTool(sandbox)]

    @property
    def tools(self) -> Sequence[BaseTool]:
        return self._tools

    @property
    def workdir(self) -> Path:
        return self.sandbox.workdir

    async def run(self, command: str, *, time_limit: float | None = None) -> CommandResult:
        """A command as the agent would run it (for tests, scripts and oracles)."""
        return await self.sandbox.run(command, time_limit=time_limit)

    async def run_solution(self) -> CommandResult:
        """The task's solution/solve.sh, run from the working directory."""
        script = self.task.solution_script
        if script is None:
            raise ConfigurationError(f"task {self.task.id} has no solution/solve.sh")
        return await self.sandbox.run(
            read_task_text(script),
            time_limit=self.task.spec.agent_timeout_s,
            env=self.task.solution_env,
        )

    @property
    def over_budget(self) -> str | None:
        """What of its budget the episode went over, after its last command (the
        runner then ends it as `resource_limit`)."""
        return self.sandbox.over_budget

    async def verify(self) -> Verdict:
        """Runs the task's tests; raises `ResourceLimitError` instead when the episode
        went over its budget (a process left in the background may have since)."""
        if over := await self.sandbox.check_budget():
            raise ResourceLimitError(f"the episode went over its budget: {over}")
        if not self.task.has_verifier:
            return Verdict(
                passed=False,
                error=f"task {self.task.id} has no verifier (tests/test_*.py): nothing to check",
            )
        limit = self.task.spec.verifier_timeout_s
        limit = max(limit - min(VERIFIER_MARGIN_S, limit / 10), 0.5)
        # Every process of the episode ends first; the tests run in a fresh sandbox.
        return await run_verifier(self.sandbox, self.task, self._python, limit)

    async def fork(self) -> TerminalEpisode:
        """A new episode of the same task and verifier, in a sandbox of its own (its own
        uid when isolating), whose working directory and TMPDIR are copies of this one's:
        what either does from now on, the other never sees. Close it like any episode.

        Files only, as they are: sparse files stay sparse, hard links stay links, modes
        and times are kept (see `turnbon_graph.bench.copying`). Processes this episode
        left running are not carried over, and named pipes, sockets and device files are
        left out (each logged as a warning). Symbolic links are never followed; those
        that point into this episode's directory are pointed into the fork's (the paths
        differ)."""
        if self.sandbox.closed:
            raise SandboxError("this episode is closed: fork it before closing it")
        sandbox = await _to_the_end(
            functools.partial(
                self.sandbox.host.create, network=self.sandbox.network, budget=self.sandbox.budget
            ),
            f"{self.task.id}-fork",
            undo=lambda made: made.close(),
        )
        try:
            await _to_the_end(_copy_sandbox, self.sandbox, sandbox)
        except BaseException:
            await sandbox.close()
            raise
        return TerminalEpisode(self.task, sandbox, self._python)

    async def close(self) -> None:
        """Kills every process the episode left and removes its directory."""
        await self.sandbox.close()


SandboxChoice = Literal["bwrap", "uid", "container"]
SANDBOX_CHOICES = ("bwrap", "uid", "container")


class TerminalEnvironment:
    """Terminal tasks (Terminal-Bench 2 layout), each episode in a sandbox of its own.

    `tasks_dir`: a folder of task folders, or one task folder; None: the shipped suite.
    Where episodes run is chosen per task (`sandbox=None`): a task with an
    `environment/Dockerfile` or a `docker_image` in a container of its image
    (`turnbon_terminal.container`: Podman or Docker, `engine=` or `$TURNBON_ENGINE`;
    `keep_images=True` keeps the images built from Dockerfiles for later episodes),
    any other in a bubblewrap sandbox on the host (`bwrap` must be installed; as root,
    also as a uid of its own). `sandbox="container"` runs every task in a container,
    `sandbox="bwrap"` every task on the host (refusing those that need an image, or
    skipping them with `skip_docker=True`), and `sandbox="uid"` is the old, weak
    fallback without bwrap (see the README for what each does and does not protect
    against). Each episode's memory, storage and CPUs are bounded by its task's
    `[environment]` budget (`turnbon_terminal.budget`) where the machine allows;
    `enforce_budgets=False` leaves only the per-process rlimits."""

    name = "terminal"

    def __init__(
        self,
        tasks_dir: str | Path | None = None,
        *,
        command_timeout: float = 60.0,
        output_limit: int = 8 * 1024,
        hard_output_limit: int = 10 * MiB,
        limits: Limits | None = None,
        isolate_user: bool | None = None,
        sandbox: SandboxChoice | None = None,
        work_root: str | Path | None = None,
        env: Mapping[str, str] | None = None,
        skip_docker: bool = False,
        verifier_python: str | None = None,
        enforce_budgets: bool = True,
        engine: str | None = None,
        keep_images: bool = False,
    ) -> None:
        if sandbox is not None and sandbox not in SANDBOX_CHOICES:
            raise ConfigurationError(
                f"sandbox must be one of {', '.join(SANDBOX_CHOICES)} or None (each task "
                f"where it belongs), got {sandbox!r}"
            )
        self._choice = sandbox
        tasks = load_tasks(tasks_dir, skip_docker=skip_docker)
        if sandbox in ("bwrap", "uid"):
            tasks = _host_tasks(tasks, sandbox, skip=skip_docker)
        self._tasks = {t.id: t for t in tasks}
        self.settings = SandboxSettings(
            command_timeout=command_timeout,
            output_limit=output_limit,
            hard_output_limit=hard_output_limit,
            limits=limits or Limits(),
            isolate_user=isolate_user,
            sandbox="uid" if sandbox == "uid" else "bwrap",
            hidden=tuple(t.folder for t in self._tasks.values()),
            work_root=Path(work_root) if work_root is not None else None,
            env=dict(env or {}),
            enforce_budgets=enforce_budgets,
        )
        self._host: SandboxHost | None = None
        self._containers: ContainerHost | None = None
        if any(not self._in_container(t) for t in tasks):
            self._host = SandboxHost(self.settings)
        if any(self._in_container(t) for t in tasks):  # the engine is needed: found now
            self._containers = ContainerHost(self.settings, engine=engine, keep_images=keep_images)
        self._engine, self._keep_images = engine, keep_images
        self._python = VerifierPython(verifier_python)

    @property
    def host(self) -> SandboxHost:
        """Where host-sandbox episodes are made (set up on first use)."""
        if self._host is None:
            self._host = SandboxHost(self.settings)
        return self._host

    @property
    def containers(self) -> ContainerHost:
        """Where container episodes are made (the engine found on first use)."""
        if self._containers is None:
            self._containers = ContainerHost(
                self.settings, engine=self._engine, keep_images=self._keep_images
            )
        return self._containers

    @property
    def isolated(self) -> bool:
        """Whether each host-sandbox episode runs as a uid of its own."""
        return self.host.isolate

    @property
    def sandbox(self) -> SandboxKind:
        """ "bwrap", or "uid" (the weak fallback, when asked for): how host-sandbox
        episodes are isolated."""
        return self.settings.sandbox

    def _in_container(self, task: TerminalTask) -> bool:
        return self._choice == "container" or (task.container is not None and self._choice is None)

    def tasks(self) -> Sequence[TaskSpec]:
        return [t.spec for t in self._tasks.values()]

    def task(self, task_id: str) -> TerminalTask:
        try:
            return self._tasks[task_id]
        except KeyError:
            raise ConfigurationError(
                f"no task {task_id!r} here; available: {', '.join(sorted(self._tasks))}"
            ) from None

    def add_instruction(
        self, instruction: str, *, workdir: str | Path | None = None, max_turns: int = 30
    ) -> TaskSpec:
        """Registers a task made from `instruction` (no verifier), starting in a copy of
        `workdir`, and returns its spec; `start` then runs it like any other task."""
        task = inline_task(instruction, workdir=workdir, max_turns=max_turns)
        self._tasks[task.id] = task
        return task.spec

    def terminal_tasks(self) -> list[TerminalTask]:
        return list(self._tasks.values())

    def stub_policy(
        self, *, p_solve: float = 0.4, p_inspect: float = 0.35, seed: int = 0
    ) -> StubPolicy:
        """A `StubServer` responder playing an oracle-ish model on these tasks, for
        `turnbon bench --env terminal --model stub` (see `turnbon_terminal.stub_policy`)."""
        return StubPolicy(self.terminal_tasks(), p_solve=p_solve, p_inspect=p_inspect, seed=seed)

    async def start(self, task: TaskSpec, trial: int) -> TerminalEpisode | ContainerEpisode:
        """A fresh working directory with the task's files, after its setup.sh ran (on
        the host), or a started container of the task's image."""
        terminal_task = self.task(task.id)
        if self._in_container(terminal_task):
            return await self._start_container(terminal_task, trial)
        sandbox = await _to_the_end(
            functools.partial(
                self.host.create,
                network=terminal_task.allow_internet,
                budget=terminal_task.budget,
            ),
            f"{task.id}-{trial}",
            undo=lambda made: made.close(),
        )
        try:
            await _to_the_end(_copy_environment, terminal_task, sandbox)
            script = terminal_task.setup_script
            if script is not None:
                result = await sandbox.run(
                    read_task_text(script), time_limit=terminal_task.setup_timeout_s
                )
                if not result.ok:
                    raise SetupScriptError(
                        f"setup.sh of task {task.id} failed, so the episode cannot start; "
                        f"fix the script (its output ends: {result.render()[-1500:]})"
                    )
            if terminal_task.has_verifier:
                await self._python.prepare(sandbox)  # once per environment
        except BaseException:
            await sandbox.close()
            raise
        return TerminalEpisode(terminal_task, sandbox, self._python)

    async def _start_container(self, task: TerminalTask, trial: int) -> ContainerEpisode:
        if task.container is None:
            raise DockerRequiredError(
                f"task {task.id} names no image (no environment/Dockerfile, no "
                "docker_image): run it without sandbox='container'"
            )
        spec = task.container
        lifetime = (
            spec.build_timeout_s
            + task.spec.agent_timeout_s
            + task.spec.verifier_timeout_s
            + LIFETIME_MARGIN_S
        )
        container = await self.containers.create(
            f"{task.id}-{trial}",
            spec,
            network=task.allow_internet,
            budget=task.budget,
            lifetime_s=lifetime,
        )
        return ContainerEpisode(task, container)


def _host_tasks(tasks: list[TerminalTask], sandbox: str, *, skip: bool) -> list[TerminalTask]:
    """The tasks the host sandbox can run: those that need an image are refused (or
    skipped with a warning, with `skip`)."""
    kept = []
    for task in tasks:
        if task.container is None:
            kept.append(task)
            continue
        message = (
            f"task {task.id} runs in a container ({task.container.describe()}), and "
            f"sandbox={sandbox!r} asks for the host sandbox: drop it (or `--sandbox "
            f"{sandbox}`) to run the task in its container"
        )
        if not skip:
            raise DockerRequiredError(message)
        warnings.warn(f"skipped: {message}", DockerTaskSkipped, stacklevel=3)
    return kept


async def _to_the_end(
    function: Callable[..., T],
    *args: Any,
    undo: Callable[[T], Awaitable[None]] | None = None,
) -> T:
    """`function(*args)` in a thread. Cancelled meanwhile, it waits for the thread to end
    (and undoes its result) before re-raising: a sandbox made or files copied behind the
    caller's back would outlive the episode."""
    job = asyncio.ensure_future(asyncio.to_thread(function, *args))
    try:
        return await asyncio.shield(job)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            result = await job
            if undo is not None:
                await undo(result)
        raise


def _copy_environment(task: TerminalTask, sandbox: Sandbox) -> None:
    source = task.environment_dir
    if source.is_dir():  # an inline task's is a symlink to the user's folder: resolved
        report = copy_tree(source.resolve(), sandbox.workdir, skip=[SETUP_SCRIPT])
        if report.unreadable:
            raise TaskFormatError(
                f"could not read {'; '.join(report.unreadable[:3])} in {source}: make the "
                f"files of task {task.id}'s environment readable to this user"
            )
        report.log(f"starting task {task.id}")
    sandbox.give(sandbox.workdir)


def _copy_sandbox(source: Sandbox, target: Sandbox) -> None:
    """The files of `source`'s working directory and TMPDIR into `target`'s, then
    handed to `target`'s user (the copies are ours until then)."""
    for old, new in zip(source.writable_dirs, target.writable_dirs, strict=True):
        report = copy_tree(old, new)
        if report.unreadable:
            raise SandboxError(
                f"could not copy {old} into a fork (could not read "
                f"{'; '.join(report.unreadable[:3])}): an agent that took away its own "
                "permissions on files cannot be forked without root"
            )
        report.log(f"a fork of {source.root.name}")
        _retarget_links(new, source.root, target.root, old)
        target.give(new)


def _retarget_links(tree: Path, old_root: Path, new_root: Path, old_tree: Path) -> None:
    """Symlinks that lead into the old episode's directory lead into the new one's, so a
    fork never reads or writes the episode it was copied from (a relative link that
    stays inside already does; an absolute one, or one that climbs out and back by the
    old directory's name, is rewritten)."""
    for folder, dirs, files in os.walk(tree):
        for name in [*dirs, *files]:
            path = os.path.join(folder, name)
            if not os.path.islink(path):
                continue
            target = os.readlink(path)
            old_place = os.path.join(old_tree, os.path.relpath(folder, tree))
            meant = _inside(os.path.normpath(os.path.join(old_place, target)), old_root)
            if meant is None:
                continue  # leads outside the episode (/usr/bin/python3): unchanged
            wanted = os.path.join(new_root, meant) if meant else str(new_root)
            if os.path.normpath(os.path.join(folder, target)) != os.path.normpath(wanted):
                os.unlink(path)
                os.symlink(wanted, path)


def _inside(path: str, root: Path) -> str | None:
    """`path` relative to `root` ("" for root itself), or None when it is outside."""
    prefix = str(root)
    if path == prefix:
        return ""
    if path.startswith(prefix + os.sep):
        return path[len(prefix) + 1 :]
    return None


def environment(spec: str | None = None, *, sandbox: str | None = None) -> TerminalEnvironment:
    """The `turnbon.environments` entry point `terminal`: `spec` is a tasks directory
    (or one task folder); None or empty runs the shipped suite. `sandbox` is the
    commands' `--sandbox` ("bwrap" or "container"; None: each task where it belongs)."""
    if sandbox is not None and sandbox not in SANDBOX_CHOICES:
        raise ConfigurationError(
            f"--sandbox must be one of {', '.join(SANDBOX_CHOICES)}, got {sandbox!r}"
        )
    return TerminalEnvironment(tasks_dir=spec or None, sandbox=cast(SandboxChoice, sandbox))
