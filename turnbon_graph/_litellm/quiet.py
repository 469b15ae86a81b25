"""What a LiteLLM call costs us beyond the request, its logging and its pricing, skipped
where nobody listens.

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
"""

from __future__ import annotations

import datetime
import functools
from collections.abc import Mapping
from typing import Any

from turnbon_graph._litellm.model_map import is_priced

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
