"""`TurnConfig`: every option of a Turn-BoN turn, declared once.

Each entry point (`create_turnbon_graph`, `create_turnbon_agent`, `ChatTurnBoN`, and any
later one) takes these options as keywords, or a ready `config=TurnConfig(...)`, and
builds its `TurnEngine` from one `TurnConfig`. A new option is a field here plus the
engine code that uses it; the options table of docs/options.md is checked against these fields.

Secrets inside `completion_kwargs` and `selector_kwargs` (API keys, header values) are
held as `SecretStr`, so `repr`, `model_dump()`, `model_dump_json()` and LangChain
serialisation never show them; `reveal_secrets` gives back the settings
a call sends.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict, TypeVar, Unpack

from langchain_core.language_models import BaseChatModel
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SkipValidation,
    ValidationError,
    field_serializer,
    field_validator,
    model_validator,
)

from turnbon_graph._secrets import hide_secrets
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import TraceSink
from turnbon_graph.selectors.base import Selector
from turnbon_graph.turn.sampling import AdaptiveN, Budget, EarlyCommit

__all__ = [
    "CONNECTION_KEYS",
    "TurnConfig",
    "TurnOptions",
    "configuration_error",
    "option_values",
    "takes_turn_options",
    "turn_config",
]

F = TypeVar("F", bound=Callable[..., Any])

CONNECTION_KEYS = (
    "api_base",
    "base_url",
    "api_key",
    "api_version",
    "organization",
    "extra_headers",
)
"""Settings of the generator's endpoint that a default selector (the same model) shares."""


class TurnConfig(BaseModel):
    """The options of a Turn-BoN turn: how many candidates, who selects, how calls are
    made and bounded, and how sampling adapts. Every field is optional."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    n: int = Field(default=4, ge=1, strict=True, description="candidates per turn")
    selector: Annotated[str | Selector | BaseChatModel | None, SkipValidation()] = Field(
        default=None,
        description=(
            "a LiteLLM model id (an `LLMSelector` on it), a `Selector`, a LangChain chat "
            "model (an `LLMSelector` speaking through it), or `None`: an `LLMSelector` on "
            "the generator's model, sharing its endpoint (`api_base`, `api_key`, ...)"
        ),
    )
    completion_kwargs: dict[str, Any] | None = Field(
        default=None,
        description=(
            "forwarded to every generator call (`temperature`, `api_base`, `api_key`, ...)"
        ),
    )
    selector_kwargs: dict[str, Any] | None = Field(
        default=None, description="forwarded to selector calls when `selector` is a model id"
    )
    prompt: str | None = Field(
        default=None, description="system prompt used when the messages carry none"
    )
    max_concurrency: int | None = Field(
        default=64,
        ge=1,
        description=(
            "cap on calls in flight (generator and selector together; a selector instance "
            "given a `client` of its own keeps that client's limits); `None`: no cap. The "
            "default holds 1,000 concurrent episodes on one engine (`benchmarks/load.py`)"
        ),
    )
    rate_limit: float | None = Field(
        default=None, gt=0, description="requests per second across those calls (asyncio-throttle)"
    )
    timeout: float | None = Field(
        default=600.0,
        gt=0,
        description=(
            "seconds per call attempt (`None`: LiteLLM's own, 6,000 s), so a hung provider "
            "cannot hold a turn for long"
        ),
    )
    max_retries: int = Field(
        default=2,
        ge=0,
        description=(
            "retries of retryable failures (408/409/429/5xx, timeouts, dropped "
            "connections), with exponential backoff, waiting at least what `Retry-After` "
            "asks; an ask over 60 s fails that call at once instead"
        ),
    )
    native_n: bool | Literal["auto"] = Field(
        default="auto",
        description=(
            '`"auto"`: one call with `n=N` for the turn\'s candidates where LiteLLM lists `n` '
            "for the provider, the model is one id and nothing needs a call each (a "
            "`ModelSpec` or mixed pool, early commit, adaptive N); the record's "
            "`sampling.separate_calls` says why not. An endpoint that refuses `n` (a 4xx) or "
            "returns fewer choices gets separate calls from then on. `True`: ask with `n` "
            "every turn; `False`: always one call per candidate"
        ),
    )
    tool_calling: Literal["auto", "native", "prompted"] = Field(
        default="auto",
        description=(
            '`"native"` sends `tools`; `"prompted"` describes them in the system prompt '
            "and constrains the reply to a JSON schema (one tool call or a final answer), "
            'for models without tool calling; `"auto"` is native unless LiteLLM\'s model '
            "map says the model has no function calling"
        ),
    )
    seed: int | None = Field(
        default=None, description="makes the selector's shuffled candidate order reproducible"
    )
    trace: Annotated[TraceSink | str | Path | None, SkipValidation()] = Field(
        default=None, description="a `TraceSink`, or a path to append one JSON line per turn to"
    )
    adaptive: AdaptiveN | None = Field(
        default=None,
        description=(
            "`AdaptiveN(first_batch=2, step=2, threshold=0.75, mutating_tools=..., "
            "mutating_min=4)`: sample a small batch, commit the plurality action without a "
            "selector call when enough candidates agree, else sample more up to `n` (TrACE "
            "at the turn level)"
        ),
    )
    early_commit: EarlyCommit | None = Field(
        default=None,
        description=(
            "`EarlyCommit(min_candidates=m, grace_s=g)`: once m candidates are in and g "
            "seconds more have passed, cancel the stragglers and select"
        ),
    )
    budget: Budget | None = Field(
        default=None,
        description=(
            "`Budget(turn_tokens=, episode_tokens=, turn_cost_usd=, episode_cost_usd=)`: "
            "fewer candidates when the estimate nears a cap, then one and no selector; "
            "never fails the run"
        ),
    )
    dedupe: bool = Field(
        default=False, description="show the selector each distinct action once, with its count"
    )
    router: Annotated[Any, SkipValidation()] = Field(
        default=None,
        description=(
            "a `litellm.Router`: model ids naming one of its model groups (generator and "
            "selector alike) go through `router.acompletion`, whose load balancing, "
            "retries, fallbacks and cooldowns then apply instead of ours"
        ),
    )
    ignore_args: tuple[str, ...] = Field(
        default=(), description="argument names left out when comparing actions (e.g. `timeout`)"
    )

    # ------------------------------------------------------------------ validation

    @field_validator("completion_kwargs", "selector_kwargs", mode="after")
    @classmethod
    def _hide(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return hide_secrets(value) if value is not None else None

    @field_validator("ignore_args", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        if isinstance(value, str):
            raise ValueError("ignore_args must be a list of argument names, not a string")
        return value

    @field_serializer("selector", "trace", "router")
    def _label(self, value: Any) -> str | None:
        """A dump names a selector instance or trace sink; it cannot hold the object."""
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, Path):
            return str(value)
        return str(getattr(value, "name", None) or type(value).__name__)

    @model_validator(mode="after")
    def _consistent(self) -> TurnConfig:
        selector = self.selector
        if selector is not None and not isinstance(selector, str | Selector | BaseChatModel):
            raise ValueError(
                "selector must be a LiteLLM model id, a Selector (with `name` and async "
                f"`select`), a LangChain chat model, or None; got {selector!r}"
            )
        if self.selector_kwargs is not None and isinstance(selector, Selector | BaseChatModel):
            raise ValueError(
                "selector_kwargs applies only when selector is a model id; configure a "
                "Selector instance or a chat model through its own constructor"
            )
        router = self.router
        routes = any(callable(getattr(router, n, None)) for n in ("registry", "get_model_names"))
        if router is not None and not (callable(getattr(router, "acompletion", None)) and routes):
            raise ValueError(f"router must be a litellm.Router, got {router!r}")
        trace = self.trace
        if trace is not None and not isinstance(trace, str | Path | TraceSink):
            raise ValueError(
                "trace must be a TraceSink (with a `write(record)` method), a file path, "
                f"or None; got {trace!r}"
            )
        return self


class TurnOptions(TypedDict, total=False):
    """`TurnConfig`'s fields as keyword arguments: what every door's `**options` takes, so
    type checkers and editors know each option by name and type. It mirrors `TurnConfig`
    field for field (a test holds the two equal); `TurnConfig` documents each one."""

    n: int
    selector: str | Selector | BaseChatModel | None
    completion_kwargs: dict[str, Any] | None
    selector_kwargs: dict[str, Any] | None
    prompt: str | None
    max_concurrency: int | None
    rate_limit: float | None
    timeout: float | None
    max_retries: int
    native_n: bool | Literal["auto"]
    tool_calling: Literal["auto", "native", "prompted"]
    seed: int | None
    trace: TraceSink | str | Path | None
    adaptive: AdaptiveN | None
    early_commit: EarlyCommit | None
    budget: Budget | None
    dedupe: bool
    router: Any
    ignore_args: tuple[str, ...]


def takes_turn_options(function: F) -> F:
    """Shows `TurnConfig`'s fields in `function`'s signature in place of its
    `**options: Unpack[TurnOptions]`, each with its type and default, so that `inspect`,
    `help()` and the API reference list them as they list the other parameters."""
    signature = inspect.signature(function)
    kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    taken = {p.name for p in kept}
    hints = TurnOptions.__annotations__  # as written: shown like the other parameters
    options = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=field.get_default(call_default_factory=True),
            annotation=getattr(hints[name], "__forward_arg__", hints[name]),
        )
        for name, field in TurnConfig.model_fields.items()
        if name not in taken
    ]
    function.__signature__ = signature.replace(parameters=[*kept, *options])  # type: ignore[attr-defined]
    return function


def turn_config(config: TurnConfig | None = None, **options: Unpack[TurnOptions]) -> TurnConfig:
    """The configuration an entry point runs on: `config`, with any keyword `options`
    over it.

    Args:
        config: a ready `TurnConfig`; None starts from the defaults.
        **options: any `TurnConfig` option by name, over `config`; `TurnConfig`
            describes each one.

    Returns:
        `config` itself when no option is given, else a new, validated `TurnConfig`.

    Raises:
        ConfigurationError: `config` is not a `TurnConfig`, or an option is unknown or
            has a bad value; the message names each bad option and what it allows.
    """
    if config is not None and not isinstance(config, TurnConfig):
        raise ConfigurationError(f"config must be a TurnConfig, got {config!r}")
    try:
        if config is None:
            return TurnConfig(**options)
        if not options:
            return config
        return TurnConfig(**{**option_values(config), **options})
    except ValidationError as exc:
        raise configuration_error(exc) from None


def option_values(config: TurnConfig) -> dict[str, Any]:
    """The options of `config` (or of anything carrying its fields, as `ChatTurnBoN`
    does) by name, secrets still hidden."""
    return {name: getattr(config, name) for name in TurnConfig.model_fields}


def configuration_error(exc: ValidationError) -> ConfigurationError:
    """A `ConfigurationError` that names each bad option, what it got and what is
    allowed. The values of `*_kwargs` are left out: they may hold a key."""
    problems = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(part) for part in error["loc"]) or "options"
        if error["type"] == "extra_forbidden":
            problems.append(f"{where} is not a turn option; the options are: {OPTION_NAMES}")
        elif error["type"] == "value_error":  # our own validators name the option
            problems.append(error["msg"].removeprefix("Value error, "))
        else:
            shown = "" if where.split(".")[0].endswith("_kwargs") else f", got {error['input']!r}"
            problems.append(f"{where} {error['msg'].replace('Input should', 'must')}{shown}")
    return ConfigurationError("; ".join(problems))


OPTION_NAMES = ", ".join(TurnConfig.model_fields)
