"""TurnConfig: one declaration of the turn options, taken by every entry point, keeping
secrets out of every dump."""

from __future__ import annotations

import inspect
import json
import re
from pathlib import Path
from typing import Any
from uuid import UUID

import litellm
import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.language_models import BaseChatModel
from langchain_core.load import dumps
from langchain_core.messages import BaseMessage
from langchain_core.tools import tool
from pydantic import ValidationError

from turnbon_graph import (
    AdaptiveN,
    Budget,
    ChatTurnBoN,
    ConfigurationError,
    EarlyCommit,
    TurnBoNMiddleware,
    TurnConfig,
    TurnEngine,
    TurnOptions,
    create_turnbon_agent,
    create_turnbon_graph,
)
from turnbon_graph.config import OPTION_NAMES, turn_config
from turnbon_graph.litellm_provider import TurnBoNProvider
from turnbon_graph.selectors import FirstSelector
from turnbon_graph.testing import StubServer, chat_completion

KEY = "sk-very-secret-key-0123"
HEADER = "Bearer header-secret-4567"

# A non-default value for every option: adding an option to TurnConfig without adding it
# here fails `test_every_option_has_a_sample_value`.
SAMPLE: dict[str, Any] = {
    "n": 3,
    "selector": "openai/judge",
    "completion_kwargs": {"temperature": 0.5, "api_base": "http://127.0.0.1:9/v1"},
    "selector_kwargs": {"api_base": "http://127.0.0.1:9/v1"},
    "prompt": "be careful",
    "max_concurrency": 7,
    "rate_limit": 20.0,
    "timeout": 12.5,
    "max_retries": 4,
    "native_n": True,
    "tool_calling": "prompted",
    "seed": 11,
    "trace": "trace.jsonl",
    "adaptive": AdaptiveN(first_batch=1),
    "early_commit": EarlyCommit(min_candidates=2, grace_s=0.1),
    "budget": Budget(turn_tokens=10_000),
    "dedupe": True,
    "ignore_args": ("timeout",),
    "router": litellm.Router(
        model_list=[
            {
                "model_name": "gen-group",
                "litellm_params": {"model": "openai/x", "api_base": "http://127.0.0.1:9/v1"},
            }
        ]
    ),
}


@tool
def shell(command: str) -> str:
    """Run a shell command."""
    return command


def test_every_option_has_a_sample_value() -> None:
    assert set(SAMPLE) == set(TurnConfig.model_fields)
    defaults = TurnConfig()
    for name, value in SAMPLE.items():
        assert getattr(defaults, name) != value, f"{name}: the sample must not be the default"


def test_each_option_given_by_keyword_reaches_the_engine(tmp_path: Path) -> None:
    options = {**SAMPLE, "trace": str(tmp_path / "trace.jsonl")}
    expected = TurnConfig(**options)
    assert TurnEngine.from_options("openai/gen", **options).config == expected
    assert ChatTurnBoN(model="openai/gen", **options).engine.config == expected
    # A ready config and keywords over it.
    over = TurnEngine.from_options("openai/gen", config=expected, n=5).config
    assert over == expected.model_copy(update={"n": 5})
    assert ChatTurnBoN(model="openai/gen", config=expected, n=5).engine.config == over


@pytest.mark.parametrize("name", sorted(SAMPLE))
def test_every_entry_point_validates_each_option_the_same_way(name: str) -> None:
    # A value of the wrong type for the option: each entry point refuses it with the same
    # message, naming the option. So each routes the option into TurnConfig.
    bad: Any = object() if name not in ("selector", "trace") else 42
    entry_points = {
        "create_turnbon_graph": lambda: create_turnbon_graph("openai/gen", **{name: bad}),
        "create_turnbon_agent": lambda: create_turnbon_agent("openai/gen", [shell], **{name: bad}),
        "ChatTurnBoN": lambda: ChatTurnBoN(model="openai/gen", **{name: bad}),
        "TurnEngine.from_options": lambda: TurnEngine.from_options("openai/gen", **{name: bad}),
    }
    messages = set()
    for entry, build in entry_points.items():
        with pytest.raises(ConfigurationError) as caught:
            build()
        assert name in str(caught.value), entry
        messages.add(str(caught.value))
    assert len(messages) == 1, messages


def test_an_unknown_option_is_refused_by_every_entry_point_with_the_list() -> None:
    for build in (
        lambda: create_turnbon_graph("openai/gen", temprature=0.1),
        lambda: create_turnbon_agent("openai/gen", [shell], temprature=0.1),
        lambda: ChatTurnBoN(model="openai/gen", temprature=0.1),
        lambda: TurnEngine.from_options("openai/gen", temprature=0.1),
    ):
        with pytest.raises(ConfigurationError, match="temprature is not a turn option") as caught:
            build()
        assert OPTION_NAMES in str(caught.value)


def test_the_factories_declare_no_option_of_their_own() -> None:
    # Their own parameters are the model, tools and graph shape; options come through
    # **options into TurnConfig, never as a parameter declared a second time.
    doors = (
        create_turnbon_graph,
        create_turnbon_agent,
        TurnEngine.from_options,
        TurnBoNMiddleware.__init__,
        TurnBoNProvider.__init__,
    )
    for factory in doors:
        code = factory.__code__
        declared = code.co_varnames[: code.co_argcount + code.co_kwonlyargcount]
        assert not set(declared) & set(TurnConfig.model_fields), factory
        assert "config" in declared
        assert code.co_flags & inspect.CO_VARKEYWORDS, factory
    # ChatTurnBoN's fields: LangChain's own, the model, LangChain's standard shorthand
    # parameters, and exactly TurnConfig's.
    own = set(ChatTurnBoN.model_fields) - set(BaseChatModel.model_fields)
    shorthand = {"model", "temperature", "max_tokens", "stop", "api_key", "streaming"}
    assert own - shorthand == set(TurnConfig.model_fields)


def test_every_door_shows_each_option_in_its_signature() -> None:
    # inspect (help(), editors, the API reference) lists TurnConfig's fields, each with
    # its default, where the code takes **options: Unpack[TurnOptions].
    for door in (create_turnbon_graph, create_turnbon_agent, TurnBoNMiddleware, TurnBoNProvider):
        parameters = inspect.signature(door).parameters
        assert not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values())
        for name, field in TurnConfig.model_fields.items():
            assert parameters[name].kind is inspect.Parameter.KEYWORD_ONLY, (door, name)
            assert parameters[name].default == field.get_default(), (door, name)
    shown = inspect.signature(create_turnbon_graph).parameters
    assert shown["n"].annotation == "int"
    assert shown["selector"].annotation == "str | Selector | BaseChatModel | None"


def test_turn_options_mirror_turn_config_field_for_field() -> None:
    # TurnOptions types every door's **options for mypy and editors: the same names, in
    # the same order, with TurnConfig's types (its validation markers aside).
    typed = TurnOptions.__annotations__
    assert list(typed) == list(TurnConfig.model_fields)
    assert not TurnOptions.__required_keys__
    for name in TurnConfig.model_fields:
        declared = TurnConfig.__annotations__[name]
        inner = re.fullmatch(r"Annotated\[(.*), SkipValidation\(\)\]", declared)
        assert typed[name].__forward_arg__ == (inner.group(1) if inner else declared), name


def test_a_config_must_be_a_turn_config() -> None:
    with pytest.raises(ConfigurationError, match="config must be a TurnConfig"):
        turn_config({"n": 2})  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="config must be a TurnConfig"):
        ChatTurnBoN(model="openai/gen", config={"n": 2})


def test_bad_values_are_named_with_what_is_allowed() -> None:
    with pytest.raises(ConfigurationError, match=r"^n must be greater than or equal to 1, got 0$"):
        turn_config(n=0)
    with pytest.raises(ConfigurationError, match="tool_calling must be 'auto', 'native' or"):
        turn_config(tool_calling="sometimes")
    with pytest.raises(ConfigurationError, match="ignore_args must be a list"):
        turn_config(ignore_args="timeout")
    with pytest.raises(ConfigurationError, match="selector_kwargs applies only"):
        turn_config(selector=FirstSelector(), selector_kwargs={"temperature": 0})
    # Settings that come from TOML or JSON: the sampling models are built from dicts.
    assert turn_config(adaptive={"first_batch": 1}).adaptive == AdaptiveN(first_batch=1)


def test_budget_needs_a_cap() -> None:
    with pytest.raises(ValidationError, match="at least one cap"):
        Budget()


def test_a_bad_kwargs_value_is_refused_without_being_quoted() -> None:
    with pytest.raises(ConfigurationError) as caught:
        turn_config(completion_kwargs=[("api_key", KEY)])
    assert "completion_kwargs" in str(caught.value)
    assert KEY not in str(caught.value)


# ---------------------------------------------------------------------- secrets


def secret_options() -> dict[str, Any]:
    return {
        "completion_kwargs": {"api_key": KEY, "extra_headers": {"Authorization": HEADER}},
        "selector_kwargs": {"api_key": KEY},
    }


def assert_no_secret(text: str) -> None:
    assert KEY not in text
    assert HEADER not in text


def test_no_dump_of_a_config_shows_a_secret() -> None:
    config = TurnConfig(**secret_options())
    for text in (repr(config), str(config), str(config.model_dump()), config.model_dump_json()):
        assert_no_secret(text)
    # The calls still get them.
    engine = TurnEngine.from_config("openai/gen", config)
    assert engine.generator.completion_kwargs["api_key"] == KEY
    assert engine.generator.completion_kwargs["extra_headers"] == {"Authorization": HEADER}


def test_no_dump_of_chat_turnbon_shows_a_secret() -> None:
    model = ChatTurnBoN(model="openai/gen", api_key=KEY, **secret_options())
    texts = [
        repr(model),
        str(model),
        str(model.model_dump()),
        model.model_dump_json(),
        dumps(model),
        json.dumps(model._identifying_params),
    ]
    for text in texts:
        assert_no_secret(text)
    # ...and the default selector, which shares the generator's endpoint, gets the key.
    shared = ChatTurnBoN(model="openai/gen", completion_kwargs={"api_key": KEY})
    assert getattr(shared.engine.selector, "completion_kwargs", {})["api_key"] == KEY


class Capture(BaseCallbackHandler):
    def __init__(self) -> None:
        self.payloads: list[str] = []

    def on_chat_model_start(
        self,
        serialized: dict[str, Any],
        messages: list[list[BaseMessage]],
        *,
        run_id: UUID,
        **kwargs: Any,
    ) -> None:
        self.payloads.append(repr(serialized))
        self.payloads.append(repr(kwargs.get("invocation_params")))
        self.payloads.append(repr(kwargs.get("metadata")))


def test_a_callback_sees_no_secret(stub: StubServer) -> None:
    stub.script(chat_completion("done"))
    options = secret_options()
    options["completion_kwargs"]["api_base"] = stub.base_url
    model = ChatTurnBoN(model="openai/stub", n=1, **options)
    capture = Capture()
    reply = model.invoke("hi", config={"callbacks": [capture]})
    assert reply.content == "done"
    assert capture.payloads
    for payload in capture.payloads:
        assert_no_secret(payload)
    # The header (over the key) did reach the provider.
    assert stub.requests[0].header("authorization") == HEADER


# ---------------------------------------------------------------------- the docs' table


def readme_options_table() -> list[tuple[str, str, str]]:
    """The options table of docs/options.md (printed by `python scripts/options_table.py`)."""
    page = (Path(__file__).resolve().parents[2] / "docs" / "options.md").read_text()
    table = page[page.index("| option | default | meaning |") :].split("\n\n", 1)[0]
    rows = []
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows.append((cells[0].strip("`"), cells[1], cells[2]))
    return rows


def test_the_readme_options_table_is_turn_config() -> None:
    rows = readme_options_table()
    assert [name for name, _, _ in rows] == list(TurnConfig.model_fields)
    for name, default, meaning in rows:
        field = TurnConfig.model_fields[name]
        assert default == f"`{field.default!r}`", name
        assert meaning == field.description, name
