"""Sync entry points over the async engine: a coroutine run to completion from sync code.

The engine is async first; `invoke`/`stream` of a graph or chat model, and sync callers
such as LiteLLM's `completion`, reach it through `run_sync`.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Coroutine
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

__all__ = ["run_sync"]

_T = TypeVar("_T")


def run_sync(coro: Coroutine[Any, Any, _T]) -> _T:
    """Runs `coro` to completion from sync code: on a fresh event loop, or, when a loop is
    already running in this thread, on a worker thread with its own loop (with this
    thread's context variables, so callbacks and LangGraph's config carry over)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    context = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="turnbon-sync") as pool:
        return pool.submit(context.run, asyncio.run, coro).result()
