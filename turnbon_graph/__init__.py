"""turnbon-graph: turn-level best-of-N sampling for LangGraph agents.

At every turn a generator proposes N candidate actions, a selector picks one, and only
that one is executed. The README and the docs site (docs/) show how to use it.

Names are imported on first use (PEP 562), so `turnbon --help` and light tools do not
pay for importing LangGraph; `from turnbon_graph import X` works as usual.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

try:  # declared once, in pyproject.toml: the installed distribution's metadata says it
    __version__ = version("turnbon-graph")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from turnbon_graph.candidates import Candidate, canonical_action
    from turnbon_graph.chat import ChatTurnBoN
    from turnbon_graph.config import TurnConfig
    from turnbon_graph.errors import (
        AllCandidatesFailedError,
        ConfigurationError,
        CredentialsError,
        TurnBoNError,
    )
    from turnbon_graph.generate import ModelSpec
    from turnbon_graph.graph import TurnBoNState, create_turnbon_agent, create_turnbon_graph
    from turnbon_graph.middleware import TurnBoNMiddleware
    from turnbon_graph.records import (
        CandidateRecord,
        JSONLTraceSink,
        TraceSink,
        TurnRecord,
        Usage,
        UsageSplit,
    )
    from turnbon_graph.sampling import AdaptiveN, Budget, EarlyCommit
    from turnbon_graph.selectors import (
        EnsembleSelector,
        FirstSelector,
        FusionSelector,
        HumanSelector,
        LLMSelector,
        MajorityVoteSelector,
        RandomSelector,
        RefineSelector,
        ScoringSelector,
        Selection,
        Selector,
        TournamentSelector,
    )
    from turnbon_graph.turn import TurnEngine, turn_record

_SOURCES = {
    "Candidate": "candidates",
    "canonical_action": "candidates",
    "ChatTurnBoN": "chat",
    "TurnConfig": "config",
    "AllCandidatesFailedError": "errors",
    "ConfigurationError": "errors",
    "CredentialsError": "errors",
    "TurnBoNError": "errors",
    "ModelSpec": "generate",
    "TurnBoNState": "graph",
    "create_turnbon_agent": "graph",
    "create_turnbon_graph": "graph",
    "TurnBoNMiddleware": "middleware",
    "CandidateRecord": "records",
    "JSONLTraceSink": "records",
    "TraceSink": "records",
    "TurnRecord": "records",
    "Usage": "records",
    "UsageSplit": "records",
    "EnsembleSelector": "selectors",
    "FirstSelector": "selectors",
    "FusionSelector": "selectors",
    "HumanSelector": "selectors",
    "LLMSelector": "selectors",
    "MajorityVoteSelector": "selectors",
    "RandomSelector": "selectors",
    "RefineSelector": "selectors",
    "ScoringSelector": "selectors",
    "Selection": "selectors",
    "Selector": "selectors",
    "TournamentSelector": "selectors",
    "AdaptiveN": "sampling",
    "Budget": "sampling",
    "EarlyCommit": "sampling",
    "TurnEngine": "turn",
    "turn_record": "turn",
}

__all__ = [
    "AdaptiveN",
    "AllCandidatesFailedError",
    "Budget",
    "Candidate",
    "CandidateRecord",
    "ChatTurnBoN",
    "ConfigurationError",
    "CredentialsError",
    "EarlyCommit",
    "EnsembleSelector",
    "FirstSelector",
    "FusionSelector",
    "HumanSelector",
    "JSONLTraceSink",
    "LLMSelector",
    "MajorityVoteSelector",
    "ModelSpec",
    "RandomSelector",
    "RefineSelector",
    "ScoringSelector",
    "Selection",
    "Selector",
    "TournamentSelector",
    "TraceSink",
    "TurnBoNError",
    "TurnBoNMiddleware",
    "TurnBoNState",
    "TurnConfig",
    "TurnEngine",
    "TurnRecord",
    "Usage",
    "UsageSplit",
    "canonical_action",
    "create_turnbon_agent",
    "create_turnbon_graph",
    "turn_record",
]


def __getattr__(name: str) -> Any:
    module = _SOURCES.get(name)
    if module is None:
        raise AttributeError(f"module 'turnbon_graph' has no attribute {name!r}")
    value = getattr(import_module(f"turnbon_graph.{module}"), name)
    globals()[name] = value  # cache: later lookups skip __getattr__
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
