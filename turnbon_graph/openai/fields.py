"""What an OpenAI request may carry, declared once: the `FORWARDED` fields with the check
each value passes, the `IGNORED` ones (checked, then dropped), and the `REFUSED` ones with
why. The chat-completions and Responses readers (`openai.chat`, `openai.responses`) and
the LiteLLM provider share these, and sort a request body by them with
`sort_request_fields`, so no door can check a field differently.

Every check raises `RequestFieldError` naming the field, before any call is made.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from types import MappingProxyType
from typing import Any, NoReturn

from turnbon_graph.errors import RequestFieldError

__all__ = [
    "CONNECTION_FIELDS",
    "FORWARDED",
    "IGNORED",
    "MAX_TOKENS_LIMIT",
    "REFUSED",
    "Check",
    "boolean",
    "fail",
    "is_integer",
    "json_object",
    "one_of",
    "sort_request_fields",
    "string",
    "unsupported_fields_error",
]


MAX_TOKENS_LIMIT = 2**31 - 1
"""The largest `max_tokens` / `max_completion_tokens` OpenAI takes (a 32-bit integer)."""


Check = Callable[[str, Any], None]
"""Raises `RequestFieldError` naming the field when its value is not one OpenAI takes."""


def fail(name: str, wanted: str, value: Any) -> NoReturn:
    """Refuses field `name`: it must be `wanted`, and got `value` (shown cut short)."""
    raise RequestFieldError(name, f"{name} must be {wanted}, got {value!r:.80}")


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_integer(value: Any) -> bool:
    """Whether `value` is an integer (a bool is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def _number(low: float, high: float | None = None) -> Check:
    """A number from `low` to `high`; without `high`, one above `low`."""
    wanted = f"a number from {low:g} to {high:g}" if high is not None else f"a number above {low:g}"

    def check(name: str, value: Any) -> None:
        if not _is_number(value) or not (low <= value <= high if high is not None else value > low):
            fail(name, wanted, value)

    return check


def _integer(low: int, high: int) -> Check:
    def check(name: str, value: Any) -> None:
        if not is_integer(value) or not low <= value <= high:
            fail(name, f"an integer from {low} to {high}", value)

    return check


def boolean(name: str, value: Any) -> None:
    """Checks that field `name` is true or false."""
    if not isinstance(value, bool):
        fail(name, "true or false", value)


def one_of(*choices: str) -> Check:
    """A check that a field is one of `choices`."""

    def check(name: str, value: Any) -> None:
        if value not in choices:
            fail(name, "one of " + ", ".join(repr(c) for c in choices), value)

    return check


def string(name: str, value: Any) -> None:
    """Checks that field `name` is a string."""
    if not isinstance(value, str):
        fail(name, "a string", value)


def json_object(name: str, value: Any) -> None:
    """Checks that field `name` is a JSON object."""
    if not isinstance(value, Mapping):
        fail(name, "a JSON object", value)


def _stop(name: str, value: Any) -> None:
    if isinstance(value, str):
        return
    if not isinstance(value, list) or len(value) > 4 or not all(isinstance(v, str) for v in value):
        fail(name, "a string or a list of up to 4 strings", value)


def _logit_bias(name: str, value: Any) -> None:
    if not isinstance(value, Mapping) or not all(
        _is_number(bias) and -100 <= bias <= 100 for bias in value.values()
    ):
        fail(name, "an object of token ids to numbers from -100 to 100", value)


def _tool_choice(name: str, value: Any) -> None:
    if value in ("none", "auto", "required"):
        return
    given = value if isinstance(value, Mapping) else {}
    function = given.get("function")
    allowed = given.get("allowed_tools")
    if (
        given.get("type") == "function"
        and isinstance(function, Mapping)
        and isinstance(function.get("name"), str)
    ) or (
        given.get("type") == "allowed_tools"
        and isinstance(allowed, Mapping)
        and allowed.get("mode") in ("auto", "required")
        and isinstance(allowed.get("tools"), list)
    ):
        return
    fail(
        name,
        "'none', 'auto', 'required', {'type': 'function', 'function': {'name': ...}} or "
        "{'type': 'allowed_tools', 'allowed_tools': {'mode', 'tools'}}",
        value,
    )


def _response_format(name: str, value: Any) -> None:
    given = value if isinstance(value, Mapping) else {}
    schema = given.get("json_schema")
    if given.get("type") in ("text", "json_object") or (
        given.get("type") == "json_schema"
        and isinstance(schema, Mapping)
        and isinstance(schema.get("name"), str)
        and isinstance(schema.get("schema", {}), Mapping)
    ):
        return
    fail(
        name,
        "{'type': 'text'}, {'type': 'json_object'} or {'type': 'json_schema', "
        "'json_schema': {'name', 'schema'}}",
        value,
    )


_INT64 = 2**63 - 1


FORWARDED: Mapping[str, Check] = MappingProxyType(
    {
        "temperature": _number(0, 2),
        "top_p": _number(0, 1),
        "max_tokens": _integer(1, MAX_TOKENS_LIMIT),
        "max_completion_tokens": _integer(1, MAX_TOKENS_LIMIT),
        "presence_penalty": _number(-2, 2),
        "frequency_penalty": _number(-2, 2),
        "stop": _stop,
        "seed": _integer(-_INT64 - 1, _INT64),
        "tool_choice": _tool_choice,
        "parallel_tool_calls": boolean,
        "response_format": _response_format,
        "logit_bias": _logit_bias,
        "reasoning_effort": string,
        "verbosity": one_of("low", "medium", "high"),
        # what OpenAI-compatible servers (vLLM, SGLang, llama.cpp) add to the same body
        "top_k": _integer(-1, _INT64),
        "min_p": _number(0, 1),
        "repetition_penalty": _number(0, None),
        "chat_template_kwargs": json_object,
    }
)
"""The fields forwarded to every generator call of the turn (never to the selector's),
each with the check its value passes first."""


IGNORED: Mapping[str, Check | None] = MappingProxyType(
    {
        # about storage, billing, caching and abuse tracking of the one request: the turn's
        # calls are its own, so these are not sent upstream
        "store": boolean,
        "metadata": json_object,
        "service_tier": string,
        "user": string,
        "safety_identifier": string,
        "prompt_cache_key": string,
        "prompt_cache_retention": string,
        "prediction": json_object,  # Predicted Outputs: a latency hint for one completion
        # the chosen message carries no logprobs: checked, then dropped
        "logprobs": boolean,
        "top_logprobs": _integer(0, 20),
    }
)
"""The fields accepted (their values checked) and dropped: they change nothing a turn
does, so they are not sent upstream."""


CONNECTION_FIELDS = frozenset(
    {
        "api_base",
        "base_url",
        "api_key",
        "api_version",
        "organization",
        "headers",
        "extra_headers",
        "custom_llm_provider",
    }
)
"""The upstream connection: the server's (or, for the provider, the call's own
arguments), never a field of a request body."""


REFUSED: Mapping[str, str] = MappingProxyType(
    {
        "audio": "a turn answers with text and tool calls, never audio",
        **{
            name: "the upstream endpoint and its key are the server's, never the request's"
            for name in sorted(CONNECTION_FIELDS)
        },
    }
)
"""The fields a request may not carry, each with why (`n` > 1 and any modality but text
are refused by their own checks)."""


def sort_request_fields(
    body: Mapping[str, Any],
    *,
    own: Set[str],
    kept: Mapping[str, Check],
    ignored: Mapping[str, Check | None],
    refused: Mapping[str, str],
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A request body's fields sorted by an endpoint's declared tables, each value checked.

    The endpoint's `own` fields (read by its caller) and null values (absent, as OpenAI
    reads them) are passed over; `ignored` fields are checked, then dropped.

    Args:
        body: the request body.
        own: the fields the caller reads itself.
        kept: the fields the turn takes, each with its check.
        ignored: the fields accepted and dropped, each with its check (None: any value).
        refused: the fields a request may not carry, each with why.

    Returns:
        The `kept` fields and the fields no table names, each by name in the body's order.

    Raises:
        RequestFieldError: a `refused` field, or a value its check refuses.
    """
    taken: dict[str, Any] = {}
    unknown: dict[str, Any] = {}
    for name, value in body.items():
        if name in own or value is None:
            continue
        if name in refused:
            raise RequestFieldError(name, f"{name} is not accepted: {refused[name]}")
        if name in kept:
            kept[name](name, value)
            taken[name] = value
        elif name in ignored:
            if (check := ignored[name]) is not None:
                check(name, value)
        else:
            unknown[name] = value
    return taken, unknown


def unsupported_fields_error(unknown: Mapping[str, Any], may_carry: str) -> RequestFieldError:
    """The error for fields no table of the endpoint names (`sort_request_fields`).

    Args:
        unknown: the fields, in the body's order (the first is the error's `param`).
        may_carry: what a request may carry instead, as the message says it.

    Returns:
        The error, naming every unknown field.
    """
    names = list(unknown)
    return RequestFieldError(
        names[0],
        f"unsupported request field(s): {', '.join(sorted(names))}; a request may carry "
        f"{may_carry}",
    )
