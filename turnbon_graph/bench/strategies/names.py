"""The strategies' default parameters, their bounds and the budget's units, in the
standard library only: the command line offers them without loading the rest (`turnbon
--help` answers at once). The strategies themselves, by name: `registry`."""

from __future__ import annotations

from typing import Literal, get_args

MAX_WIDTH = 16
"""The most trajectories (beam) or particles a search keeps: a turn of beam search makes
up to W x N children, each in a fork of its environment (a copy of its work folder), so
the forks, and the value calls that score them, grow with W."""
DEFAULT_HORIZON = 1
"""lookahead: the turns each candidate's rollout continues, when none is given."""
MAX_HORIZON = 10
"""lookahead: the most turns a rollout continues; every turn of it is a generator call
for each distinct candidate, and the rollouts of a turn are all thrown away."""
DEFAULT_AGREE = 0.5
"""escalate: the agreement below which a turn is sampled again with more effort (the
share of its candidates that propose its most common action), when none is given:
escalate when no action has half of the candidates."""

BudgetUnit = Literal["tokens", "completion", "usd"]
"""What `--token-budget` counts: every prompt and completion token (`tokens`), the
completion tokens alone, as the paper's Table 1 counts them (`completion`), or the cost
in US dollars by LiteLLM's price map (`usd`)."""
BUDGET_UNITS: tuple[BudgetUnit, ...] = get_args(BudgetUnit)
