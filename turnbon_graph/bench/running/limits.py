"""Limits across a Ray cluster: one actor hands out request slots and rate tokens.

An engine's own `max_concurrency` and `rate_limit` (turn options) hold per process: on
Ray, per worker. A provider's limit is per account, so `SlotBook` runs once, as a Ray
actor, and every worker's client asks it before each call (`ClusterLimit.slot`, the
client's `shared_limit`, held inside the client's own slot).

A slot is a lease named by its caller: a caller cancelled while waiting releases a lease
not granted yet (it is handed back as soon as it would be), and a dead worker's leases are
handed back by the driver (`SlotBook.forget`), so neither leaks a slot.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from turnbon_graph._litellm.client import LiteLLMClient, throttler
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.turn.engine import TurnEngine


class SlotBook:
    """At most `max_concurrency` leases held at once, at most `rate_limit` granted a
    second (either None: no such limit). Runs as a Ray async actor (`ray.remote(SlotBook)`);
    plain asyncio, so it also works in one process."""

    def __init__(self, max_concurrency: int | None, rate_limit: float | None) -> None:
        if max_concurrency is not None and max_concurrency < 1:
            raise ConfigurationError(f"max_concurrency must be >= 1 or None, got {max_concurrency}")
        if rate_limit is not None and rate_limit <= 0:
            raise ConfigurationError(f"rate_limit must be > 0 requests/second, got {rate_limit}")
        self.max_concurrency = max_concurrency
        self._slots = asyncio.Semaphore(max_concurrency) if max_concurrency else None
        self._throttler = throttler(rate_limit)
        self._held: dict[str, str] = {}  # lease -> holder
        self._released: set[str] = set()  # leases given back before they were granted
        self._gone: set[str] = set()  # holders forgotten (dead workers)
        self.peak = 0

    async def acquire(self, lease: str, holder: str) -> bool:
        """Waits for a slot and a rate token; False when the lease was given back (or its
        holder forgotten) meanwhile: then the slot is free again."""
        if self._slots is not None:
            await self._slots.acquire()
        if self._throttler is not None:
            await self._throttler.acquire()
        if lease in self._released or holder in self._gone:
            self._released.discard(lease)
            self._free()
            return False
        self._held[lease] = holder
        self.peak = max(self.peak, len(self._held))
        return True

    def release(self, lease: str) -> None:
        """Gives a lease back, granted or not yet."""
        if self._held.pop(lease, None) is None:
            self._released.add(lease)
        else:
            self._free()

    def forget(self, holder: str) -> int:
        """Gives back every lease of `holder` (a worker that died), now and when granted;
        returns how many it held."""
        self._gone.add(holder)
        leases = [lease for lease, owner in self._held.items() if owner == holder]
        for lease in leases:
            self.release(lease)
        return len(leases)

    def stats(self) -> dict[str, int]:
        """Leases held now, and the most ever held at once."""
        return {"held": len(self._held), "peak": self.peak}

    def _free(self) -> None:
        if self._slots is not None:
            self._slots.release()


@dataclass(frozen=True)
class ClusterLimit:
    """A worker's side of the cluster-wide limit: `slot()` holds a lease of the `SlotBook`
    actor `book` for the length of one call. Pickles (an actor handle and a name)."""

    book: Any
    """The `SlotBook` actor's handle."""
    holder: str
    """This worker's name, which the driver forgets the leases of when it dies."""

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        lease = uuid.uuid4().hex
        answered = granted = False
        try:
            granted = await self.book.acquire.remote(lease, self.holder)
            answered = True
            if not granted:
                raise ConfigurationError(f"the cluster limiter forgot worker {self.holder}")
            yield
        finally:
            if granted or not answered:  # a granted lease back, or a waiting one dropped
                self.book.release.remote(lease)


def limit_engine(engine: TurnEngine, limit: ClusterLimit) -> None:
    """Makes every call of `engine`'s clients (generator and selector) also hold a slot of
    `limit`, inside the client's own (per-process) slot and rate token: the client's
    `shared_limit`."""
    for client in _clients(engine):
        client.shared_limit = limit


def _clients(engine: TurnEngine) -> list[LiteLLMClient]:
    found = [getattr(engine.generator, "client", None), getattr(engine.selector, "client", None)]
    return [c for c in found if isinstance(c, LiteLLMClient)]
