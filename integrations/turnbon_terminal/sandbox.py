"""Running commands for one episode: its own directory, user, limits and environment.

Each command runs in a new session (its own process group) as the episode's uid, with
rlimits set, stdin closed, stdout and stderr interleaved into one pipe that is read as it
arrives. A command that outlives its timeout, or prints more than the hard cap, has its
process group killed; processes it started in the background keep running until the
episode closes, when every process of the uid is killed and the directory removed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnbon_graph.errors import ConfigurationError
from turnbon_terminal.envvars import SAFE_PATH, checked, sandbox_env
from turnbon_terminal.errors import SandboxError
from turnbon_terminal.limits import Limits, MiB
from turnbon_terminal.output import CappedOutput
from turnbon_terminal.users import (
    UID_BASE,
    UID_COUNT,
    UidLease,
    chown_tree,
    kill_user,
    lease_uid,
    remove_user_files,
)
from turnbon_terminal.workroot import default_work_root, private_dir, remove_tree

_CHUNK = 64 * 1024


@dataclass(frozen=True)
class SandboxSettings:
    """How every episode's commands run (shared by all episodes of an environment)."""

    command_timeout: float = 60.0
    output_limit: int = 8 * 1024
    """Bytes of output the agent sees: the first and last half, with a line about the cut."""
    hard_output_limit: int = 10 * MiB
    """Past this much output the command is killed (a `yes` flood)."""
    limits: Limits = field(default_factory=Limits)
    isolate_user: bool | None = None
    """A dedicated uid per episode; None: when running as root (it needs root)."""
    work_root: Path | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    """Extra variables for every command; secret-looking names are refused."""
    uid_base: int = UID_BASE
    uid_count: int = UID_COUNT
    background_grace: float = 0.25
    """After the command exits, how long to wait for output still in flight; if the pipe
    is still held then (background processes), the result is returned anyway."""

    def __post_init__(self) -> None:
        checked(self.env, origin="SandboxSettings.env")
        if self.command_timeout <= 0 or self.output_limit < 64 or self.hard_output_limit < 1:
            raise ConfigurationError(
                "command_timeout must be > 0, output_limit >= 64 and hard_output_limit >= 1; "
                f"got {self.command_timeout}, {self.output_limit}, {self.hard_output_limit}"
            )


@dataclass
class CommandResult:
    """What one command did; `render()` is what the agent reads."""

    output: str
    exit_code: int
    """The process's return code: negative when a signal ended it."""
    timeout: float
    timed_out: bool = False
    flooded: bool = False
    background: bool = False
    """Processes the command started still held its output when it returned."""
    total_bytes: int = 0
    hard_limit: int = 0
    duration_s: float = 0.0

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not (self.timed_out or self.flooded)

    def render(self) -> str:
        lines = [self.output.rstrip("\n") if self.output else "(no output)"]
        if self.timed_out:
            lines.append(f"[timed out after {self.timeout:g} s: the command was killed]")
        if self.flooded:
            lines.append(f"[more than {_size(self.hard_limit)} of output: the command was killed]")
        if self.background:
            lines.append(
                "[processes the command started in the background still run and hold its "
                "output; their further output is discarded]"
            )
        if self.exit_code >= 0:
            lines.append(f"[exit code {self.exit_code}]")
        else:
            name = _signal_name(-self.exit_code)
            lines.append(f"[exit code {128 - self.exit_code} (killed by {name})]")
        return "\n".join(lines)


def _size(n: int) -> str:
    return f"{n / MiB:g} MiB" if n >= MiB else f"{n} bytes"


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


class _Pump:
    """Reads a command's output pipe into a CappedOutput until EOF (or closed)."""

    def __init__(self, fd: int, sink: CappedOutput, hard_limit: int) -> None:
        self._fd = fd
        self.sink = sink
        self.hard_limit = hard_limit
        self.flooded = asyncio.Event()
        self._reader = asyncio.StreamReader(limit=2 * _CHUNK)
        self._transport: asyncio.ReadTransport | None = None
        self.task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        pipe = os.fdopen(self._fd, "rb", buffering=0)
        protocol = asyncio.StreamReaderProtocol(self._reader)
        try:
            self._transport, _ = await loop.connect_read_pipe(lambda: protocol, pipe)
        except BaseException:
            pipe.close()
            raise
        self.task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        try:
            while chunk := await self._reader.read(_CHUNK):
                self.sink.add(chunk)
                if self.sink.total > self.hard_limit:
                    self.flooded.set()
                    if self.sink.frozen:
                        break  # background writers only: stop reading; they get SIGPIPE
        finally:
            self.close()

    def close(self) -> None:
        if self._transport is not None and not self._transport.is_closing():
            self._transport.close()

    async def stop(self) -> None:
        self.close()
        if self.task is not None and not self.task.done():
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class SandboxHost:
    """The prepared work root and settings from which episodes' sandboxes are made."""

    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        root_user = os.geteuid() == 0
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
        self._root = settings.work_root or default_work_root()
        self._prepared = False

    def _prepare(self) -> tuple[Path, Path]:
        private_dir(self._root, 0o711)
        episodes = private_dir(self._root / "episodes", 0o711)
        locks = private_dir(self._root / "uids", 0o700)
        return episodes, locks

    def create(self, name: str) -> Sandbox:
        """A fresh episode directory (and uid, when isolating)."""
        episodes, locks = self._prepare()
        safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:60] or "episode"
        root = Path(tempfile.mkdtemp(prefix=f"{safe}-", dir=episodes))
        lease: UidLease | None = None
        try:
            if self.isolate:
                lease = lease_uid(locks, self.settings.uid_base, self.settings.uid_count)
                _remove_stale_episodes(episodes, lease.uid)
                os.chmod(root, 0o711)
            workdir, tmpdir = root / "work", root / "tmp"
            for path in (workdir, tmpdir):
                path.mkdir(mode=0o700)
                if lease is not None:
                    os.chown(path, lease.uid, lease.gid)
        except BaseException:
            remove_tree(root)
            if lease is not None:
                lease.release()
            raise
        return Sandbox(self, root, workdir, tmpdir, lease)


def _remove_stale_episodes(episodes: Path, uid: int) -> None:
    """Removes episode directories a crashed run left for `uid`: the uid's lock was free,
    so no live episode owns them."""
    for entry in episodes.iterdir():
        try:
            stale = (entry / "work").lstat().st_uid == uid
        except OSError:
            continue
        if stale:
            remove_tree(entry)


class Sandbox:
    """One episode's directory, user and processes."""

    def __init__(
        self, host: SandboxHost, root: Path, workdir: Path, tmpdir: Path, lease: UidLease | None
    ) -> None:
        self.host = host
        self.settings = host.settings
        self.root = root
        self.workdir = workdir
        self.tmpdir = tmpdir
        self._lease = lease
        self._pumps: set[_Pump] = set()
        self._groups: set[int] = set()
        self._closed = False
        self._preexec = self.settings.limits.preexec(limit_processes=lease is not None)

    @property
    def uid(self) -> int | None:
        """The episode's own uid, or None when commands run as the current user."""
        return self._lease.uid if self._lease is not None else None

    @property
    def closed(self) -> bool:
        return self._closed

    def env(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        return sandbox_env(
            workdir=self.workdir,
            tmpdir=self.tmpdir,
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
    ) -> CommandResult:
        """Runs `argv` as the episode's user; never raises for the command's own failure."""
        if self._closed:
            raise SandboxError("this episode is closed: start a new one to run commands")
        limit = self.settings.command_timeout if time_limit is None else time_limit
        sink = CappedOutput(keep or self.settings.output_limit)
        read_fd, write_fd = os.pipe()
        started = time.monotonic()
        try:
            process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                cwd=cwd or self.workdir,
                env=self.env(env),
                start_new_session=True,  # its own process group, killed as one
                umask=0o077,  # what it creates in shared places stays its own
                preexec_fn=self._preexec,
                **self._identity(),
            )
        except OSError as exc:
            # Could not execute argv[0] at all: answered like a shell would (126/127).
            os.close(read_fd)
            code = 127 if isinstance(exc, FileNotFoundError) else 126
            return CommandResult(
                output=f"cannot run {argv[0]}: {exc.strerror or exc}\n",
                exit_code=code,
                timeout=limit,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        pump = _Pump(read_fd, sink, self.settings.hard_output_limit)
        timed_out = flooded = background = False
        waiter: asyncio.Future[int] | None = None
        try:
            await pump.open()
            waiter = asyncio.ensure_future(process.wait())
            flood = asyncio.ensure_future(pump.flooded.wait())
            try:
                await asyncio.wait(
                    {waiter, flood}, timeout=limit, return_when=asyncio.FIRST_COMPLETED
                )
                if not waiter.done():
                    flooded = flood.done()
                    timed_out = not flooded
                    _kill_group(process.pid)
                    await waiter
            finally:
                flood.cancel()
            assert pump.task is not None
            try:
                await asyncio.wait_for(asyncio.shield(pump.task), self.settings.background_grace)
            except TimeoutError:
                background = True
        except BaseException:
            # Cancelled (the agent's time ran out) or broken: nothing of it may live on.
            _kill_group(process.pid)
            if waiter is not None:
                waiter.cancel()
            await pump.stop()
            raise
        sink.freeze()
        if background:
            self._pumps.add(pump)  # drained (and closed past the hard cap) until close()
            self._groups.add(process.pid)
        return CommandResult(
            output=sink.text(),
            exit_code=process.returncode if process.returncode is not None else -9,
            timeout=limit,
            timed_out=timed_out,
            flooded=flooded,
            background=background,
            total_bytes=sink.seen,
            hard_limit=self.settings.hard_output_limit,
            duration_s=round(time.monotonic() - started, 3),
        )

    async def kill_all(self) -> bool:
        """Kills every process of the episode; True when none is left."""
        for pump in list(self._pumps):
            await pump.stop()
        self._pumps.clear()
        if self._lease is not None:
            return await asyncio.to_thread(kill_user, self._lease.uid)
        # Without a uid of its own, the episode's processes are its commands' groups
        # (a process that started a new session of its own is out of reach).
        for pgid in self._groups:
            _kill_group(pgid)
        self._groups.clear()
        return True

    async def close(self) -> None:
        """Kills every process of the episode and removes its directory; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            await self.kill_all()
            if self._lease is not None:
                await asyncio.to_thread(remove_user_files, self._lease.uid)
            await asyncio.to_thread(remove_tree, self.root)
        finally:
            if self._lease is not None:
                self._lease.release()
