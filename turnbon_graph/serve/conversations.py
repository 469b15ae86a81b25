"""OpenAI's Conversations API on `turnbon serve`: a conversation is a list of items the
server keeps, which a Responses request continues by naming it (`conversation`); its
input and its answer are then added to it.

A conversation lives in the response store (`serve.store`, in memory or the SQLite file
every `--workers` process shares), bounded as responses are, kept as a stored record
whose response object is the conversation object and whose input is its items:

- `POST /v1/conversations` (`items`, `metadata`), `GET`, `POST` (new `metadata`) and
  `DELETE /v1/conversations/{id}`;
- `GET /v1/conversations/{id}/items` (a page, as `input_items`), `POST` (more items),
  `GET` and `DELETE /v1/conversations/{id}/items/{item_id}`.

Two requests continuing one conversation at once each add their items to what they
read; the one that ends last keeps its own (as with a stored response, there is no lock).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from typing import Any

from turnbon_graph.errors import ConfigurationError, NotStoredError, RequestFieldError
from turnbon_graph.serve.limits import continued_conversation
from turnbon_graph.serve.state import as_items, page_of, with_ids
from turnbon_graph.serve.store import ResponseStore, StoredResponse

__all__ = [
    "added",
    "appended",
    "continued",
    "conversation_id",
    "created",
    "item_of",
    "item_removed",
    "items_page",
    "read",
    "removed",
    "updated",
]

FIELD = "conversation"
MAX_METADATA = 16
"""Keys a conversation's metadata may hold (OpenAI's limit)."""


def conversation_id(given: Any) -> str:
    """The id a request's `conversation` names: the id itself, or `{"id": ...}`."""
    if isinstance(given, Mapping):
        given = given.get("id")
    if not isinstance(given, str) or not given:
        raise RequestFieldError(FIELD, f"{FIELD} must be a conversation id or {{'id': ...}}")
    return given


async def continued(body: Any, store: ResponseStore, max_bytes: int) -> tuple[str | None, Any, int]:
    """A Responses body that names a `conversation`: its id, the body with the
    conversation's items before its own input (the field gone), and how many items
    came from the conversation; else `(None, body, 0)`. The conversation counts
    against `max_bytes` as a body holding it would (`limits.continued_conversation`).

    Raises:
        RequestFieldError: it also names a `previous_response_id`, or no conversation.
        NotStoredError: the conversation is not kept.
    """
    if not isinstance(body, Mapping) or body.get(FIELD) is None:
        return None, body, 0
    if body.get("previous_response_id") is not None:
        raise RequestFieldError(
            FIELD,
            "Mutually exclusive parameters: Ensure you are only providing one of: "
            "'previous_response_id' or 'conversation'.",
        )
    conversation = conversation_id(body[FIELD])
    stored = await read(store, conversation)
    continued_conversation(stored.size, max_bytes)
    given = as_items(body.get("input"))
    rest = {k: v for k, v in body.items() if k != FIELD}
    if not isinstance(given, list):
        return conversation, rest, 0  # the request's own checks refuse it
    return conversation, {**rest, "input": [*stored.input, *given]}, len(stored.input)


async def created(store: ResponseStore, body: Any) -> dict[str, Any]:
    """`POST /v1/conversations`: a new conversation with `items` and `metadata`."""
    if not isinstance(body, Mapping):
        raise ConfigurationError("the body must be a JSON object")
    items = _items(body.get("items") or [], "items")
    conversation = {
        "id": f"conv_{uuid.uuid4().hex}",
        "object": FIELD,
        "created_at": int(time.time()),
        "metadata": _metadata(body.get("metadata")),
    }
    await _keep(store, StoredResponse(conversation, with_ids(items)))
    return conversation


async def read(store: ResponseStore, conversation: str) -> StoredResponse:
    """The stored conversation (a 404 `NotStoredError` when it is not kept)."""
    stored = await store.get(conversation)
    if stored is None or stored.response.get("object") != FIELD:
        message = f"Conversation with id '{conversation}' not found."
        raise NotStoredError(None, message, status=404, code=None)
    return stored


async def updated(store: ResponseStore, conversation: str, body: Any) -> dict[str, Any]:
    """`POST /v1/conversations/{id}`: its metadata replaced."""
    stored = await read(store, conversation)
    given = body.get("metadata") if isinstance(body, Mapping) else None
    response = {**stored.response, "metadata": _metadata(given)}
    await _keep(store, StoredResponse(response, stored.input))
    return response


async def removed(store: ResponseStore, conversation: str) -> dict[str, Any]:
    """`DELETE /v1/conversations/{id}`: OpenAI's confirmation."""
    await read(store, conversation)
    await store.delete(conversation)
    return {"id": conversation, "object": "conversation.deleted", "deleted": True}


async def items_page(
    store: ResponseStore, conversation: str, query: Mapping[str, str]
) -> dict[str, Any]:
    """`GET /v1/conversations/{id}/items`: a page of its items, as `input_items`."""
    return page_of((await read(store, conversation)).input, query)


async def added(store: ResponseStore, conversation: str, body: Any) -> dict[str, Any]:
    """`POST /v1/conversations/{id}/items`: `items` added at its end; the list of them."""
    given = body.get("items") if isinstance(body, Mapping) else None
    new = with_ids(_items(given if given is not None else [], "items"))
    if not new:
        raise RequestFieldError("items", "items must hold at least one item")
    await appended(store, conversation, new)
    return {
        "object": "list",
        "data": new,
        "first_id": new[0]["id"],
        "last_id": new[-1]["id"],
        "has_more": False,
    }


async def item_of(store: ResponseStore, conversation: str, item_id: str) -> dict[str, Any]:
    """`GET /v1/conversations/{id}/items/{item_id}`."""
    return _item(await read(store, conversation), item_id)


async def item_removed(store: ResponseStore, conversation: str, item_id: str) -> dict[str, Any]:
    """`DELETE /v1/conversations/{id}/items/{item_id}`: the conversation object."""
    stored = await read(store, conversation)
    gone = _item(stored, item_id)
    kept = [item for item in stored.input if item is not gone]
    await _keep(store, StoredResponse(stored.response, kept))
    return stored.response


async def appended(store: ResponseStore, conversation: str, items: list[dict[str, Any]]) -> None:
    """`items` (with ids) added at the end of the conversation."""
    stored = await read(store, conversation)
    await _keep(store, StoredResponse(stored.response, [*stored.input, *items]))


def _item(stored: StoredResponse, item_id: str) -> dict[str, Any]:
    """The conversation's item `item_id` (a 404 `NotStoredError` when it has none)."""
    found = next((item for item in stored.input if item.get("id") == item_id), None)
    if found is None:
        message = f"Item with id '{item_id}' not found."
        raise NotStoredError(None, message, status=404, code=None)
    return found


async def _keep(store: ResponseStore, record: StoredResponse) -> None:
    if not await store.put(record):
        raise RequestFieldError(
            "items", "the conversation is larger than the server's store (--response-store-mb)"
        )


def _items(given: Any, field: str) -> list[dict[str, Any]]:
    if not isinstance(given, list) or not all(isinstance(item, Mapping) for item in given):
        raise RequestFieldError(field, f"{field} must be a list of items (JSON objects)")
    return [dict(item) for item in given]


def _metadata(given: Any) -> dict[str, str]:
    if given is None:
        return {}
    if (
        not isinstance(given, Mapping)
        or len(given) > MAX_METADATA
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in given.items())
    ):
        raise RequestFieldError(
            "metadata", f"metadata must map at most {MAX_METADATA} keys to strings"
        )
    return dict(given)
