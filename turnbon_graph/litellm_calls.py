"""What a LiteLLM call costs us beyond the request: its logging, its pricing, and the
model-map lookups, each done once where once is enough.

Every `litellm.acompletion` runs LiteLLM's success logging (a standard logging payload
built per call, a task on its logging worker) and prices the response with
`completion_cost` (model-map look-ups; for an unpriced model, a failed look-up with
thousands of `re.search` calls). With nobody listening, that was about a quarter of a
turn's CPU. So when the user has configured no LiteLLM callbacks (`is_quiet`), a call
gets a logging object of its own (`quiet_call`), made by LiteLLM's own `function_setup`
(pre-call rules, custom providers and the rest still apply), whose success logging is
marked as done and whose cost calculation is skipped, and the call is priced here from
its token counts through LiteLLM's price map (`price_call`). Nothing global is changed:
the rest of the program's LiteLLM calls log and price as before, and once a callback is
registered (Langfuse, OpenTelemetry, a `CustomLogger`), every later call of ours goes
LiteLLM's whole way again, so the callback sees it.

The model-map answers (`supports_*`, `is_priced`) are kept per model id and size of the
map: each look-up costs as much as a small request, and the map changes only when a model
is registered (`litellm.register_model`), which is then read afresh.
"""

from __future__ import annotations

import datetime
import functools
import sys
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple, TypeVar

T = TypeVar("T")

# Every list LiteLLM dispatches logging callbacks from.
_CALLBACK_LISTS = (
    "callbacks",
    "success_callback",
    "_async_success_callback",
    "failure_callback",
    "_async_failure_callback",
    "input_callback",
    "_async_input_callback",
    "service_callback",
)
# Per-call settings that ask LiteLLM's logging or pricing for something: such a call goes
# LiteLLM's whole way.
_LOGGED_KEYS = frozenset(
    {
        "callbacks",
        "success_callback",
        "failure_callback",
        "litellm_logging_obj",
        "logger_fn",
        "metadata",
        "litellm_metadata",
        "base_model",
        "model_info",
        "custom_cost_per_token",
        "input_cost_per_token",
        "output_cost_per_token",
        "input_cost_per_second",
        "output_cost_per_second",
        "stream",
    }
)


def is_quiet(litellm: Any, kwargs: Mapping[str, Any]) -> bool:
    """True when nobody would see this call's LiteLLM logging: no callback registered
    anywhere, no budget to keep, no per-call logging or pricing setting. Read on every
    call, so a callback registered later is honoured from its next call on."""
    if any(getattr(litellm, name, None) for name in _CALLBACK_LISTS):
        return False
    if getattr(litellm, "max_budget", None):
        return False  # LiteLLM's budget counts the cost its logging computes
    return not _LOGGED_KEYS.intersection(kwargs)


def quiet_call(litellm: Any, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """`kwargs` with a logging object of this call's own (`litellm_logging_obj`, a per-call
    argument LiteLLM's `client` wrapper uses instead of making one). LiteLLM has no
    per-call switch for this: `no-log` skips the callbacks but still builds the logging
    payload and prices the call. So the object is LiteLLM's own, marked as having
    scheduled its success logging (the flags its wrapper checks, so no logging task is
    made), with its cost calculation answering None for this call only."""
    from litellm._uuid import uuid4
    from litellm.litellm_core_utils.rules import Rules
    from litellm.utils import function_setup

    call = {**kwargs, "litellm_call_id": str(uuid4())}  # type: ignore[no-untyped-call]
    logging_obj: Any
    logging_obj, call = function_setup(
        "acompletion", _rules(Rules), datetime.datetime.now(), **call
    )
    logging_obj._async_success_scheduled = True
    logging_obj._sync_success_scheduled = True
    logging_obj.response_cost_calculator = _unpriced  # this object's only
    call["litellm_logging_obj"] = logging_obj
    return dict(call)


def _per_model(lookup: Callable[[str], T]) -> Callable[[str], T]:
    """`lookup` answered once per model id while LiteLLM's model map keeps its size."""
    cached = functools.cache(lambda model, _size: lookup(model))

    @functools.wraps(lookup)
    def answer(model: str) -> T:
        litellm = sys.modules.get("litellm")
        size = len(getattr(litellm, "model_cost", None) or ()) if litellm is not None else -1
        result: T = cached(model, size)
        return result

    return answer


@functools.cache
def _rules(rules: type) -> Any:
    return rules()


def _unpriced(*_: Any, **__: Any) -> None:
    """Stands in for a quiet call's `response_cost_calculator`: `price_call` prices it."""
    return None


def price_call(litellm: Any, model: str, response: Any) -> float | None:
    """What LiteLLM's price map says the response's tokens cost (`cost_per_token`, from
    its usage: cached and reasoning tokens priced as `completion_cost` prices them), or
    None for a model the map does not price (known after one look-up per model)."""
    usage = getattr(response, "usage", None)
    if usage is None or not is_priced(model):
        return None
    hidden = getattr(response, "_hidden_params", None) or {}
    try:
        prompt, completion = litellm.cost_per_token(
            model=model,
            usage_object=usage,
            custom_llm_provider=hidden.get("custom_llm_provider"),
        )
    except Exception:
        return None
    return float(prompt + completion)


@_per_model
def is_priced(model: str) -> bool:
    """Whether LiteLLM's price map knows `model`."""
    import litellm

    try:
        litellm.get_model_info(model)
    except Exception:
        return False
    return True


@_per_model
def supports_native_tools(model: str) -> bool:
    """Whether to send `tools` natively: what LiteLLM's model map says, and yes for a
    model it does not know (OpenAI-compatible servers usually accept tools)."""
    import litellm

    try:
        litellm.get_model_info(model)
    except Exception:
        return True
    try:
        return bool(litellm.supports_function_calling(model=model))
    except Exception:
        return True


@_per_model
def supports_native_n(model: str) -> bool:
    """Whether LiteLLM lists `n` among the provider's supported parameters."""
    import litellm

    try:
        _, provider, _, _ = litellm.get_llm_provider(model)
        params = litellm.get_supported_openai_params(model=model, custom_llm_provider=provider)
    except Exception:
        return False
    return params is not None and "n" in params


EFFORT_ORDER = ("none", "minimal", "low", "medium", "high", "xhigh")
"""LiteLLM's `reasoning_effort` levels, weakest first."""
DEFAULT_REASONING_EFFORT = "medium"
"""The level a reasoning model works at when asked for none and its map entry names no
`default_reasoning_effort` (OpenAI's documented default)."""


class Efforts(NamedTuple):
    """The `reasoning_effort` levels a model takes, weakest first (none when it takes no
    reasoning effort), and the level it works at when asked for none."""

    levels: tuple[str, ...] = ()
    default: str | None = None


@_per_model
def reasoning_efforts(model: str) -> Efforts:
    """What `reasoning_effort` `model` takes: nothing unless LiteLLM says the model
    reasons (`supports_reasoning`) and lists `reasoning_effort` among its provider's
    parameters (`get_supported_openai_params`, which lists it for every OpenAI-compatible
    model, reasoning or not). The levels are low, medium and high, which every reasoning
    model takes, and xhigh where the map says `supports_xhigh_reasoning_effort`; the
    default is the map's `default_reasoning_effort`, else medium."""
    import litellm

    try:
        if not litellm.supports_reasoning(model=model):
            return Efforts()
        _, provider, _, _ = litellm.get_llm_provider(model)
        params = litellm.get_supported_openai_params(model=model, custom_llm_provider=provider)
        info = litellm.get_model_info(model)
    except Exception:
        return Efforts()
    if not params or "reasoning_effort" not in params:
        return Efforts()
    xhigh = bool(info.get("supports_xhigh_reasoning_effort"))
    levels = EFFORT_ORDER[2:] if xhigh else EFFORT_ORDER[2:-1]
    return Efforts(levels, str(info.get("default_reasoning_effort") or DEFAULT_REASONING_EFFORT))


@_per_model
def supports_response_schema(model: str) -> bool:
    """Whether LiteLLM says `model` takes a JSON-schema `response_format`."""
    import litellm

    try:
        return bool(litellm.supports_response_schema(model=model))
    except Exception:
        return False


def choice_tokens(model: str, choice: Any) -> int:
    """The completion tokens of one choice, counted by LiteLLM's `token_counter` (its
    text and tool calls): a provider reports one usage for a call with `n`."""
    import litellm

    message = choice.message
    parts = [message.content or ""]
    for call in getattr(message, "tool_calls", None) or []:
        function = getattr(call, "function", None)
        parts += [getattr(function, "name", "") or "", getattr(function, "arguments", "") or ""]
    try:
        return int(litellm.token_counter(model=model, text="\n".join(parts)))
    except Exception:
        return max(len("".join(parts)) // 4, 1)  # a model LiteLLM cannot count for
