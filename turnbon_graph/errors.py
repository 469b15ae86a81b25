"""One exception hierarchy: every message says what failed and what to do about it."""

from __future__ import annotations


class TurnBoNError(Exception):
    """Base class of every error turnbon-graph raises on purpose."""


class ConfigurationError(TurnBoNError, ValueError):
    """An argument given to a factory, selector or chat model is invalid."""


class CredentialsError(ConfigurationError):
    """A model call failed for its key: none was set, or the provider refused it. Never
    retried; the message names the variable or the key to check."""


class AllCandidatesFailedError(TurnBoNError):
    """Every generator call of a turn failed for good, so there is nothing to select.

    No message is appended to the state when this is raised.
    """

    def __init__(self, model: str, n: int, last_error: str) -> None:
        self.model = model
        self.n = n
        self.last_error = last_error
        super().__init__(
            f"All {n} candidate call(s) to {model!r} failed; last error: {last_error}. "
            "Check the model id, api_base and credentials, or raise `timeout`/`max_retries` "
            "if the provider is slow or rate-limited."
        )


class ResourceLimitError(TurnBoNError):
    """An episode went over a budget its environment enforces (memory, storage): it
    ends with the outcome `resource_limit`, not as an agent error."""
