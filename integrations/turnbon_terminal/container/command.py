"""One command in a running container: `<engine> exec` run as any command is
(`turnbon_terminal.process`), its output read as it comes,
its time limit kept inside the container (`timeout -s KILL`: killing the engine's client
would leave the command running there), and the command found and killed inside when
its output floods, when it outlives its limit anyway, or when it is cancelled: every
command carries a variable naming it, `TURNBON_COMMAND=<token>`, which its processes
inherit."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
from collections.abc import Mapping, Sequence

from turnbon_terminal.container.engine import ContainerError, Engine
from turnbon_terminal.output import CappedOutput
from turnbon_terminal.process import run_process
from turnbon_terminal.result import CommandResult
from turnbon_terminal.task.settings import SandboxSettings

EXEC_GRACE_S = 5.0
"""How long past a command's limit the client may take before it is killed too."""
MARK = "TURNBON_COMMAND"
COMMAND_ENV = {
    "TERM": "dumb",
    "PAGER": "cat",
    "GIT_PAGER": "cat",
    "GIT_EDITOR": "true",
    "DEBIAN_FRONTEND": "noninteractive",
    "PYTHONUNBUFFERED": "1",
}
"""Set for the agent's commands: nothing waits for a terminal, a pager or an editor."""
_KILL_MARKED = (
    'for d in /proc/[0-9]*; do grep -qs "$1" "$d/environ" && kill -9 "${d#/proc/}"; '
    "done 2>/dev/null; true"
)


async def exec_command(
    engine: Engine,
    container: str,
    settings: SandboxSettings,
    argv: Sequence[str],
    *,
    limit: float,
    env: Mapping[str, str],
    cwd: str,
    keep: int | None = None,
    root: bool = False,
    timeout_inside: bool = True,
) -> CommandResult:
    """Runs `argv` in `container` (as root with `root`); never raises for the command's
    own failure. `timeout_inside`: the image has coreutils' `timeout`."""
    token = marked()
    flags = ["exec", "-w", cwd, "-e", token, *(["-u", "0"] if root else []), *env_flags(env)]
    inside = ["timeout", "-s", "KILL", f"{limit:.3f}"] if timeout_inside else []
    sink = CappedOutput(keep or settings.output_limit)

    async def end(pid: int) -> None:
        # killing the engine's client would leave the command running in the container
        await kill_marked(engine, container, token)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    ran = await run_process(
        [engine.path, *flags, container, *inside, *argv],
        {"cwd": engine.cwd},  # not the user's folder: conmon writes a file there
        argv0=engine.path,
        limit=limit + EXEC_GRACE_S,
        sink=sink,
        hard_limit=settings.hard_output_limit,
        background_grace=settings.background_grace,
        end=end,
    )
    if ran.pump is not None:
        await ran.pump.stop()  # the client's output closes when it ends: nothing to wait for
    result = ran.result
    result.timeout = limit
    if result.exit_code == 137 and timeout_inside and result.duration_s >= limit:
        result.timed_out = True  # `timeout -s KILL` ended it
    if result.timed_out or result.flooded:
        result.exit_code = -9
    result.background = False
    return result


def marked() -> str:
    """A new `TURNBON_COMMAND=<token>` for a command's `-e`: its processes carry it."""
    return f"{MARK}={secrets.token_hex(8)}"


def env_flags(env: Mapping[str, str]) -> list[str]:
    """`-e KEY=VALUE` for each variable of `env`, as `<engine> run` and `exec` take them."""
    return [flag for key, value in env.items() for flag in ("-e", f"{key}={value}")]


async def kill_marked(engine: Engine, container: str, token: str) -> None:
    """Kills every process in `container` that carries `token` in its environment (a
    container that is gone has none left: never raises)."""
    with contextlib.suppress(ContainerError, OSError):
        await engine.call(
            "exec", "-u", "0", container, "sh", "-c", _KILL_MARKED, "sh", token,
            limit_s=30.0, check=False,
        )  # fmt: skip
