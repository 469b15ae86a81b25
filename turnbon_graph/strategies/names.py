"""The strategies' names and default widths, in the standard library only: the command
line offers them without loading the rest (`turnbon --help` answers at once)."""

from __future__ import annotations

from typing import Literal, get_args

StrategyName = Literal["bon", "beam", "particle"]
STRATEGIES: tuple[StrategyName, ...] = get_args(StrategyName)
DEFAULT_WIDTH: dict[str, int] = {"beam": 2, "particle": 3}
"""The width of a search strategy when none is given."""
