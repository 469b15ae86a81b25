"""Secrets, in one place: which call settings hold them, how they are hidden in a
configuration, and how they are kept out of every record, error, trace and log line.

An API key or a header value reaches the provider and nothing else: `TurnConfig` holds
them as `SecretStr` (`hide_secrets`, `reveal_secrets` for the call), and every text the
library writes down passes `redact` with `secret_values` (the call's keys and headers and
the environment's keys and tokens).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import AIMessage
from pydantic import SecretStr

# Keys whose values are secrets: they reach the provider but never a record or an error text.
_SECRET_ENV_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD")


SECRET_KEYS = frozenset({"api_key", "azure_ad_token", "aws_secret_access_key", "aws_session_token"})


HEADER_KEYS = ("extra_headers", "headers")
"""Call settings whose values are header maps: every header value is a secret."""


def secret_values(kwargs: Mapping[str, Any]) -> list[str]:
    """Every value that must never be written down: the call's keys and header values,
    and the environment's keys and tokens (LiteLLM reads OPENAI_API_KEY & co. there, and a
    provider's error may quote the key it was sent)."""
    secrets = [str(v) for k, v in kwargs.items() if k in SECRET_KEYS and v]
    for key in HEADER_KEYS:
        headers = kwargs.get(key)
        if isinstance(headers, Mapping):
            secrets.extend(str(v) for v in headers.values() if v)
    secrets.extend(
        value for name, value in os.environ.items() if len(value) >= 8 and _secret_env_name(name)
    )
    return [s for s in secrets if len(s) >= 4]


@functools.lru_cache(maxsize=4096)
def _secret_env_name(name: str) -> bool:
    """Whether an environment variable's name looks like a key's: kept per name (the
    values are read afresh every call), as every call scans the environment."""
    return _SECRET_ENV_NAME.search(name.upper()) is not None


def redact(text: str, secrets: Iterable[str]) -> str:
    for secret in secrets:
        text = text.replace(secret, "[REDACTED]")
    return text


def redact_value(value: Any, secrets: Iterable[str]) -> Any:
    """`value` with every secret replaced in each string it holds (dicts and lists walked)."""
    secrets = list(secrets)
    if isinstance(value, str):
        return redact(value, secrets)
    if isinstance(value, dict):
        return {k: redact_value(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(redact_value(v, secrets) for v in value)
    return value


def hide_secrets(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """`kwargs` with every secret (an API key, a header value) wrapped in `SecretStr`."""
    hidden: dict[str, Any] = {}
    for key, value in kwargs.items():
        if key in SECRET_KEYS and isinstance(value, str):
            hidden[key] = SecretStr(value)
        elif key in HEADER_KEYS and isinstance(value, Mapping):
            hidden[key] = {k: SecretStr(v) if isinstance(v, str) else v for k, v in value.items()}
        else:
            hidden[key] = value
    return hidden


def reveal_secrets(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The settings a call sends: every `SecretStr` of `hide_secrets` unwrapped."""
    revealed: dict[str, Any] = {}
    for key, value in kwargs.items():
        if isinstance(value, SecretStr):
            revealed[key] = value.get_secret_value()
        elif key in HEADER_KEYS and isinstance(value, Mapping):
            revealed[key] = {
                k: v.get_secret_value() if isinstance(v, SecretStr) else v for k, v in value.items()
            }
        else:
            revealed[key] = value
    return revealed


def without_secrets(message: AIMessage, secrets: list[str]) -> AIMessage:
    """`message` with every secret replaced in its text, tool-call arguments and extra
    fields: a provider that echoes a key or a header must not have it recorded, traced, or
    run in an agent's shell."""
    fields = ("content", "tool_calls", "invalid_tool_calls", "additional_kwargs")
    update = {name: redact_value(getattr(message, name), secrets) for name in fields}
    if all(update[name] == getattr(message, name) for name in fields):
        return message  # nothing to hide: no copy
    return message.model_copy(update=update)
