"""How each endpoint of `turnbon serve` reads a request body: into the turn's request,
and how to answer it with the chosen message, whole or streamed (a `Reply`).

`POST /v1/chat/completions` is read by `openai.chat`. `POST /v1/responses` (the OpenAI
Responses API, so that `client.responses.create` and openai-agents' default model run
Turn-BoN turns) is read by `openai.responses` (LiteLLM's transformation), with state as
OpenAI keeps it (`state`): `previous_response_id` and `item_reference` items are resolved
against the response store before the request is read, and the answer is stored unless
the request says `store: false`. `conversation` is a 400. Both answer through the app's
one `answer`: the same bearer check, body limits, keep-alive stream and errors.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

from langchain_core.messages import AIMessage

from turnbon_graph._litellm.loading import load_litellm
from turnbon_graph.openai.chat import (
    ChatRequest,
    chat_completion,
    chat_completion_chunks,
    parse_chat_request,
)
from turnbon_graph.openai.responses import (
    parse_responses_request,
    response_body,
    response_events,
)
from turnbon_graph.serve import conversations
from turnbon_graph.serve.limits import in_proportion
from turnbon_graph.serve.state import keep, resolve, with_ids

if TYPE_CHECKING:
    from turnbon_graph.serve.config import ServeConfig
    from turnbon_graph.serve.store import ResponseStore

__all__ = ["Reader", "Reply", "chat_reader", "responses_reader"]


class Reply(NamedTuple):
    """What an endpoint makes of a request body: the turn's request, and how to answer
    with the chosen message, whole (a JSON body) and streamed (server-sent events); each
    may first await what the answer needs (a Responses answer is stored)."""

    request: ChatRequest
    whole: Callable[[AIMessage], Awaitable[dict[str, Any]]]
    streamed: Callable[[AIMessage], Awaitable[Iterable[str]]]


Reader = Callable[[Any], Awaitable[Reply]]
"""Reads one endpoint's request body into its `Reply` (a `ConfigurationError`: a 400)."""


def chat_reader(config: ServeConfig) -> Reader:
    """How the app reads a chat-completions request body for the served model."""

    async def read(body: Any) -> Reply:
        chat = await in_proportion(parse_chat_request, body)
        name = chat.model or config.name

        async def whole(message: AIMessage) -> dict[str, Any]:
            return chat_completion(message, model=name)

        async def streamed(message: AIMessage) -> Iterator[str]:
            chunks = chat_completion_chunks(message, model=name, include_usage=chat.include_usage)
            return _chat_events(chunks)

        return Reply(chat, whole, streamed)

    return read


def responses_reader(config: ServeConfig, store: ResponseStore) -> Reader:
    """How the app reads a Responses request body for the served `config.model`, its
    state in `store`, and answers it, stored unless asked not to."""

    async def read(body: Any) -> Reply:
        await load_litellm()  # its transformation reads the request (off the loop, once)
        limit = config.max_body_bytes
        conversation, body, held = await conversations.continued(body, store, limit)
        resolved = await resolve(body, store, limit)
        request = await in_proportion(parse_responses_request, resolved.body, model=config.model)
        name = request.chat.model or config.name

        async def whole(message: AIMessage) -> dict[str, Any]:
            answered = await in_proportion(response_body, message, request, model=name)
            await keep(answered, resolved, store)
            if conversation is not None:  # its input and answer join the conversation
                answered["conversation"] = {"id": conversation}
                new = [*with_ids(resolved.conversation[held:]), *answered.get("output", [])]
                await conversations.appended(store, conversation, new)
            return answered

        async def streamed(message: AIMessage) -> Iterator[str]:
            return _response_events(response_events(await whole(message)))

        return Reply(request.chat, whole, streamed)

    return read


def _chat_events(chunks: list[dict[str, Any]]) -> Iterator[str]:
    """Server-sent events as OpenAI streams a chat completion: `data: [DONE]` last."""
    for chunk in chunks:
        yield f"data: {json.dumps(chunk)}\n\n"
    yield "data: [DONE]\n\n"


def _response_events(events: list[dict[str, Any]]) -> Iterator[str]:
    """Server-sent events as OpenAI sends the Responses stream: each named by its type,
    no `[DONE]` after the last."""
    for event in events:
        yield f"event: {event['type']}\ndata: {json.dumps(event)}\n\n"
