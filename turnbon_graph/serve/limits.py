"""What one request may cost the server, so that no client can make it hold a connection,
memory or a stack frame without bound.

- `read_json_body`: the body of every endpoint, read with a byte bound (Content-Length
  first, then the bytes as they stream, so a chunked body is refused as it grows, not
  after it has been buffered), a deadline, and a nesting bound checked without
  recursing. A refusal is a `BodyError`, which the app answers in OpenAI's error shape
  (413, 408 or 400); a client that leaves before its body is complete, `ClientLeft`.
- `in_proportion`: work whose time grows with the body (parsing it, checking and
  converting the request it holds, answering with what it echoes) runs on a thread
  when the body is large, so that the event loop goes on answering other requests.
- `guarded_protocol`: uvicorn's HTTP protocol with a deadline on each request's headers
  and a bound on their size. uvicorn closes idle keep-alive connections
  (`timeout_keep_alive`) but never one that sent a partial request line or partial
  headers; this closes it once `header_timeout_s` has passed.
"""

from __future__ import annotations

import asyncio
import functools
import json
import re
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from itertools import accumulate
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import h11
from starlette.requests import ClientDisconnect
from uvicorn.protocols.http.h11_impl import H11Protocol

from turnbon_graph.errors import ConfigurationError, RequestFieldError, TurnBoNError
from turnbon_graph.openai.text import check_utf8
from turnbon_graph.serve.config import MB

if TYPE_CHECKING:
    from starlette.requests import Request

    from turnbon_graph.serve.config import ServeConfig

__all__ = [
    "PROTOCOLS",
    "BodyError",
    "ClientLeft",
    "continued_conversation",
    "guarded_protocol",
    "in_proportion",
    "json_depth",
    "read_json_body",
]

_P = ParamSpec("_P")
_T = TypeVar("_T")


class BodyError(TurnBoNError):
    """A request body the server refuses: `status` 413 (too large), 408 (too slow) or 400
    (not JSON, nested too deep, not valid UTF-8 text), `code` and `param` for OpenAI's
    error shape."""

    def __init__(self, status: int, message: str, code: str, param: str | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.param = param


class ClientLeft(TurnBoNError):
    """The client closed its connection before its request body was complete: nothing
    to answer, and nothing wrong with the server (the app logs a line)."""


async def read_json_body(request: Request, config: ServeConfig) -> Any:
    """The request's JSON body, read at most `config.max_body_bytes` into memory and
    nested at most `config.max_json_depth` deep; else a `BodyError` (a `ClientLeft` if
    the client goes first). Its size is kept for `in_proportion`."""
    limit = config.max_body_bytes
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise _too_large(limit)
    parts: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(config.body_timeout_s):
            async for part in request.stream():
                size += len(part)
                if size > limit:  # a chunked body, or one longer than it said
                    raise _too_large(limit)
                parts.append(part)
    except TimeoutError:
        raise BodyError(
            408,
            f"the request body did not arrive within {config.body_timeout_s:g} seconds "
            "(--body-timeout)",
            "request_timeout",
        ) from None
    except ClientDisconnect:
        of = f" of the {int(declared):,}" if declared.isdigit() else ""
        raise ClientLeft(f"the client left after {size:,}{of} bytes of its body") from None
    raw = b"".join(parts)
    _BODY_BYTES.set(len(raw))
    return await in_proportion(_parse, raw, config.max_json_depth)


_ON_THE_LOOP = 64 * 1024
"""Work for a body up to this size runs on the event loop (about a millisecond at most,
less than a thread hop costs); for a larger one on a thread, so that other requests are
not held up."""

_BODY_BYTES: ContextVar[int] = ContextVar("turnbon_body_bytes", default=0)
"""The size of the body the current request sent, with the stored conversation it
continues (each request is a task of its own, with a context of its own)."""


def continued_conversation(size: int, limit: int) -> None:
    """A request that continues a stored conversation of `size` bytes costs what a body
    of its size and the conversation's would: refused past `limit` (--max-body-mb), as
    that body would be, and counted by `in_proportion`, so that a small request that
    continues a long conversation is worked on off the event loop.

    Raises:
        BodyError: 413, the conversation is over `limit`.
    """
    whole = _BODY_BYTES.get() + size
    if whole > limit:
        raise BodyError(
            413,
            f"this request continues a stored conversation of {_size(size)}, which with its "
            f"body is more than a request may hold ({_size(limit)}, --max-body-mb): start a "
            "new conversation with its own input, or raise --max-body-mb",
            "request_too_large",
        )
    _BODY_BYTES.set(whole)


def _size(count: int) -> str:
    """Bytes in words: KiB under a MiB, else MiB."""
    return f"{count / 1024:,.0f} KiB" if count < MB else f"{count / MB:,.1f} MiB"


async def in_proportion(work: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """`work(*args, **kwargs)`, whose time grows with the body of the request being
    answered (`read_json_body` read it): on a thread when that body is over 64 KiB, so
    that the event loop goes on serving other requests (`/health` among them) while a
    large one is parsed, checked, converted or answered; on the loop for a small one."""
    if _BODY_BYTES.get() > _ON_THE_LOOP:
        return await asyncio.to_thread(work, *args, **kwargs)
    return work(*args, **kwargs)


def _parse(raw: bytes, max_depth: int) -> Any:
    if json_depth(raw) > max_depth:
        raise BodyError(
            400, f"the request body is nested deeper than {max_depth} levels", "nested_too_deep"
        )
    try:
        body = json.loads(raw)
    except UnicodeDecodeError as exc:
        raise BodyError(
            400,
            f"the request body is not valid UTF-8 text (at byte {exc.start:,}): send JSON as UTF-8",
            "invalid_utf8",
        ) from None
    except (ValueError, RecursionError):
        raise BodyError(400, "the request body is not valid JSON", "invalid_json") from None
    if isinstance(body, Mapping):  # (an endpoint refuses any other body, quoting none of it)
        try:
            check_utf8(body)
        except RequestFieldError as exc:
            raise BodyError(400, str(exc), "invalid_request", exc.param) from None
    return body


def _too_large(limit: int) -> BodyError:
    return BodyError(
        413,
        f"the request body is larger than this server's limit of {limit:,} bytes "
        "(--max-body-mb); send images and files by URL",
        "request_too_large",
    )


_STRING = re.compile(rb'"[^"\\]*+(?:\\.[^"\\]*+)*+(?:"|\\?\Z)', re.DOTALL)
"""A JSON string, whose brackets are text; an unterminated one runs to the end. Possessive
and never failing once begun, so no input makes it rescan (many unterminated strings
would make a pattern that needs the closing quote quadratic)."""
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


def json_depth(raw: bytes) -> int:
    """How deep the arrays and objects of JSON text `raw` nest (0 for a scalar), counted
    over its brackets outside strings, without parsing or recursing: a body nested
    100,000 deep is measured, not a RecursionError."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


# ---------------------------------------------------------------------- the protocol


class _HeaderGuard(asyncio.Protocol):
    """Mixed into uvicorn's HTTP protocol: while a connection waits for a request's
    headers (from connecting, or from the first byte of a request on a kept-alive
    connection), a timer runs; headers not complete within `header_timeout_s` close the
    connection, and more than `max_header_bytes` of them get a 431 and a close. Once
    the headers are in, the request is the app's and the timer stops; between requests
    uvicorn's own keep-alive timeout closes an idle connection."""

    def __init__(
        self, *args: Any, header_timeout_s: float, max_header_bytes: int, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self.header_timeout_s = header_timeout_s
        self.max_header_bytes = max_header_bytes
        self._header_timer: asyncio.TimerHandle | None = None
        self._header_bytes = 0

    def _waiting(self) -> bool:
        """True while a request's headers have begun (or the connection is new) and
        are not complete."""
        raise NotImplementedError

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._arm()

    def data_received(self, data: bytes) -> None:
        if self._waiting():
            # counted before the parser sees them: a whole header block in one read
            # would otherwise be complete, and the app's, before it was measured
            end = data.find(b"\r\n\r\n")
            self._header_bytes += len(data) if end < 0 else end + 4
            if self._header_bytes > self.max_header_bytes:
                self._refuse_headers()
                return
        super().data_received(data)
        if not self._waiting():  # the headers are in (or nothing has begun)
            self._disarm()
            self._header_bytes = 0
        elif self._header_timer is None:  # a request begun on a kept-alive connection
            self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def _arm(self) -> None:
        loop = asyncio.get_running_loop()
        self._header_timer = loop.call_later(self.header_timeout_s, self._timed_out)

    def _disarm(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _timed_out(self) -> None:
        self._header_timer = None
        transport = getattr(self, "transport", None)
        if transport is not None and not transport.is_closing():
            transport.close()

    def _refuse_headers(self) -> None:
        self._disarm()
        transport = getattr(self, "transport", None)
        if transport is None or transport.is_closing():
            return
        text = b"the request headers are larger than this server's limit"
        transport.write(
            b"HTTP/1.1 431 Request Header Fields Too Large\r\ncontent-type: text/plain\r\n"
            b"connection: close\r\ncontent-length: %d\r\n\r\n%s" % (len(text), text)
        )
        transport.close()


class GuardedH11Protocol(_HeaderGuard, H11Protocol):
    """uvicorn's h11 protocol with the header guard."""

    def _waiting(self) -> bool:
        # h11 leaves IDLE when a request's headers are complete; a new connection, or
        # one with a partial request line or headers buffered, is IDLE
        return self.conn.their_state is h11.IDLE


PROTOCOLS: dict[str, type[_HeaderGuard]] = {"h11": GuardedH11Protocol}
"""uvicorn's HTTP protocols, each with the header guard, by uvicorn's names for them."""
try:  # httptools comes with uvicorn[standard]
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class GuardedHttpToolsProtocol(_HeaderGuard, HttpToolsProtocol):
        """uvicorn's httptools protocol with the header guard."""

        _in_headers = False

        def _waiting(self) -> bool:
            if self.cycle is None:  # a new connection
                return True
            # a request begun, not while a response is going out (a pipelined request
            # left partial is the keep-alive timeout's, armed once the response is out)
            return self._in_headers and self.cycle.response_complete

        def on_message_begin(self) -> None:
            self._in_headers = True
            super().on_message_begin()

        def on_headers_complete(self) -> None:
            self._in_headers = False
            super().on_headers_complete()

    PROTOCOLS["httptools"] = GuardedHttpToolsProtocol
except ImportError:  # pragma: no cover
    pass


def guarded_protocol(config: ServeConfig) -> Any:
    """uvicorn's `http` setting for `config`: the HTTP protocol `config.http` names
    ("auto", as uvicorn picks: httptools where it is installed, else h11) with the
    header guard. A partial of a module-level class, so that uvicorn's worker
    processes can unpickle it."""
    name = config.http
    if name == "auto":
        name = "httptools" if "httptools" in PROTOCOLS else "h11"
    if name not in PROTOCOLS:
        raise ConfigurationError(
            f"http {config.http!r}: uvicorn here has {', '.join(['auto', *PROTOCOLS])} "
            "(httptools comes with uvicorn[standard])"
        )
    return functools.partial(
        PROTOCOLS[name],
        header_timeout_s=config.header_timeout_s,
        max_header_bytes=config.max_header_bytes,
    )
