"""Where `ChatTurnBoN` reports a turn's progress (candidate_arrived, candidate_failed,
selection_made): as custom callback events named `"turnbon"` on the model's run (so
`astream_events` shows them as `on_custom_event`), and, inside a LangGraph run, on the
graph's custom stream (`stream_mode="custom"`), tagged `"source": "turnbon"`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

from langchain_core.callbacks import (
    AsyncCallbackManager,
    AsyncCallbackManagerForLLMRun,
    CallbackManager,
    CallbackManagerForLLMRun,
)
from langgraph.config import get_stream_writer

from turnbon_graph.turn.engine import EventSink

__all__ = ["EVENT_NAME", "async_events", "sync_events"]

EVENT_NAME = "turnbon"
"""Name of the custom callback events a call dispatches (data: the progress event), and
the `source` of the events it writes to a graph's custom stream."""


def _graph_writer() -> EventSink | None:
    """The running LangGraph graph's custom-stream writer, or None outside a graph run.

    Read where the call starts, in the caller's context (a sync call may run the turn on
    a worker thread)."""
    try:
        write = get_stream_writer()
    except (RuntimeError, KeyError):  # no runnable context, or a context that is no graph's
        return None
    return lambda event: write({**event, "source": EVENT_NAME})


def _fan_out(sinks: list[EventSink]) -> EventSink | None:
    if not sinks:
        return None
    if len(sinks) == 1:
        return sinks[0]

    def each(event: dict[str, Any]) -> None:
        for sink in sinks:
            sink(event)

    return each


_Manager = TypeVar("_Manager", CallbackManager, AsyncCallbackManager)


def _run_callbacks(
    run_manager: CallbackManagerForLLMRun | AsyncCallbackManagerForLLMRun,
    manager_class: type[_Manager],
) -> _Manager:
    """The run's handlers, as a manager that can dispatch custom events to the run."""
    return manager_class(
        handlers=run_manager.handlers,
        parent_run_id=run_manager.parent_run_id,
        tags=run_manager.tags,
        metadata=run_manager.metadata,
    )


def sync_events(run_manager: CallbackManagerForLLMRun | None) -> EventSink | None:
    """The event sink of a sync call: custom callback events on the model's run, and the
    graph's custom stream when the call runs inside a graph."""
    sinks = [writer] if (writer := _graph_writer()) is not None else []
    if run_manager is not None and run_manager.handlers:
        manager = _run_callbacks(run_manager, CallbackManager)
        run_id = run_manager.run_id
        sinks.append(lambda event: manager.on_custom_event(EVENT_NAME, event, run_id=run_id))
    return _fan_out(sinks)


@asynccontextmanager
async def async_events(
    run_manager: AsyncCallbackManagerForLLMRun | None,
) -> AsyncIterator[EventSink | None]:
    """The event sink of an async call, as `sync_events`; the callback events go out in
    order.

    The engine reports progress synchronously; a single pump task awaits the handlers.
    """
    sinks = [writer] if (writer := _graph_writer()) is not None else []
    if run_manager is None or not run_manager.handlers:
        yield _fan_out(sinks)
        return
    manager = _run_callbacks(run_manager, AsyncCallbackManager)
    run_id = run_manager.run_id
    queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def pump() -> None:
        while (event := await queue.get()) is not None:
            await manager.on_custom_event(EVENT_NAME, event, run_id=run_id)

    put: Callable[[dict[str, Any]], None] = queue.put_nowait
    task = asyncio.create_task(pump())
    try:
        yield _fan_out([*sinks, put])
    finally:
        queue.put_nowait(None)
        await task
