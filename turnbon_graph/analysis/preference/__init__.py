"""Which behaviours the selector prefers (the paper's Figure 4), and how long the
actions it picks are (Figure 5), each against a paired bootstrap over tasks.

`behaviour` is Figure 4, `lengths` Figure 5, `turns` the rule both share for which turns
count, `rows` their results as rows and Markdown; every name is re-exported here.
"""

from __future__ import annotations

from turnbon_graph.analysis.preference.behaviour import (
    DECLARES_COMPLETE,
    BehaviourPreference,
    Tagger,
    behaviour_preference,
    candidate_tags,
    default_tagger,
)
from turnbon_graph.analysis.preference.lengths import (
    LENGTH_METRICS,
    LengthComparison,
    LengthMetric,
    command_chars,
    length_comparison,
    reasoning_tokens,
)
from turnbon_graph.analysis.preference.rows import markdown_table, to_rows
from turnbon_graph.analysis.preference.turns import (
    AGREEMENT_SELECTOR,
    History,
    TurnStatus,
    turn_status,
)

__all__ = [
    "AGREEMENT_SELECTOR",
    "DECLARES_COMPLETE",
    "LENGTH_METRICS",
    "BehaviourPreference",
    "History",
    "LengthComparison",
    "LengthMetric",
    "Tagger",
    "TurnStatus",
    "behaviour_preference",
    "candidate_tags",
    "command_chars",
    "default_tagger",
    "length_comparison",
    "markdown_table",
    "reasoning_tokens",
    "to_rows",
    "turn_status",
]
