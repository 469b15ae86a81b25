"""Running commands for one episode: its own directory, namespaces, limits and environment.

Under bwrap (the default) each episode has one long-lived bubblewrap sandbox (see
`turnbon_terminal.host.bwrap`) that every command enters; run as root, the sandbox also runs
as a uid of its own, leased machine-wide. Each command runs in a new session (its own
process group), with rlimits set, stdin closed, stdout and stderr interleaved into one
pipe that is read as it arrives. A command that outlives its timeout, or prints more
than the hard cap, has its process group killed; processes it started in the
background keep running until the episode ends (`kill_all`, before verification, or
`close`), when the sandbox's PID namespace is killed as one.

Each episode also has a budget (`ResourceBudget`, from its task): every process joins the
episode's control group before it execs, and its writable folders live on a file
system of its own (`turnbon_terminal.task.enforcement`); after each command the sandbox
looks whether it went over (`over_budget`).

The "uid" fallback runs commands on the host as the episode's uid (as root) or as the
runner, and kills every process of the uid at the end.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import os
import re
import shutil
import tempfile
import threading
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import turnbon_graph
from turnbon_terminal.errors import SandboxError
from turnbon_terminal.host.bwrap import TMP_PLACE, WORK_PLACE, Layout, Session, find_tools
from turnbon_terminal.host.users import (
    UidLease,
    chown_tree,
    kill_user,
    lease_uid,
    remove_user_files,
)
from turnbon_terminal.host.workroot import (
    default_work_root,
    private_dir,
    reachable_by_others,
    remove_tree,
)
from turnbon_terminal.output import CappedOutput, Pump
from turnbon_terminal.process import kill_group, run_process
from turnbon_terminal.result import CommandResult
from turnbon_terminal.task.budget import ResourceBudget
from turnbon_terminal.task.enforcement import Enforcement, EpisodeResources
from turnbon_terminal.task.envvars import SAFE_PATH, sandbox_env
from turnbon_terminal.task.settings import Fresh, SandboxSettings

__all__ = ["CommandResult", "Fresh", "Sandbox", "SandboxHost", "SandboxSettings"]

_log = logging.getLogger(__name__)
_SPAWNER = concurrent.futures.ThreadPoolExecutor(4, thread_name_prefix="turnbon-bwrap")
"""Starts and ends sandboxes. Its threads live as long as the process, which matters:
`--die-with-parent` kills a sandbox when the thread that started it ends."""
UID_FALLBACK_WARNING = (
    "turnbon_terminal: sandbox='uid' is the weak fallback: commands run on the host, see "
    "its network (127.0.0.1 included), can read every world-readable file (the tasks' "
    "tests and solutions too) and, as a non-root runner, run as you. Install bubblewrap "
    "and drop sandbox='uid' for real isolation"
)


class SandboxHost:
    """The prepared work root and settings from which episodes' sandboxes are made."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        root_user = os.geteuid() == 0
        self.tools: tuple[str, str, str] | None = None
        if settings.sandbox == "bwrap":
            self.tools = find_tools()
            if settings.isolate_user is False and root_user:
                raise SandboxError(
                    "as root, the bwrap sandbox always runs an episode as a uid of its own "
                    "(inside it root would keep capabilities): drop isolate_user=False, "
                    "or pass sandbox='uid' for the old behaviour"
                )
            isolate = root_user if settings.isolate_user is None else settings.isolate_user
        else:
            warnings.warn(UID_FALLBACK_WARNING, UserWarning, stacklevel=3)
            _log.warning(UID_FALLBACK_WARNING)
            isolate = root_user if settings.isolate_user is None else settings.isolate_user
        if isolate and not root_user:
            raise SandboxError(
                "isolate_user=True needs root (a uid per episode is set with setuid); "
                "run as root, or pass isolate_user=None to run commands as yourself"
            )
        self.isolate = isolate
        bash = shutil.which("bash", path=SAFE_PATH)
        if bash is None:
            raise SandboxError(f"bash was not found on {SAFE_PATH}; install bash")
        self.bash = bash
        self.work_root = settings.work_root or default_work_root()
        if isolate:
            reachable_by_others(self.work_root)
        # the library's and this integration's own code (this module is in host/)
        packages = [Path(turnbon_graph.__file__).parent, Path(__file__).parents[1]]
        self.hidden = (*packages, *settings.hidden)
        self.enforcement = Enforcement(
            self.work_root, settings.limits, enabled=settings.enforce_budgets
        )

    def create(
        self, name: str, *, network: bool = False, budget: ResourceBudget | None = None
    ) -> Sandbox:
        """A fresh episode directory (and uid, when isolating), on a file system and in
        a control group of its own where the machine has them (blocking); `network`: the
        task may use the internet (its task.toml says `allow_internet = true`)."""
        private_dir(self.work_root, 0o711)
        episodes = private_dir(self.work_root / "episodes", 0o711)
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60] or "episode"
        root = Path(tempfile.mkdtemp(prefix=f"{safe}-", dir=episodes))
        lease: UidLease | None = None
        resources: EpisodeResources | None = None
        try:
            if self.isolate:
                lease = lease_uid(
                    self.settings.uid_base,
                    self.settings.uid_count,
                    clear=self.enforcement.clear_leftovers,
                )
                lease.record(root)
                os.chmod(root, 0o711)
            resources = self.enforcement.make(root, budget or ResourceBudget())
            workdir, tmpdir = resources.root / "work", resources.root / "tmp"
            for path in (workdir, tmpdir):
                path.mkdir(mode=0o700)
                if lease is not None:
                    os.chown(path, lease.uid, lease.gid)
            return Sandbox(self, root, workdir, tmpdir, lease, resources, network=network)
        except BaseException:
            if resources is not None:
                resources.release()
            remove_tree(root)
            if lease is not None:
                lease.release()
            raise


class Sandbox:
    """One episode's directory, user, namespaces and processes."""

    def __init__(
        self,
        host: SandboxHost,
        root: Path,
        workdir: Path,
        tmpdir: Path,
        lease: UidLease | None,
        resources: EpisodeResources,
        *,
        network: bool = False,
    ) -> None:
        self.host = host
        self.settings = host.settings
        self.root = root
        self.workdir = workdir
        self.tmpdir = tmpdir
        self.network = network
        self._lease = lease
        self._pumps: set[Pump] = set()
        self._groups: set[int] = set()
        self._closed = False
        self.resources = resources
        self._over_budget: str | None = None
        group = resources.cgroup
        self._joins = group.open_joins() if group is not None else []
        bwrap = host.tools is not None
        self._preexec = self.settings.limits.preexec(
            limit_processes=bwrap or lease is not None, joins=self._joins
        )
        self._mutex = threading.Lock()
        self._session: concurrent.futures.Future[Session] | None = None

    @property
    def uid(self) -> int | None:
        """The episode's own uid, or None when commands run as the current user."""
        return self._lease.uid if self._lease is not None else None

    @property
    def isolation(self) -> str:
        """How this episode's commands are isolated: "bwrap" or "uid"."""
        return "bwrap" if self.host.tools is not None else "uid"

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def budget(self) -> ResourceBudget:
        return self.resources.budget

    @property
    def over_budget(self) -> str | None:
        """What of its budget the episode went over (memory, storage), as found after
        its last command; None while within it."""
        return self._over_budget

    async def check_budget(self) -> str | None:
        """`over_budget`, looked at again now (a background process may have gone over
        since the last command)."""
        if self._over_budget is None and not self._closed:
            self._over_budget = await asyncio.to_thread(self.resources.breach)
        return self._over_budget

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return sandbox_env(
            workdir=self.inside(self.workdir),
            tmpdir=self.inside(self.tmpdir),
            extra={**self.settings.env, **(extra or {})},
        )

    def give(self, path: Path) -> None:
        """Hands `path` (and all below it) to the episode's user."""
        if self._lease is not None:
            chown_tree(path, self._lease.uid, self._lease.gid)

    def _identity(self) -> dict[str, Any]:
        if self._lease is None:
            return {}
        return {"user": self._lease.uid, "group": self._lease.gid, "extra_groups": []}

    def inside(self, path: Path) -> Path:
        """Where the agent sees its work or tmp folder `path`: under bwrap, a fixed path
        (`bwrap.WORK_PLACE`, the same in every episode and fork); else `path` itself."""
        places = {self.workdir: WORK_PLACE, self.tmpdir: TMP_PLACE}
        return places.get(path, path) if self.host.tools is not None else path

    @property
    def writable_dirs(self) -> tuple[Path, ...]:
        """Every host folder the agent can write to (what a fork copies)."""
        return (self.workdir, self.tmpdir)

    def _layout(
        self, env: Mapping[str, str], fresh: Fresh | None = None, cwd: Path | None = None
    ) -> Layout:
        return Layout(
            writable=[self.workdir, *fresh.writable] if fresh is not None else self.writable_dirs,
            readonly=fresh.readonly if fresh is not None else (),
            hidden=self.host.hidden,
            network=self.network,
            tmpfs_bytes=self.settings.limits.tmpfs_bytes,
            env=env,
            cwd=cwd or self.inside(self.workdir),
            places={d: self.inside(d) for d in self.writable_dirs},
        )

    def _start_session(self, previous: concurrent.futures.Future[Session] | None) -> Session:
        if previous is not None and not previous.cancelled() and previous.exception() is None:
            previous.result().end()  # it died (the agent killed its first process)
        assert self.host.tools is not None
        return Session.start(
            self.host.tools[0],
            self._layout(self.env()),
            log=self.root / "bwrap.log",
            identity=self._identity(),
            preexec=self._preexec,
        )

    async def _entered(self) -> Session:
        """The episode's sandbox, started on first use (and again if it died)."""
        with self._mutex:
            future = self._session
            if future is None or (future.done() and not _healthy(future)):
                future = _SPAWNER.submit(self._start_session, future)
                self._session = future
        return await asyncio.wrap_future(future)

    async def _launch(
        self, argv: Sequence[str], cwd: Path, env: dict[str, str], fresh: Fresh | None
    ) -> tuple[list[str], dict[str, Any]]:
        """The argv and subprocess options that run `argv` in this episode's sandbox."""
        identity = {**self._identity(), "pass_fds": fresh.fds if fresh is not None else ()}
        if self.host.tools is None:
            return list(argv), {"cwd": cwd, "env": env, **identity}
        bwrap, nsenter, env_tool = self.host.tools
        if fresh is not None:
            layout = replace(self._layout({**env, "TMPDIR": "/tmp"}, fresh, cwd), init=False)
            return [bwrap, *layout.options(), "--", *argv], {"cwd": "/", "env": {}, **identity}
        session = await self._entered()
        command = session.enter(nsenter, env_tool, cwd, argv)
        return command, {"cwd": "/", "env": env, **identity, "pass_fds": session.fds}

    async def run(
        self,
        command: str,
        *,
        time_limit: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """`bash -c command` in the working directory."""
        return await self.execute([self.host.bash, "-c", command], time_limit=time_limit, env=env)

    async def execute(
        self,
        argv: Sequence[str],
        *,
        time_limit: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        keep: int | None = None,
        fresh: Fresh | None = None,
    ) -> CommandResult:
        """Runs `argv` in the episode's sandbox (or, with `fresh`, in a new one of its
        own); never raises for the command's own failure."""
        if self._closed:
            raise SandboxError("this episode is closed: start a new one to run commands")
        options = (argv, time_limit, env, cwd, keep, fresh)
        result = await self._execute_once(*options)
        if fresh is None and self._entry_failed(result):
            # The agent ended its sandbox's first process just before (`kill -9 -1`),
            # so this entered a namespace that was dying: the command never ran.
            result = await self._execute_once(*options)
        if fresh is None:
            result.over_budget = await self.check_budget()
        return result

    def _entry_failed(self, result: CommandResult) -> bool:
        with self._mutex:
            future = self._session
        dead = future is not None and future.done() and not _healthy(future)
        return dead and result.exit_code == 1 and result.output.startswith("nsenter: ")

    async def _execute_once(
        self,
        argv: Sequence[str],
        time_limit: float | None,
        env: Mapping[str, str] | None,
        cwd: Path | None,
        keep: int | None,
        fresh: Fresh | None,
    ) -> CommandResult:
        limit = self.settings.command_timeout if time_limit is None else time_limit
        sink = CappedOutput(keep or self.settings.output_limit)
        cwd = cwd or self.inside(self.workdir)
        command, options = await self._launch(argv, cwd, self.env(env), fresh)
        ran = await run_process(
            command,
            options,
            argv0=argv[0],
            limit=limit,
            sink=sink,
            hard_limit=self.settings.hard_output_limit,
            background_grace=self.settings.background_grace,
            preexec=self._preexec,
        )
        if ran.pump is not None:  # processes it left in the background
            self._pumps.add(ran.pump)  # drained (and closed past the hard cap) until close()
            self._groups.add(ran.pgid)
        return ran.result

    async def kill_all(self) -> bool:
        """Ends every process of the episode (before verification, and at close); True
        when none is left. A later command starts the sandbox afresh (files remain)."""
        for pump in list(self._pumps):
            await pump.stop()
        self._pumps.clear()
        if self.host.tools is not None:
            with self._mutex:
                future, self._session = self._session, None
            done = True
            if future is not None:
                ending = _SPAWNER.submit(_end_when_started, future)
                done = await asyncio.shield(asyncio.wrap_future(ending))
            if self._lease is not None:  # and the nsenter helpers on the host side
                done = await asyncio.to_thread(kill_user, self._lease.uid) and done
            return done
        if self._lease is not None:
            return await asyncio.to_thread(kill_user, self._lease.uid)
        # Without a uid of its own, the episode's processes are its commands' groups
        # (a process that started a new session of its own is out of reach).
        for pgid in self._groups:
            kill_group(pgid)
        self._groups.clear()
        return True

    async def close(self) -> None:
        """Kills every process of the episode and removes its directory; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.kill_all()
            for fd in self._joins:
                os.close(fd)
            self._joins.clear()
            await asyncio.to_thread(self.resources.release)
            if self._lease is not None:
                await asyncio.to_thread(remove_user_files, self._lease.uid)
            await asyncio.to_thread(remove_tree, self.root)
        finally:
            if self._lease is not None:
                self._lease.release()


def _healthy(future: concurrent.futures.Future[Session]) -> bool:
    return not future.cancelled() and future.exception() is None and future.result().alive


def _end_when_started(future: concurrent.futures.Future[Session]) -> bool:
    """Ends the session once its start finished (it was submitted to the pool before
    this, so it is running or done: no wait on a queued job)."""
    try:
        session = future.result()
    except BaseException:
        return True
    return session.end()
