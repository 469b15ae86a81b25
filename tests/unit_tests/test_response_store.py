"""The response stores of `turnbon serve` (in memory, and in a SQLite file), alike: a
response and its output items are kept until the size limit drops the oldest, the age
limit drops the expired, or it is deleted."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from turnbon_graph.serve.sqlite_store import SqliteStore
from turnbon_graph.serve.store import Encoded, MemoryStore, ResponseStore, StoredResponse

Store = Callable[..., ResponseStore]


@pytest.fixture(params=["memory", "sqlite"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    if request.param == "memory":
        return MemoryStore
    return lambda **limits: SqliteStore(tmp_path / "responses.db", **limits)


def response(n: int, words: int = 50) -> StoredResponse:
    output = [
        {"type": "message", "id": f"msg_{n}", "role": "assistant", "content": "word " * words}
    ]
    said = [{"type": "message", "role": "user", "content": f"question {n}"}]
    return StoredResponse({"id": f"resp_{n}", "output": output}, said)


def kept(store: ResponseStore, *ids: str) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        return {i: await store.get(i) for i in ids}

    return asyncio.run(read())


def test_a_response_and_its_items_come_back_as_they_went_in(make: Store) -> None:
    store = make(max_bytes=10**6, max_age_s=60)
    first = response(1)
    assert asyncio.run(store.put(first))
    assert kept(store, "resp_1") == {"resp_1": first}
    items = asyncio.run(store.items(["msg_1", "msg_9"]))
    assert items == {"msg_1": first.output[0]}
    assert asyncio.run(store.delete("resp_1"))
    assert not asyncio.run(store.delete("resp_1"))
    assert kept(store, "resp_1") == {"resp_1": None}
    assert asyncio.run(store.items(["msg_1"])) == {}
    store.close()


def test_past_the_size_limit_the_oldest_go(make: Store) -> None:
    size = Encoded.of(response(1)).size
    store = make(max_bytes=2 * size + 10, max_age_s=60)  # room for two
    for n in (1, 2, 3):
        assert asyncio.run(store.put(response(n)))
    found = kept(store, "resp_1", "resp_2", "resp_3")
    assert found["resp_1"] is None and found["resp_2"] and found["resp_3"]
    assert set(asyncio.run(store.items(["msg_1", "msg_2", "msg_3"]))) == {"msg_2", "msg_3"}
    assert not asyncio.run(store.put(response(4, words=2000)))  # alone larger than the store
    assert kept(store, "resp_4") == {"resp_4": None}
    store.close()


def test_past_the_age_limit_a_response_is_gone(make: Store) -> None:
    store = make(max_bytes=10**6, max_age_s=0.05)
    asyncio.run(store.put(response(1)))
    time.sleep(0.2)
    assert kept(store, "resp_1") == {"resp_1": None}
    assert asyncio.run(store.items(["msg_1"])) == {}
    asyncio.run(store.put(response(2)))  # a write drops the expired for good
    assert kept(store, "resp_2")["resp_2"] is not None
    store.close()


def test_stores_on_one_file_share_its_size_limit(tmp_path: Path) -> None:
    """Two stores on one SQLite file, as two worker processes have: what one wrote
    counts against the limit when the other writes."""
    size = Encoded.of(response(1)).size
    one, two = (
        SqliteStore(tmp_path / "responses.db", max_bytes=2 * size + 10, max_age_s=60)
        for _ in range(2)
    )
    asyncio.run(one.put(response(1)))
    asyncio.run(one.put(response(2)))
    asyncio.run(two.put(response(3)))
    assert kept(one, "resp_1")["resp_1"] is None
    assert kept(one, "resp_3")["resp_3"] == response(3)
    assert asyncio.run(two.delete("resp_2"))
    assert kept(one, "resp_2")["resp_2"] is None
    one.close()
    two.close()


def test_many_item_ids_are_looked_up_at_once(make: Store) -> None:
    """More ids than one SQLite statement takes parameters (32,766 by default, 250,000
    in some builds): a body full of item references is answered, not a server error."""
    store = make(max_bytes=10**6, max_age_s=60)
    asyncio.run(store.put(response(1)))
    wanted = [f"msg_unknown_{n}" for n in range(260_000)] + ["msg_1"]
    assert list(asyncio.run(store.items(wanted))) == ["msg_1"]
    store.close()
