"""The Responses API's state on `turnbon serve`, as OpenAI keeps it: a request's
`previous_response_id` and `item_reference` items resolved against the response store
into the whole conversation a turn reads, the answer stored (`store`, true unless the
request says false, as OpenAI's default), and the stored responses read and deleted by id,
their input items listed a page at a time (`GET /v1/responses/{id}/input_items`).

A miss is answered as OpenAI answers it, words, status and code: an unknown (expired,
deleted, never stored) `previous_response_id` is a 400 `previous_response_not_found`
("Previous response with id '...' not found."), an unknown item a 404, an unknown id in
the path a 404. Clients that replay the whole conversation when OpenAI has lost a
response (agno) recover alike. As on OpenAI, `instructions` and `tools` are not carried
over from the previous response: only its items.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from turnbon_graph.errors import NotStoredError, RequestFieldError
from turnbon_graph.openai.responses import item_id
from turnbon_graph.serve.config import ServeConfig
from turnbon_graph.serve.limits import continued_conversation
from turnbon_graph.serve.sqlite_store import SqliteStore
from turnbon_graph.serve.store import MemoryStore, ResponseStore, StoredResponse

__all__ = [
    "Resolved",
    "as_items",
    "deleted",
    "input_items",
    "keep",
    "open_store",
    "page_of",
    "resolve",
    "retrieved",
    "with_ids",
]

log = logging.getLogger("turnbon.serve")

PREVIOUS = "previous_response_id"
REFERENCE = "item_reference"


def open_store(config: ServeConfig) -> ResponseStore:
    """The server's response store: the SQLite file `config.response_store`, else this
    process's memory."""
    size, age = config.response_store_bytes, config.response_store_ttl_s
    if config.response_store is not None:
        return SqliteStore(Path(config.response_store), max_bytes=size, max_age_s=age)
    return MemoryStore(max_bytes=size, max_age_s=age)


@dataclass(frozen=True)
class Resolved:
    """A Responses request body with its state resolved."""

    body: Any
    """The body a turn reads: `input` the whole conversation, no `previous_response_id`."""
    conversation: list[dict[str, Any]] = field(default_factory=list)
    """That input as items, to store with the answer."""
    previous: str | None = None
    """The `previous_response_id` given, which the response echoes."""


async def resolve(body: Any, store: ResponseStore, max_bytes: int) -> Resolved:
    """`body` with its previous response's items, then its own input with each
    `item_reference` replaced by the stored item, as `input` (a `NotStoredError` for a
    miss; a `BodyError` when the conversation continued is over `max_bytes`, as a body
    holding it would be). A body that is not an object, or whose `input` is neither text
    nor a list, is left for the request's own checks to refuse."""
    if not isinstance(body, Mapping):
        return Resolved(body)
    previous, given = body.get(PREVIOUS), body.get("input")
    if previous is not None and not isinstance(previous, str):
        raise RequestFieldError(PREVIOUS, f"{PREVIOUS} must be a response id (a string)")
    rest = {k: v for k, v in body.items() if k != PREVIOUS}
    given = as_items(given)
    if not isinstance(given, list):
        return Resolved(rest, previous=previous)
    before: list[dict[str, Any]] = []
    if previous is not None:
        stored = await store.get(previous)
        if stored is None:
            raise NotStoredError(
                PREVIOUS,
                f"Previous response with id '{previous}' not found.",
                status=400,
                code="previous_response_not_found",
            )
        continued_conversation(stored.size, max_bytes)
        before = [*stored.input, *stored.output]
    own = await _referenced(given, store)
    if previous is None and own is given:  # nothing to resolve: the body as it came
        return Resolved(body, own)
    _refuse_repeats(before, given)
    conversation = [*before, *own]
    return Resolved({**rest, "input": conversation}, conversation, previous)


def as_items(given: Any) -> Any:
    """A Responses `input` as a list of items: a text is one user message; anything else
    as it came (a list, or what the request's own checks refuse)."""
    if isinstance(given, str):
        return [{"type": "message", "role": "user", "content": given}]
    return given


async def _referenced(given: list[Any], store: ResponseStore) -> list[Any]:
    """`given` with each `item_reference` replaced by the stored output item it names."""
    wanted = []
    for i, item in enumerate(given):
        if isinstance(item, Mapping) and item.get("type") == REFERENCE:
            if not isinstance(item.get("id"), str):
                raise RequestFieldError("input", f"input[{i}] ({REFERENCE}) needs an id")
            wanted.append(item["id"])
    if not wanted:
        return given
    found = await store.items(wanted)
    if missing := [item_id for item_id in wanted if item_id not in found]:
        raise NotStoredError(
            "input",
            f"Item with id '{missing[0]}' not found. Items are not persisted when `store` is "
            "set to false. Try again with `store` set to true, or remove this item from your "
            "input.",
            status=404,
            code=None,
        )
    return [
        found[item["id"]] if isinstance(item, Mapping) and item.get("type") == REFERENCE else item
        for item in given
    ]


def _refuse_repeats(before: list[dict[str, Any]], given: list[Any]) -> None:
    """An `item_reference` to an item the previous response's conversation already holds
    is a 400, as on OpenAI: the turn would read it twice."""
    held = {item.get("id") for item in before}
    for item in given:
        if isinstance(item, Mapping) and item.get("type") == REFERENCE and item["id"] in held:
            raise RequestFieldError(
                "input",
                f"Duplicate item found with id {item['id']}. Remove duplicate items from your "
                "input and try again.",
            )


async def keep(response: dict[str, Any], resolved: Resolved, store: ResponseStore) -> None:
    """Stores `response` (answered to `resolved`) unless the request said `store: false`,
    and says in its `store` whether it was; it echoes `previous_response_id`. A store
    that fails (a full disk) loses the response, not the turn: it is answered unstored."""
    response[PREVIOUS] = resolved.previous
    kept = False
    if isinstance(resolved.body, Mapping) and resolved.body.get("store") is not False:
        response["store"] = True  # as it is stored (and retrieved)
        try:
            kept = await store.put(StoredResponse(response, with_ids(resolved.conversation)))
        except (sqlite3.Error, OSError) as exc:
            log.warning("response %s was not stored: %s", response["id"], exc)
        else:
            if not kept:
                log.warning("response %s was not stored: larger than the store", response["id"])
    response["store"] = kept


def with_ids(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`items` each with an id, as OpenAI gives the input items it stores: an input item
    listed by `input_items` is named by its id, which pagination's cursors are."""
    # an item without a type is a message
    return [
        item if "id" in item else {"id": item_id(str(item.get("type", "message"))), **item}
        for item in items
    ]


async def retrieved(store: ResponseStore, response_id: str) -> dict[str, Any]:
    """`GET /v1/responses/{id}`: the stored response object."""
    stored = await store.get(response_id)
    if stored is None:
        raise _unknown(response_id)
    return stored.response


async def deleted(store: ResponseStore, response_id: str) -> dict[str, Any]:
    """`DELETE /v1/responses/{id}`: OpenAI's confirmation; a later reference misses."""
    if not await store.delete(response_id):
        raise _unknown(response_id)
    return {"id": response_id, "object": "response", "deleted": True}


async def input_items(
    store: ResponseStore, response_id: str, query: Mapping[str, str]
) -> dict[str, Any]:
    """`GET /v1/responses/{id}/input_items`: a page of the conversation the response
    answered, OpenAI's list object. `query` takes OpenAI's `limit` (1 to 100, 20 by
    default), `order` (`desc` by default, newest first, or `asc`) and the cursors `after`
    and `before`, each an item id of the list in that order."""
    stored = await store.get(response_id)
    if stored is None:
        raise _unknown(response_id)
    return page_of(stored.input, query)


def page_of(given: list[dict[str, Any]], query: Mapping[str, str]) -> dict[str, Any]:
    """A page of `given` items as OpenAI lists them (`limit`, `order`, `after`,
    `before`: see `input_items`)."""
    limit, order = _limit(query.get("limit", "20")), query.get("order", "desc")
    if order not in ("asc", "desc"):
        raise RequestFieldError(
            "order", f"Invalid 'order': expected one of 'asc' or 'desc', but got {order!r}."
        )
    items = [_as_listed(item) for item in given]
    if order == "desc":
        items.reverse()
    ids = [item.get("id") for item in items]
    start, end = 0, len(items)
    if (after := query.get("after")) is not None:
        start = _cursor(ids, after, "after") + 1
    if (before := query.get("before")) is not None:
        end = _cursor(ids, before, "before")
    page = items[start:end][:limit]
    return {
        "object": "list",
        "data": page,
        "first_id": page[0].get("id") if page else None,
        "last_id": page[-1].get("id") if page else None,
        "has_more": end - start > limit,
    }


def _limit(given: str) -> int:
    try:
        limit = int(given)
    except ValueError:
        raise RequestFieldError(
            "limit", f"Invalid 'limit': expected an integer, but got {given!r} instead."
        ) from None
    if not 1 <= limit <= 100:
        raise RequestFieldError(
            "limit", f"Invalid 'limit': expected a value from 1 to 100, but got {limit} instead."
        )
    return limit


def _cursor(ids: list[Any], item_id: str, param: str) -> int:
    try:
        return ids.index(item_id)
    except ValueError:
        message = f"Item with id '{item_id}' not found."
        raise NotStoredError(param, message, status=404, code=None) from None


def _as_listed(item: dict[str, Any]) -> dict[str, Any]:
    """An input message as OpenAI lists it: its text as an `input_text` part, its status."""
    if item.get("type", "message") != "message" or "status" in item:
        return item
    content = item.get("content")
    if isinstance(content, str):
        content = [{"type": "input_text", "text": content}]
    return {**item, "type": "message", "content": content, "status": "completed"}


def _unknown(response_id: str) -> NotStoredError:
    message = f"Response with id '{response_id}' not found."
    return NotStoredError(None, message, status=404, code=None)
