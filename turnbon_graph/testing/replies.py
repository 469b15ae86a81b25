"""What goes over the stub's wire: the captured request, the scripted answer, and the
builders of OpenAI chat-completion bodies (and the chunks that stream them), tool calls
and errors (plus a matcher for the library's selector requests).

The request and answer types live here, not in `server`, because the builders make them
(`error` returns a `StubResponse`) and the server consumes them. Stdlib only.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

__all__ = [
    "SELECTOR_PROMPT_PREFIX",
    "CapturedRequest",
    "Responder",
    "StubResponse",
    "chat_completion",
    "choice",
    "completion_chunks",
    "error",
    "is_selector_request",
    "last_user_text",
    "tool_call",
]

SELECTOR_PROMPT_PREFIX = "You are the selector"


@dataclass
class StubResponse:
    """One scripted HTTP answer."""

    body: dict[str, Any] | str | bytes | None = None
    """A dict is sent as JSON; ``str``/``bytes`` are sent verbatim (use this for malformed
    bodies); ``None`` sends an empty body."""
    status: int = 200
    """The HTTP status."""
    headers: dict[str, str] = field(default_factory=dict)
    """Response headers (``Retry-After``, ...)."""
    delay: float = 0.0
    """Seconds waited inside the server before answering (a client that leaves meanwhile
    counts as a disconnect)."""
    drop: bool = False
    """Close the connection without any HTTP response."""


@dataclass
class CapturedRequest:
    """A request received on the chat-completions endpoint."""

    path: str
    """The URL path it was sent to (``/v1/chat/completions``)."""
    headers: dict[str, str]
    """Its headers, as sent (``header`` looks one up whatever its casing)."""
    body: dict[str, Any] | None
    """The JSON body; None when it was not a JSON object."""
    received_at: float
    """When it arrived (``time.monotonic()``)."""

    def header(self, name: str) -> str | None:
        """Case-insensitive header lookup (clients differ in header-name casing).

        Args:
            name: the header's name, in any casing.

        Returns:
            Its value, or None when the request has no such header.
        """
        wanted = name.lower()
        for key, value in self.headers.items():
            if key.lower() == wanted:
                return value
        return None


Responder: TypeAlias = (
    StubResponse | dict[str, Any] | Callable[[CapturedRequest], "StubResponse | dict[str, Any]"]
)
"""What a route answers with; a plain dict is shorthand for ``StubResponse(body=dict)``."""


# --------------------------------------------------------------------------- builders


def _hex(n: int = 24) -> str:
    return uuid.uuid4().hex[:n]


def tool_call(name: str, args: dict[str, Any], *, id: str | None = None) -> dict[str, Any]:
    """Build an OpenAI ``tool_calls`` entry (arguments are JSON-encoded, as the API does).

    Args:
        name: the tool's name.
        args: the call's arguments.
        id: the call's id; None makes a random ``call_...`` one.

    Returns:
        The entry, for ``chat_completion(tool_calls=[...])`` or ``choice``.
    """
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
    """Build one ``choices`` entry of a chat.completion body.

    Args:
        content: the assistant message's text.
        tool_calls: its ``tool_calls`` entries (``tool_call``).
        reasoning_content: private reasoning, as providers that return it send it.
        refusal: a refusal's text.
        finish_reason: None: ``tool_calls`` with tool calls, else ``stop``.
        index: the choice's position (several for a request with ``n``).

    Returns:
        The choice, for ``chat_completion(choices=[...])``.
    """
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

    Args:
        content: the assistant message's text.
        tool_calls: its ``tool_calls`` entries (``tool_call``).
        reasoning_content: private reasoning, as providers that return it send it.
        refusal: a refusal's text.
        finish_reason: None: ``tool_calls`` with tool calls, else ``stop``.
        model: the body's ``model``.
        usage: the body's ``usage``; None: 11 prompt and 7 completion tokens.
        choices: the choices (``choice``), instead of the one built from the above.

    Returns:
        The body, as a route's responder or a ``StubResponse``'s ``body``.
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
    headers: dict[str, str] | None = None,
) -> StubResponse:
    """Build an OpenAI-style error response, with a ``Retry-After`` header if given.

    Args:
        status: the HTTP status; the error's ``type`` and ``code`` are OpenAI's for it.
        message: the error's message.
        retry_after: seconds for a ``Retry-After`` header.
        delay: seconds to wait before answering.
        headers: any other headers, such as ``retry-after-ms``.

    Returns:
        The response, as a route's responder.
    """
    kind, code = _ERROR_KINDS.get(
        status, ("server_error", "server_error") if status >= 500 else ("api_error", "error")
    )
    headers = dict(headers or {})
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
    """True when the request's first message is the library's selector system prompt.

    Args:
        request: a captured request (a route's ``match`` gets one).

    Returns:
        Whether a selector (of this library's prompts) sent it, rather than a generator.
    """
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


def last_user_text(request: CapturedRequest) -> str:
    """The text of the request's last user message (its text parts joined): what a
    responder that answers the question asked reads.

    Args:
        request: a captured request.

    Returns:
        That text, or "" when the request has no user message.
    """
    messages = (request.body or {}).get("messages")
    if not isinstance(messages, list):
        return ""
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return _message_text(users[-1].get("content")) if users else ""


def completion_chunks(
    completion: dict[str, Any], *, include_usage: bool = False, piece: int = 16
) -> list[dict[str, Any]]:
    """A ``chat.completion`` body as the ``chat.completion.chunk``s OpenAI streams for
    it: per choice, the role, its reasoning and content in deltas of up to ``piece``
    characters, each tool call (its id and name, then its arguments in pieces), and a
    chunk with the finish reason; with ``include_usage`` (``stream_options``), every
    chunk has ``"usage": null`` and a last one, with no choices, the usage."""
    envelope = {
        "id": completion.get("id") or f"chatcmpl-{_hex()}",
        "object": "chat.completion.chunk",
        "created": completion.get("created", int(time.time())),
        "model": completion.get("model", "stub"),
    }
    chunks: list[dict[str, Any]] = []

    def chunk(index: int, delta: dict[str, Any], finish: str | None = None) -> None:
        choice = {"index": index, "delta": delta, "logprobs": None, "finish_reason": finish}
        chunks.append({**envelope, "choices": [choice]})

    def pieces(text: str) -> list[str]:
        return [text[i : i + piece] for i in range(0, len(text), piece)]

    for position, entry in enumerate(completion.get("choices") or []):
        index = entry.get("index", position)
        message = entry.get("message") or {}
        chunk(index, {"role": "assistant", "content": ""})
        for part in pieces(message.get("reasoning_content") or ""):
            chunk(index, {"reasoning_content": part})
        for part in pieces(message.get("content") or ""):
            chunk(index, {"content": part})
        if message.get("refusal"):
            chunk(index, {"refusal": message["refusal"]})
        for number, call in enumerate(message.get("tool_calls") or []):
            function = call.get("function") or {}
            head = {"name": function.get("name"), "arguments": ""}
            first = {"index": number, "id": call.get("id"), "type": "function", "function": head}
            chunk(index, {"tool_calls": [first]})
            for part in pieces(function.get("arguments") or ""):
                chunk(index, {"tool_calls": [{"index": number, "function": {"arguments": part}}]})
        chunk(index, {}, entry.get("finish_reason") or "stop")
    if include_usage:
        for each in chunks:
            each["usage"] = None
        chunks.append({**envelope, "choices": [], "usage": completion.get("usage")})
    return chunks
