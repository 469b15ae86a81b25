"""Which search strategy a bench run uses, with its parameters: declared once here,
kept in the run's settings and on every episode row.

    bon        one trajectory; each turn N candidates, the selector picks one (Turn-BoN)
    beam       `width` trajectories; each turn every one proposes N candidates, each
               distinct candidate runs in a fork of its parent's environment, a value model
               scores the children and the best `width` go on
    particle   `width` trajectories, each extended by one candidate a turn, resampled with
               replacement by a softmax of the value model's scores at `value_temperature`
    lookahead  one trajectory; each turn N candidates, each distinct one runs in a fork and
               is rolled out `horizon` turns at N=1 in a fork of its own; the value model
               scores where each rollout led, and the best candidate is the one taken
    escalate   one trajectory; each turn N candidates; when their agreement is below
               `agree`, the turn is sampled again with more effort (`reasoning_effort` one
               step up, or a think-step-by-step prompt) and the selector picks among those
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from turnbon_graph.bench.strategies.names import (
    DEFAULT_AGREE,
    DEFAULT_HORIZON,
    DEFAULT_WIDTH,
    MAX_HORIZON,
    MAX_WIDTH,
    BudgetUnit,
    StrategyName,
)

VALUE_STRATEGIES = ("beam", "particle", "lookahead")
"""The strategies a value model guides (`--value`)."""


class StrategySpec(BaseModel):
    """A strategy and its parameters (N is the run's setting, not part of it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: StrategyName = "bon"
    width: int | None = Field(default=None, ge=1, le=MAX_WIDTH)
    """Trajectories kept (beam) or particles (particle); None for the others."""
    value: str | None = None
    """The value model's LiteLLM model id; None: the generator's model. Used by beam,
    particle and lookahead."""
    value_temperature: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    """The softmax temperature of particle resampling, over the scores normalised to
    [0, 1] (a score of 10 is 1)."""
    horizon: int | None = Field(default=None, ge=1, le=MAX_HORIZON)
    """lookahead: the turns each candidate's rollout continues at N=1; None for the others."""
    agree: float | None = Field(default=None, gt=0, le=1)
    """escalate: a turn whose candidates' agreement (the share of the most common action)
    is below this is sampled again with more effort; None for the others."""
    token_budget: int | float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """What an episode may spend on its generator, selector, value and rollout calls
    together, in `budget_unit`; None: no bound."""
    budget_unit: BudgetUnit = "tokens"
    """What `token_budget` counts: prompt plus completion tokens, completion tokens
    alone, or US dollars."""

    @model_validator(mode="after")
    def _fits_the_strategy(self) -> StrategySpec:
        name = self.name
        budget = self.token_budget
        if budget is not None and self.budget_unit != "usd" and budget != int(budget):
            raise ValueError(
                f"--token-budget {budget:g} counts {self.amount(budget).split(' ', 1)[1]}: "
                "give a whole number, or --budget-unit usd for dollars"
            )
        if budget is not None and self.budget_unit != "usd":
            object.__setattr__(self, "token_budget", int(budget))
        if self.width is not None and name not in DEFAULT_WIDTH:
            raise ValueError(
                f"--width applies to beam and particle, not {name} (it keeps one trajectory): "
                "drop --width, or add --strategy beam or particle"
            )
        if self.value is not None and name not in VALUE_STRATEGIES:
            raise ValueError(
                f"--value applies to a strategy a value model guides (beam, particle, "
                f"lookahead), not {name}: drop --value, or add one of those with --strategy"
            )
        if self.horizon is not None and name != "lookahead":
            raise ValueError(
                f"--horizon applies to lookahead, not {name}: drop --horizon, or add "
                "--strategy lookahead"
            )
        if self.agree is not None and name != "escalate":
            raise ValueError(
                f"--agree applies to escalate, not {name}: drop --agree, or add --strategy escalate"
            )
        if self.width is None and name in DEFAULT_WIDTH:
            object.__setattr__(self, "width", DEFAULT_WIDTH[name])
        if self.horizon is None and name == "lookahead":
            object.__setattr__(self, "horizon", DEFAULT_HORIZON)
        if self.agree is None and name == "escalate":
            object.__setattr__(self, "agree", DEFAULT_AGREE)
        return self

    @property
    def searches(self) -> bool:
        """Whether episodes run through a search (every strategy but plain bon)."""
        return self.name != "bon" or self.token_budget is not None

    @property
    def budget_text(self) -> str:
        """The budget as a setting's label shows it: `2000`, or `$0.05` in dollars."""
        budget = self.token_budget
        if budget is None:
            return ""
        return f"${budget:g}" if self.budget_unit == "usd" else str(int(budget))

    def amount(self, value: float) -> str:
        """An amount in the budget's unit, in words: `412 tokens`, `$0.0031`."""
        if self.budget_unit == "usd":
            return f"${value:.4g}"
        unit = "completion tokens" if self.budget_unit == "completion" else "tokens"
        return f"{value:.0f} {unit}"

    def label(self, n: int) -> str:
        """The setting's name in the run: `N=4` for bon, its parameters first for the
        others (`beam W=2 N=4`, `lookahead H=1 N=3`, `escalate A=0.5 N=3`)."""
        if self.name == "bon":
            return f"N={n}"
        if self.name == "lookahead":
            return f"lookahead H={self.horizon} N={n}"
        if self.name == "escalate":
            return f"escalate A={self.agree:g} N={n}"
        return f"{self.name} W={self.width} N={n}"
