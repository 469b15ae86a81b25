"""Sync entry points over the async engine: a coroutine run to completion from sync code.

The engine is async first; `invoke`/`stream` of a graph or chat model, the middleware's
`wrap_model_call`, and sync callers such as LiteLLM's `completion` reach it through
`run_sync`. Every sync call runs on one event loop that lives on a background thread for
the life of the process: LiteLLM's HTTP clients and logging worker are bound to the loop
they were made on, so a fresh loop per call would rebuild them (and warn) every time.

The other way round, `sized_for_loop` runs sync work that grows with a conversation (its
conversion, a selector's transcript) on a thread once the conversation is long.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable, Coroutine, Sized
from typing import Any, TypeVar

__all__ = ["LONG_CONVERSATION", "run_sync", "sized_for_loop"]

_T = TypeVar("_T")

LONG_CONVERSATION = 1000
"""Messages beyond which a turn's work over its conversation (converting it, rendering a
selector's transcript) runs on a thread: about 5 µs a message, a few milliseconds below
this, most of a second at 90,000."""


async def sized_for_loop(
    conversation: Sized, work: Callable[..., _T], *args: Any, **kwargs: Any
) -> _T:
    """`work(*args, **kwargs)`, on a thread when `conversation` is long (the loop must
    not wait for it), else here (a thread's hop would cost more than the work)."""
    if len(conversation) > LONG_CONVERSATION:
        return await asyncio.to_thread(work, *args, **kwargs)
    return work(*args, **kwargs)


_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_starting = threading.Lock()


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _starting:
        if _loop is None or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(
                target=loop.run_forever, name="turnbon-sync-loop", daemon=True
            )
            thread.start()
            _loop, _thread = loop, thread
        return _loop


def run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Runs `coro` to completion from sync code, on the process's background loop, with
    this thread's context variables (so callbacks and LangGraph's config carry over).

    Called from that loop's own thread (a sync function called by a coroutine there), it
    runs `coro` on a fresh loop in a worker thread instead, since waiting on the loop from
    inside it would never return."""
    context = contextvars.copy_context()
    if threading.current_thread() is _thread:
        with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="turnbon-sync") as pool:
            return pool.submit(context.run, asyncio.run, coro).result()
    loop = _background_loop()
    done: concurrent.futures.Future[_T] = concurrent.futures.Future()
    started: list[asyncio.Task[_T]] = []

    def start() -> None:
        task = loop.create_task(coro, context=context)
        started.append(task)

        def finish(task: asyncio.Task[_T]) -> None:
            if task.cancelled():
                done.cancel()
            elif (error := task.exception()) is not None:
                done.set_exception(error)
            else:
                done.set_result(task.result())

        task.add_done_callback(finish)

    loop.call_soon_threadsafe(start)
    try:
        return done.result()
    except KeyboardInterrupt:
        # Ctrl-C in the caller's thread: cancel this call's task (its calls in flight
        # close), then stop as asked.
        loop.call_soon_threadsafe(lambda: [task.cancel() for task in started])
        raise
