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

`replies` builds the bodies and holds the request/answer types; `server` is the server.
This package deliberately imports only the stdlib and aiohttp: importing litellm costs
seconds and tests that only need the server should not pay for it.
"""

from __future__ import annotations

from turnbon_graph.testing.replies import (
    SELECTOR_PROMPT_PREFIX,
    CapturedRequest,
    Responder,
    StubResponse,
    chat_completion,
    choice,
    error,
    is_selector_request,
    last_user_text,
    tool_call,
)
from turnbon_graph.testing.server import StubServer

__all__ = [
    "SELECTOR_PROMPT_PREFIX",
    "CapturedRequest",
    "Responder",
    "StubResponse",
    "StubServer",
    "chat_completion",
    "choice",
    "error",
    "is_selector_request",
    "last_user_text",
    "tool_call",
]
