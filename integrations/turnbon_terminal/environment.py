"""`TerminalEnvironment`: the `turnbon_graph.bench.environment.Environment` of terminal tasks."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, cast

from turnbon_graph.bench.environment import TaskSpec
from turnbon_graph.errors import ConfigurationError
from turnbon_terminal.container.episode import ContainerEpisode
from turnbon_terminal.container.instance import DEFAULT_IMAGE, LIFETIME_MARGIN_S, ContainerHost
from turnbon_terminal.errors import DockerRequiredError
from turnbon_terminal.host.episode import TerminalEpisode, start_host_episode
from turnbon_terminal.host.sandbox import SandboxHost, SandboxSettings
from turnbon_terminal.stub_policy import StubPolicy
from turnbon_terminal.task.folders import (
    FRESH_SHELL_NOTE,
    SESSION_SHELL_NOTE,
    DockerTaskSkipped,
    TerminalTask,
    inline_task,
    load_tasks,
)
from turnbon_terminal.task.limits import Limits, MiB
from turnbon_terminal.task.settings import SandboxKind
from turnbon_terminal.task.tb2 import DEFAULT_WORKDIR, ContainerSpec
from turnbon_terminal.verdict.verifier import VerifierPython

SandboxChoice = Literal["bwrap", "uid", "container"]
SANDBOX_CHOICES = ("bwrap", "uid", "container")
ShellChoice = Literal["session", "fresh"]
SHELL_CHOICES = ("session", "fresh")


class TerminalEnvironment:
    """Terminal tasks (Terminal-Bench 2 layout), each episode in a sandbox of its own.

    Where an episode runs is chosen per task: a task with an `environment/Dockerfile` or
    a `docker_image` (or whose only verifier is `tests/test.sh`) in a container of its
    image (`ContainerEpisode`: Podman or Docker, judged by the reward its test.sh
    writes), any other in a bubblewrap sandbox on the host (`bwrap` must be installed;
    as root, also as a uid of its own; judged by its pytest tests). Each episode's
    memory, storage and CPUs are bounded by its task's `[environment]` budget
    (`turnbon_terminal.task.budget`) where the machine allows.

    Args:
        tasks_dir: A folder of task folders, or one task folder; None: the shipped suite.
        command_timeout: Seconds each of the agent's commands may run.
        output_limit: Bytes of a command's output the agent reads (head and tail).
        hard_output_limit: Bytes of output past which a command is killed.
        limits: The host sandbox's per-process limits.
        isolate_user: A uid of its own per host-sandbox episode; None: when root.
        sandbox: None: each task where it belongs (above); "container": every task in a
            container (those that name no image in `image`, their files copied into
            its working directory); "bwrap": every task on the host, refusing those
            that need an image (or skipping them, with `skip_docker`); "uid": the old,
            weak fallback without bwrap (see the README for what each protects against).
        work_root: Where episodes' folders go on this machine (default: under /tmp).
        env: Variables for every command; secret-looking names are refused.
        skip_docker: Leave out, with a warning, the tasks that cannot run (a compose
            file; with sandbox="bwrap", a task that needs an image) instead of refusing.
        verifier_python: The Python that runs host tasks' pytest tests (default: found).
        enforce_budgets: False leaves only the per-process rlimits on the host and no
            memory, CPU or storage flags on containers.
        engine: "podman" or "docker" (default: `$TURNBON_ENGINE`, else whichever is
            installed, Podman first).
        keep_images: Keep the images built from Dockerfiles, keyed by their build
            context and bases, for later episodes and runs (default: yes, unless
            `$TURNBON_KEEP_IMAGES` is 0; no: each episode removes the image it built).
        force_build: Build each task's environment/Dockerfile even when the task names
            a `docker_image`, and build again an image kept from earlier runs (once per
            process), as Harbor's `--force-build` does.
        image: The image of tasks that name none, with sandbox="container".
        shell: How a container episode runs the agent's commands: "session", in one
            bash session kept for the episode (tmux; `cd`, variables, jobs and running
            programs carry over; an image without tmux falls back to "fresh"); "fresh",
            each in a new `bash -c`. Host-sandbox episodes always run them fresh.

    Raises:
        TaskFormatError: A task folder cannot be read (`DockerRequiredError`: it cannot
            run here).
        ContainerError: Tasks need a container and neither Podman nor Docker is here.
    """

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
        keep_images: bool | None = None,
        image: str = DEFAULT_IMAGE,
        force_build: bool = False,
        shell: ShellChoice = "session",
    ) -> None:
        # What it is made with, as given: what it pickles as (`__reduce__`).
        self._made_with = {k: v for k, v in locals().items() if k != "self"}
        if shell not in SHELL_CHOICES:
            raise ConfigurationError(
                f"shell must be one of {', '.join(SHELL_CHOICES)}, got {shell!r}"
            )
        self.shell = shell
        if sandbox is not None and sandbox not in SANDBOX_CHOICES:
            raise ConfigurationError(
                f"sandbox must be one of {', '.join(SANDBOX_CHOICES)} or None (each task "
                f"where it belongs), got {sandbox!r}"
            )
        self._choice = sandbox
        tasks = load_tasks(tasks_dir, skip_docker=skip_docker)
        if sandbox in ("bwrap", "uid"):
            tasks = _host_tasks(tasks, sandbox, skip=skip_docker)
        self._tasks = {t.id: self._told(t) for t in tasks}
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
            self._containers = self._container_host(engine, keep_images, force_build)
        self._engine, self._keep_images, self._image = engine, keep_images, image
        self._force_build = force_build
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
            self._containers = self._container_host(
                self._engine, self._keep_images, self._force_build
            )
        return self._containers

    def _container_host(
        self, engine: str | None, keep_images: bool | None, force_build: bool
    ) -> ContainerHost:
        return ContainerHost(
            self.settings, engine=engine, keep_images=keep_images, force_build=force_build
        )

    @property
    def isolated(self) -> bool:
        """Whether each host-sandbox episode runs as a uid of its own."""
        return self.host.isolate

    @property
    def sandbox(self) -> SandboxKind:
        """How host-sandbox episodes are isolated: "bwrap", or "uid" (the weak fallback,
        when asked for)."""
        return self.settings.sandbox

    def _in_container(self, task: TerminalTask) -> bool:
        return self._choice == "container" or (task.needs_container and self._choice is None)

    def _told(self, task: TerminalTask) -> TerminalTask:
        """`task`, its instruction telling of the shell session when it gets one."""
        if self.shell != "session" or not self._in_container(task):
            return task
        told = task.spec.instruction.replace(FRESH_SHELL_NOTE, SESSION_SHELL_NOTE)
        return dataclasses.replace(task, spec=task.spec.model_copy(update={"instruction": told}))

    def tasks(self) -> Sequence[TaskSpec]:
        """The tasks, as the runner sees them.

        Returns:
            Every task's spec, in the order of their ids.
        """
        return [t.spec for t in self._tasks.values()]

    def task(self, task_id: str) -> TerminalTask:
        """One task, with its folder.

        Args:
            task_id: Its id (its folder's name).

        Returns:
            The task.

        Raises:
            ConfigurationError: There is no such task here.
        """
        try:
            return self._tasks[task_id]
        except KeyError:
            raise ConfigurationError(
                f"no task {task_id!r} here; available: {', '.join(sorted(self._tasks))}"
            ) from None

    def add_instruction(
        self, instruction: str, *, workdir: str | Path | None = None, max_turns: int = 30
    ) -> TaskSpec:
        """Registers a task made from an instruction, with no verifier; `start` then runs
        it like any other task.

        Args:
            instruction: What the agent is told to do.
            workdir: A folder whose copy the episodes start in (None: an empty one).
            max_turns: Turns the agent may take.

        Returns:
            The new task's spec.
        """
        task = self._told(inline_task(instruction, workdir=workdir, max_turns=max_turns))
        self._tasks[task.id] = task
        self._inline = True
        return task.spec

    def __reduce__(self) -> tuple[Any, tuple[dict[str, Any]]]:
        """Pickles as the arguments it was made with, so a Ray worker (or any process)
        rebuilds it with live parts of its own (the sandbox host, the engine): the task
        folders must be at the same paths there.

        Raises:
            TypeError: it has an inline task (`add_instruction`), which lives in a
                temporary folder of this process only.
        """
        if getattr(self, "_inline", False):
            raise TypeError(
                "a TerminalEnvironment with an inline task (add_instruction) cannot go to "
                "another process: write the task as a task folder and pass its path"
            )
        return _rebuilt, (self._made_with,)

    def task_cpus(self, task_id: str) -> float:
        """The CPUs a task asks (`[environment] cpus`), for the run's core check
        (`turnbon_graph.bench.running.cores`).

        Args:
            task_id: one of the tasks.

        Returns:
            Its CPU share.

        Raises:
            KeyError: no such task.
        """
        return self._tasks[task_id].budget.cpus

    def terminal_tasks(self) -> list[TerminalTask]:
        """The tasks with their folders.

        Returns:
            Every task.
        """
        return list(self._tasks.values())

    def stub_policy(
        self, *, p_solve: float = 0.4, p_inspect: float = 0.35, seed: int = 0
    ) -> StubPolicy:
        """A `StubServer` responder playing an oracle-ish model on these tasks, for
        `turnbon bench --env terminal --model stub` (see `turnbon_terminal.stub_policy`).

        Args:
            p_solve: How often a candidate runs the task's solution.
            p_inspect: How often it only looks around (else it gives up).
            seed: Seeds its draws.

        Returns:
            The responder.
        """
        return StubPolicy(self.terminal_tasks(), p_solve=p_solve, p_inspect=p_inspect, seed=seed)

    async def start(self, task: TaskSpec, trial: int) -> TerminalEpisode | ContainerEpisode:
        """Starts an episode of a task.

        Args:
            task: The task (one of `tasks()`).
            trial: Which attempt at it this is (names the episode).

        Returns:
            A host-sandbox episode (a fresh working directory with the task's files,
            after its setup.sh ran), or a container episode (a started container of the
            task's image).
        """
        terminal_task = self.task(task.id)
        if self._in_container(terminal_task):
            return await self._start_container(terminal_task, trial)
        return await start_host_episode(self.host, self._python, terminal_task, trial)

    async def _start_container(self, task: TerminalTask, trial: int) -> ContainerEpisode:
        spec = task.container or ContainerSpec(
            image=self._image, workdir=DEFAULT_WORKDIR, build_timeout_s=task.setup_timeout_s
        )
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
        episode = ContainerEpisode(task, container)
        try:
            if task.container is None:  # a host task: its files and setup.sh
                await episode.prepare()
            if self.shell == "session":
                await episode.open_session()
        except BaseException:
            await episode.close()
            raise
        return episode


def _host_tasks(tasks: list[TerminalTask], sandbox: str, *, skip: bool) -> list[TerminalTask]:
    """The tasks the host sandbox can run: those that need an image are refused (or
    skipped with a warning, with `skip`)."""
    kept = []
    for task in tasks:
        if not task.needs_container:
            kept.append(task)
            continue
        image = task.container.describe() if task.container else "its verifier is test.sh"
        message = (
            f"task {task.id} runs in a container ({image}), and "
            f"sandbox={sandbox!r} asks for the host sandbox: drop it (or `--sandbox "
            f"{sandbox}`) to run the task in its container"
        )
        if not skip:
            raise DockerRequiredError(message)
        warnings.warn(f"skipped: {message}", DockerTaskSkipped, stacklevel=3)
    return kept


def _rebuilt(made_with: dict[str, Any]) -> TerminalEnvironment:
    """A `TerminalEnvironment` made again from its arguments (unpickling)."""
    return TerminalEnvironment(**made_with)


def environment(
    spec: str | None = None,
    *,
    sandbox: str | None = None,
    force_build: bool = False,
    shell: str = "session",
) -> TerminalEnvironment:
    """The `turnbon.environments` entry point `terminal`: `spec` is a tasks directory
    (or one task folder); None or empty runs the shipped suite. `sandbox` is the
    commands' `--sandbox` ("bwrap" or "container"; None: each task where it belongs);
    `force_build` their `--force-build`, `shell` their `--shell`."""
    if sandbox is not None and sandbox not in SANDBOX_CHOICES:
        raise ConfigurationError(
            f"--sandbox must be one of {', '.join(SANDBOX_CHOICES)}, got {sandbox!r}"
        )
    return TerminalEnvironment(
        tasks_dir=spec or None,
        sandbox=cast(SandboxChoice, sandbox),
        force_build=force_build,
        shell=cast(ShellChoice, shell),
    )
