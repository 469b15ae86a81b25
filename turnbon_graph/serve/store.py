"""The responses `turnbon serve` keeps, so that a later Responses request may continue
one (`previous_response_id`) or name its output items (`item_reference`), and
`GET`/`DELETE /v1/responses/{id}` find it.

A stored response is the response object as it was answered and the whole conversation
that led to it, as input items (its chain's, references resolved), so that continuing
it needs no other response: one that outlives its ancestors still continues. Nothing
else is kept: no header, key or request field besides the input items.

The store is bounded: a response older than `max_age_s` is gone, and past `max_bytes`
(of JSON text) the oldest go first; a miss is answered as OpenAI answers one. Every
operation runs on a thread (`asyncio.to_thread`): the JSON of a long conversation takes
milliseconds to write and read, which the event loop must not wait for.
`MemoryStore` is one process's (the default); `SqliteStore` (`sqlite_store`) is a file
that every `--workers` process, or several servers, share.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from abc import ABC, abstractmethod
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Encoded", "MemoryStore", "ResponseStore", "StoredResponse"]


@dataclass(frozen=True)
class StoredResponse:
    """A response as the store keeps it."""

    response: dict[str, Any]
    """The response object as it was answered (`id`, `output`, `usage`, the turn record)."""
    input: list[dict[str, Any]]
    """The whole conversation before it, as input items: its chain's input and output
    items, then the request's own input, item references resolved."""
    size: int = field(default=0, compare=False)
    """Its bytes as stored (JSON text), when it was read from a store: what a request
    that continues it makes the server hold and convert."""

    @property
    def id(self) -> str:
        return str(self.response["id"])

    @property
    def output(self) -> list[dict[str, Any]]:
        return list(self.response.get("output") or [])


@dataclass(frozen=True)
class Encoded:
    """A stored response as JSON text: what a store writes, and its size."""

    id: str
    response: str
    input: str
    items: dict[str, str]
    """Each output item with an id, by its id (what an `item_reference` names)."""

    @classmethod
    def of(cls, stored: StoredResponse) -> Encoded:
        items = {
            str(item["id"]): json.dumps(item)
            for item in stored.output
            if isinstance(item.get("id"), str)
        }
        return cls(stored.id, json.dumps(stored.response), _lines(stored.input), items)

    @property
    def size(self) -> int:
        """Its bytes (JSON text is ASCII: `json.dumps` escapes the rest)."""
        return len(self.response) + len(self.input) + sum(map(len, self.items.values()))

    @staticmethod
    def decode(response: str, given: str) -> StoredResponse:
        return StoredResponse(
            response=json.loads(response), input=_items(given), size=len(response) + len(given)
        )


def _lines(items: list[dict[str, Any]]) -> str:
    """A conversation as JSON lines, an item a line: written item by item, so that a long
    one never holds the interpreter (and the event loop beside this thread) for one
    long `json.dumps`."""
    return "\n".join(json.dumps(item) for item in items)


def _items(text: str) -> list[dict[str, Any]]:
    """`_lines` read back item by item (a JSON array: what earlier versions stored)."""
    if text.startswith("["):
        return list(json.loads(text))
    return [json.loads(line) for line in text.split("\n") if line]


class ResponseStore(ABC):
    """Where responses are kept, for at most `max_age_s` seconds and `max_bytes` in all.
    The coroutines run the synchronous methods on a thread."""

    def __init__(self, *, max_bytes: int, max_age_s: float) -> None:
        self.max_bytes = max_bytes
        self.max_age_s = max_age_s

    async def put(self, stored: StoredResponse) -> bool:
        """Keeps `stored`; False when it alone is larger than the store."""
        return await asyncio.to_thread(self._put, stored)

    async def get(self, response_id: str) -> StoredResponse | None:
        """The stored response, or None when it is not kept (any more)."""
        return await asyncio.to_thread(self.read, response_id)

    async def items(self, item_ids: list[str]) -> dict[str, dict[str, Any]]:
        """The stored output items of those ids that are kept, by id."""
        found = await asyncio.to_thread(self.read_items, item_ids)
        return {item_id: json.loads(text) for item_id, text in found.items()}

    async def delete(self, response_id: str) -> bool:
        """Removes a stored response and its items; False when it was not kept."""
        return await asyncio.to_thread(self.remove, response_id)

    def _put(self, stored: StoredResponse) -> bool:
        encoded = Encoded.of(stored)
        if encoded.size > self.max_bytes:
            return False
        self.write(encoded, time.time())
        return True

    def oldest_kept(self) -> float:
        """The creation time (`time.time()`) below which a response has expired."""
        return time.time() - self.max_age_s

    @abstractmethod
    def write(self, encoded: Encoded, created: float) -> None:
        """Keeps `encoded` (no larger than the store), dropping what expired and, past
        `max_bytes`, the oldest."""

    @abstractmethod
    def read(self, response_id: str) -> StoredResponse | None: ...

    @abstractmethod
    def read_items(self, item_ids: list[str]) -> dict[str, str]: ...

    @abstractmethod
    def remove(self, response_id: str) -> bool: ...

    def close(self) -> None:  # noqa: B027  (a store in memory holds nothing open)
        """Releases what the store holds open (a file)."""


@dataclass(frozen=True)
class _Entry:
    encoded: Encoded
    created: float


class MemoryStore(ResponseStore):
    """Responses in this process's memory, as JSON text (oldest first)."""

    def __init__(self, *, max_bytes: int, max_age_s: float) -> None:
        super().__init__(max_bytes=max_bytes, max_age_s=max_age_s)
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._owners: dict[str, str] = {}  # item id -> the response id it is an output of
        self._bytes = 0

    def write(self, encoded: Encoded, created: float) -> None:
        with self._lock:
            self._drop(encoded.id)
            self._entries[encoded.id] = _Entry(encoded, created)
            self._owners.update(dict.fromkeys(encoded.items, encoded.id))
            self._bytes += encoded.size
            self._expire()
            while self._bytes > self.max_bytes:
                self._drop(next(iter(self._entries)))

    def read(self, response_id: str) -> StoredResponse | None:
        with self._lock:
            self._expire()
            entry = self._entries.get(response_id)
        if entry is None:
            return None
        return Encoded.decode(entry.encoded.response, entry.encoded.input)

    def read_items(self, item_ids: list[str]) -> dict[str, str]:
        with self._lock:
            self._expire()
            found = {}
            for item_id in item_ids:
                owner = self._entries.get(self._owners.get(item_id, ""))
                if owner is not None and item_id in owner.encoded.items:
                    found[item_id] = owner.encoded.items[item_id]
            return found

    def remove(self, response_id: str) -> bool:
        with self._lock:
            return self._drop(response_id)

    def _expire(self) -> None:
        oldest = self.oldest_kept()
        while self._entries and next(iter(self._entries.values())).created < oldest:
            self._drop(next(iter(self._entries)))

    def _drop(self, response_id: str) -> bool:
        entry = self._entries.pop(response_id, None)
        if entry is None:
            return False
        self._bytes -= entry.encoded.size
        for item_id in entry.encoded.items:
            if self._owners.get(item_id) == response_id:
                del self._owners[item_id]
        return True
