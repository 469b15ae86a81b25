"""The engine: one Turn-BoN turn, behind every door.

`engine` holds `TurnEngine` (generate N candidates, select one, record the turn), `state`
the candidates checkpointed between the two phases, `generator` the N calls as they
arrive, `candidates` an action's identity and agreement, `sampling` how many candidates
and how long (adaptive N, early commit, budgets), `prompted_tools` tool calls for models
without them, `tool_errors` what an action that cannot run answers, and `_builder` the
parts a `TurnConfig` makes.

Names are imported on first use, so that no module of the engine is imported while
another of its modules is still being imported.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnbon_graph._exports import lazy_exports

if TYPE_CHECKING:
    from turnbon_graph.turn.candidates import Candidate, canonical_action
    from turnbon_graph.turn.engine import EventSink, TurnEngine, turn_record
    from turnbon_graph.turn.generator import CandidateGenerator, CandidateSource, ModelSpec
    from turnbon_graph.turn.sampling import AdaptiveN, Budget, EarlyCommit
    from turnbon_graph.turn.state import GeneratedTurn

__all__ = [
    "AdaptiveN",
    "Budget",
    "Candidate",
    "CandidateGenerator",
    "CandidateSource",
    "EarlyCommit",
    "EventSink",
    "GeneratedTurn",
    "ModelSpec",
    "TurnEngine",
    "canonical_action",
    "turn_record",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Candidate": "candidates",
        "canonical_action": "candidates",
        "EventSink": "engine",
        "TurnEngine": "engine",
        "turn_record": "engine",
        "CandidateGenerator": "generator",
        "CandidateSource": "generator",
        "ModelSpec": "generator",
        "AdaptiveN": "sampling",
        "Budget": "sampling",
        "EarlyCommit": "sampling",
        "GeneratedTurn": "state",
    },
)
