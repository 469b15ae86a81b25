"""Calling LiteLLM robustly: concurrency cap, rate limit, timeout, retries with backoff.

The generator and the selector share one client per graph (a selector instance is
bound to it unless given a client of its own), so `max_concurrency` and `rate_limit`
bound every call the turn makes. LiteLLM is imported on the first call, off the event
loop (`load_litellm`), never at import time (it costs seconds).
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import importlib
import os
import random
import re
import threading
import time
import weakref
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Protocol

from asyncio_throttle import Throttler

from turnbon_graph.errors import CallFailure, ConfigurationError, CredentialsError
from turnbon_graph.litellm_calls import is_quiet, price_call, quiet_call
from turnbon_graph.records import Usage

_RETRYABLE_STATUS = frozenset({408, 409, 429})
# Keys whose values are secrets: they reach the provider but never a record or an error text.
_SECRET_ENV_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD")
SECRET_KEYS = frozenset({"api_key", "azure_ad_token", "aws_secret_access_key", "aws_session_token"})
HEADER_KEYS = ("extra_headers", "headers")
"""Call settings whose values are header maps: every header value is a secret."""


@dataclass
class CallResult:
    """One completed call: the raw LiteLLM response and what it cost."""

    response: Any
    usage: Usage
    latency_s: float
    attempts: int
    deployment: str | None = None
    """The Router deployment that served a routed call (its `model_info` id)."""


class CompletionClient(Protocol):
    """What a model-calling selector calls through: `LiteLLMClient`, or a chat model's
    (`chat_client.ChatModelClient`)."""

    async def complete(self, **kwargs: Any) -> CallResult: ...


class SharedLimit(Protocol):
    """A limit shared with other processes (`bench.limits.ClusterLimit` on Ray): its
    `slot()` is held inside a client's own slot and rate token for every call."""

    def slot(self) -> AbstractAsyncContextManager[None]: ...


_NO_LIMIT: AbstractAsyncContextManager[None] = nullcontext()


class LiteLLMClient:
    """Makes `litellm.acompletion` calls within the configured limits.

    Retries 408/409/429/5xx, timeouts and connection errors with exponential backoff
    and jitter, waiting at least as long as a Retry-After header asks. A Retry-After over
    `max_backoff` (60 s) is not waited out: that call fails at once, recorded like any
    failure, so one throttled call never holds a turn for minutes. Other errors (bad
    request) fail at once; a missing or refused key (`key_error`) fails at once as a
    `ConfigurationError` naming the variable to set, whatever status LiteLLM gave it.

    With a `router` (a `litellm.Router`), a call whose model names one of its model groups
    goes through `router.acompletion` instead, and the Router retries it: its load
    balancing, retries, fallbacks and cooldowns pick and re-pick deployments, so this
    client makes that call once (its limits still hold) and records which deployment
    served it. Calls to other model ids are ours to retry, as above.
    """

    def __init__(
        self,
        *,
        max_concurrency: int | None = None,
        rate_limit: float | None = None,
        timeout: float | None = None,
        max_retries: int = 2,
        backoff_base: float = 0.5,
        max_backoff: float = 60.0,
        seed: int | None = None,
        router: Any = None,
        shared_limit: SharedLimit | None = None,
    ) -> None:
        if max_concurrency is not None and max_concurrency < 1:
            raise ConfigurationError(f"max_concurrency must be >= 1 or None, got {max_concurrency}")
        if rate_limit is not None and rate_limit <= 0:
            raise ConfigurationError(f"rate_limit must be > 0 requests/second, got {rate_limit}")
        if timeout is not None and timeout <= 0:
            raise ConfigurationError(f"timeout must be > 0 seconds or None, got {timeout}")
        if max_retries < 0:
            raise ConfigurationError(f"max_retries must be >= 0, got {max_retries}")
        self.max_concurrency = max_concurrency
        self.rate_limit = rate_limit
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.max_backoff = max_backoff
        self.router = router
        # A limit shared with other processes (`bench.limits.ClusterLimit`: its `slot()`,
        # an async context manager, is held inside this client's own for every call).
        self.shared_limit = shared_limit
        # The Router's model groups, read once: a model id in them is routed.
        self._groups = router_groups(router) if router is not None else frozenset()
        self._throttler = _throttler(rate_limit)
        self._jitter = random.Random(seed)
        # asyncio.Semaphore binds to the loop it first waits on; sync entry points
        # run a fresh loop per call, so keep one semaphore per loop.
        self._semaphores: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Semaphore]
        self._semaphores = weakref.WeakKeyDictionary()

    def _semaphore(self) -> asyncio.Semaphore | None:
        if self.max_concurrency is None:
            return None
        loop = asyncio.get_running_loop()
        semaphore = self._semaphores.get(loop)
        if semaphore is None:
            semaphore = self._semaphores[loop] = asyncio.Semaphore(self.max_concurrency)
        return semaphore

    async def complete(self, **kwargs: Any) -> CallResult:
        """One chat completion, retried as configured. Raises the last error when retries
        run out; its message has every secret from `kwargs` redacted."""
        litellm: Any = await load_litellm()
        # LiteLLM prints a help banner for every failed call; a turn records its failures
        # (and retries them), so the banner is noise here.
        litellm.suppress_debug_info = True
        kwargs.setdefault("timeout", self.timeout)
        if kwargs["timeout"] is None:
            del kwargs["timeout"]
        routed = kwargs.get("model") in self._groups
        if routed:
            call, retries = self.router.acompletion, 0  # the Router retries and falls back
        else:
            # Retries are ours (with Retry-After and accounting); stop LiteLLM's and the SDK's.
            kwargs["num_retries"] = 0
            kwargs["max_retries"] = 0
            call, retries = litellm.acompletion, self.max_retries
        # Quiet: nobody listens to LiteLLM's per-call logging, so it is switched off for this
        # call and the call is priced here instead (`price_call`); never for a routed call.
        quiet = not routed and is_quiet(litellm, kwargs)
        started = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            failure: Exception | None = None
            try:
                async with self.slot():
                    response = await call(**(quiet_call(litellm, kwargs) if quiet else kwargs))
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                # A missing or refused key fails every call alike: never retried.
                failure = key_error(litellm, exc, kwargs, routed=routed)
                if failure is None:
                    wait = self._backoff(attempt, exc) if is_retryable(exc) else None
                    if attempt <= retries and wait is not None:
                        await asyncio.sleep(wait)
                        continue
                    failure = redact_error(exc, secret_values(kwargs))
                    asked = retry_after_seconds(exc)
                    if asked is not None and asked > self.max_backoff:
                        failure = CallFailedError(
                            f"{describe_error(failure)} (the provider asked to retry after "
                            f"{asked:g} s, longer than the {self.max_backoff:g} s a call waits; "
                            "lower rate_limit or max_concurrency to stay under the limit)",
                            status_code=getattr(exc, "status_code", None),
                            retry_after=asked,
                            error=redact_value(_error_object(exc), secret_values(kwargs)),
                        )
                    elif failure is exc:
                        raise
            if failure is not None:
                # Raised here, outside the `except`, so that the original (whose text or
                # chain holds a secret) is neither its __cause__ nor its __context__.
                raise failure
            hidden = getattr(response, "_hidden_params", None) or {}
            usage = usage_of(response)
            if quiet:
                usage.cost_usd = price_call(litellm, kwargs["model"], response)
            return CallResult(
                response=response,
                usage=usage,
                latency_s=time.monotonic() - started,
                attempts=attempt,
                deployment=hidden.get("model_id") if routed else None,
            )

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        """Holds one of the `max_concurrency` places for a call, once the rate limit lets
        it start. Calls made some other way (an agent's own model, in the middleware) take
        a slot too, so the limits bound them with the rest."""
        semaphore = self._semaphore()
        async with semaphore if semaphore is not None else _NO_LIMIT:
            if self._throttler is not None:
                await self._throttler.acquire()
            async with self._shared_slot():
                yield

    def _shared_slot(self) -> AbstractAsyncContextManager[None]:
        """The `shared_limit`'s slot, when there is one."""
        return self.shared_limit.slot() if self.shared_limit is not None else _NO_LIMIT

    def _backoff(self, attempt: int, exc: BaseException) -> float | None:
        """Seconds to wait before the next attempt: exponential with jitter, at least what a
        Retry-After asks; None when it asks for more than `max_backoff` (then the call
        fails now, rather than hold the turn longer than that)."""
        delay: float = self.backoff_base * 2 ** (attempt - 1) * (0.5 + self._jitter.random() / 2)
        asked = retry_after_seconds(exc)
        if asked is not None:
            if asked > self.max_backoff:
                return None
            delay = max(delay, asked)
        return min(delay, self.max_backoff)


_litellm: ModuleType | None = None
_importing = threading.Lock()


def _import_litellm() -> ModuleType:
    global _litellm
    with _importing:  # one import at a time, so none sees a half-initialised module
        if _litellm is None:
            use_bundled_price_map()
            _litellm = importlib.import_module("litellm")
    return _litellm


def import_litellm() -> ModuleType:
    """LiteLLM, imported here and now if it is not yet (with the bundled price map,
    `use_bundled_price_map`); for code off any event loop (`load_litellm` on one)."""
    return _litellm if _litellm is not None else _import_litellm()


def router_groups(router: Any) -> frozenset[str]:
    """The model names a `litellm.Router` routes: `registry().names()` (what the
    deprecated `get_model_names` returned), or `get_model_names()` on a Router that
    predates the registry."""
    registry = getattr(router, "registry", None)
    if callable(registry):
        return frozenset(registry().names())
    return frozenset(router.get_model_names())


def use_bundled_price_map() -> None:
    """Makes LiteLLM read the price map bundled with it instead of fetching the newest one
    from the internet when it is imported (a network call at import stalls offline and
    sandboxed runs). A choice made in the environment stands: set
    `LITELLM_LOCAL_MODEL_COST_MAP=False` to let LiteLLM fetch it."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


async def load_litellm() -> ModuleType:
    """LiteLLM, imported off the event loop the first time. Importing it takes seconds and
    makes blocking calls (files, os.getcwd) that would stall every coroutine of the loop,
    and that LangGraph Server refuses; afterwards a plain `import litellm` is free."""
    if _litellm is not None:
        return _litellm
    return await asyncio.to_thread(_import_litellm)


RESERVED_KEYS = ("model", "messages", "tools", "n")
"""Call arguments the library sets itself; user-given completion settings may not."""


def check_reserved(kwargs: Mapping[str, Any], where: str, setter: str) -> None:
    """Refuses completion settings that would override what `setter` sets itself."""
    for reserved in RESERVED_KEYS:
        if reserved in kwargs:
            raise ConfigurationError(f"{where} may not set {reserved!r}: {setter} sets it")


def _throttler(rate_limit: float | None) -> Throttler | None:
    if rate_limit is None:
        return None
    if rate_limit >= 1 and float(rate_limit).is_integer():
        return Throttler(rate_limit=int(rate_limit), period=1.0)
    # A fractional rate: one request per 1/rate seconds.
    return Throttler(rate_limit=1, period=1.0 / rate_limit)


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


def usage_of(response: Any) -> Usage:
    """Usage of one call as the provider reported it, with cost where LiteLLM prices the model."""
    usage = getattr(response, "usage", None)
    details = getattr(usage, "completion_tokens_details", None)
    prompt_details = getattr(usage, "prompt_tokens_details", None)
    # LiteLLM has already run `completion_cost` on the response and kept the answer here;
    # calling it again for an unpriced model only prints a warning and raises.
    hidden = getattr(response, "_hidden_params", None) or {}
    cost = hidden.get("response_cost")
    return Usage(
        calls=1,
        prompt_tokens=int(getattr(usage, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(usage, "completion_tokens", 0) or 0),
        reasoning_tokens=int(getattr(details, "reasoning_tokens", 0) or 0),
        cached_tokens=int(getattr(prompt_details, "cached_tokens", 0) or 0),
        cost_usd=float(cost) if cost is not None else None,
    )


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
        error=redact_value(_error_object(exc), secrets),
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
        error = redact_value(_error_object(exc), secrets)
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


def _error_object(exc: BaseException) -> dict[str, Any] | None:
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
