"""A request that continues a stored conversation costs what the conversation does: its
work leaves the event loop past the threshold a large body has, and the conversation
counts against the body limit."""

from __future__ import annotations

import asyncio
import contextvars
import json
import threading

import pytest

from turnbon_graph.serve.limits import BodyError, continued_conversation, in_proportion


def _thread() -> str:
    return threading.current_thread().name


async def test_a_small_request_alone_is_worked_on_the_loop() -> None:
    here = _thread()
    assert await in_proportion(_thread) == here


async def test_continuing_a_long_conversation_moves_the_work_off_the_loop() -> None:
    here = _thread()

    async def request() -> str:  # a request is a task with a context of its own
        continued_conversation(2_000_000, limit=10_000_000)
        return await in_proportion(_thread)

    assert await asyncio.create_task(request(), context=contextvars.copy_context()) != here
    assert await in_proportion(_thread) == here  # another request is not affected


def test_a_conversation_over_the_body_limit_is_refused() -> None:
    def request() -> None:
        continued_conversation(11_000_000, limit=10 * 1024 * 1024)

    with pytest.raises(BodyError) as refused:
        contextvars.copy_context().run(request)
    said = str(refused.value)
    assert refused.value.status == 413 and "of 10.5 MiB" in said and "(10.0 MiB" in said


def test_a_conversation_is_stored_an_item_a_line_and_an_older_array_still_reads() -> None:
    from turnbon_graph.serve.store import Encoded, StoredResponse

    items = [{"type": "message", "role": "user", "content": f"line {i}\n"} for i in range(3)]
    stored = StoredResponse(response={"id": "resp_1", "output": []}, input=items)
    encoded = Encoded.of(stored)
    assert encoded.input.count("\n") == 2  # one item a line (newlines in text are escaped)
    assert Encoded.decode(encoded.response, encoded.input) == stored
    older = Encoded.decode(encoded.response, json.dumps(items))  # as earlier versions wrote
    assert older.input == items
