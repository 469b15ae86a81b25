"""The Harbor agent's `--ak` options (`turnbon_harbor.options`, which imports no Harbor):
every turn option, the agent's own, and what is refused, each with a message that says
what to do. The agent that uses them runs under Harbor in test_harbor_agent.py."""

from __future__ import annotations

from typing import Any

import pytest

from turnbon_graph.errors import ConfigurationError
from turnbon_graph.selectors.simple import FirstSelector
from turnbon_harbor.options import ACTION_DURATIONS, agent_options, user_kwargs


def test_turn_options_and_the_agents_own_are_taken() -> None:
    options = agent_options(
        {"n": 8, "selector": "first", "seed": 3, "max_turns": 30, "api_base": "http://h/v1"}
    )
    assert options.config.n == 8 and options.config.seed == 3
    assert isinstance(options.config.selector, FirstSelector)
    assert options.config.completion_kwargs == {"api_base": "http://h/v1"}
    assert options.settings.max_turns == 30
    # the same keystrokes with another wait are one action
    assert options.config.ignore_args == (ACTION_DURATIONS,)
    assert agent_options({"ignore_args": []}).config.ignore_args == ()


def test_a_model_id_selector_stays_a_model_id() -> None:
    assert agent_options({"selector": "openai/gpt-4o-mini"}).config.selector == "openai/gpt-4o-mini"


@pytest.mark.parametrize(
    ("kwargs", "said"),
    [
        ({"nn": 4}, "unknown option(s) nn; the agent's options are max_turns"),
        ({"n": 0}, "n must be greater than or equal to 1, got 0"),
        ({"max_turns": 0}, "max_turns must be greater than or equal to 1"),
        ({"trace": "x.jsonl"}, "trace: the agent writes every turn record"),
        ({"completion_kwargs": {"api_key": "sk-x"}}, "holds api_key: keys and headers never"),
        ({"selector_kwargs": {"extra_headers": {"A": "b"}}}, "holds extra_headers"),
        ({"selector": 3}, "selector must be first, random, majority"),
        (
            {"api_base": "http://a/v1", "completion_kwargs": {"api_base": "http://b/v1"}},
            "api_base is given twice",
        ),
    ],
)
def test_a_wrong_option_says_what_is_wrong(kwargs: dict[str, Any], said: str) -> None:
    with pytest.raises(ConfigurationError) as raised:
        agent_options(kwargs)
    assert said in str(raised.value)
    assert "sk-x" not in str(raised.value)


def test_harbors_own_keywords_are_not_options() -> None:
    def framework(logs_dir: str, model_name: str | None = None, *, extra_env: Any = None) -> None:
        """Stands for Harbor's BaseAgent.__init__ (its parameters are what counts)."""

    user, own = user_kwargs(
        {"logs_dir": "x", "extra_env": {}, "override_setup_timeout_sec": 5, "n": 2}, framework
    )
    assert user == {"n": 2}
    assert set(own) == {"logs_dir", "extra_env", "override_setup_timeout_sec"}
