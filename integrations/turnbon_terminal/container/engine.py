"""The container engine: Podman or Docker, driven through its command line.

One engine serves an environment: `Engine.find` takes the name it is given (the
`engine=` option of `TerminalEnvironment`), else the `TURNBON_ENGINE` environment
variable (which `scripts/base_image.sh` reads too), else `podman` when it is installed,
else `docker`. Every call runs the CLI as a subprocess of the event loop, never
blocking it, with a time limit; a failure raises `ContainerError` with the engine's own
words.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from turnbon_graph.errors import ConfigurationError
from turnbon_terminal.errors import SandboxError

ENGINE_VARIABLE = "TURNBON_ENGINE"
"""The environment variable that picks the engine (`podman` or `docker`)."""
ENGINES = ("podman", "docker")
DEFAULT_CALL_TIMEOUT_S = 120.0
_SAID = 1500
"""Characters of the engine's own message kept in an error."""


class ContainerError(SandboxError):
    """The container engine failed: the image did not build or pull, the container did
    not start, a copy failed. An episode that cannot start ends as an agent error."""


class EngineStorageError(ContainerError):
    """The engine's own storage failed (a layer or container it lists is gone, as when
    another process removes images meanwhile): not the task's fault, and worth a retry."""


STORAGE_FAILURES = (
    "layer not known",
    "identifier is not a container",
    "identifier is not an image",
    "no such layer",
    "error locating item named",
    "readlink /var/lib/containers/storage",
)
"""What the engine says when its own storage, not the call's input, is at fault."""


@dataclass(frozen=True)
class Completed:
    """What one engine call did."""

    code: int
    out: bytes
    err: bytes

    @property
    def said(self) -> str:
        """The engine's message (stderr, else stdout), cut to its end."""
        text = (self.err or self.out).decode(errors="replace").strip()
        return text[-_SAID:] or f"exit code {self.code}"


@dataclass(frozen=True)
class Engine:
    """A container engine's CLI (`name` is "podman" or "docker")."""

    name: str
    path: str
    cwd: str = "/"
    """Where the CLI runs: Podman's conmon writes an `oom` file into its current folder
    for every `exec`, so the CLI never runs in the user's (`Engine.find` gives it a
    private folder of its own)."""

    @classmethod
    def find(cls, choice: str | None = None) -> Engine:
        """The engine `choice` names, else `$TURNBON_ENGINE`'s, else podman or docker,
        whichever is installed (podman first)."""
        wanted = choice or os.environ.get(ENGINE_VARIABLE) or None
        if wanted is not None and wanted not in ENGINES:
            origin = "engine=" if choice else f"${ENGINE_VARIABLE}"
            raise ConfigurationError(
                f"{origin} must be one of {', '.join(ENGINES)}, got {wanted!r}"
            )
        for name in [wanted] if wanted else ENGINES:
            path = shutil.which(name)
            if path is not None:
                folder = Path(tempfile.gettempdir(), f"turnbon-engine-{os.getuid()}")
                folder.mkdir(mode=0o700, exist_ok=True)
                return cls(name, path, str(folder))
        missing = wanted or "podman or docker"
        raise ContainerError(
            f"{missing} is not installed, and this task runs in a container: install "
            "Podman (as root: `make setup-podman`, which also writes the containers.conf "
            f"it needs here) or Docker, or set {ENGINE_VARIABLE} to the engine you have"
        )

    async def call(
        self,
        *args: str,
        limit_s: float = DEFAULT_CALL_TIMEOUT_S,
        stdin: bytes | None = None,
        check: bool = True,
    ) -> Completed:
        """`<engine> args...`; raises ContainerError when it fails (unless `check` is
        False) or outlives `limit_s` (then the client is killed)."""
        process = await asyncio.create_subprocess_exec(
            self.path,
            *args,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.cwd,
        )
        try:
            out, err = await asyncio.wait_for(process.communicate(stdin), limit_s)
        except BaseException as exc:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with contextlib.suppress(Exception):
                await asyncio.shield(process.wait())
            if isinstance(exc, TimeoutError):
                raise ContainerError(
                    f"`{self.name} {_shown(args)}` did not finish within {limit_s:g} s"
                ) from None
            raise
        done = Completed(process.returncode or 0, out, err)
        if check and done.code != 0:
            said = done.said
            if any(sign in said.lower() for sign in STORAGE_FAILURES):
                raise EngineStorageError(
                    f"{self.name}'s own storage failed during `{self.name} {_shown(args)}` "
                    f"({said}): not the task's fault (another process may have removed "
                    f"images meanwhile); run again, and if it persists check the engine "
                    f"(`{self.name} system check`, or `{self.name} system prune`)"
                )
            raise ContainerError(f"`{self.name} {_shown(args)}` failed: {said}")
        return done

    async def pipe(self, source: Sequence[str], target: Sequence[str], *, limit_s: float) -> None:
        """`<engine> source... | <engine> target...`, streamed (a container's folder as a
        tar archive into another's); raises ContainerError when either fails."""
        read_fd, write_fd = os.pipe()
        try:
            sender = await asyncio.create_subprocess_exec(
                self.path,
                *source,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=write_fd,
                stderr=asyncio.subprocess.PIPE,
                cwd=self.cwd,
            )
            receiver = await asyncio.create_subprocess_exec(
                self.path, *target, stdin=read_fd, cwd=self.cwd,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
        finally:
            os.close(read_fd)
            os.close(write_fd)
        try:
            ends = await asyncio.wait_for(
                asyncio.gather(sender.communicate(), receiver.communicate()), limit_s
            )
        except BaseException:
            for process in (sender, receiver):
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
            raise
        for process, args, (out, err) in zip(
            (sender, receiver), (source, target), ends, strict=True
        ):
            if process.returncode:
                said = Completed(process.returncode, out or b"", err or b"").said
                raise ContainerError(f"`{self.name} {_shown(args)}` failed: {said}")

    async def lines(self, *args: str, limit_s: float = DEFAULT_CALL_TIMEOUT_S) -> list[str]:
        """The non-empty lines a listing call prints (`ps -q`, `images --format ...`)."""
        done = await self.call(*args, limit_s=limit_s)
        return [line for line in done.out.decode(errors="replace").splitlines() if line.strip()]

    async def exists(self, kind: str, name: str) -> bool:
        """Whether the image (`kind` "image"), container or volume `name` exists."""
        field = "{{.Name}}" if kind == "volume" else "{{.Id}}"
        done = await self.call(kind, "inspect", name, "--format", field, check=False)
        return done.code == 0

    async def remove(self, kind: str, names: Sequence[str]) -> None:
        """Removes containers, volumes or images (`kind`), ignoring those already gone;
        never raises (cleanup must go on)."""
        if not names:
            return
        command = {
            "container": ["rm", "-f", "-t", "0"] if self.name == "podman" else ["rm", "-f"],
            "volume": ["volume", "rm", "-f"],
            "image": ["rmi"],  # never -f: an image another container uses stays
        }[kind]
        with contextlib.suppress(ContainerError, OSError):
            await self.call(*command, *names, check=False)


def _shown(args: Sequence[str]) -> str:
    """A call's arguments as shown in an error: the first few, never a command's text."""
    shown = " ".join(args[:3])
    return shown + (" ..." if len(args) > 3 else "")
