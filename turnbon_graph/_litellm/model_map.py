"""What LiteLLM's model map says of a model: whether it is priced, takes native tools,
`n`, a JSON-schema `response_format` or a `reasoning_effort`, and how many tokens one
choice holds.

Each answer is kept per model id and size of the map: a look-up costs as much as a small
request, and the map changes only when a model is registered (`litellm.register_model`),
which is then read afresh.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any, NamedTuple, TypeVar

from turnbon_graph._litellm.loading import quiet_litellm

T = TypeVar("T")


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


@_per_model
def is_priced(model: str) -> bool:
    """Whether LiteLLM's price map knows `model`."""
    litellm = quiet_litellm()
    try:
        litellm.get_model_info(model)
    except Exception:
        return False
    return True


@_per_model
def supports_native_tools(model: str) -> bool:
    """Whether to send `tools` natively: what LiteLLM's model map says, and yes for a
    model it does not know (OpenAI-compatible servers usually accept tools)."""
    litellm = quiet_litellm()
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
    litellm = quiet_litellm()
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
    litellm = quiet_litellm()
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
    litellm = quiet_litellm()
    try:
        return bool(litellm.supports_response_schema(model=model))
    except Exception:
        return False


def choice_tokens(model: str, choice: Any) -> int:
    """The completion tokens of one choice, counted by LiteLLM's `token_counter` (its
    text and tool calls): a provider reports one usage for a call with `n`."""
    litellm = quiet_litellm()
    message = choice.message
    parts = [message.content or ""]
    for call in getattr(message, "tool_calls", None) or []:
        function = getattr(call, "function", None)
        parts += [getattr(function, "name", "") or "", getattr(function, "arguments", "") or ""]
    try:
        return int(litellm.token_counter(model=model, text="\n".join(parts)))
    except Exception:
        return max(len("".join(parts)) // 4, 1)  # a model LiteLLM cannot count for
