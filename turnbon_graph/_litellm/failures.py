"""How a LiteLLM call failed: retryable or not, a missing or refused key, the
Retry-After it asked, and the redacted stand-in for an error whose text held a secret.
"""

from __future__ import annotations

import asyncio
import email.utils
import re
import time
from collections.abc import Iterable, Mapping
from typing import Any

from turnbon_graph._secrets import redact, redact_value, secret_values
from turnbon_graph.errors import CallFailure, CredentialsError

_RETRYABLE_STATUS = frozenset({408, 409, 429})


def is_retryable(exc: BaseException) -> bool:
    """Rate limits, server errors, timeouts and dropped connections are worth another try."""
    from litellm.exceptions import APIConnectionError, Timeout

    if isinstance(exc, Timeout | APIConnectionError | asyncio.TimeoutError):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in _RETRYABLE_STATUS or status >= 500)


MISSING_KEY_TEXTS = ("Missing credentials", "api_key client option must be set")
"""What LiteLLM's and the OpenAI SDK's errors say when a call had no key at all (LiteLLM
raises them as an InternalServerError, a 500, which would otherwise be retried)."""


_KEY_NAME = re.compile(r"\b[A-Z][A-Z0-9_]*_API_KEY\b")


def key_error(
    litellm: Any, exc: BaseException, kwargs: Mapping[str, Any], *, routed: bool = False
) -> CredentialsError | None:
    """A `CredentialsError` for a call that surely failed for its key: LiteLLM's
    `AuthenticationError` (a 401), or its messages for a call made with no key at all
    (`MISSING_KEY_TEXTS`); None for any other failure. It names the variable the
    provider reads (LiteLLM's `validate_environment`, else the names the error gives)
    and what to do; the provider's own words follow, every secret redacted."""
    from litellm.exceptions import AuthenticationError

    text = str(exc)
    missing = any(words in text for words in MISSING_KEY_TEXTS)
    if not missing and not isinstance(exc, AuthenticationError):
        return None
    model = str(kwargs.get("model"))
    said = redact(describe_error(exc), secret_values(kwargs))
    if routed:
        return CredentialsError(
            f"a deployment of the Router's model group {model} has no key, or its key was "
            f"refused: give each deployment its api_key (litellm_params) ({said})"
        )
    given = bool(kwargs.get("api_key"))
    unset: list[str] = []
    if not given:
        try:
            found = litellm.validate_environment(model=model, api_base=kwargs.get("api_base"))
            unset = list(found.get("missing_keys") or [])
        except Exception:  # a model LiteLLM cannot look up: the error's own words stand
            unset = []
    named = list(dict.fromkeys(_KEY_NAME.findall(text)))
    if missing or unset:
        variable = " or ".join(unset or named) or "its provider's API key variable"
        return CredentialsError(
            f"the model {model} needs {variable}, which is not set: export it, or pass "
            "api_key in completion_kwargs (a server of your own that checks no key takes "
            f"any value) ({said})"
        )
    which = (
        "the api_key passed"
        if given
        else " or ".join(named) or "the key it read from the environment"
    )
    return CredentialsError(
        f"the provider refused the key of {model}: check {which} (a key of this provider "
        f"and endpoint, not revoked), then run again ({said})"
    )


def retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds a Retry-After (or retry-after-ms) header on the error's response asks for."""
    for headers in _headers_of(exc):
        lowered = {str(k).lower(): str(v) for k, v in headers.items()}
        if "retry-after-ms" in lowered:
            try:
                return max(0.0, float(lowered["retry-after-ms"]) / 1000)
            except ValueError:
                pass
        value = lowered.get("retry-after")
        if value is None:
            continue
        try:
            return max(0.0, float(value))
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value) if value else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    return None


def _headers_of(exc: BaseException) -> Iterable[Mapping[str, Any]]:
    headers = getattr(exc, "litellm_response_headers", None)
    if headers:
        yield headers
    response = getattr(exc, "response", None)
    if response is not None and getattr(response, "headers", None):
        yield response.headers
    headers = getattr(exc, "headers", None)
    if isinstance(headers, Mapping) and headers:
        yield headers


def redact_error(exc: Exception, secrets: list[str]) -> Exception:
    """The same error if no secret is in its text or its chain (`__cause__`,
    `__context__`); else a `CallFailedError` with the cleaned text, to be raised with no
    chain at all."""
    chain: list[BaseException] = []
    link: BaseException | None = exc
    while link is not None and link not in chain:
        chain.append(link)
        link = link.__cause__ or link.__context__
    if not any(secret in str(e) or secret in repr(e) for e in chain for secret in secrets):
        return exc
    return CallFailedError(
        f"{type(exc).__name__}: {redact(str(exc), secrets)}",
        status_code=getattr(exc, "status_code", None),
        retry_after=retry_after_seconds(exc),
        error=redact_value(error_object(exc), secrets),
        timed_out=_timed_out(exc),
    )


class CallFailedError(Exception):
    """Stands in for a provider error whose message had to be redacted (or that was
    not waited out): its status, Retry-After, error object and whether it timed out are
    the original's."""

    def __init__(
        self,
        message: str,
        status_code: int | None = None,
        *,
        retry_after: float | None = None,
        error: dict[str, Any] | None = None,
        timed_out: bool = False,
    ) -> None:
        super().__init__(message)
        self.status_code = status_code
        self.retry_after = retry_after
        self.error = error
        self.timed_out = timed_out


def call_failure(exc: BaseException, secrets: Iterable[str]) -> CallFailure:
    """How a call failed, for a door to answer with (`AllCandidatesFailedError.status`):
    the upstream's status (None for a dropped connection), its own message and error
    object, the Retry-After it asked, whether it timed out; every secret redacted."""
    secrets = list(secrets)
    if isinstance(exc, CallFailedError):
        error, retry_after, timed_out = exc.error, exc.retry_after, exc.timed_out
    else:
        error = redact_value(error_object(exc), secrets)
        retry_after, timed_out = retry_after_seconds(exc), _timed_out(exc)
    said = error.get("message") if error else None
    message = said if isinstance(said, str) and said else describe_error(exc)
    status = getattr(exc, "status_code", None)
    if not isinstance(status, int) or _dropped(exc):
        status = None
    return CallFailure(
        status=status,
        message=redact(message, secrets),
        retry_after=retry_after,
        timed_out=timed_out,
        error=error,
    )


def error_object(exc: BaseException) -> dict[str, Any] | None:
    """The upstream's OpenAI-shaped error object: `{"message", "type", "param", "code"}`
    (what the OpenAI SDK keeps as the error's `body`, and LiteLLM for some statuses; for
    the others it is in the reply LiteLLM keeps as its `response`)."""
    body = getattr(exc, "body", None)
    if not isinstance(body, Mapping):
        response: Any = getattr(exc, "response", None)
        try:
            body = response.json()
        except Exception:  # no reply, an unread stream, or not JSON
            return None
    if isinstance(body, Mapping) and isinstance(body.get("error"), str):
        return {"message": body["error"]}
    if isinstance(body, Mapping) and isinstance(body.get("error"), Mapping):
        body = body["error"]
    return dict(body) if isinstance(body, Mapping) else None


def _timed_out(exc: BaseException) -> bool:
    from litellm.exceptions import Timeout

    return isinstance(exc, Timeout | asyncio.TimeoutError)


def _dropped(exc: BaseException) -> bool:
    """No reply at all (LiteLLM gives a dropped connection a status of 500)."""
    from litellm.exceptions import APIConnectionError

    return isinstance(exc, APIConnectionError)


def describe_error(exc: BaseException) -> str:
    """A one-line description for records: class and message, no traceback."""
    if isinstance(exc, CallFailedError):
        return str(exc)
    text = " ".join(str(exc).split()) or repr(exc)
    return f"{type(exc).__name__}: {text[:500]}"
