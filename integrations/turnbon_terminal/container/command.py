"""One command in a running container: `<engine> exec`, its output read as it comes,
its time limit kept inside the container (`timeout -s KILL`: killing the engine's client
would leave the command running there), and the command found and killed inside when
its output floods, when it outlives its limit anyway, or when it is cancelled: every
command carries a variable naming it, `TURNBON_COMMAND=<token>`, which its processes
inherit."""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import subprocess
import time
from collections.abc import Mapping, Sequence

from turnbon_terminal.container.engine import ContainerError, Engine
from turnbon_terminal.output import CappedOutput, Pump, exited_or_flooded
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
    token = f"{MARK}={secrets.token_hex(8)}"
    flags = ["exec", "-w", cwd, "-e", token, *(["-u", "0"] if root else [])]
    for key, value in env.items():
        flags += ["-e", f"{key}={value}"]
    inside = ["timeout", "-s", "KILL", f"{limit:.3f}"] if timeout_inside else []
    sink = CappedOutput(keep or settings.output_limit)
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    try:
        process = await asyncio.create_subprocess_exec(
            engine.path,
            *flags,
            container,
            *inside,
            *argv,
            stdin=subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,
            cwd=engine.cwd,  # not the user's folder: conmon writes a file there
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    pump = Pump(read_fd, sink, settings.hard_output_limit)
    timed_out = flooded = False
    try:
        await pump.open()
        waiter = await exited_or_flooded(process, pump, limit + EXEC_GRACE_S)
        if not waiter.done():
            flooded = pump.flooded.is_set()
            timed_out = not flooded
            await kill_marked(engine, container, token)
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        await waiter
        assert pump.task is not None
        await asyncio.wait_for(asyncio.shield(pump.task), settings.background_grace)
    except TimeoutError:
        pass  # the client's output is closed when it ends: nothing more to read
    except BaseException:
        # Cancelled (the agent's time ran out): nothing of it may live on.
        await asyncio.shield(kill_marked(engine, container, token))
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await pump.stop()
        raise
    finally:
        await pump.stop()
    sink.freeze()
    code = process.returncode if process.returncode is not None else -9
    duration = time.monotonic() - started
    if code == 137 and timeout_inside and duration >= limit:
        timed_out = True  # `timeout -s KILL` ended it
    return CommandResult(
        output=sink.text(),
        exit_code=-9 if timed_out or flooded else code,
        timeout=limit,
        timed_out=timed_out,
        flooded=flooded,
        total_bytes=sink.seen,
        hard_limit=settings.hard_output_limit,
        duration_s=round(duration, 3),
    )


async def kill_marked(engine: Engine, container: str, token: str) -> None:
    """Kills every process in `container` that carries `token` in its environment (a
    container that is gone has none left: never raises)."""
    with contextlib.suppress(ContainerError, OSError):
        await engine.call(
            "exec", "-u", "0", container, "sh", "-c", _KILL_MARKED, "sh", token,
            limit_s=30.0, check=False,
        )  # fmt: skip
