"""Replies a provider should not send: a selector answer with no choices, and replies that
echo the request's key. The turn goes on, and no key is kept anywhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from tests.helpers import stub_engine, stub_kwargs
from turnbon_graph import turn_record
from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph.selectors import LLMSelector
from turnbon_graph.testing import (
    CapturedRequest,
    StubResponse,
    StubServer,
    chat_completion,
    is_selector_request,
    tool_call,
)

KEY = "sk-hostile-0123456789"
ASK = [HumanMessage("go")]


def no_choices() -> dict[str, Any]:
    body = chat_completion("unused")
    body["choices"] = []
    return body


def echo_key(request: CapturedRequest) -> dict[str, Any]:
    """A reply that quotes the Authorization header back, in its text and its tool call."""
    header = request.header("authorization") or ""
    return chat_completion(
        f"I was sent {header}", tool_calls=[tool_call("shell", {"command": f"echo {header}"})]
    )


async def test_a_selector_reply_without_choices_falls_back_with_the_reason(
    stub: StubServer,
) -> None:
    stub.route(is_selector_request, no_choices())
    stub.route(lambda r: not is_selector_request(r), chat_completion("a"), chat_completion("b"))
    selector = LLMSelector("openai/judge", completion_kwargs=stub_kwargs(stub.base_url))
    record = turn_record(await stub_engine(stub, n=2, selector=selector).run(ASK))
    assert record is not None
    assert record.fallback is not None and "no choices" in record.fallback
    assert record.selected_index in (0, 1)


async def test_a_reply_that_echoes_the_key_is_kept_without_it(
    stub: StubServer, tmp_path: Path
) -> None:
    stub.route(
        is_selector_request,
        lambda r: chat_completion(
            json.dumps({"reason": f"key {r.header('authorization')}", "selected_index": 0})
        ),
    )
    stub.route(lambda r: not is_selector_request(r), echo_key)
    trace = tmp_path / "trace.jsonl"
    engine = stub_engine(stub, n=2, completion_kwargs={"api_key": KEY}, trace=trace)
    message = await engine.run(ASK)
    assert KEY not in json.dumps(message.model_dump(), default=str)  # the executed action
    assert message.tool_calls[0]["args"]["command"] == "echo Bearer [REDACTED]"
    assert KEY not in trace.read_text()
    record = turn_record(message)
    assert record is not None and KEY not in record.model_dump_json()
    assert all(f"Bearer {KEY}" == r.header("authorization") for r in stub.requests)


async def test_a_redacted_error_carries_no_key_in_its_chain(stub: StubServer) -> None:
    stub.script(StubResponse(status=401, body={"error": {"message": f"bad key {KEY}"}}))
    client = LiteLLMClient(max_retries=0)
    with pytest.raises(Exception) as caught:
        await client.complete(
            model="openai/stub",
            messages=[{"role": "user", "content": "x"}],
            api_base=stub.base_url,
            api_key=KEY,
        )
    link: BaseException | None = caught.value
    seen = 0
    while link is not None:
        assert KEY not in str(link) and KEY not in repr(link)
        link = link.__cause__ or link.__context__
        seen += 1
    assert seen == 1  # nothing chained: the original, key and all, is gone
    assert "[REDACTED]" in str(caught.value)
