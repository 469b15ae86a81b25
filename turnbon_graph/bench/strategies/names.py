"""The strategies' names and default parameters, in the standard library only: the
command line offers them without loading the rest (`turnbon --help` answers at once)."""

from __future__ import annotations

from typing import Literal, get_args

StrategyName = Literal["bon", "beam", "particle", "lookahead", "escalate"]
STRATEGIES: tuple[StrategyName, ...] = get_args(StrategyName)
DEFAULT_WIDTH: dict[str, int] = {"beam": 2, "particle": 3}
"""The width of a search strategy of several trajectories when none is given."""
DEFAULT_HORIZON = 1
"""lookahead: the turns each candidate's rollout continues, when none is given."""
DEFAULT_AGREE = 0.5
"""escalate: the agreement below which a turn is sampled again with more effort (the
share of its candidates that propose its most common action), when none is given:
escalate when no action has half of the candidates."""
