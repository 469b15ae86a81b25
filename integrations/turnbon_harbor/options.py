"""The agent's options: every `--ak key=value` of `harbor run`, checked in one place.

Harbor hands the agent its `--ak` values as keyword arguments, mixed with its own
(`logs_dir`, `logger`, `extra_env`, ...). The agent's own options are `AgentSettings`;
every other name must be a `TurnConfig` option (n, selector, completion_kwargs, ...),
validated by `turn_config`, so a wrong name or value is an error that names it before any
container starts (`TurnBoNAgent.preflight`). This module does not import Harbor.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from turnbon_graph._secrets import HEADER_KEYS, SECRET_KEYS
from turnbon_graph.cli.flags.values import SELECTOR_KEYWORDS
from turnbon_graph.cli.models import make_selector
from turnbon_graph.config import TurnConfig, configuration_error, turn_config
from turnbon_graph.errors import ConfigurationError

ACTION_DURATIONS = "durations"
"""The canonical action's argument that holds each command's wait: left out when
candidates are compared unless `ignore_args` is given (the same keystrokes with another
wait do the same thing)."""

REFUSED = {
    "trace": "the agent writes every turn record to the trial's agent/turns.jsonl itself",
    "router": "a litellm.Router cannot be given on the command line",
}
"""Turn options the agent sets itself or that cannot come as text, and why."""


class AgentSettings(BaseModel):
    """The agent's own options (the rest of `--ak` are turn options)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_turns: int | None = Field(
        default=None, ge=1, description="turns before the agent stops (None: the agent timeout)"
    )
    api_base: str | None = Field(
        default=None,
        description="the generator's endpoint (the default selector shares it); "
        "the same as completion_kwargs={'api_base': ...}",
    )
    pane_width: int = Field(default=160, ge=20, description="tmux pane width, as Terminus-2's")
    pane_height: int = Field(default=40, ge=10, description="tmux pane height, as Terminus-2's")


@dataclass(frozen=True)
class AgentOptions:
    """Everything `--ak` said, checked: the agent's settings and the turn's config."""

    settings: AgentSettings
    config: TurnConfig


def user_kwargs(
    kwargs: Mapping[str, Any], framework: Callable[..., Any]
) -> tuple[dict[str, Any], dict[str, Any]]:
    """`kwargs` split into the user's `--ak` options and the framework's own keywords
    (the parameters of `framework`, Harbor's `BaseAgent.__init__`)."""
    own = set(inspect.signature(framework).parameters) | {"override_setup_timeout_sec"}
    user = {k: v for k, v in kwargs.items() if k not in own}
    return user, {k: v for k, v in kwargs.items() if k in own}


def agent_options(kwargs: Mapping[str, Any]) -> AgentOptions:
    """The `--ak` options checked; `ConfigurationError` (a `ValueError`, which Harbor
    prints without a traceback) names every problem and says what is allowed."""
    unknown = sorted(set(kwargs) - set(AgentSettings.model_fields) - set(TurnConfig.model_fields))
    refused = [f"{name}: {why}" for name, why in REFUSED.items() if name in kwargs]
    if unknown or refused:
        problems = [*refused]
        if unknown:
            problems.append(
                f"unknown option(s) {', '.join(unknown)}; the agent's options are "
                f"{', '.join(AgentSettings.model_fields)} and the turn options "
                f"{', '.join(n for n in TurnConfig.model_fields if n not in REFUSED)}"
            )
        raise ConfigurationError("; ".join(problems))
    try:
        settings = AgentSettings(
            **{k: v for k, v in kwargs.items() if k in AgentSettings.model_fields}
        )
    except ValidationError as exc:
        raise configuration_error(exc) from None
    turn = {k: v for k, v in kwargs.items() if k in TurnConfig.model_fields}
    refuse_keys(turn)
    selector = turn.get("selector")
    if selector is not None and not isinstance(selector, str):
        raise ConfigurationError(
            f"selector must be {', '.join(SELECTOR_KEYWORDS)} or a LiteLLM model id, "
            f"got {selector!r}"
        )
    turn["selector"] = make_selector(selector, turn.get("seed"))
    if settings.api_base is not None:
        completion = dict(turn.get("completion_kwargs") or {})
        if "api_base" in completion:
            raise ConfigurationError(
                "api_base is given twice (as api_base and in completion_kwargs); keep one"
            )
        turn["completion_kwargs"] = {**completion, "api_base": settings.api_base}
    turn.setdefault("ignore_args", (ACTION_DURATIONS,))
    return AgentOptions(settings=settings, config=turn_config(**turn))


def refuse_keys(turn: Mapping[str, Any]) -> None:
    """Keys and headers never come through `--ak`: Harbor writes every `--ak` value into
    the job's config.json and each trial's result.json."""
    for option in ("completion_kwargs", "selector_kwargs"):
        given = turn.get(option)
        if not isinstance(given, Mapping):
            continue
        secret = sorted(k for k in given if k in SECRET_KEYS or k in HEADER_KEYS)
        if secret:
            raise ConfigurationError(
                f"{option} holds {', '.join(secret)}: keys and headers never go through --ak "
                "(Harbor writes every --ak value into the job's config.json); export the "
                "provider's key in the shell that runs harbor (e.g. OPENAI_API_KEY), where "
                "LiteLLM reads it"
            )
