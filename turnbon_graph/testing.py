"""Loopback OpenAI-compatible stub server for tests.

``StubServer`` answers ``POST /v1/chat/completions`` with scripted responses so that
code calling LiteLLM (or any OpenAI client) can be tested through the real HTTP path
without network access. It runs an ``aiohttp.web`` app on its own event loop in a daemon
thread, so the same server works from sync tests and from async tests.

Example::

    with StubServer() as stub:
        stub.script(chat_completion("hello"))
        await litellm.acompletion(
            model="openai/stub", api_base=stub.base_url, api_key="sk-test", messages=[...]
        )
        assert stub.requests[0].body["messages"] == [...]

This module deliberately imports only the stdlib and aiohttp: importing litellm costs
seconds and tests that only need the server should not pay for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, TypeAlias

from aiohttp import web

__all__ = [
    "CapturedRequest",
    "Responder",
    "StubResponse",
    "StubServer",
    "chat_completion",
    "choice",
    "error",
    "is_selector_request",
    "tool_call",
]

SELECTOR_PROMPT_PREFIX = "You are the selector"

# Poll interval while a scripted delay runs; small enough that disconnects are noticed
# promptly, large enough not to spin.
_POLL_INTERVAL = 0.01


@dataclass
class StubResponse:
    """One scripted HTTP answer.

    ``body``: a dict is sent as JSON; ``str``/``bytes`` are sent verbatim (use this for
    malformed bodies); ``None`` sends an empty body. ``delay`` is waited inside the server
    before answering; ``drop`` closes the connection without any HTTP response.
    """

    body: dict[str, Any] | str | bytes | None = None
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    drop: bool = False


@dataclass
class CapturedRequest:
    """A request received on the chat-completions endpoint."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    received_at: float

    def header(self, name: str) -> str | None:
        """Case-insensitive header lookup (clients differ in header-name casing)."""
        wanted = name.lower()
        for key, value in self.headers.items():
            if key.lower() == wanted:
                return value
        return None


Responder: TypeAlias = (
    StubResponse | dict[str, Any] | Callable[[CapturedRequest], "StubResponse | dict[str, Any]"]
)
"""What a route answers with; a plain dict is shorthand for ``StubResponse(body=dict)``."""


# --------------------------------------------------------------------------- helpers


def _hex(n: int = 24) -> str:
    return uuid.uuid4().hex[:n]


def tool_call(name: str, args: dict[str, Any], *, id: str | None = None) -> dict[str, Any]:
    """Build an OpenAI ``tool_calls`` entry (arguments are JSON-encoded, as the API does)."""
    return {
        "id": id or f"call_{_hex()}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(args)},
    }


def choice(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    reasoning_content: str | None = None,
    refusal: str | None = None,
    finish_reason: str | None = None,
    index: int = 0,
) -> dict[str, Any]:
    """Build one ``choices`` entry of a chat.completion body."""
    message: dict[str, Any] = {"role": "assistant", "content": content, "refusal": refusal}
    if tool_calls:
        message["tool_calls"] = tool_calls
    if reasoning_content is not None:
        message["reasoning_content"] = reasoning_content
    if finish_reason is None:
        finish_reason = "tool_calls" if tool_calls else "stop"
    return {"index": index, "message": message, "logprobs": None, "finish_reason": finish_reason}


def chat_completion(
    content: str | None = None,
    tool_calls: list[dict[str, Any]] | None = None,
    *,
    reasoning_content: str | None = None,
    refusal: str | None = None,
    finish_reason: str | None = None,
    model: str = "stub",
    usage: dict[str, Any] | None = None,
    choices: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Build a full OpenAI ``chat.completion`` body.

    Unless ``choices`` is given (e.g. several for a native ``n`` request), a single choice
    is built from ``content``/``tool_calls``/``reasoning_content``/``refusal``.
    """
    if choices is None:
        choices = [
            choice(
                content,
                tool_calls,
                reasoning_content=reasoning_content,
                refusal=refusal,
                finish_reason=finish_reason,
            )
        ]
    return {
        "id": f"chatcmpl-{_hex()}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": choices,
        "usage": dict(usage)
        if usage is not None
        else {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
    }


_ERROR_KINDS: dict[int, tuple[str, str]] = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("authentication_error", "invalid_api_key"),
    403: ("permission_error", "permission_denied"),
    404: ("invalid_request_error", "not_found"),
    408: ("timeout_error", "timeout"),
    422: ("invalid_request_error", "unprocessable_entity"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    503: ("server_error", "service_unavailable"),
}


def error(
    status: int,
    message: str = "scripted error",
    *,
    retry_after: float | None = None,
    delay: float = 0.0,
) -> StubResponse:
    """Build an OpenAI-style error response, with a ``Retry-After`` header if given."""
    kind, code = _ERROR_KINDS.get(
        status, ("server_error", "server_error") if status >= 500 else ("api_error", "error")
    )
    headers: dict[str, str] = {}
    if retry_after is not None:
        headers["Retry-After"] = f"{retry_after:g}"
    return StubResponse(
        body={"error": {"message": message, "type": kind, "param": None, "code": code}},
        status=status,
        headers=headers,
        delay=delay,
    )


def _message_text(content: Any) -> str:
    # Content may be a plain string or a list of typed parts (OpenAI multimodal format).
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", ""))
            for part in content
            if isinstance(part, dict) and part.get("type") == "text"
        )
    return ""


def is_selector_request(request: CapturedRequest) -> bool:
    """True when the request's first message is the library's selector system prompt."""
    body = request.body
    if not body:
        return False
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        return False
    first = messages[0]
    if not isinstance(first, dict) or first.get("role") != "system":
        return False
    return _message_text(first.get("content")).lstrip().startswith(SELECTOR_PROMPT_PREFIX)


def _default_responder(_: CapturedRequest) -> StubResponse | dict[str, Any]:
    # A callable rather than a fixed dict so every default reply gets a fresh id.
    return chat_completion("ok")


# --------------------------------------------------------------------------- server


@dataclass
class _Route:
    match: Callable[[CapturedRequest], bool]
    responders: list[Responder]
    repeat_last: bool
    used: int = 0

    def take(self) -> Responder | None:
        """Next responder, or None once exhausted."""
        if self.used < len(self.responders):
            self.used += 1
            return self.responders[self.used - 1]
        if self.repeat_last:
            return self.responders[-1]
        return None


class StubServer:
    """Scriptable OpenAI-compatible HTTP server on 127.0.0.1 (free port).

    Routes are tried in the order added; the first whose ``match`` is true and which
    still has responders answers. Otherwise ``default`` answers (``chat_completion("ok")``
    unless given).
    """

    def __init__(self, *, default: Responder | None = None) -> None:
        self._default: Responder = default if default is not None else _default_responder
        # Touched from the server thread and the test thread; re-entrant so a route matcher
        # may itself read `requests`.
        self._lock = threading.RLock()
        self._routes: list[_Route] = []
        self._requests: list[CapturedRequest] = []
        self._disconnects = 0
        self._responder_errors: list[BaseException] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> StubServer:
        """Start serving in a background thread; returns self."""
        if self._thread is not None:
            raise RuntimeError("StubServer already started")
        self._stopping = False
        loop = asyncio.new_event_loop()
        thread = threading.Thread(
            target=self._run_loop, args=(loop,), name="turnbon-stub-server", daemon=True
        )
        thread.start()
        self._loop, self._thread = loop, thread
        try:
            asyncio.run_coroutine_threadsafe(self._setup(), loop).result(timeout=10)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the server and its thread; safe to call more than once."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        self._stopping = True
        if self._runner is not None:
            # Suppress: a failing cleanup must not mask the test's own outcome.
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self._runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        if not thread.is_alive():
            loop.close()
        self._loop = self._thread = self._runner = None
        self._port = None

    def __enter__(self) -> StubServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        loop.run_forever()

    async def _setup(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._handle_chat)
        app.router.add_post("/chat/completions", self._handle_chat)
        app.router.add_get("/v1/models", self._handle_models)
        app.router.add_get("/models", self._handle_models)
        app.router.add_route("*", "/{tail:.*}", self._handle_unknown)
        # Short shutdown_timeout: in-flight delayed handlers must not hold up stop().
        runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=0.2)
        await runner.setup()
        site = web.TCPSite(runner, host="127.0.0.1", port=0)
        await site.start()
        self._runner = runner
        addresses = runner.addresses
        if not addresses:
            raise RuntimeError("StubServer could not determine its port")
        self._port = int(addresses[0][1])

    # ------------------------------------------------------------------ public state

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, for ``api_base``."""
        if self._port is None:
            raise RuntimeError("StubServer not started")
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def requests(self) -> list[CapturedRequest]:
        """Chat-completion requests received so far, in arrival order (a copy)."""
        with self._lock:
            return list(self._requests)

    @property
    def disconnects(self) -> int:
        """Requests whose client went away before the response was sent."""
        with self._lock:
            return self._disconnects

    @property
    def responder_errors(self) -> list[BaseException]:
        """Exceptions raised by callable responders or route matchers (answered as 500)."""
        with self._lock:
            return list(self._responder_errors)

    # ------------------------------------------------------------------ scripting

    def route(
        self,
        match: Callable[[CapturedRequest], bool],
        *responders: Responder,
        repeat_last: bool = True,
    ) -> None:
        """Answer requests for which ``match`` is true with ``responders`` in order."""
        if not responders:
            raise ValueError("route() needs at least one responder")
        with self._lock:
            self._routes.append(_Route(match, list(responders), repeat_last))

    def script(self, *responders: Responder, repeat_last: bool = True) -> None:
        """Route matching every request."""
        self.route(lambda _: True, *responders, repeat_last=repeat_last)

    def reset(self) -> None:
        """Clear routes, captured requests, disconnect count and responder errors."""
        with self._lock:
            self._routes.clear()
            self._requests.clear()
            self._disconnects = 0
            self._responder_errors.clear()

    # ------------------------------------------------------------------ handlers

    def _pick(self, captured: CapturedRequest) -> Responder:
        # Held across matching so concurrent requests consume scripted responders
        # in a consistent arrival order.
        with self._lock:
            self._requests.append(captured)
            for route in self._routes:
                if not route.match(captured):
                    continue
                responder = route.take()
                if responder is not None:
                    return responder
            return self._default

    def _resolve(self, captured: CapturedRequest) -> StubResponse:
        try:
            responder = self._pick(captured)
            result = responder(captured) if callable(responder) else responder
            if isinstance(result, dict):
                return StubResponse(body=result)
            if isinstance(result, StubResponse):
                return result
            raise TypeError(f"responder returned {type(result).__name__}, not StubResponse/dict")
        except Exception as exc:
            # Surface as a 500 so the client fails, and keep the exception for the test.
            with self._lock:
                self._responder_errors.append(exc)
            return error(500, f"stub responder raised {type(exc).__name__}: {exc}")

    @staticmethod
    def _client_gone(request: web.Request) -> bool:
        transport = request.transport
        return transport is None or transport.is_closing()

    def _record_disconnect(self) -> None:
        with self._lock:
            self._disconnects += 1

    async def _handle_chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        body: dict[str, Any] | None
        try:
            parsed = json.loads(raw) if raw else None
            body = parsed if isinstance(parsed, dict) else None
        except ValueError:
            body = None
        captured = CapturedRequest(
            path=request.path,
            headers=dict(request.headers),
            body=body,
            received_at=time.monotonic(),
        )
        reply = self._resolve(captured)

        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(reply.delay, 0.0)
        try:
            # aiohttp no longer cancels handlers when the client leaves, so poll the
            # transport to notice disconnects during the delay.
            while (remaining := deadline - loop.time()) > 0:
                if self._client_gone(request):
                    self._record_disconnect()
                    return web.Response(status=499)
                await asyncio.sleep(min(_POLL_INTERVAL, remaining))
        except asyncio.CancelledError:
            # Cancellation from stop() is shutdown, not a client disconnect.
            if not self._stopping:
                self._record_disconnect()
            raise

        if self._client_gone(request):
            self._record_disconnect()
            return web.Response(status=499)

        if reply.drop:
            transport = request.transport
            if transport is not None:
                transport.close()
            # Writing to the closed transport fails quietly inside aiohttp; no bytes go out.
            return web.Response(status=499)

        return self._to_http(reply)

    @staticmethod
    def _to_http(reply: StubResponse) -> web.Response:
        payload: bytes
        if reply.body is None:
            payload = b""
        elif isinstance(reply.body, bytes):
            payload = reply.body
        elif isinstance(reply.body, str):
            payload = reply.body.encode()
        else:
            payload = json.dumps(reply.body).encode()
        headers = {"Content-Type": "application/json"}
        # Scripted headers win, including Content-Type.
        for key, value in reply.headers.items():
            if key.lower() == "content-type":
                headers.pop("Content-Type", None)
            headers[key] = value
        return web.Response(status=reply.status, body=payload, headers=headers)

    @staticmethod
    async def _handle_models(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "object": "list",
                "data": [
                    {"id": "stub", "object": "model", "created": 0, "owned_by": "turnbon-stub"}
                ],
            }
        )

    @staticmethod
    async def _handle_unknown(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "error": {
                    "message": f"stub server: no endpoint {request.method} {request.path}",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "not_found",
                }
            },
            status=404,
        )
