"""The stub's HTTP side: `StubServer`, an aiohttp app on its own event loop in a daemon
thread, which captures each chat-completion request and answers it from the routes
scripted on it (or the default reply), with delays, drops and disconnects; a request
with `"stream": true` gets its scripted completion as server-sent events.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from turnbon_graph.testing.replies import (
    CapturedRequest,
    Responder,
    StubResponse,
    chat_completion,
    completion_chunks,
    error,
)

__all__ = ["StubServer"]

MAX_BODY_BYTES = 64 * 1024 * 1024
"""The largest request body the stub takes (aiohttp's default, 1 MiB, is far below what
providers take: a long transcript would get aiohttp's 413, unrecorded)."""

MAX_LOG_BYTES = 64 * 1024 * 1024
"""How much of the requests it received the stub keeps by default (`StubServer.requests`),
counted as their bodies' and headers' bytes: thousands of ordinary requests, and a
bounded memory for a stub that serves for long (`turnbon serve --model stub`)."""

# Poll interval while a scripted delay runs; small enough that disconnects are noticed
# promptly, large enough not to spin.
_POLL_INTERVAL = 0.01


def _default_responder(_: CapturedRequest) -> StubResponse | dict[str, Any]:
    # A callable rather than a fixed dict so every default reply gets a fresh id.
    return chat_completion("ok")


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

    ``requests`` keeps the most recent requests, as many as fit in ``max_log_bytes`` of
    bodies and headers (always the latest one); older ones are dropped, so that a stub
    that serves for long holds a bounded memory. ``received`` counts them all.

    A request with ``"stream": true`` whose answer is a ``chat.completion`` (status 200,
    a dict with ``choices``) gets it as OpenAI streams it: ``chat.completion.chunk``
    server-sent events (the role, content and tool-call deltas, the finish reason; the
    usage in a last chunk only with ``stream_options.include_usage``), then
    ``data: [DONE]`` (``replies.completion_chunks``). Errors, malformed bodies, delays
    and drops are answered as scripted, streamed or not, so a client sees what a
    provider that fails before its stream starts sends.
    """

    def __init__(
        self, *, default: Responder | None = None, max_log_bytes: int = MAX_LOG_BYTES
    ) -> None:
        """A stopped server: ``start()`` it, or use it as a context manager.

        Args:
            default: answers a request no route answers; None: ``chat_completion("ok")``.
            max_log_bytes: how many bytes of bodies and headers ``requests`` keeps (the
                latest request always).

        Raises:
            ValueError: ``max_log_bytes`` is negative.
        """
        if max_log_bytes < 0:
            raise ValueError(f"max_log_bytes must be at least 0, got {max_log_bytes}")
        self._default: Responder = default if default is not None else _default_responder
        self.max_log_bytes = max_log_bytes
        # Touched from the server thread and the test thread; re-entrant so a route matcher
        # may itself read `requests`.
        self._lock = threading.RLock()
        self._routes: list[_Route] = []
        self._requests: deque[tuple[int, CapturedRequest]] = deque()  # (bytes, request)
        self._logged_bytes = 0
        self._received = 0
        self._disconnects = 0
        self._responder_errors: list[BaseException] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._runner: web.AppRunner | None = None
        self._port: int | None = None
        self._stopping = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> StubServer:
        """Start serving in a background thread.

        Returns:
            The server itself, listening.

        Raises:
            RuntimeError: it was already started.
        """
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

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    @staticmethod
    def _run_loop(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        loop.run_forever()

    async def _setup(self) -> None:
        app = web.Application(client_max_size=MAX_BODY_BYTES)
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
        """Chat-completion requests received so far, in arrival order (a copy): the most
        recent, within ``max_log_bytes``."""
        with self._lock:
            return [request for _, request in self._requests]

    @property
    def received(self) -> int:
        """Chat-completion requests received so far, those dropped from ``requests`` too."""
        with self._lock:
            return self._received

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
        """Answer requests for which ``match`` is true with ``responders`` in order.

        Args:
            match: tells the requests this route answers (``is_selector_request``, say).
            *responders: the answers, one a request, in order.
            repeat_last: once they are used up, answer every further request with the
                last; False: leave further requests to later routes or ``default``.

        Raises:
            ValueError: no responder is given.
        """
        if not responders:
            raise ValueError("route() needs at least one responder")
        with self._lock:
            self._routes.append(_Route(match, list(responders), repeat_last))

    def script(self, *responders: Responder, repeat_last: bool = True) -> None:
        """Route matching every request.

        Args:
            *responders: the answers, one a request, in order.
            repeat_last: as for ``route``.
        """
        self.route(lambda _: True, *responders, repeat_last=repeat_last)

    def reset(self) -> None:
        """Clear routes, captured requests and their count, disconnect count and
        responder errors."""
        with self._lock:
            self._routes.clear()
            self._requests.clear()
            self._logged_bytes = self._received = 0
            self._disconnects = 0
            self._responder_errors.clear()

    # ------------------------------------------------------------------ handlers

    def _log(self, captured: CapturedRequest, size: int) -> None:
        """Keeps `captured` (`size` bytes), dropping the oldest past ``max_log_bytes``."""
        self._requests.append((size, captured))
        self._logged_bytes += size
        self._received += 1
        while self._logged_bytes > self.max_log_bytes and len(self._requests) > 1:
            self._logged_bytes -= self._requests.popleft()[0]

    def _pick(self, captured: CapturedRequest, size: int) -> Responder:
        # Held across matching so concurrent requests consume scripted responders
        # in a consistent arrival order.
        with self._lock:
            self._log(captured, size)
            for route in self._routes:
                if not route.match(captured):
                    continue
                responder = route.take()
                if responder is not None:
                    return responder
            return self._default

    def _resolve(self, captured: CapturedRequest, size: int) -> StubResponse:
        try:
            responder = self._pick(captured, size)
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
        headers = sum(len(k) + len(v) for k, v in captured.headers.items())
        reply = self._resolve(captured, len(raw) + headers)

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

        if _streamed(captured, reply):
            return await self._stream(request, captured, reply)
        return self._to_http(reply)

    async def _stream(
        self, request: web.Request, captured: CapturedRequest, reply: StubResponse
    ) -> web.StreamResponse:
        """The scripted completion as server-sent events (`_streamed` said it is one)."""
        assert isinstance(reply.body, dict) and captured.body is not None
        options = captured.body.get("stream_options")
        usage = isinstance(options, dict) and options.get("include_usage") is True
        headers = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        headers.update({k: v for k, v in reply.headers.items() if k.lower() != "content-type"})
        response = web.StreamResponse(status=reply.status, headers=headers)
        await response.prepare(request)
        try:
            for chunk in completion_chunks(reply.body, include_usage=usage):
                await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
            await response.write(b"data: [DONE]\n\n")
            await response.write_eof()
        except (ConnectionResetError, ConnectionError):  # the client left mid-stream
            self._record_disconnect()
        return response

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


def _streamed(captured: CapturedRequest, reply: StubResponse) -> bool:
    """Whether the answer goes out as a stream: the request asked for one and the answer
    is a chat completion (an error or a malformed body goes out as scripted)."""
    asked = captured.body is not None and captured.body.get("stream") is True
    body = reply.body
    return asked and reply.status == 200 and isinstance(body, dict) and "choices" in body
