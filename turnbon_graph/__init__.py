"""turnbon-graph: turn-level best-of-N sampling for LangGraph agents.

At every turn a generator proposes N candidate actions, a selector picks one, and only
that one is executed. See the README for the quickstart.
"""

from turnbon_graph.candidates import Candidate, canonical_action
from turnbon_graph.errors import AllCandidatesFailedError, ConfigurationError, TurnBoNError
from turnbon_graph.graph import TurnBoNState, create_turnbon_agent, create_turnbon_graph
from turnbon_graph.records import (
    CandidateRecord,
    JSONLTraceSink,
    TraceSink,
    TurnRecord,
    Usage,
    UsageSplit,
)
from turnbon_graph.selectors import (
    FirstSelector,
    LLMSelector,
    MajorityVoteSelector,
    RandomSelector,
    Selection,
    Selector,
)
from turnbon_graph.turn import TurnEngine, turn_record

__all__ = [
    "AllCandidatesFailedError",
    "Candidate",
    "CandidateRecord",
    "ConfigurationError",
    "FirstSelector",
    "JSONLTraceSink",
    "LLMSelector",
    "MajorityVoteSelector",
    "RandomSelector",
    "Selection",
    "Selector",
    "TraceSink",
    "TurnBoNError",
    "TurnBoNState",
    "TurnEngine",
    "TurnRecord",
    "Usage",
    "UsageSplit",
    "canonical_action",
    "create_turnbon_agent",
    "create_turnbon_graph",
    "turn_record",
]
