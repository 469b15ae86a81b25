"""A command's output, kept small: the head and the tail, with a line saying what was cut."""

from __future__ import annotations

import asyncio
import contextlib
import os

_CHUNK = 64 * 1024


class CappedOutput:
    """Keeps the first and last `keep // 2` bytes of what is added, and counts it all.

    Memory stays bounded however much a command prints; the agent sees the beginning
    (usually the command's own messages) and the end (usually the error)."""

    def __init__(self, keep: int) -> None:
        self._half = max(keep // 2, 1)
        self._head = bytearray()
        self._tail = bytearray()
        self.seen = 0
        """Bytes added before `freeze`: what `text` describes."""
        self.total = 0
        """Every byte added, after `freeze` too."""
        self.frozen = False

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.frozen:
            return  # the result went out already: background output is only counted
        self.seen += len(chunk)
        room = self._half - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self._tail += chunk
            if len(self._tail) > self._half:
                del self._tail[: len(self._tail) - self._half]

    def freeze(self) -> None:
        self.frozen = True

    def text(self) -> str:
        head = self._head.decode("utf-8", errors="replace")
        tail = self._tail.decode("utf-8", errors="replace")
        cut = self.seen - len(self._head) - len(self._tail)
        if cut <= 0:
            return head + tail
        return (
            f"{head}\n[... {cut} bytes of output cut: the first {len(self._head)} "
            f"and the last {len(self._tail)} bytes are shown ...]\n{tail}"
        )


class Pump:
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


async def exited_or_flooded(
    process: asyncio.subprocess.Process, pump: Pump, limit: float
) -> asyncio.Future[int]:
    """Waits until `process` exits, its output passes the pump's hard limit, or `limit`
    seconds pass; returns the future of its exit code (not done: it still runs)."""
    waiter = asyncio.ensure_future(process.wait())
    flood = asyncio.ensure_future(pump.flooded.wait())
    try:
        await asyncio.wait({waiter, flood}, timeout=limit, return_when=asyncio.FIRST_COMPLETED)
    except BaseException:
        waiter.cancel()
        raise
    finally:
        flood.cancel()
    return waiter
