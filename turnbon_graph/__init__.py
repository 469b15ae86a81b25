"""turnbon-graph: turn-level best-of-N sampling for LangGraph agents.

At every turn a generator proposes N candidate actions, a selector picks one, and only
that one is executed. The README and the docs site (docs/) show how to use it.

The doors are here: `create_turnbon_graph`, `create_turnbon_agent`, `ChatTurnBoN`,
`TurnBoNMiddleware`, and `TurnEngine` behind them all, with their options (`TurnConfig`,
`TurnOptions`), the turn record and the errors. Selectors are in `turnbon_graph.selectors`,
the LiteLLM provider in `turnbon_graph.litellm_provider`, the HTTP server in
`turnbon_graph.serve`, the test stub in `turnbon_graph.testing`.

Names are imported on first use (PEP 562), so `turnbon --help` and light tools do not
pay for importing LangGraph; `from turnbon_graph import X` works as usual.
"""

from __future__ import annotations

import warnings
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING, Any

from turnbon_graph._exports import install_moved_modules, lazy_exports
from turnbon_graph._litellm.price_map import use_bundled_price_map

# Before anything imports LiteLLM, the user's own `import litellm` after this one included:
# it then reads its bundled price map instead of fetching one at import.
use_bundled_price_map()

try:  # declared once, in pyproject.toml: the installed distribution's metadata says it
    __version__ = version("turnbon-graph")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from turnbon_graph._litellm.client import CallResult, CompletionClient, LiteLLMClient
    from turnbon_graph.chat import ChatTurnBoN
    from turnbon_graph.config import TurnConfig, TurnOptions
    from turnbon_graph.errors import (
        AllCandidatesFailedError,
        ConfigurationError,
        CredentialsError,
        TurnBoNError,
    )
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
    from turnbon_graph.turn.candidates import Candidate, canonical_action
    from turnbon_graph.turn.engine import TurnEngine, turn_record
    from turnbon_graph.turn.generator import ModelSpec
    from turnbon_graph.turn.sampling import AdaptiveN, Budget, EarlyCommit

_SOURCES = {
    "CallResult": "_litellm.client",
    "CompletionClient": "_litellm.client",
    "LiteLLMClient": "_litellm.client",
    "ChatTurnBoN": "chat",
    "TurnConfig": "config",
    "TurnOptions": "config",
    "AllCandidatesFailedError": "errors",
    "ConfigurationError": "errors",
    "CredentialsError": "errors",
    "TurnBoNError": "errors",
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
    "Candidate": "turn.candidates",
    "canonical_action": "turn.candidates",
    "TurnEngine": "turn.engine",
    "turn_record": "turn.engine",
    "ModelSpec": "turn.generator",
    "AdaptiveN": "turn.sampling",
    "Budget": "turn.sampling",
    "EarlyCommit": "turn.sampling",
}

__all__ = [
    "AdaptiveN",
    "AllCandidatesFailedError",
    "Budget",
    "CallResult",
    "Candidate",
    "CandidateRecord",
    "ChatTurnBoN",
    "CompletionClient",
    "ConfigurationError",
    "CredentialsError",
    "EarlyCommit",
    "JSONLTraceSink",
    "LiteLLMClient",
    "ModelSpec",
    "TraceSink",
    "TurnBoNError",
    "TurnBoNMiddleware",
    "TurnBoNState",
    "TurnConfig",
    "TurnEngine",
    "TurnOptions",
    "TurnRecord",
    "Usage",
    "UsageSplit",
    "canonical_action",
    "create_turnbon_agent",
    "create_turnbon_graph",
    "turn_record",
]

_SELECTORS = frozenset(
    {
        "EnsembleSelector",
        "FirstSelector",
        "FusionSelector",
        "HumanSelector",
        "LLMSelector",
        "MajorityVoteSelector",
        "RandomSelector",
        "RefineSelector",
        "ScoringSelector",
        "Selection",
        "Selector",
        "TournamentSelector",
    }
)
"""Selector names the package root exported before they lived in `turnbon_graph.selectors`
alone: still found here, with a `DeprecationWarning`, for one minor version. Listed, not
read from `selectors.__all__`: a selector added later was never here, and looking would
import the selectors (and LangChain) on every unknown name, `from turnbon_graph import
testing` included."""

_lazy_getattr, __dir__ = lazy_exports(__name__, _SOURCES)


def __getattr__(name: str) -> Any:
    if name in _SELECTORS:
        warnings.warn(
            f"import {name} from turnbon_graph.selectors; turnbon_graph.{name} goes in the "
            "next minor version",
            DeprecationWarning,
            stacklevel=2,
        )
        from turnbon_graph import selectors

        value = getattr(selectors, name)
        globals()[name] = value  # one warning: later lookups find it here
        return value
    return _lazy_getattr(name)


install_moved_modules()
