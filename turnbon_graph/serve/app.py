"""The OpenAI-compatible HTTP app behind `turnbon serve`: every chat completion is one
Turn-BoN turn of the served model, answered with the chosen action.

`POST /v1/chat/completions` (tools, `tool_choice`, `stream: true` as server-sent events
ending in `data: [DONE]`), `GET /v1/models`, `GET /health`. The turn record is the
response's top-level `"turnbon"` field (on the last chunk when streaming; `usage` only
with `stream_options.include_usage`, in a last chunk with no choices, as OpenAI streams).
A request's fields are read by `openai.fields`' one list, every value checked before any
call. Errors come in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`:
400 for a malformed body or a bad field (`param` names it), 401 for a wrong key; when no
candidate succeeded, the upstream's own status and error if every candidate got the same
4xx (a 429 with the longest `Retry-After` asked), 504 if every call timed out, else 502;
500 for anything else, and nothing a request does stops the server. One engine serves every
request, so concurrent requests share its `max_concurrency` and `rate_limit`. A client
that goes away cancels its turn (and the upstream calls in flight). A streamed turn that
takes longer than `keepalive_s` starts its stream early and sends an SSE comment every
`keepalive_s` until the chunks (a failure then comes as an error event).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from langchain_core.messages import AIMessage
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from turnbon_graph._litellm.loading import load_litellm
from turnbon_graph._secrets import redact, reveal_secrets, secret_values
from turnbon_graph.errors import (
    AllCandidatesFailedError,
    ConfigurationError,
    CredentialsError,
    NotStoredError,
)
from turnbon_graph.openai.chat import (
    ChatRequest,
)
from turnbon_graph.serve import conversations
from turnbon_graph.serve.config import ServeConfig
from turnbon_graph.serve.limits import BodyError, ClientLeft, in_proportion, read_json_body
from turnbon_graph.serve.readers import Reader, chat_reader, responses_reader
from turnbon_graph.serve.state import deleted, input_items, open_store, retrieved
from turnbon_graph.turn.engine import TurnEngine, turn_record

__all__ = ["bad_request", "create_app", "error_response"]

log = logging.getLogger("turnbon.serve")

CLIENT_GONE = 499
"""The status logged for a request whose client left before its turn was chosen."""


def error_response(
    status: int, message: str, kind: str, code: str, *, param: str | None = None
) -> JSONResponse:
    """An error in OpenAI's shape."""
    return JSONResponse(_error_body(message, kind, code, param), status_code=status)


def _error_body(message: str, kind: str, code: str, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def bad_request(exc: ConfigurationError) -> JSONResponse:
    """A 400 for a request refused before its turn (a `RequestFieldError` names its field
    as `param`); a stored response or item it names that is not kept, OpenAI's miss."""
    param = getattr(exc, "param", None)
    if isinstance(exc, NotStoredError):
        error = {"message": str(exc), "type": "invalid_request_error", "param": param}
        return JSONResponse({"error": {**error, "code": exc.code}}, status_code=exc.status)
    return error_response(400, str(exc), "invalid_request_error", "invalid_request", param=param)


CONVERSATION_ROUTES = (
    ("", ["POST"]),
    ("/{conversation_id}", ["GET", "POST", "DELETE"]),
    ("/{conversation_id}/items", ["GET", "POST"]),
    ("/{conversation_id}/items/{item_id}", ["GET", "DELETE"]),
)
"""The Conversations API's paths under /v1/conversations, and their methods."""


def create_app(config: ServeConfig, *, engine: TurnEngine | None = None) -> Starlette:
    """The app serving `config.model` with `config.turn` (or a ready `engine`).

    Args:
        config: what to serve, and the server's limits.
        engine: a ready engine to serve instead of one made from `config.model` and
            `config.turn` (tests and embedders that share one).

    Returns:
        The Starlette app: the chat completions, Responses, models and health routes,
            with and without `/v1`; `app.state.engine` is its engine.

    Raises:
        ConfigurationError: the engine cannot be made from `config`.
    """
    service = _Service(config, engine or TurnEngine.from_config(config.model, config.turn))
    chat = Route("/v1/chat/completions", service.chat, methods=["POST"])
    routes = [
        chat,
        Route("/chat/completions", service.chat, methods=["POST"]),
        Route("/v1/responses", service.responses, methods=["POST"]),
        Route("/responses", service.responses, methods=["POST"]),
        Route("/v1/responses/{response_id}", service.stored, methods=["GET", "DELETE"]),
        Route("/responses/{response_id}", service.stored, methods=["GET", "DELETE"]),
        Route("/v1/responses/{response_id}/input_items", service.input_items, methods=["GET"]),
        Route("/responses/{response_id}/input_items", service.input_items, methods=["GET"]),
        *(
            Route(f"{root}/conversations{path}", service.conversation, methods=methods)
            for root in ("/v1", "")
            for path, methods in CONVERSATION_ROUTES
        ),
        Route("/v1/models", service.models, methods=["GET"]),
        Route("/models", service.models, methods=["GET"]),
        Route("/health", service.health, methods=["GET"]),
    ]
    app = Starlette(
        routes=routes,
        exception_handlers={
            HTTPException: _http_error,
            BodyError: _body_error,
            ClientLeft: _client_left,
        },
        lifespan=service.lifespan,
    )
    app.state.engine = service.engine
    return app


async def _body_error(request: Request, exc: Exception) -> Response:
    """A refused body (`limits.read_json_body`), in OpenAI's error shape. A 413 or 408
    closes the connection, so that the rest of the body is not read (or waited for)."""
    if not isinstance(exc, BodyError):
        raise exc
    response = error_response(
        exc.status, str(exc), "invalid_request_error", exc.code, param=exc.param
    )
    if exc.status in (413, 408):
        response.headers["connection"] = "close"
    return response


async def _client_left(request: Request, exc: Exception) -> Response:
    """A client that left before its body was complete: one line in the log (no
    traceback: nothing went wrong here), and nobody to answer."""
    log.info("%s %s: %s", request.method, request.url.path, exc)
    return Response(status_code=CLIENT_GONE)


async def _http_error(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    message = f"no endpoint {request.method} {request.url.path}"
    if status == 405:
        message = f"{request.url.path} does not take {request.method}"
    hint = (
        "; the endpoints are POST /v1/chat/completions, POST /v1/responses, "
        "GET and DELETE /v1/responses/{id}, GET /v1/models, GET /health"
    )
    return error_response(status, message + hint, "invalid_request_error", "not_found")


class _Service:
    """The handlers, around one engine."""

    def __init__(self, config: ServeConfig, engine: TurnEngine) -> None:
        self.config = config
        self.engine = engine
        kwargs = reveal_secrets(config.turn.completion_kwargs or {})
        self._secrets = secret_values(kwargs)
        key = config.require_key
        self._key = key.get_secret_value().encode() if key is not None else None
        self.store = open_store(config)
        self._read_chat = chat_reader(config)
        self._read_responses = responses_reader(config, self.store)

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        await load_litellm()  # off the loop, before the first request pays for it
        log.info("serving %s as %r, n=%d", self.config.model, self.config.name, self.config.turn.n)
        try:
            yield
        finally:
            await asyncio.to_thread(self.store.close)

    def _refused(self, request: Request) -> Response | None:
        if self._key is None:
            return None
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(token.strip().encode(), self._key):
            return None
        return error_response(
            401,
            "missing or wrong API key: send the server's key as 'Authorization: Bearer <key>' "
            "(the OpenAI SDK's api_key)",
            "authentication_error",
            "invalid_api_key",
        )

    async def models(self, request: Request) -> Response:
        if (refused := self._refused(request)) is not None:
            return refused
        entry = {"id": self.config.name, "object": "model", "created": 0, "owned_by": "turnbon"}
        return JSONResponse({"object": "list", "data": [entry]})

    async def health(self, request: Request) -> Response:
        return JSONResponse(
            {"status": "ok", "model": self.config.name, "n": self.config.turn.n, "pid": os.getpid()}
        )

    async def chat(self, request: Request) -> Response:
        return await self.answer(request, self._read_chat)

    async def responses(self, request: Request) -> Response:
        return await self.answer(request, self._read_responses)

    async def stored(self, request: Request) -> Response:
        """`GET` or `DELETE /v1/responses/{id}`: a stored response (a 404 when not kept)."""
        if (refused := self._refused(request)) is not None:
            return refused
        response_id = request.path_params["response_id"]
        reply = retrieved if request.method == "GET" else deleted
        try:
            return JSONResponse(await reply(self.store, response_id))
        except ConfigurationError as exc:
            return bad_request(exc)

    async def conversation(self, request: Request) -> Response:
        """The Conversations API (`serve.conversations`), by path and method."""
        if (refused := self._refused(request)) is not None:
            return refused
        found = request.path_params.get("conversation_id")
        item = request.path_params.get("item_id")
        store, method = self.store, request.method
        body = await read_json_body(request, self.config) if method == "POST" else None
        try:
            if found is None:
                answer = await conversations.created(store, body)
            elif item is not None:
                reply = conversations.item_of if method == "GET" else conversations.item_removed
                answer = await reply(store, found, item)
            elif request.url.path.endswith("/items"):
                answer = await (
                    conversations.items_page(store, found, request.query_params)
                    if method == "GET"
                    else conversations.added(store, found, body)
                )
            elif method == "GET":
                answer = (await conversations.read(store, found)).response
            elif method == "POST":
                answer = await conversations.updated(store, found, body)
            else:
                answer = await conversations.removed(store, found)
        except ConfigurationError as exc:
            return bad_request(exc)
        return JSONResponse(answer)

    async def input_items(self, request: Request) -> Response:
        """`GET /v1/responses/{id}/input_items`: a page of a stored response's input."""
        if (refused := self._refused(request)) is not None:
            return refused
        response_id = request.path_params["response_id"]
        try:
            return JSONResponse(await input_items(self.store, response_id, request.query_params))
        except ConfigurationError as exc:
            return bad_request(exc)

    async def answer(self, request: Request, read: Reader) -> Response:
        """An endpoint: the bearer check, the body (`read_json_body`), `read` into the
        turn's request and how to answer it (a `ConfigurationError`: a 400), one turn,
        answered with the chosen message's body (or, when streamed, its server-sent
        events), or the turn's failure (`_failure`). Every endpoint answers through this,
        so all share the checks, the keep-alive and the failures."""
        if (refused := self._refused(request)) is not None:
            return refused
        raw = await read_json_body(request, self.config)  # a BodyError: _body_error
        try:
            reply = await read(raw)
        except ConfigurationError as exc:
            return bad_request(exc)
        turn = asyncio.create_task(self._turn(request, reply.request))
        try:
            if reply.request.stream and self.config.keepalive_s:
                await asyncio.wait({turn}, timeout=self.config.keepalive_s)
                if not turn.done():  # a long turn: start the stream, keep it alive
                    kept = self._kept_alive(turn, reply.streamed)
                    return StreamingResponse(kept, media_type="text/event-stream")
            await asyncio.wait({turn})
        except BaseException:  # this handler was cancelled (shutdown): so is its turn
            turn.cancel()
            raise
        if (failed := self._failure_response(turn)) is not None:
            return failed
        message = turn.result()
        if message is None:
            return Response(status_code=CLIENT_GONE)
        if reply.request.stream:
            return StreamingResponse(await reply.streamed(message), media_type="text/event-stream")
        return await in_proportion(JSONResponse, await reply.whole(message))

    def _failure(self, turn: asyncio.Task[AIMessage | None]) -> tuple[int, dict[str, Any]] | None:
        """The status and OpenAI-shaped error body for a finished turn that raised (its
        headers: `_failure_response`)."""
        exc = None if turn.cancelled() else turn.exception()
        if exc is None:
            return None
        if isinstance(exc, CredentialsError):  # the server's upstream key, not the client's
            log.warning("turn failed upstream: %s", self._clean(exc))
            return 502, _error_body(self._clean(exc), "upstream_error", "upstream_credentials")
        if isinstance(exc, ConfigurationError):
            param = getattr(exc, "param", None)
            body = _error_body(self._clean(exc), "invalid_request_error", "invalid_request", param)
            return 400, body
        if isinstance(exc, AllCandidatesFailedError):
            log.warning("turn failed upstream: %s", self._clean(exc))
            return exc.status, self._upstream_body(exc)
        # a bug or an unexpected failure: answer, stay up
        log.error("turn failed: %s: %s", type(exc).__name__, self._clean(exc))
        text = f"the turn failed: {type(exc).__name__}: {self._clean(exc)}"
        return 500, _error_body(text, "server_error", "internal_error")

    def _failure_response(self, turn: asyncio.Task[AIMessage | None]) -> Response | None:
        """`_failure` as a response: a 429 with the longest `Retry-After` the upstream
        asked of any candidate."""
        if (failure := self._failure(turn)) is None:
            return None
        exc = turn.exception()
        asked = exc.retry_after if isinstance(exc, AllCandidatesFailedError) else None
        headers = {"Retry-After": str(math.ceil(asked))} if asked is not None else None
        return JSONResponse(failure[1], status_code=failure[0], headers=headers)

    def _upstream_body(self, exc: AllCandidatesFailedError) -> dict[str, Any]:
        """Every candidate refused alike (a 4xx): the upstream's own error, its words and
        type, keys redacted. Else (timeouts, 5xx, dropped connections, a mixed set) the
        turn's error, naming the model and the last failure."""
        if (upstream := exc.upstream) is None:
            code = "timeout" if exc.status == 504 else "all_candidates_failed"
            return _error_body(self._clean(exc), "upstream_error", code)
        given = {k: v for k, v in (upstream.error or {}).items() if isinstance(v, str)}
        message = redact(upstream.message, self._secrets)
        kind, code = given.get("type", "invalid_request_error"), given.get("code", "upstream")
        return _error_body(message, kind, code, given.get("param"))

    async def _kept_alive(
        self,
        turn: asyncio.Task[AIMessage | None],
        events: Callable[[AIMessage], Awaitable[Iterable[str]]],
    ) -> AsyncIterator[str]:
        """A stream started before its turn was chosen: an SSE comment (which clients
        skip) every `keepalive_s`, so that no proxy or client read timeout ends a long
        turn; then the chunks, or a failure as an error event (the status is already 200),
        which the OpenAI SDK raises as an `APIError`."""
        try:
            while not turn.done():
                yield ": turn in progress\n\n"
                await asyncio.wait({turn}, timeout=self.config.keepalive_s)
        finally:  # the client left (Starlette closes the stream): stop the turn
            if not turn.done():
                turn.cancel()
        if (failure := self._failure(turn)) is not None:
            yield f"data: {json.dumps(failure[1])}\n\n"
            return
        message = turn.result()
        if message is not None:
            for event in await events(message):
                yield event

    async def _turn(self, request: Request, chat: ChatRequest) -> AIMessage | None:
        """The chosen message, or None when the client left first (its turn cancelled)."""
        turn = asyncio.create_task(
            self.engine.run(chat.messages, tools=chat.tools, extra=chat.settings or None)
        )
        gone = asyncio.create_task(_disconnected(request))
        try:
            await asyncio.wait({turn, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:  # also when this handler is cancelled (shutdown)
            gone.cancel()
            if not turn.done():
                turn.cancel()
                await asyncio.gather(turn, return_exceptions=True)
        if turn.cancelled():
            return None
        message = turn.result()
        if (record := turn_record(message)) is not None:
            log.info(
                "turn %s: %d/%d candidates, %s chose %d",
                record.turn_id[:8],
                record.n_ok,
                record.n_requested,
                record.selector,
                record.selected_index,
            )
        return message

    def _clean(self, exc: BaseException) -> str:
        return redact(str(exc), self._secrets)


async def _disconnected(request: Request) -> None:
    """Returns once the client has gone (the body has been read, so nothing else comes)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass
