"""One command as a process, for both sandboxes (the host's bubblewrap, and a container's
`<engine> exec`): its own session (process group), stdin closed, stdout and stderr
interleaved into one pipe read as it arrives, and the command ended when it outlives its
time limit, prints past the hard cap or is cancelled (by default its whole group killed;
a container kills what it ran inside). What it leaves running in the background is
handed back, so the episode can end it later."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from turnbon_terminal.output import CappedOutput, Pump, exited_or_flooded
from turnbon_terminal.result import CommandResult

__all__ = ["Ran", "end_group", "kill_group", "run_process"]


def kill_group(pgid: int) -> None:
    """Kills process group `pgid`, if it is still there."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


async def end_group(pgid: int) -> None:
    """`run_process`'s default ending: process group `pgid` killed."""
    kill_group(pgid)


@dataclass
class Ran:
    """A command's result, and what it left running: the pump still reading the output of
    its background processes, and their process group (None, 0 when nothing was left)."""

    result: CommandResult
    pump: Pump | None = None
    pgid: int = 0


async def run_process(
    command: Sequence[str],
    options: dict[str, Any],
    *,
    argv0: str,
    limit: float,
    sink: CappedOutput,
    hard_limit: int,
    background_grace: float,
    preexec: Callable[[], None] | None = None,
    end: Callable[[int], Awaitable[None]] | None = None,
) -> Ran:
    """Runs `command` (with `asyncio.create_subprocess_exec`'s `options`) until it exits,
    its `limit` in seconds passes or its output passes `hard_limit` bytes, its output kept
    in `sink`. A command that cannot start at all is answered as a shell would (126, 127,
    naming `argv0`); cancelled, it is ended before the cancellation goes on. `end(pid)`
    ends it (default: its process group is killed)."""
    end = end or end_group
    read_fd, write_fd = os.pipe()
    started = time.monotonic()
    try:
        process = await asyncio.create_subprocess_exec(
            *command,
            stdin=subprocess.DEVNULL,
            stdout=write_fd,
            stderr=write_fd,
            start_new_session=True,  # its own process group, killed as one
            umask=0o077,  # what it creates in shared places stays its own
            preexec_fn=preexec,
            **options,
        )
    except OSError as exc:
        # Could not execute argv[0] at all: answered like a shell would (126/127).
        os.close(read_fd)
        code = 127 if isinstance(exc, FileNotFoundError) else 126
        return Ran(
            CommandResult(
                output=f"cannot run {argv0}: {exc.strerror or exc}\n",
                exit_code=code,
                timeout=limit,
            )
        )
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    pump = Pump(read_fd, sink, hard_limit)
    timed_out = flooded = background = False
    waiter: asyncio.Future[int] | None = None
    try:
        await pump.open()
        waiter = await exited_or_flooded(process, pump, limit)
        if not waiter.done():
            flooded = pump.flooded.is_set()
            timed_out = not flooded
            await end(process.pid)
            await waiter
        assert pump.task is not None
        try:
            await asyncio.wait_for(asyncio.shield(pump.task), background_grace)
        except TimeoutError:
            background = True
    except BaseException:
        # Cancelled (the agent's time ran out) or broken: nothing of it may live on.
        await asyncio.shield(end(process.pid))
        if waiter is not None:
            waiter.cancel()
        await pump.stop()
        raise
    sink.freeze()
    result = CommandResult(
        output=sink.text(),
        exit_code=process.returncode if process.returncode is not None else -9,
        timeout=limit,
        timed_out=timed_out,
        flooded=flooded,
        background=background,
        total_bytes=sink.seen,
        hard_limit=hard_limit,
        duration_s=round(time.monotonic() - started, 3),
    )
    return Ran(result, pump, process.pid) if background else Ran(result)
