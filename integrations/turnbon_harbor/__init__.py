"""turnbon-harbor: a Turn-BoN agent for Harbor, the harness that runs Terminal-Bench 2.

`TurnBoNAgent` is a Harbor agent (`harbor run -a turnbon_harbor:TurnBoNAgent -m MODEL
--ak n=4 --ak selector=...`): Terminus-2's shell loop in the task's container, each turn
N candidate answers and a selector's choice (`turnbon_graph.TurnEngine`). Harbor needs
Python 3.12 or newer; this package is written against Harbor `HARBOR_VERSION`.
`turnbon_harbor.options` (the `--ak` checks) imports no Harbor; the agent does, on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

HARBOR_VERSION = "0.26.0"
"""The Harbor release this agent was written and tested against (the `harbor` extra pins it)."""

if TYPE_CHECKING:
    from turnbon_harbor.agent import TurnBoNAgent

__all__ = ["HARBOR_VERSION", "TurnBoNAgent"]


def __getattr__(name: str) -> Any:
    """`TurnBoNAgent` on first use, so that `turnbon_harbor.options` works without Harbor."""
    if name == "TurnBoNAgent":
        # (turnbon_graph, imported first, has LiteLLM read its bundled price map: Harbor
        # imports LiteLLM, which would otherwise fetch one)
        from turnbon_graph._extras import install_hint

        try:
            from turnbon_harbor.agent import TurnBoNAgent
        except ModuleNotFoundError as exc:
            if exc.name is None or exc.name.partition(".")[0] != "harbor":
                raise
            raise ModuleNotFoundError(
                f"turnbon_harbor.TurnBoNAgent needs Harbor {HARBOR_VERSION}, which needs "
                f"Python 3.12 or newer: in such a venv, {install_hint('harbor')}",
                name="harbor",
            ) from exc
        return TurnBoNAgent
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
