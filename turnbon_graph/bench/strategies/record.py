"""What a search adds to its episode's row (`runs.EpisodeResult.search`): what it spent
in its budget's unit and by kind, the value model's failures, and every finished leaf
with its value and the verifier's verdict (the exploration/exploitation split:
`decomposition.exploration`)."""

from __future__ import annotations

from pydantic import BaseModel, Field

from turnbon_graph.bench.strategies.names import BudgetUnit
from turnbon_graph.records import Usage


class Leaf(BaseModel):
    """A trajectory of the search that finished (or that the budget stopped), verified
    before its environment closed."""

    node: str
    """Its last node in the tree file."""
    value: float | None = None
    """The value model's score (0-10); None when it was never scored."""
    passed: bool | None = None
    """The verifier's verdict; None when the verifier gave none (it failed, or ran out
    of time)."""
    ended: str
    """How it ended: a final answer, the turn limit, or the token budget."""
    chosen: bool = False
    """The trajectory the search chose: its verdict is the episode's outcome."""
    held: bool | None = None
    """Whether the strategy still held it when the search stopped (a leaf it pushed out or
    never redrew is not held, yet is chosen from all the same); None in rows written
    before it was recorded."""


class SearchRecord(BaseModel):
    """A search's own record on its episode's row."""

    unit: BudgetUnit = "tokens"
    spent: float = 0.0
    """What the episode's calls count in `unit`: what its budget bounds."""
    rollout: Usage = Field(default_factory=Usage)
    """lookahead: the generator calls of its rollouts (not in the row's generator usage)."""
    steps: int = 0
    """Actions executed in an environment, rollouts' included."""
    forks: int = 0
    """Environments forked."""
    refused: int = 0
    """Calls the token budget refused (not even their prompt fitted)."""
    value_calls: int = 0
    """Values asked for (a re-ask of an unusable answer is part of its question)."""
    value_failed: int = 0
    """Of them, failed calls (the provider's error, a missing key, an unknown model)."""
    value_unparsed: int = 0
    """Of them, answers still unusable after the re-ask."""
    value_error: str | None = None
    """The first failed or unusable value's error."""
    leaves: list[Leaf] = Field(default_factory=list)
    verify_s: float = 0.0
    """Seconds the verifier spent on the leaves other than the chosen one (verifier time,
    not the agent's, and no model tokens)."""
