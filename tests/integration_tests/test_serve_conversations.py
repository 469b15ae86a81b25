"""OpenAI's Conversations API on `turnbon serve`, driven by the official OpenAI SDK
(`client.conversations`) and by openai-agents' `OpenAIConversationsSession`: a
conversation is created, read, updated and deleted, its items listed, added, read and
removed, and a Responses request that names it reads its items and adds its own input
and answer to it."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import openai
import pytest

from tests.integration_tests.test_serve import client_of, serve_config
from turnbon_graph.serve import BackgroundServer
from turnbon_graph.testing import StubServer, chat_completion


@pytest.fixture
def serving(stub: StubServer) -> Any:
    with BackgroundServer(serve_config(stub)) as running:
        yield running


def test_a_conversation_is_continued_by_responses_and_keeps_every_item(
    stub: StubServer, serving: BackgroundServer
) -> None:
    client = client_of(serving)
    made = client.conversations.create(
        items=[{"type": "message", "role": "user", "content": "My name is Ann."}],
        metadata={"topic": "names"},
    )
    assert made.id.startswith("conv_") and made.metadata == {"topic": "names"}
    stub.script(chat_completion("Hello, Ann."))
    first = client.responses.create(model="turnbon", conversation=made.id, input="Hi!")
    assert first.conversation is not None and first.conversation.id == made.id
    stub.reset()
    stub.script(chat_completion("Your name is Ann."))
    client.responses.create(model="turnbon", conversation=made.id, input="What is my name?")
    sent = [m["content"] for m in stub.requests[0].body["messages"] if m["role"] != "system"]
    assert sent[:3] == ["My name is Ann.", "Hi!", "Hello, Ann."]  # the conversation read
    listed = list(client.conversations.items.list(made.id, order="asc"))
    roles = [(item.type, getattr(item, "role", None)) for item in listed]
    assert roles == [("message", "user"), ("message", "user"), ("message", "assistant")] * 1 + [
        ("message", "user"),
        ("message", "assistant"),
    ]
    assert all(item.id.partition("_")[0] == "msg" for item in listed)
    one = client.conversations.items.retrieve(listed[1].id, conversation_id=made.id)
    assert one.id == listed[1].id
    client.conversations.items.delete(listed[1].id, conversation_id=made.id)
    assert len(list(client.conversations.items.list(made.id))) == 4
    updated = client.conversations.update(made.id, metadata={"topic": "greetings"})
    assert updated.metadata == {"topic": "greetings"}
    assert client.conversations.retrieve(made.id).metadata == {"topic": "greetings"}
    gone = client.conversations.delete(made.id)
    assert gone.deleted is True
    with pytest.raises(openai.NotFoundError):
        client.conversations.retrieve(made.id)


def test_a_conversation_and_a_previous_response_together_are_refused(
    stub: StubServer, serving: BackgroundServer
) -> None:
    client = client_of(serving)
    made = client.conversations.create()
    body = {
        "model": "turnbon",
        "input": "Hi",
        "conversation": made.id,
        "previous_response_id": "resp_1",
    }
    answer = httpx.post(f"{serving.base_url}/responses", json=body)
    assert answer.status_code == 400 and answer.json()["error"]["param"] == "conversation"
    missing = httpx.post(
        f"{serving.base_url}/responses",
        json={"model": "turnbon", "input": "Hi", "conversation": "conv_none"},
    )
    assert missing.status_code == 404
    assert stub.requests == []  # nothing went upstream


def test_openai_agents_keeps_a_session_in_a_server_conversation(
    serving: BackgroundServer,
) -> None:
    from agents.memory import OpenAIConversationsSession
    from openai import AsyncOpenAI

    async def scenario() -> tuple[list[Any], Any, list[Any]]:
        client = AsyncOpenAI(base_url=serving.base_url, api_key="none")
        session = OpenAIConversationsSession(openai_client=client)
        await session.add_items(
            [
                {"role": "user", "content": "Hello"},
                {"role": "assistant", "content": "Hi there"},
            ]
        )
        items = await session.get_items()
        popped = await session.pop_item()
        after = await session.get_items()
        await session.clear_session()
        return items, popped, after

    items, popped, after = asyncio.run(scenario())
    assert [item["role"] for item in items] == ["user", "assistant"]
    assert popped is not None and popped["role"] == "assistant"
    assert [item["role"] for item in after] == ["user"]
