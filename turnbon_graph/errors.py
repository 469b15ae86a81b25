"""One exception hierarchy: every message says what failed and what to do about it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


class TurnBoNError(Exception):
    """Base class of every error turnbon-graph raises on purpose."""


class ConfigurationError(TurnBoNError, ValueError):
    """An argument given to a factory, selector or chat model is invalid."""


class RequestFieldError(ConfigurationError):
    """A field of a chat-completions request body has a value OpenAI would refuse, or one
    a turn cannot honour. `param` names the field (OpenAI's error `param`)."""

    def __init__(self, param: str, message: str) -> None:
        self.param = param
        super().__init__(message)


class NotStoredError(ConfigurationError):
    """A request names a stored response or item the server does not have (never
    stored, expired or deleted). `param`, `status` and `code` are OpenAI's for the same
    miss (`param` None for an id in the path), so clients that replay the whole
    conversation on OpenAI's "not found" do so here."""

    def __init__(self, param: str | None, message: str, *, status: int, code: str | None) -> None:
        self.param = param
        self.status = status
        self.code = code
        super().__init__(message)


class CredentialsError(ConfigurationError):
    """A model call failed for its key: none was set, or the provider refused it. Never
    retried; the message names the variable or the key to check."""


@dataclass(frozen=True)
class CallFailure:
    """How one candidate's call failed for good (after its retries), as a door answers
    it: the upstream's HTTP status (None when no reply came: a dropped connection), its
    own message and error object with keys redacted, and the Retry-After it asked."""

    status: int | None
    message: str
    retry_after: float | None = None
    timed_out: bool = False
    error: dict[str, Any] | None = None
    """The upstream's OpenAI-shaped error object (`type`, `param`, `code`), if it sent one."""


GATEWAY_ERROR = 502
GATEWAY_TIMEOUT = 504


class AllCandidatesFailedError(TurnBoNError):
    """Every generator call of a turn failed for good, so there is nothing to select.

    No message is appended to the state when this is raised. `failures` holds how each
    candidate's call failed (None where that is unknown); `status`, `retry_after` and
    `upstream` say what a door that speaks HTTP answers with.
    """

    def __init__(
        self,
        model: str,
        n: int,
        last_error: str,
        failures: Sequence[CallFailure | None] = (),
    ) -> None:
        """The error of a turn whose `n` calls to `model` all failed.

        Args:
            model: the model(s) the calls went to, as the message names them.
            n: how many candidate calls were made.
            last_error: the last failure's description, secrets redacted.
            failures: how each call failed, in candidate order (None where unknown).
        """
        self.model = model
        self.n = n
        self.last_error = last_error
        self.failures = tuple(failures)
        super().__init__(
            f"All {n} candidate call(s) to {model!r} failed; last error: {last_error}. "
            "Check the model id, api_base and credentials, or raise `timeout`/`max_retries` "
            "if the provider is slow or rate-limited."
        )

    @property
    def upstream(self) -> CallFailure | None:
        """The one client error (4xx) every candidate got, or None: the upstream refused
        the request itself, so its status and words are the caller's answer."""
        known = [f for f in self.failures if f is not None]
        if len(known) != self.n or not known or known[0].timed_out:
            return None
        status = known[0].status
        if status is None or not 400 <= status < 500:
            return None
        if any(f.status != status or f.timed_out for f in known):
            return None  # a mixed set: nothing one status says
        return known[0]

    @property
    def status(self) -> int:
        """The HTTP status for the turn: the upstream's, when every candidate got the
        same 4xx; 504 when every call timed out; else 502 (5xx, dropped connections, or a
        mixed set of failures)."""
        if (upstream := self.upstream) is not None and upstream.status is not None:
            return upstream.status
        known = [f for f in self.failures if f is not None]
        if len(known) == self.n and known and all(f.timed_out for f in known):
            return GATEWAY_TIMEOUT
        return GATEWAY_ERROR

    @property
    def retry_after(self) -> float | None:
        """The longest Retry-After the candidates' errors asked for, when the turn's
        status is a 429 (else None)."""
        if self.status != 429:
            return None
        asked = [f.retry_after for f in self.failures if f is not None]
        return max((a for a in asked if a is not None), default=None)


class ResourceLimitError(TurnBoNError):
    """An episode went over a budget its environment enforces (memory, storage): it
    ends with the outcome `resource_limit`, not as an agent error."""
