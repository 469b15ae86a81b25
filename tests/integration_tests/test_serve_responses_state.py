"""The Responses API with state on `turnbon serve`, driven by the official OpenAI SDK
and raw HTTP: a response is stored unless the request says `store: false` (OpenAI's
default is to store), `previous_response_id` continues its whole conversation,
`item_reference` items name its output items, `GET`/`DELETE /v1/responses/{id}` read and
drop it, and every miss (never stored, deleted, expired, evicted) is OpenAI's own error,
before any upstream call. A store in a SQLite file is shared by two servers, and by the
`--workers` processes of `turnbon serve`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from openai import OpenAI

from tests.helpers import terminate
from tests.integration_tests.test_litellm_provider import CHOSEN, script_turns
from tests.integration_tests.test_serve import UPSTREAM_KEY, _free_port, client_of, serve_config
from tests.integration_tests.test_serve_responses import QUESTION, SHELL, generator_bodies
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.serve import BackgroundServer, ServeConfig, create_app
from turnbon_graph.testing import StubServer, chat_completion

ANSWER = "You are in /home/ann."


def previous_not_found(response_id: str) -> dict[str, Any]:
    """OpenAI's error for an unknown `previous_response_id` (a 400), which agno reads."""
    return {
        "message": f"Previous response with id '{response_id}' not found.",
        "type": "invalid_request_error",
        "param": "previous_response_id",
        "code": "previous_response_not_found",
    }


def item_not_found(item_id: str) -> dict[str, Any]:
    """OpenAI's error for an `item_reference` to an item it does not keep (a 404)."""
    return {
        "message": f"Item with id '{item_id}' not found. Items are not persisted when `store` "
        "is set to false. Try again with `store` set to true, or remove this item from your "
        "input.",
        "type": "invalid_request_error",
        "param": "input",
        "code": None,
    }


def response_not_found(response_id: str) -> dict[str, Any]:
    """OpenAI's error for an unknown id in `GET`/`DELETE /v1/responses/{id}` (a 404)."""
    message = f"Response with id '{response_id}' not found."
    return {"message": message, "type": "invalid_request_error", "param": None, "code": None}


@pytest.fixture
def serving(stub: StubServer) -> Any:
    with BackgroundServer(serve_config(stub)) as running:
        yield running


def chained(server: BackgroundServer, previous: str, given: Any = "And now?") -> httpx.Response:
    body = {"model": "turnbon", "input": given, "previous_response_id": previous}
    return httpx.post(f"{server.base_url}/responses", json=body)


def roles(body: dict[str, Any]) -> list[str]:
    return [m["role"] for m in body["messages"]]


def test_the_sdk_chains_a_tool_calling_conversation_by_previous_response_id(
    stub: StubServer, serving: BackgroundServer
) -> None:
    client = client_of(serving)
    script_turns(stub)  # three shell calls; the selector picks the CHOSEN one
    first = client.responses.create(
        model="turnbon",
        input=QUESTION,
        instructions="Use the shell.",
        tools=[SHELL],  # type: ignore[list-item]
    )
    assert first.store is True  # OpenAI's default: stored
    (call,) = first.output
    assert call.type == "function_call" and json.loads(call.arguments) == {"command": CHOSEN}

    stub.reset()
    stub.script(chat_completion(ANSWER))  # unanimous
    ran = {"type": "function_call_output", "call_id": call.call_id, "output": "/home/ann"}
    second = client.responses.create(
        model="turnbon",
        previous_response_id=first.id,
        input=[ran],  # type: ignore[list-item]
        tools=[SHELL],  # type: ignore[list-item]
    )
    assert second.output_text == ANSWER and second.previous_response_id == first.id
    for body in generator_bodies(stub):
        # the instructions are not carried over (as on OpenAI): only the items
        user, assistant, tool = body["messages"]
        assert user == {"role": "user", "content": QUESTION}
        (replayed,) = assistant["tool_calls"]
        assert replayed["id"] == call.call_id
        assert json.loads(replayed["function"]["arguments"]) == {"command": CHOSEN}
        assert tool == {"role": "tool", "tool_call_id": call.call_id, "content": "/home/ann"}

    stub.reset()
    stub.script(chat_completion("It is Tuesday."))
    third = client.responses.create(
        model="turnbon", previous_response_id=second.id, input="What day is it?"
    )
    assert third.output_text == "It is Tuesday."
    for body in generator_bodies(stub):
        assert roles(body) == ["user", "assistant", "tool", "assistant", "user"]
        assert body["messages"][3]["content"] == ANSWER
        assert body["messages"][4] == {"role": "user", "content": "What day is it?"}


def test_a_stored_response_is_retrieved_then_deleted(
    stub: StubServer, serving: BackgroundServer
) -> None:
    client = client_of(serving)
    script_turns(stub, text=True)
    made = client.responses.create(model="turnbon", input=QUESTION)
    kept = client.responses.retrieve(made.id)
    assert kept.id == made.id and kept.output_text == CHOSEN and kept.store is True
    assert kept.usage == made.usage
    assert (kept.model_extra or {})["turnbon"] == (made.model_extra or {})["turnbon"]
    raw = httpx.delete(f"{serving.base_url}/responses/{made.id}")
    assert raw.json() == {"id": made.id, "object": "response", "deleted": True}
    with pytest.raises(openai.NotFoundError) as gone:
        client.responses.retrieve(made.id)
    assert gone.value.body == response_not_found(made.id)
    with pytest.raises(openai.NotFoundError):
        client.responses.delete(made.id)
    with pytest.raises(openai.BadRequestError) as missed:
        client.responses.create(model="turnbon", previous_response_id=made.id, input="more")
    assert missed.value.body == previous_not_found(made.id)


def test_store_false_keeps_nothing_and_a_reference_to_it_misses(
    stub: StubServer, serving: BackgroundServer
) -> None:
    script_turns(stub, text=True)
    made = client_of(serving).responses.create(model="turnbon", input=QUESTION, store=False)
    assert made.store is False
    assert httpx.get(f"{serving.base_url}/responses/{made.id}").status_code == 404
    stub.reset()
    missed = chained(serving, made.id)
    assert missed.status_code == 400 and missed.json() == {"error": previous_not_found(made.id)}
    (message,) = made.output
    referenced = [{"type": "item_reference", "id": message.id}]
    response = httpx.post(
        f"{serving.base_url}/responses", json={"model": "turnbon", "input": referenced}
    )
    assert response.status_code == 404 and response.json() == {"error": item_not_found(message.id)}
    assert stub.requests == []  # nothing went upstream


@pytest.mark.parametrize("unknown", ["resp_0123456789abcdef", "", "msg_x' OR '1'='1"])
def test_an_unknown_previous_response_is_openais_not_found_before_any_call(
    stub: StubServer, serving: BackgroundServer, unknown: str
) -> None:
    missed = chained(serving, unknown)
    assert missed.status_code == 400 and missed.json() == {"error": previous_not_found(unknown)}
    assert stub.requests == []


def test_item_references_resolve_to_the_stored_output_items(
    stub: StubServer, serving: BackgroundServer
) -> None:
    script_turns(stub, text=True)
    made = client_of(serving).responses.create(model="turnbon", input=QUESTION)
    (message,) = made.output
    stub.reset()
    stub.script(chat_completion(ANSWER))
    items = [
        {"role": "user", "content": QUESTION},
        {"type": "item_reference", "id": message.id},
        {"role": "user", "content": "Where exactly?"},
    ]
    answer = client_of(serving).responses.create(model="turnbon", input=items)  # type: ignore[arg-type]
    assert answer.output_text == ANSWER
    for body in generator_bodies(stub):
        assert body["messages"] == [
            {"role": "user", "content": QUESTION},
            {"role": "assistant", "content": CHOSEN},
            {"role": "user", "content": "Where exactly?"},
        ]
    stub.reset()
    unknown = [*items[:1], {"type": "item_reference", "id": "msg_unknown"}]
    missed = httpx.post(f"{serving.base_url}/responses", json={"model": "t", "input": unknown})
    assert missed.status_code == 404 and missed.json() == {"error": item_not_found("msg_unknown")}
    assert stub.requests == []


def test_a_reference_to_an_item_the_chain_holds_is_refused_as_a_duplicate(
    stub: StubServer, serving: BackgroundServer
) -> None:
    script_turns(stub, text=True)
    made = client_of(serving).responses.create(model="turnbon", input=QUESTION)
    stub.reset()
    (message,) = made.output
    again = [{"type": "item_reference", "id": message.id}, {"role": "user", "content": "So?"}]
    refused = chained(serving, made.id, again)
    assert refused.status_code == 400
    error = refused.json()["error"]
    assert error["param"] == "input" and error["message"].startswith(
        f"Duplicate item found with id {message.id}."
    )
    assert stub.requests == []


def test_a_streamed_response_is_stored_and_continued(
    stub: StubServer, serving: BackgroundServer
) -> None:
    script_turns(stub, text=True)
    client = client_of(serving)
    with client.responses.stream(model="turnbon", input=QUESTION) as stream:
        final = stream.get_final_response()
    assert final.store is True
    assert client.responses.retrieve(final.id).output_text == CHOSEN
    stub.reset()
    stub.script(chat_completion(ANSWER))
    events = list(
        client.responses.create(
            model="turnbon", previous_response_id=final.id, input="Sure?", stream=True
        )
    )
    assert events[-1].type == "response.completed"
    for body in generator_bodies(stub):
        assert roles(body) == ["user", "assistant", "user"]


def test_the_age_limit_drops_a_response(stub: StubServer) -> None:
    script_turns(stub, text=True)
    with BackgroundServer(serve_config(stub, response_store_ttl_s=0.05)) as running:
        made = client_of(running).responses.create(model="turnbon", input=QUESTION)
        time.sleep(0.3)  # well past its age
        missed = chained(running, made.id)
    assert missed.status_code == 400 and missed.json() == {"error": previous_not_found(made.id)}


def test_a_response_larger_than_the_store_is_answered_unstored(stub: StubServer) -> None:
    script_turns(stub, text=True)
    with BackgroundServer(serve_config(stub, response_store_bytes=100)) as running:
        made = client_of(running).responses.create(model="turnbon", input=QUESTION)
        assert made.store is False and made.output_text == CHOSEN
        assert chained(running, made.id).json() == {"error": previous_not_found(made.id)}


def test_two_servers_share_a_sqlite_store(stub: StubServer, tmp_path: Path) -> None:
    shared = tmp_path / "responses.db"
    config = serve_config(stub, response_store=shared)
    with BackgroundServer(config) as one, BackgroundServer(config) as two:
        script_turns(stub, text=True)
        made = client_of(one).responses.create(model="turnbon", input=QUESTION)
        stub.reset()
        stub.script(chat_completion(ANSWER))
        answer = client_of(two).responses.create(
            model="turnbon", previous_response_id=made.id, input="Sure?"
        )
        assert answer.output_text == ANSWER
        for body in generator_bodies(stub):
            assert roles(body) == ["user", "assistant", "user"]
        assert client_of(one).responses.retrieve(answer.id).previous_response_id == made.id
        assert httpx.delete(f"{two.base_url}/responses/{made.id}").status_code == 200
        assert httpx.get(f"{one.base_url}/responses/{made.id}").status_code == 404
    # a server started later on the same file continues the chain
    with BackgroundServer(config) as later:
        stub.reset()
        stub.script(chat_completion("Yes."))
        again = client_of(later).responses.create(
            model="turnbon", previous_response_id=answer.id, input="Really?"
        )
        assert again.output_text == "Yes."


def test_the_store_keeps_no_key_or_header(stub: StubServer, tmp_path: Path) -> None:
    from pydantic import SecretStr

    shared = tmp_path / "responses.db"
    client_key = "sk-client-bearer-9876543210"
    config = serve_config(stub, response_store=shared, require_key=SecretStr(client_key))
    with BackgroundServer(config) as running:
        script_turns(stub, text=True)
        client = client_of(running, key=client_key)
        made = client.responses.create(model="turnbon", input=QUESTION, user="ann")
        client.responses.create(model="turnbon", previous_response_id=made.id, input="Sure?")
        refused = httpx.get(f"{running.base_url}/responses/{made.id}")  # no bearer key
        assert refused.status_code == 401
    assert shared.stat().st_mode & 0o777 == 0o600  # the server's user's only
    kept = b"".join(p.read_bytes() for p in tmp_path.iterdir())
    assert QUESTION.encode() in kept
    for secret in (UPSTREAM_KEY, client_key, "Bearer", "authorization"):
        assert secret.encode() not in kept


def test_a_store_file_that_is_not_sqlite_is_refused_at_start(
    stub: StubServer, tmp_path: Path
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("not a database, " * 100)
    with pytest.raises(ConfigurationError, match="cannot be opened as a SQLite file"):
        create_app(serve_config(stub, response_store=notes))
    with pytest.raises(ConfigurationError, match="does not exist: create it"):
        serve_config(stub, response_store=tmp_path / "missing" / "responses.db")


def test_the_store_flags_and_file_keys_reach_the_server(tmp_path: Path) -> None:
    import argparse
    import dataclasses

    from turnbon_graph.cli.serve import SETTINGS, serve_arguments, serve_config

    defaults = {f.name: f.default for f in dataclasses.fields(ServeConfig)}
    assert SETTINGS["response_store"] is defaults["response_store"] is None
    assert SETTINGS["response_store_mb"] * 1024 * 1024 == defaults["response_store_bytes"]
    assert SETTINGS["response_store_ttl_s"] == defaults["response_store_ttl_s"]

    def parsed(argv: list[str]) -> Any:
        parser = argparse.ArgumentParser()
        serve_arguments(parser)
        args = parser.parse_args(argv[1:])
        args.argv = argv
        return serve_config(args)[0]

    store = tmp_path / "r.db"
    flags = ["serve", "--model", "openai/gpt-4o-mini", "--response-store", str(store)]
    config = parsed([*flags, "--response-store-mb", "2", "--response-store-ttl", "60"])
    assert config.response_store == store
    assert (config.response_store_bytes, config.response_store_ttl_s) == (2 * 1024 * 1024, 60)
    file = tmp_path / "serve.toml"
    file.write_text(f'model = "openai/gpt-4o-mini"\nresponse_store = "{store}"\n')
    assert parsed(["serve", "--config", str(file)]).response_store == store


def test_workers_continue_each_others_responses_through_the_store_file(
    stub: StubServer, tmp_path: Path
) -> None:
    """Two worker processes on one port: a kept-alive connection stays with the worker
    that accepted it (`/health` names it), so a chain is sent to one worker, then the
    other."""
    script_turns(stub, text=True)
    port = _free_port()
    env = {**os.environ, "TURNBON_TEST_UPSTREAM": UPSTREAM_KEY}
    command = [sys.executable, "-m", "turnbon_graph.cli", "serve", "--model", "openai/stub"]
    command += ["--api-base", stub.base_url, "--api-key-env", "TURNBON_TEST_UPSTREAM"]
    command += ["-n", "3", "--seed", "0", "--port", str(port), "--workers", "2"]
    command += ["--idle-timeout", "120", "--response-store", str(tmp_path / "responses.db")]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    connections: dict[int, httpx.Client] = {}
    try:
        deadline = time.monotonic() + 120
        while len(connections) < 2 and time.monotonic() < deadline:
            connection = httpx.Client(timeout=60)
            try:
                pid = connection.get(f"{base}/health").json()["pid"]
            except httpx.TransportError:
                connection.close()
                time.sleep(0.1)
                continue
            if pid in connections:
                connection.close()
            else:
                connections[pid] = connection
        assert len(connections) == 2, connections
        (one, first_pid), (two, second_pid) = ((c, p) for p, c in connections.items())
        by = [OpenAI(base_url=f"{base}/v1", api_key="none", http_client=c) for c in (one, two)]
        made = by[0].responses.create(model="turnbon", input=QUESTION)
        assert one.get(f"{base}/health").json()["pid"] == first_pid  # the same connection
        stub.reset()
        stub.script(chat_completion(ANSWER))
        answer = by[1].responses.create(
            model="turnbon", previous_response_id=made.id, input="Sure?"
        )
        assert two.get(f"{base}/health").json()["pid"] == second_pid != first_pid
        assert answer.output_text == ANSWER
        for body in generator_bodies(stub):
            assert roles(body) == ["user", "assistant", "user"]
    finally:
        for connection in connections.values():
            connection.close()
        terminate(process)
    _, stderr = process.communicate()
    assert "Traceback" not in stderr and UPSTREAM_KEY not in stderr
    assert "keeps its stored responses in its own memory" not in stderr


def test_workers_without_a_store_file_are_told_that_theirs_are_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from turnbon_graph.cli.serve.store import warn_unshared_store

    warn_unshared_store(ServeConfig(model="openai/gpt-4o-mini"), 2)
    assert "share them with --response-store PATH" in capsys.readouterr().err
    shared = ServeConfig(model="openai/gpt-4o-mini", response_store=tmp_path / "r.db")
    warn_unshared_store(shared, 2)
    warn_unshared_store(ServeConfig(model="openai/gpt-4o-mini"), 1)
    assert capsys.readouterr().err == ""


def test_a_small_request_continuing_a_conversation_larger_than_a_body_may_be_is_a_413(
    stub: StubServer,
) -> None:
    # Each turn's answer fits the body limit; the conversation it grows into does not.
    with BackgroundServer(serve_config(stub, max_body_bytes=64 * 1024)) as running:
        stub.script(chat_completion(ANSWER))
        first = httpx.post(
            f"{running.base_url}/responses",
            json={"model": "turnbon", "input": "x" * 20_000},
        )
        assert first.status_code == 200, first.text
        second = chained(running, first.json()["id"], "y" * 40_000)
        assert second.status_code == 200, second.text
        third = chained(running, second.json()["id"], "z" * 6_000)  # a small body
        assert third.status_code == 413
        error = third.json()["error"]
        assert error["code"] == "request_too_large"
        assert "continues a stored conversation" in error["message"]
        assert "--max-body-mb" in error["message"]
