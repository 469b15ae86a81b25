"""Errors of the BFCL integration; each says what to do."""

from __future__ import annotations

from turnbon_graph._extras import install_hint
from turnbon_graph.errors import TurnBoNError

BFCL_EVAL_VERSION = "2026.3.23"
"""The bfcl-eval release this integration was written and tested against."""

SETUP_COMMAND = "make setup-bfcl (in a clone of turnbon-graph), or " + install_hint(
    "bfcl", then=f"pip install --no-deps bfcl-eval=={BFCL_EVAL_VERSION}"
)


class BFCLNotInstalledError(TurnBoNError, ImportError):
    """bfcl-eval, or one of the few modules its multi-turn code needs, is missing."""

    def __init__(self, missing: str) -> None:
        super().__init__(
            f"The BFCL environment needs the bfcl-eval package, but {missing!r} cannot be "
            f"imported. Install it with: {SETUP_COMMAND}"
        )


class BFCLToolContextError(TurnBoNError, RuntimeError):
    """A BFCL tool ran outside a LangGraph `ToolNode` over a `messages` state."""


class ReplayError(TurnBoNError, ValueError):
    """The ground-truth replay got a conversation it has no script for."""
