"""A missing or refused key through the Python API, on LiteLLM's real path: a
`ConfigurationError` naming the variable and what to do, never retried. With no
OPENAI_API_KEY and no api_base, `openai/gpt-4o-mini` fails inside LiteLLM before any
network ("Missing credentials", which it raises as a retryable 500); a key the provider
refuses is a 401 from the loopback stub."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import litellm
import pytest
from langchain_core.messages import HumanMessage

from turnbon_graph import TurnEngine
from turnbon_graph._litellm.client import LiteLLMClient
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.testing import StubServer, chat_completion, error

ASK = [{"role": "user", "content": "hi"}]
NEEDS = "the model openai/gpt-4o-mini needs OPENAI_API_KEY, which is not set: export it"
SECRET = "sk-refused-key-0123456789"


@pytest.fixture
def no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_ADMIN_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    """Every `litellm.acompletion` call, passed through to LiteLLM as it is."""
    made: list[dict[str, Any]] = []
    real = litellm.acompletion

    async def counted(**kwargs: Any) -> Any:
        made.append(kwargs)
        return await real(**kwargs)

    monkeypatch.setattr(litellm, "acompletion", counted)
    yield made


@pytest.mark.usefixtures("no_key")
async def test_a_call_without_its_key_is_a_configuration_error_and_is_not_retried(
    calls: list[dict[str, Any]],
) -> None:
    client = LiteLLMClient(max_retries=3, backoff_base=5.0)  # a retry would wait seconds
    with pytest.raises(ConfigurationError) as raised:
        await client.complete(model="openai/gpt-4o-mini", messages=ASK)
    text = str(raised.value)
    assert text.startswith(NEEDS)
    assert "pass api_key in completion_kwargs" in text
    assert "Missing credentials" in text  # LiteLLM's own words follow
    assert len(calls) == 1
    assert raised.value.__cause__ is None and raised.value.__context__ is None


@pytest.mark.usefixtures("no_key")
async def test_a_turn_without_its_key_names_the_variable() -> None:
    engine = TurnEngine.from_options("openai/gpt-4o-mini", n=2)
    with pytest.raises(ConfigurationError) as raised:  # the turn's own error, not a candidate's
        await engine.run([HumanMessage("hi")])
    assert NEEDS in str(raised.value)


async def test_a_refused_key_is_a_configuration_error_and_is_not_retried(
    stub: StubServer,
) -> None:
    stub.script(error(401, f"Incorrect API key provided: {SECRET}"))
    client = LiteLLMClient(max_retries=3)
    with pytest.raises(ConfigurationError) as raised:
        await client.complete(
            model="openai/gpt-4o-mini", messages=ASK, api_base=stub.base_url, api_key=SECRET
        )
    text = str(raised.value)
    assert text.startswith("the provider refused the key of openai/gpt-4o-mini: check the api_key")
    assert SECRET not in text and "Incorrect API key provided: [REDACTED]" in text
    assert len(stub.requests) == 1


async def test_a_refused_key_from_the_environment_is_named_as_such(
    stub: StubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    stub.script(error(401, "invalid api key"))
    with pytest.raises(ConfigurationError) as raised:
        await LiteLLMClient().complete(
            model="openai/gpt-4o-mini", messages=ASK, api_base=stub.base_url
        )
    assert "check the key it read from the environment" in str(raised.value)
    assert SECRET not in str(raised.value)
    assert len(stub.requests) == 1


async def test_other_failures_are_still_retried(stub: StubServer) -> None:
    stub.script(error(503, "busy"), error(503, "busy"), chat_completion("ok"))
    result = await LiteLLMClient(max_retries=2, backoff_base=0.01).complete(
        model="openai/gpt-4o-mini", messages=ASK, api_base=stub.base_url, api_key="sk-ok"
    )
    assert result.attempts == 3
