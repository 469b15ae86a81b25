"""One container per episode: made from the task's image, bounded by its budget, and
every command of the episode run in it with `<engine> exec`.

    <engine> run -d --rm --init --network none --memory M --memory-swap M --cpus C
        --pids-limit 4096 -v <host folder>/verifier:/logs/verifier
        [-v <ext4 volume of storage_mb>:<workdir>] --label turnbon.owner=<this process>
        --entrypoint sleep IMAGE <the episode's longest possible life>

The network is on only when the task allows it. The agent's commands run in its shell
session (`turnbon_terminal.container.session`) when the episode keeps one; every other
command (the verifier's, a setup.sh, `run`, the agent's in an image without tmux) runs as
`exec -w <workdir> CONTAINER timeout -s KILL <limit> bash -c COMMAND`
(`turnbon_terminal.container.command`). Processes a command leaves in the background run
until the episode ends (as in the host sandbox), and their output after the command
returned is not shown.

The container removes itself when its `sleep` ends, whatever happened to this process;
`close` removes it, its volume and an image built for it at once, and the first
episode of a run removes what runs that died left (`turnbon_terminal.container.owners`).
"""

from __future__ import annotations

import asyncio
import re
import secrets
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from turnbon_terminal.container.command import COMMAND_ENV, env_flags, exec_command
from turnbon_terminal.container.engine import ContainerError, Engine
from turnbon_terminal.container.images import EpisodeImage, episode_image, keep_images_by_default
from turnbon_terminal.container.owners import OWNER_FILE, OWNER_LABEL, current_owner, sweep
from turnbon_terminal.container.volumes import StorageSupport, is_full, storage_volume
from turnbon_terminal.errors import SandboxError
from turnbon_terminal.host.cgroups import EpisodeCgroup
from turnbon_terminal.host.workroot import default_work_root, private_dir
from turnbon_terminal.result import CommandResult
from turnbon_terminal.task.budget import ResourceBudget
from turnbon_terminal.task.settings import SandboxSettings
from turnbon_terminal.task.tb2 import DEFAULT_WORKDIR, ContainerSpec

VERIFIER_LOGS = "/logs/verifier"
DEFAULT_IMAGE = "localhost/turnbon-bookworm:latest"
"""The image of tasks that name none (`sandbox="container"`): Debian 12 with bash, tmux
and python3, built offline by `make setup-podman` (scripts/base_image.sh)."""
CONTAINER_PIDS = 4096
"""Processes a container may hold (Podman's default is 2048, Docker's unbounded)."""
LIFETIME_MARGIN_S = 900.0
"""The container's `sleep` outlasts the episode's agent and verifier time by this much."""
_NO_TIMEOUT = 4
_PREPARE = (
    f'mkdir -p "$1" /logs/agent || exit 3; command -v timeout >/dev/null || exit {_NO_TIMEOUT}'
)
"""Makes the working directory and says whether the image has coreutils' `timeout`."""


class ContainerHost:
    """The engine and settings from which an environment's containers are made."""

    def __init__(
        self,
        settings: SandboxSettings,
        *,
        engine: str | None = None,
        keep_images: bool | None = None,
        work_root: Path | None = None,
        force_build: bool = False,
    ) -> None:
        self.settings = settings
        self.force_build = force_build
        self.engine = Engine.find(engine)
        self.keep_images = keep_images_by_default() if keep_images is None else keep_images
        self.work_root = work_root or settings.work_root or default_work_root()
        self.folders = self.work_root / "containers"
        self.storage = StorageSupport.detect(settings.enforce_budgets)
        self._swept = False

    async def create(
        self,
        name: str,
        spec: ContainerSpec,
        *,
        network: bool,
        budget: ResourceBudget,
        lifetime_s: float,
        image: EpisodeImage | None = None,
    ) -> Container:
        """A started container for one episode of the task `spec` describes (of
        `image` when given: a fork's, which the container then owns)."""
        if not self._swept:
            self._swept = True
            await asyncio.to_thread(private_dir, self.folders.parent, 0o711)
            await asyncio.to_thread(private_dir, self.folders, 0o700)
            await sweep(self.engine, self.folders)
        safe = re.sub(r"[^a-z0-9_.-]+", "-", name.lower()).strip(".-")[:40] or "episode"
        ident = f"turnbon-{safe}-{secrets.token_hex(3)}"
        folder = await asyncio.to_thread(_host_folder, self.folders, ident)
        container = Container(self, ident, folder, spec, network=network, budget=budget)
        try:
            await container.start(lifetime_s, image)
        except BaseException:
            await asyncio.shield(container.close())
            raise
        return container


def _host_folder(folders: Path, ident: str) -> Path:
    """The episode's folder on this machine, named for its owner first (blocking)."""
    folder = Path(tempfile.mkdtemp(prefix=f"{ident}-", dir=folders))
    (folder / OWNER_FILE).write_text(current_owner() + "\n")
    # Writable by the image's user, whoever it is (as Harbor's): the folder above is ours.
    (folder / "verifier").mkdir()
    (folder / "verifier").chmod(0o777)
    return folder


class Container:
    """One episode's container and what it runs (see the module)."""

    def __init__(
        self,
        host: ContainerHost,
        name: str,
        folder: Path,
        spec: ContainerSpec,
        *,
        network: bool,
        budget: ResourceBudget,
    ) -> None:
        self.host = host
        self.engine = host.engine
        self.settings = host.settings
        self.name = name
        self.folder = folder
        self.spec = spec
        self.network = network
        self.budget = budget
        self.image: EpisodeImage | None = None
        self.workdir = spec.workdir or DEFAULT_WORKDIR
        self.volume: str | None = None
        self._mountpoint: str | None = None
        self._memory: EpisodeCgroup | None = None
        self._pids_events: Path | None = None
        self.lifetime_s = 0.0
        self._timeout = False
        self._running = False
        self._closed = False
        self._over_budget: str | None = None

    @property
    def verifier_logs(self) -> Path:
        """The host folder mounted at /logs/verifier."""
        return self.folder / "verifier"

    @property
    def closed(self) -> bool:
        return self._closed

    async def start(self, lifetime_s: float, image: EpisodeImage | None = None) -> None:
        owner = current_owner()
        self.lifetime_s = lifetime_s
        self.image = image or await episode_image(
            self.engine,
            self.spec,
            episode=self.name,
            owner=owner,
            keep=self.host.keep_images,
            force_build=self.host.force_build,
        )
        if self.spec.workdir is None:
            said = await self.engine.lines(
                "image", "inspect", "--format", "{{.Config.WorkingDir}}", self.image.name
            )
            self.workdir = (said[0].strip() if said else "") or DEFAULT_WORKDIR
        self.volume = await storage_volume(
            self.engine,
            self.host.storage,
            self.folder,
            f"{self.name}-work",
            self.budget.storage_mb,
            owner,
        )
        try:
            await self._run(owner, lifetime_s)
        except ContainerError as exc:
            if self.volume is None:
                raise
            # The engine could not mount the volume here (no loop devices?): without it.
            await self.engine.remove("volume", [self.volume])
            self.volume = None
            await self._run(owner, lifetime_s)
            self.host.storage.off(f"the engine could not mount it: {exc}")
        self._running = True
        made, pid = await asyncio.gather(
            self.engine.call(
                "exec",
                "-u",
                "0",
                self.name,
                "sh",
                "-c",
                _PREPARE,
                "sh",
                self.workdir,
                check=False,
            ),
            self.engine.lines("inspect", "--format", "{{.State.Pid}}", self.name),
        )
        if made.code not in (0, _NO_TIMEOUT):
            raise ContainerError(
                f"the container could not make its working directory {self.workdir}: {made.said}"
            )
        self._timeout = made.code == 0
        first = int(pid[0]) if pid else 0
        self._memory = await asyncio.to_thread(_memory_group, first)
        self._pids_events = await asyncio.to_thread(_pids_events, first)
        if self.volume is not None:
            where = await self.engine.lines(
                "volume", "inspect", "--format", "{{.Mountpoint}}", self.volume
            )
            self._mountpoint = where[0].strip() if where else None

    async def _run(self, owner: str, lifetime_s: float) -> None:
        assert self.image is not None
        budget = self.budget
        flags = ["run", "-d", "--rm", "--init", "--name", self.name]
        flags += ["--label", f"{OWNER_LABEL}={owner}"]
        if not self.network:
            flags += ["--network", "none"]
        if self.settings.enforce_budgets:
            memory = f"{budget.memory_mb}m"
            flags += ["--memory", memory, "--memory-swap", memory, "--cpus", f"{budget.cpus:g}"]
        flags += ["--pids-limit", str(CONTAINER_PIDS)]
        flags += ["-v", f"{self.verifier_logs}:{VERIFIER_LOGS}"]
        if self.volume is not None:
            flags += ["-v", f"{self.volume}:{self.workdir}"]
        flags += env_flags({**self.spec.env, "TASK_WORKDIR": self.workdir})
        flags += ["--entrypoint", "sleep", self.image.name, str(int(lifetime_s))]
        try:
            await self.engine.call(*flags, limit_s=max(self.spec.build_timeout_s, 60.0))
        except ContainerError as exc:
            raise ContainerError(f"the container of {self.name} did not start: {exc}") from None

    @property
    def over_budget(self) -> str | None:
        """What of its budget the episode went over (memory, storage), as found after
        its last command; None while within it."""
        return self._over_budget

    async def check_budget(self) -> str | None:
        """`over_budget`, looked at again now."""
        if self._over_budget is None and self._running:
            self._over_budget = await asyncio.to_thread(self._breach)
        return self._over_budget

    def _breach(self) -> str | None:
        if self._memory is not None and self._memory.oom_kills() > 0:
            return (
                f"memory: its processes needed more than memory_mb = {self.budget.memory_mb}, "
                "so the kernel killed one"
            )
        if self._pids_events is not None and _forks_refused(self._pids_events) > 0:
            return (
                f"processes: its processes reached the container's limit of {CONTAINER_PIDS}, "
                "so a fork was refused"
            )
        if self._mountpoint is not None and is_full(self._mountpoint):
            return (
                f"storage: its files filled storage_mb = {self.budget.storage_mb} "
                f"(the working directory {self.workdir})"
            )
        return None

    async def run(
        self,
        command: str,
        *,
        time_limit: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """`bash -c command` in the working directory, as the agent's tool runs it when
        the episode keeps no shell session."""
        return await self.execute(
            ["bash", "-c", command], time_limit=time_limit, env={**COMMAND_ENV, **(env or {})}
        )

    async def execute(
        self,
        argv: Sequence[str],
        *,
        time_limit: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        keep: int | None = None,
        root: bool = False,
    ) -> CommandResult:
        """Runs `argv` in the container, as the image's user (as root with `root`: the
        verifier's own steps); never raises for the command's own failure."""
        if self._closed:
            raise SandboxError("this episode is closed: start a new one to run commands")
        result = await self._execute(argv, time_limit, env, cwd, keep, root)
        result.over_budget = await self.check_budget()
        return result

    async def _execute(
        self,
        argv: Sequence[str],
        time_limit: float | None,
        env: Mapping[str, str] | None,
        cwd: str | None,
        keep: int | None,
        root: bool,
    ) -> CommandResult:
        return await exec_command(
            self.engine,
            self.name,
            self.settings,
            argv,
            limit=self.settings.command_timeout if time_limit is None else time_limit,
            env={**self.settings.env, **(env or {})},
            cwd=cwd or self.workdir,
            keep=keep,
            root=root,
            timeout_inside=self._timeout,
        )

    async def copy_in(self, source: Path, target: str) -> None:
        """Copies the host folder `source` into the container as `target`."""
        await self.engine.call("cp", f"{source}/.", f"{self.name}:{target}")

    async def copy_tar(self, archive: bytes, target: str) -> None:
        """Unpacks the tar `archive` into the container's folder `target`."""
        await self.engine.call("cp", "-", f"{self.name}:{target}", stdin=archive)

    async def copy_out(self, source: str, target: Path) -> None:
        """Copies the container's folder `source` to the new host folder `target`."""
        await self.engine.call("cp", f"{self.name}:{source}/.", str(target))

    async def close(self) -> None:
        """Removes the container, its volume, the image built for it and its host
        folder; idempotent, and never stopped halfway by a cancellation."""
        if self._closed:
            return
        self._closed = True
        await asyncio.shield(self._remove())

    async def _remove(self) -> None:
        await self.engine.remove("container", [self.name])
        if self.volume is not None:
            await self.engine.remove("volume", [self.volume])
        if self.image is not None and self.image.own:
            await self.engine.remove("image", [self.image.name])
        await asyncio.to_thread(shutil.rmtree, self.folder, True)


def _pids_events(pid: int) -> Path | None:
    """The `pids.events` file of the container whose first process is `pid`, which
    counts the forks its limit refused; None when it cannot be read."""
    found = _cgroup(pid, "pids")
    return found[1] / "pids.events" if found is not None else None


def _forks_refused(events: Path) -> int:
    """How many forks the pids limit refused (`max N` of pids.events; 0 when unread)."""
    try:
        for line in events.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "max":
                return int(value)
    except (OSError, ValueError):
        pass
    return 0


def _memory_group(pid: int) -> EpisodeCgroup | None:
    """The memory control group of the container whose first process is `pid` on this
    machine, to read its OOM kills from (None when it cannot be read)."""
    found = _cgroup(pid, "memory")
    return EpisodeCgroup(found[0], (found[1],)) if found is not None else None


def _cgroup(pid: int, controller: str) -> tuple[Literal["v1", "v2"], Path] | None:
    """The cgroup version and folder of `controller` for the process `pid` (v1: its
    controller's hierarchy, else v2's unified one); None when it cannot be read."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines() if pid > 0 else []
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return "v1", Path("/sys/fs/cgroup", controller, path.lstrip("/"))
    for line in lines:
        if line.startswith("0::"):
            return "v2", Path("/sys/fs/cgroup", line[3:].lstrip("/"))
    return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return EpisodeCgroup("v1", (Path("/sys/fs/cgroup/memory") / path.lstrip("/"),))
    for line in lines:
        if line.startswith("0::"):
            return EpisodeCgroup("v2", (Path("/sys/fs/cgroup") / line[3:].lstrip("/"),))
    return None
