"""`POST /v1/responses`: the OpenAI Responses API on `turnbon serve`, so that
`client.responses.create` and openai-agents' default model (`OpenAIResponsesModel`) run
Turn-BoN turns. Each call is one turn of the same engine as a chat completion, read and
answered by `openai_responses` (LiteLLM's transformation), through the app's one
`answer`: the same bearer check, body limits, keep-alive stream and errors.

With state, as OpenAI keeps it (`state`): `previous_response_id` and `item_reference`
items are resolved against the response store before the request is read, and the answer
is stored unless the request says `store: false`. `conversation` is a 400.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage

from turnbon_graph.client import load_litellm
from turnbon_graph.openai_responses import (
    parse_responses_request,
    response_body,
    response_events,
)
from turnbon_graph.serve.limits import in_proportion
from turnbon_graph.serve.state import keep, resolve

if TYPE_CHECKING:
    from turnbon_graph.serve.app import Reply
    from turnbon_graph.serve.config import ServeConfig
    from turnbon_graph.serve.store import ResponseStore

__all__ = ["responses_reader"]


def responses_reader(
    config: ServeConfig, store: ResponseStore
) -> Callable[[Any], Awaitable[Reply]]:
    """How the app reads a Responses request body for the served `config.model`, its
    state in `store`, and answers it (`_Service.answer`), stored unless asked not to."""

    async def read(body: Any) -> Reply:
        await load_litellm()  # its transformation reads the request (off the loop, once)
        resolved = await resolve(body, store)
        request = await in_proportion(parse_responses_request, resolved.body, model=config.model)
        name = request.chat.model or config.name

        async def whole(message: AIMessage) -> dict[str, Any]:
            answered = await in_proportion(response_body, message, request, model=name)
            await keep(answered, resolved, store)
            return answered

        async def streamed(message: AIMessage) -> Iterator[str]:
            return _sse(response_events(await whole(message)))

        return request.chat, whole, streamed

    return read


def _sse(events: list[dict[str, Any]]) -> Iterator[str]:
    """Server-sent events as OpenAI sends the Responses stream: each named by its type,
    no `[DONE]` after the last."""
    for event in events:
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
