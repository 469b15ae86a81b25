"""`POST /v1/responses`: the OpenAI Responses API on `turnbon serve`, so that
`client.responses.create` and openai-agents' default model (`OpenAIResponsesModel`) run
Turn-BoN turns. Each call is one turn of the same engine as a chat completion, read and
answered by `openai_responses` (LiteLLM's transformation), through the app's one
`answer`: the same bearer check, body limits, keep-alive stream and errors.

Stateless: `previous_response_id` and `conversation` are a 400 that says to send the whole
input (`store` is accepted either way; nothing is stored). A per-process store would
answer or miss by which `--workers` process a request reached.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage

from turnbon_graph.client import load_litellm
from turnbon_graph.openai_responses import (
    parse_responses_request,
    response_body,
    response_events,
)

if TYPE_CHECKING:
    from turnbon_graph.serve.app import Reply
    from turnbon_graph.serve.config import ServeConfig

__all__ = ["responses_reader"]


def responses_reader(config: ServeConfig) -> Callable[[Any], Awaitable[Reply]]:
    """How the app reads a Responses request body for the served `config.model` and
    answers it (`_Service.answer`)."""

    async def read(body: Any) -> Reply:
        await load_litellm()  # its transformation reads the request (off the loop, once)
        request = parse_responses_request(body, model=config.model)
        name = request.chat.model or config.name

        def whole(message: AIMessage) -> dict[str, Any]:
            return response_body(message, request, model=name)

        def streamed(message: AIMessage) -> Iterable[str]:
            return _sse(response_events(whole(message)))

        return request.chat, whole, streamed

    return read


def _sse(events: list[dict[str, Any]]) -> Iterator[str]:
    """Server-sent events as OpenAI sends the Responses stream: each named by its type,
    no `[DONE]` after the last."""
    for event in events:
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
