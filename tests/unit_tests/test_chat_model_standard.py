"""ChatTurnBoN against langchain-tests' standard unit tests, plus its own construction
and tool-binding behaviour (nothing here calls a model)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.runnables import RunnableBinding
from langchain_core.tools import tool
from langchain_tests.unit_tests import ChatModelUnitTests

from turnbon_graph import ChatTurnBoN, ConfigurationError
from turnbon_graph.selectors import FirstSelector

# Unit tests never call the model: nothing needs to listen here.
API_BASE = "http://127.0.0.1:9/v1"


class TestChatTurnBoNStandard(ChatModelUnitTests):
    @property
    def chat_model_class(self) -> type[ChatTurnBoN]:
        return ChatTurnBoN

    @property
    def chat_model_params(self) -> dict[str, Any]:
        return {"model": "openai/stub", "n": 3, "completion_kwargs": {"api_base": API_BASE}}

    @property
    def supports_model_override(self) -> bool:
        # The generator models are fixed at construction; a per-call `model` is refused.
        return False


@tool
def get_weather(city: str) -> str:
    """Weather in a city."""
    return f"sunny in {city}"


def make(**options: Any) -> ChatTurnBoN:
    return ChatTurnBoN(model="openai/stub", completion_kwargs={"api_base": API_BASE}, **options)


def bound_kwargs(runnable: Any) -> dict[str, Any]:
    assert isinstance(runnable, RunnableBinding)
    return dict(runnable.kwargs)


def test_configuration_errors_surface_at_construction() -> None:
    with pytest.raises(ConfigurationError, match="n must be"):
        make(n=0)
    with pytest.raises(ConfigurationError, match="completion_kwargs may not set 'tools'"):
        ChatTurnBoN(model="openai/stub", completion_kwargs={"tools": []})
    with pytest.raises(ConfigurationError, match="selector_kwargs applies only"):
        make(selector=FirstSelector(), selector_kwargs={"temperature": 0})
    with pytest.raises(ConfigurationError, match="temperature is set both"):
        ChatTurnBoN(model="openai/stub", temperature=0.2, completion_kwargs={"temperature": 1})
    with pytest.raises(ConfigurationError, match="trace must be"):
        make(trace=42)


def test_unknown_option_is_rejected() -> None:
    with pytest.raises(ValueError, match="completion_kwrgs"):
        ChatTurnBoN(model="openai/stub", completion_kwrgs={})  # type: ignore[call-arg]


def test_engine_is_built_once_and_follows_option_changes() -> None:
    model = make(n=3)
    engine = model.engine
    assert model.engine is engine
    assert engine.config.n == 3
    copy = model.model_copy(update={"n": 5})
    assert copy.engine.config.n == 5
    assert model.engine is engine


def test_standard_parameters_reach_generator_calls_only() -> None:
    model = make(temperature=0.3, max_tokens=50, stop=["END"], api_key="sk-unit-secret")
    generator_kwargs = model.engine.generator.completion_kwargs
    assert generator_kwargs["temperature"] == 0.3
    assert generator_kwargs["max_tokens"] == 50
    assert generator_kwargs["stop"] == ["END"]
    assert generator_kwargs["api_key"] == "sk-unit-secret"
    # The default selector shares the endpoint and key, not the sampling settings.
    selector = model.engine.selector
    selector_kwargs = selector.completion_kwargs  # type: ignore[attr-defined]
    assert selector_kwargs == {"api_base": API_BASE, "api_key": "sk-unit-secret"}


def test_secrets_stay_out_of_repr_and_identifying_params() -> None:
    model = ChatTurnBoN(
        model="openai/stub",
        completion_kwargs={"api_base": API_BASE, "api_key": "sk-in-kwargs-1234"},
        selector="openai/judge",
        selector_kwargs={"api_key": "sk-selector-5678", "extra_headers": {"X-Key": "hdr-9999"}},
    )
    shown = repr(model) + repr(model._identifying_params) + repr(model._get_invocation_params())
    for secret in ("sk-in-kwargs-1234", "sk-selector-5678", "hdr-9999"):
        assert secret not in shown
    assert model._identifying_params["selector"] == "llm:openai/judge"
    assert model._llm_type == "turnbon"


def test_ls_params_name_the_pool() -> None:
    model = ChatTurnBoN(model=["openai/a", "openai/b"], completion_kwargs={"api_base": API_BASE})
    params = model._get_ls_params()
    assert params["ls_model_name"] == "openai/a+openai/b"
    assert params["ls_provider"] == "turnbon"


@pytest.mark.parametrize(
    ("choice", "expected"),
    [
        ("any", "required"),
        (True, "required"),
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
        (
            {"type": "function", "function": {"name": "get_weather"}},
            {"type": "function", "function": {"name": "get_weather"}},
        ),
    ],
)
def test_bind_tools_maps_tool_choice(choice: Any, expected: Any) -> None:
    kwargs = bound_kwargs(make().bind_tools([get_weather], tool_choice=choice))
    assert kwargs["tool_choice"] == expected
    assert kwargs["tools"][0]["function"]["name"] == "get_weather"


def test_bind_tools_without_choice_binds_only_tools() -> None:
    kwargs = bound_kwargs(make().bind_tools([get_weather], parallel_tool_calls=False))
    assert set(kwargs) == {"tools", "parallel_tool_calls"}


def test_bind_tools_rejects_unknown_tool_name() -> None:
    with pytest.raises(ConfigurationError, match="get_weather"):
        make().bind_tools([get_weather], tool_choice="get_time")
