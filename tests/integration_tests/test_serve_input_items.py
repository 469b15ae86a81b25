"""`GET /v1/responses/{id}/input_items` on `turnbon serve`, driven by the official OpenAI
SDK: the whole conversation a stored response answered, newest first by default, each
item with an id that stays the same between listings, a page at a time by `limit` and
the cursors `after` and `before`, and OpenAI's errors for a miss or a bad query."""

from __future__ import annotations

from typing import Any

import httpx
import openai
import pytest

from tests.integration_tests.test_litellm_provider import CHOSEN, script_turns
from tests.integration_tests.test_serve import client_of, serve_config
from tests.integration_tests.test_serve_responses import QUESTION
from turnbon_graph.serve import BackgroundServer
from turnbon_graph.testing import StubServer, chat_completion

FOLLOW_UP = "And now?"


@pytest.fixture
def serving(stub: StubServer) -> Any:
    with BackgroundServer(serve_config(stub)) as running:
        yield running


def text_of(item: Any) -> str:
    """An input message's text (its `input_text` parts) or an output message's."""
    return "".join(part.text for part in item.content)


def test_the_sdk_lists_a_chained_conversation_page_by_page(
    stub: StubServer, serving: BackgroundServer
) -> None:
    client = client_of(serving)
    script_turns(stub, text=True)
    first = client.responses.create(model="turnbon", input=QUESTION)
    stub.reset()
    stub.script(chat_completion("Later."))
    second = client.responses.create(
        model="turnbon", previous_response_id=first.id, input=FOLLOW_UP
    )

    # limit=1: the SDK follows has_more and `after` through three pages
    newest_first = list(client.responses.input_items.list(second.id, limit=1))
    assert [item.role for item in newest_first] == ["user", "assistant", "user"]
    assert [text_of(item) for item in newest_first] == [FOLLOW_UP, CHOSEN, QUESTION]
    assert newest_first[1].id == first.output[0].id  # the first response's output item
    assert newest_first[0].type == "message" and newest_first[0].status == "completed"
    ids = [item.id for item in newest_first]
    assert len(set(ids)) == 3 and all(ids)

    oldest_first = client.responses.input_items.list(second.id, order="asc")
    assert [item.id for item in oldest_first.data] == ids[::-1]  # the same ids again
    assert oldest_first.has_more is False
    assert (oldest_first.first_id, oldest_first.last_id) == (ids[2], ids[0])
    # the first response's own input keeps the id it had in the chain
    assert [item.id for item in client.responses.input_items.list(first.id)] == [ids[2]]

    page = httpx.get(
        f"{serving.base_url}/responses/{second.id}/input_items",
        params={"order": "asc", "before": ids[0], "limit": 1},
    ).json()
    assert [item["id"] for item in page["data"]] == [ids[2]] and page["has_more"] is True


def test_misses_and_bad_queries_are_openais_errors(
    stub: StubServer, serving: BackgroundServer
) -> None:
    client = client_of(serving)
    script_turns(stub, text=True)
    made = client.responses.create(model="turnbon", input=QUESTION)
    with pytest.raises(openai.NotFoundError) as unknown:
        client.responses.input_items.list("resp_unknown")
    assert unknown.value.body["message"] == "Response with id 'resp_unknown' not found."
    with pytest.raises(openai.NotFoundError) as cursor:
        client.responses.input_items.list(made.id, after="msg_unknown")
    assert cursor.value.body["param"] == "after"
    for query, param in [
        ({"limit": 0}, "limit"),
        ({"limit": 101}, "limit"),
        ({"limit": "many"}, "limit"),
        ({"order": "sideways"}, "order"),
    ]:
        refused = httpx.get(f"{serving.base_url}/responses/{made.id}/input_items", params=query)
        assert refused.status_code == 400, query
        assert refused.json()["error"]["param"] == param

    unstored = client.responses.create(model="turnbon", input=QUESTION, store=False)
    with pytest.raises(openai.NotFoundError):
        client.responses.input_items.list(unstored.id)


def test_every_item_id_is_shaped_as_openais(stub: StubServer, serving: BackgroundServer) -> None:
    # msg_, fc_, fco_ and 32 hex digits, no dashes: clients that read ids by prefix work
    client = client_of(serving)
    stub.script(chat_completion("Done."))
    given = [
        {"role": "user", "content": QUESTION},
        {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "/home/ann"},
    ]
    answered = client.responses.create(model="turnbon", input=given)  # type: ignore[arg-type]
    (message,) = answered.output
    ids = [item.id for item in client.responses.input_items.list(answered.id, order="asc")]
    shaped = [message.id, *ids]
    assert [i.partition("_")[0] for i in shaped] == ["msg", "msg", "fc", "fco"]
    assert all(len(i.partition("_")[2]) == 32 and "-" not in i for i in shaped), shaped
