"""`ChatTurnBoN`: one Turn-BoN turn per call, as a LangChain chat model.

It drops into anything that takes a `BaseChatModel`: LangGraph's prebuilt
`create_react_agent`, LangChain agents, chains. Every call runs the same `TurnEngine` as
`create_turnbon_graph` (N candidates, then selection) and returns the chosen `AIMessage`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import (
    AsyncCallbackManagerForLLMRun,
    CallbackManagerForLLMRun,
)
from langchain_core.language_models import LangSmithParams, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict, PrivateAttr, SecretStr, ValidationError, model_validator

from turnbon_graph._sync import run_sync
from turnbon_graph.chat.events import EVENT_NAME, async_events, sync_events
from turnbon_graph.chat.streaming import STREAM_CALL, ReplayStreaming
from turnbon_graph.chat.structured import StructuredMethod, structured_output
from turnbon_graph.chat.usage import areport_selector, chat_result, report_selector, selector_model
from turnbon_graph.config import TurnConfig, configuration_error, option_values, turn_config
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.turn.engine import EventSink, TurnEngine
from turnbon_graph.turn.generator import ModelSpec

__all__ = ["EVENT_NAME", "ChatTurnBoN"]

# tool_choice values the OpenAI format (and LiteLLM) takes as they are.
_TOOL_CHOICE_MODES = ("auto", "none", "required")
# Per-call keyword arguments that are LangChain switches, not completion settings.
_LANGCHAIN_ONLY_KWARGS = ("stream", STREAM_CALL)


class ChatTurnBoN(ReplayStreaming, TurnConfig):
    """A chat model that answers each call with a turn-level best-of-N choice.

    Each call proposes `n` candidate next messages through LiteLLM, lets the selector
    pick one (no selector call when all candidates agree), and returns the chosen
    `AIMessage` with its turn record in `response_metadata["turnbon"]` (read it with
    `turnbon_graph.turn_record`). Only the chosen message's tool calls reach the agent,
    so only they are executed.

    Args:
        **data: the fields below, and every `TurnConfig` option by name (`n`,
            `selector`, `completion_kwargs`, ...: this class carries `TurnConfig`'s
            fields, which `TurnConfig` describes), or a ready `config=TurnConfig(...)`
            (keywords given beside it win). Secrets in `completion_kwargs` and
            `selector_kwargs` are held as `SecretStr`: no repr, dump or callback payload
            shows them.

    Raises:
        ConfigurationError: an option is unknown or has a bad value, or a shorthand
            parameter and `completion_kwargs` set one setting to different values.

    LangChain's standard parameters `temperature`, `max_tokens`, `stop` and `api_key`
    are shorthand for the same `completion_kwargs` entries (generator calls only, except
    that a default selector shares the generator's `api_key`); setting one both ways with
    different values is an error.

    Per-call keyword arguments (bound with `bind`/`bind_tools` or passed to `invoke`):
    `tools` are offered to every candidate; `tool_choice`, `stop`, `parallel_tool_calls`,
    `response_format` and any other completion settings go to the generator calls of
    that call only. A per-call `model` is refused: the models are fixed at construction.
    `with_structured_output` takes `method="function_calling"`, `"json_schema"` or
    `"json_mode"` (`chat.structured`).

    Streaming: a turn is decided only once its candidates are in, so `stream`/`astream`
    run the whole turn, then replay the chosen message as `AIMessageChunk`s (its text,
    then its `tool_call_chunks`; usage and the turn record on the last chunk), which add
    up to what `invoke` returns. The candidates' and the selector's calls never stream.
    `invoke` answers whole, even under a streaming callback handler; `streaming` is
    accepted for compatibility.

    Usage: the returned message's `usage_metadata` counts the generator calls (all N
    candidates, cached prompt tokens in `input_token_details.cache_read`) under the
    generator's `model_name`; the selector's calls are reported as a child LLM run named
    `"turnbon_selector"` whose message names the selector's model, so
    `get_usage_metadata_callback()` books each under its own model and their sum is what
    the turn cost (`chat.usage`). The turn record keeps the generator/selector split in
    `usage` and the chosen candidate's own usage in `candidates[selected_index].usage`.

    Progress events (candidate_arrived, candidate_failed, selection_made) are dispatched
    as custom callback events named `"turnbon"` on the model's run, so they show up in
    `astream_events` as `on_custom_event`, and, when the model runs inside a LangGraph
    graph, written to the graph's custom stream (`stream_mode="custom"`) with
    `"source": "turnbon"` (`chat.events`).

    The engine is built once, at construction (configuration errors raise
    `ConfigurationError` there), rebuilt only if the options are changed afterwards, and
    left out of pickles (rebuilt on the first call after unpickling). Selectors and trace
    sinks are arbitrary objects, so the model is not LangChain-serializable (`dumps` gives
    its redacted repr), and one that holds a selector or trace sink instance pickles only
    if that object does.
    """

    model: str | list[str | ModelSpec]
    """A LiteLLM model id, or a list of ids and `ModelSpec`s for a mixed pool."""

    temperature: float | None = None
    """Shorthand for `completion_kwargs["temperature"]` (the generator's calls)."""
    max_tokens: int | None = None
    """Shorthand for `completion_kwargs["max_tokens"]` (the generator's calls)."""
    stop: list[str] | None = None
    """Shorthand for `completion_kwargs["stop"]` (the generator's calls)."""
    api_key: SecretStr | None = None
    """Shorthand for `completion_kwargs["api_key"]`; a default selector shares it."""
    streaming: bool = False
    """Accepted for compatibility: `stream` replays the chosen message either way, and
    `invoke` answers whole."""

    model_config = ConfigDict(extra="forbid")

    _engine: TurnEngine | None = PrivateAttr(default=None)
    _engine_config: tuple[Any, TurnConfig] | None = PrivateAttr(default=None)

    if not TYPE_CHECKING:
        # Builds the engine after validation. Not a validator: pydantic would wrap a
        # ConfigurationError in a ValidationError. Hidden from type checkers, so they
        # keep the keyword signature pydantic synthesises from the fields.
        def __init__(self, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:
                raise configuration_error(exc) from None
            self._get_engine()

    @model_validator(mode="before")
    @classmethod
    def _expand_config(cls, data: Any) -> Any:
        """`config=TurnConfig(...)` stands for its options; keywords given beside it win."""
        if isinstance(data, dict) and "config" in data:
            data = dict(data)
            config = data.pop("config")
            if not isinstance(config, TurnConfig):
                raise ValueError(f"config must be a TurnConfig, got {config!r}")
            data = {**option_values(config), **data}
        return data

    # ------------------------------------------------------------------ engine

    def _generator_kwargs(self) -> dict[str, Any]:
        """`completion_kwargs` with the standard LangChain parameters merged in (secrets
        still hidden)."""
        kwargs = dict(self.completion_kwargs or {})
        shorthand: dict[str, Any] = {
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
            "stop": list(self.stop) if self.stop else None,
            "api_key": self.api_key,
        }
        for key, value in shorthand.items():
            if value is None:
                continue
            if key in kwargs and kwargs[key] != value:
                raise ConfigurationError(
                    f"{key} is set both as ChatTurnBoN({key}=...) and in completion_kwargs, "
                    "with different values; set it in one place"
                )
            kwargs[key] = value
        return kwargs

    @property
    def config(self) -> TurnConfig:
        """The `TurnConfig` the engine runs on: this model's options, with the LangChain
        shorthand parameters merged into `completion_kwargs`."""
        return turn_config(**{**option_values(self), "completion_kwargs": self._generator_kwargs()})

    def _get_engine(self) -> TurnEngine:
        """The cached engine; rebuilt if the options changed since it was built (after
        `model_copy(update=...)` or an attribute assignment)."""
        model = list(self.model) if isinstance(self.model, list) else self.model
        built = (model, self.config)
        if self._engine is None or built != self._engine_config:
            self._engine = TurnEngine.from_config(model, built[1])
            self._engine_config = built
        return self._engine

    @property
    def engine(self) -> TurnEngine:
        """The `TurnEngine` every call runs."""
        return self._get_engine()

    # ------------------------------------------------------------------ LangChain metadata

    @property
    def _llm_type(self) -> str:
        return "turnbon"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        # Goes into callbacks (`invocation_params`) and cache keys: no secrets.
        return {
            "model": self.model,
            "n": self.n,
            "selector": self._get_engine().selector.name,
            "prompt": self.prompt,
            "native_n": self.native_n,
            "tool_calling": self.tool_calling,
            "seed": self.seed,
            "completion_kwargs": self.config.model_dump(mode="json")["completion_kwargs"],
        }

    def _get_ls_params(self, stop: list[str] | None = None, **kwargs: Any) -> LangSmithParams:
        settings = {**self._generator_kwargs(), **kwargs}
        model = kwargs.get("model")
        params = LangSmithParams(
            ls_provider="turnbon",
            ls_model_name=model if isinstance(model, str) else self._get_engine().generator.label,
            ls_model_type="chat",
        )
        temperature = settings.get("temperature")
        if isinstance(temperature, int | float) and not isinstance(temperature, bool):
            params["ls_temperature"] = float(temperature)
        max_tokens = settings.get("max_tokens")
        if isinstance(max_tokens, int) and not isinstance(max_tokens, bool):
            params["ls_max_tokens"] = max_tokens
        stop_sequences = stop or settings.get("stop")
        if stop_sequences:
            params["ls_stop"] = list(stop_sequences)
        return params

    # ------------------------------------------------------------------ tools

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: dict[str, Any] | str | bool | None = None,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Offers `tools` to every candidate of every call.

        Args:
            tools: LangChain tools, functions, pydantic models or OpenAI tool dicts.
            tool_choice: "auto", "none", "required" (alias "any" or True), a tool name
                to force that tool, or an OpenAI tool_choice dict; None or False: the
                model's default.
            strict: passed to `convert_to_openai_tool`.
            **kwargs: bound as per-call completion settings (for example
                `parallel_tool_calls=False`).

        Returns:
            This model with the tools bound (a `RunnableBinding`).

        Raises:
            ConfigurationError: `tool_choice` names no bound tool, or is of another type.
        """
        formatted = [convert_to_openai_tool(tool, strict=strict) for tool in tools]
        if tool_choice is not None and tool_choice is not False:
            kwargs["tool_choice"] = _tool_choice(tool_choice, formatted)
        return self.bind(tools=formatted, **kwargs)

    # ------------------------------------------------------------------ structured output

    def with_structured_output(
        self,
        schema: dict[str, Any] | type | None = None,
        *,
        method: StructuredMethod = "function_calling",
        include_raw: bool = False,
        strict: bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, dict[str, Any] | BaseModel]:
        """Answers with `schema`'s instances (a dict for a dict or TypedDict schema).

        A chosen reply without a structured answer raises `OutputParserException` when
        the runnable is invoked (or, with `include_raw=True`, is reported in
        `parsing_error`).

        Args:
            schema: a pydantic model, a TypedDict, or a JSON schema dict; None only with
                "json_mode".
            method: "function_calling" (the schema as the one forced tool),
                "json_schema" (`response_format` with the schema on every generator
                call) or "json_mode" (`response_format={"type": "json_object"}`; the
                schema only validates).
            include_raw: answer `{"raw", "parsed", "parsing_error"}` instead of the
                parsed value alone.
            strict: OpenAI's `strict` on the tool or JSON schema (the reply follows the
                schema exactly, where the provider takes it).
            **kwargs: none is taken; any given is refused.

        Returns:
            A runnable that answers with the parsed value (or the dict of
                `include_raw`).

        Raises:
            ConfigurationError: an unknown method, no schema for a method that needs
                one, or other keyword arguments.
        """
        return structured_output(
            self, schema, method=method, include_raw=include_raw, strict=strict, **kwargs
        )

    # ------------------------------------------------------------------ pickling

    def __getstate__(self) -> dict[Any, Any]:
        """The options only: the engine (its client's semaphores and throttler) is
        rebuilt on the first call after unpickling."""
        state = super().__getstate__()
        private = dict(state.get("__pydantic_private__") or {})
        private.update(_engine=None, _engine_config=None)
        return {**state, "__pydantic_private__": private}

    # ------------------------------------------------------------------ calls

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        result = run_sync(self._turn(messages, stop, kwargs, sync_events(run_manager)))
        report_selector(run_manager, result, selector_model(self._get_engine().selector))
        return result

    async def _agenerate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: AsyncCallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        async with async_events(run_manager) as on_event:
            result = await self._turn(messages, stop, kwargs, on_event)
        await areport_selector(run_manager, result, selector_model(self._get_engine().selector))
        return result

    async def _turn(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None,
        kwargs: dict[str, Any],
        on_event: EventSink | None,
    ) -> ChatResult:
        extra = {k: v for k, v in kwargs.items() if k not in _LANGCHAIN_ONLY_KWARGS}
        tools = extra.pop("tools", None)
        if "model" in extra:
            raise ConfigurationError(
                f"ChatTurnBoN got a per-call model={extra['model']!r}; its models are fixed "
                "at construction: create another ChatTurnBoN for other models"
            )
        if stop:
            extra["stop"] = list(stop)
        openai_tools = [convert_to_openai_tool(t) for t in tools] if tools else None
        message = await self._get_engine().run(
            messages, tools=openai_tools, on_event=on_event, extra=extra or None
        )
        return chat_result(message)


def _tool_choice(
    choice: dict[str, Any] | str | bool, tools: list[dict[str, Any]]
) -> dict[str, Any] | str:
    if isinstance(choice, dict):
        return choice
    if choice is True or choice == "any":
        return "required"
    if isinstance(choice, str):
        if choice in _TOOL_CHOICE_MODES:
            return choice
        names = [tool["function"]["name"] for tool in tools if "function" in tool]
        if choice not in names:
            raise ConfigurationError(
                f"tool_choice {choice!r} is neither 'auto', 'none', 'required', 'any' nor "
                f"the name of a bound tool ({', '.join(names) or 'no tools bound'})"
            )
        return {"type": "function", "function": {"name": choice}}
    raise ConfigurationError(
        f"tool_choice must be a tool name, 'auto', 'none', 'required', 'any', a bool or a "
        f"dict; got {choice!r}"
    )
