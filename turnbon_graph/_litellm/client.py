"""Calling LiteLLM robustly: concurrency cap, rate limit, timeout, retries with backoff.

The generator and the selector share one client per graph (a selector instance is
bound to it unless given a client of its own), so `max_concurrency` and `rate_limit`
bound every call the turn makes. LiteLLM is imported on the first call, off the event
loop (`load_litellm`), never at import time (it costs seconds).
"""

from __future__ import annotations

import asyncio
import random
import time
import weakref
from collections.abc import AsyncIterator, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext
from dataclasses import dataclass
from typing import Any, Protocol

from asyncio_throttle import Throttler

from turnbon_graph._litellm.failures import (
    CallFailedError,
    describe_error,
    error_object,
    is_retryable,
    key_error,
    redact_error,
    retry_after_seconds,
)
from turnbon_graph._litellm.loading import load_litellm
from turnbon_graph._litellm.quiet import is_quiet, price_call, quiet_call
from turnbon_graph._secrets import redact_value, secret_values
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import Usage


@dataclass
class CallResult:
    """One completed call: the raw LiteLLM response and what it cost."""

    response: Any
    """LiteLLM's `ModelResponse`, as it returned it."""
    usage: Usage
    """The call's tokens, and its cost where LiteLLM prices the model."""
    latency_s: float
    """Seconds from the call's start to its response: waiting for a slot, the rate limit
    and retries included."""
    attempts: int
    """Attempts it took (1 when the first succeeded)."""
    deployment: str | None = None
    """The Router deployment that served a routed call (its `model_info` id)."""


class CompletionClient(Protocol):
    """What a model-calling selector calls through: `LiteLLMClient`, or a chat model's
    (`_litellm.chat_model.ChatModelClient`)."""

    async def complete(self, **kwargs: Any) -> CallResult:
        """One chat completion.

        Args:
            **kwargs: `litellm.acompletion`'s arguments: `model`, `messages`, and any
                completion settings (`response_format`, `temperature`, ...).

        Returns:
            The response, with its usage and latency.
        """
        ...


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
        """A client with its own limits; a turn's options make one (`TurnConfig`'s
        `max_concurrency`, `rate_limit`, `timeout`, `max_retries`, `seed`, `router`).

        Args:
            max_concurrency: the most calls in flight at once; None: no cap.
            rate_limit: requests per second the calls may start at; None: no limit.
            timeout: seconds per call attempt; None: LiteLLM's own.
            max_retries: retries of a retryable failure after the first attempt.
            backoff_base: seconds before the first retry, doubled each retry (with
                jitter), at least what a Retry-After asks.
            max_backoff: the longest wait before a retry; a Retry-After over it fails
                the call at once.
            seed: makes the backoff's jitter reproducible.
            router: a `litellm.Router`; calls to its model groups go through it, and it
                retries them.
            shared_limit: a limit shared with other processes (`bench.limits.ClusterLimit`
                on Ray), held inside this client's own for every call.

        Raises:
            ConfigurationError: a limit is out of range (`max_concurrency` < 1,
                `rate_limit` or `timeout` <= 0, `max_retries` < 0).
        """
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
        self._throttler = throttler(rate_limit)
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
        """One chat completion, retried as configured.

        Args:
            **kwargs: `litellm.acompletion`'s arguments: `model`, `messages`, and any
                completion settings; a `timeout` here overrides the client's.

        Returns:
            The response, with its usage (priced where LiteLLM prices the model), latency,
                attempts, and the Router deployment that served a routed call.

        Raises:
            ConfigurationError: the provider's key is missing or refused (it names the
                variable to set); never retried.
            Exception: LiteLLM's error of the last attempt when retries run out, or at
                once for one not worth retrying; its message has every secret from
                `kwargs` redacted (a `CallFailedError` stands in for one that had to be).
        """
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
                            error=redact_value(error_object(exc), secret_values(kwargs)),
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
        a slot too, so the limits bound them with the rest.

        Yields:
            Nothing: the call is made inside `async with client.slot():`.
        """
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


def router_groups(router: Any) -> frozenset[str]:
    """The model names a `litellm.Router` routes: `registry().names()` (what the
    deprecated `get_model_names` returned), or `get_model_names()` on a Router that
    predates the registry."""
    registry = getattr(router, "registry", None)
    if callable(registry):
        return frozenset(registry().names())
    return frozenset(router.get_model_names())


RESERVED_KEYS = ("model", "messages", "tools", "n")
"""Call arguments the library sets itself; user-given completion settings may not."""


def check_reserved(kwargs: Mapping[str, Any], where: str, setter: str) -> None:
    """Refuses completion settings that would override what `setter` sets itself."""
    for reserved in RESERVED_KEYS:
        if reserved in kwargs:
            raise ConfigurationError(f"{where} may not set {reserved!r}: {setter} sets it")


def throttler(rate_limit: float | None) -> Throttler | None:
    if rate_limit is None:
        return None
    if rate_limit >= 1 and float(rate_limit).is_integer():
        return Throttler(rate_limit=int(rate_limit), period=1.0)
    # A fractional rate: one request per 1/rate seconds.
    return Throttler(rate_limit=1, period=1.0 / rate_limit)


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
