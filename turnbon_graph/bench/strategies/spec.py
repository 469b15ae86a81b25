"""Which search strategy a bench run uses, with its parameters: declared once here,
kept in the run's settings and on every episode row.

The strategies that ship (others are registered: `registry`):

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
    fusion     bon whose selector (`FusionSelector`) writes the action from the candidates
    refine     bon whose selector's pick is critiqued and revised once (`RefineSelector`)
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from turnbon_graph.bench.strategies.names import MAX_HORIZON, MAX_WIDTH, BudgetUnit
from turnbon_graph.bench.strategies.registry import (
    StrategyKind,
    known_kind,
    strategy_kinds,
    value_scheme,
)

PARAMETERS = {
    "width": "--width",
    "value": "--value",
    "rubric": "--value-rubric",
    "horizon": "--horizon",
    "agree": "--agree",
}
"""A spec's parameters that only some strategies take, with the flag that sets each."""


class StrategySpec(BaseModel):
    """A strategy and its parameters (N is the run's setting, not part of it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(default="bon", min_length=1)
    """A strategy of `registry`: a built-in one, or one registered with
    `register_strategy`."""
    width: int | None = Field(default=None, ge=1, le=MAX_WIDTH)
    """Trajectories kept (beam) or particles (particle); None for the others."""
    value: str | None = None
    """What scores a partial trajectory, for the strategies a value function guides: a
    LiteLLM model id (the LLM rubric, `rubric`), `prm:MODEL` (a process reward model),
    `oracle` (the task's own tests: an upper bound that leaks the verifier) or a value
    function registered with `register_value`; None: the LLM rubric on the generator's
    model."""
    rubric: str | None = Field(default=None, min_length=1)
    """The LLM rubric's criteria (`value.VALUE_RUBRIC` when None)."""
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
        budget = self.token_budget
        if budget is not None and self.budget_unit != "usd" and budget != int(budget):
            raise ValueError(
                f"--token-budget {budget:g} counts {self.amount(budget).split(' ', 1)[1]}: "
                "give a whole number, or --budget-unit usd for dollars"
            )
        if budget is not None and self.budget_unit != "usd":
            object.__setattr__(self, "token_budget", int(budget))
        kind = known_kind(self.name)
        if kind is None:  # registered in another process: kept as recorded
            return self
        for field, flag in PARAMETERS.items():
            if getattr(self, field) is not None and not takes(kind, field):
                which = ", ".join(k.name for k in strategy_kinds() if takes(k, field))
                raise ValueError(
                    f"{flag} applies to {which}, not {self.name}: drop {flag}, or add one "
                    "of those with --strategy"
                )
        if self.rubric is not None and value_scheme(self.value) is not None:
            raise ValueError(
                f"--value-rubric is the LLM rubric's, not the value function {self.value}'s: "
                "drop one of them"
            )
        for field in ("width", "horizon", "agree"):
            if getattr(self, field) is None:
                object.__setattr__(self, field, getattr(kind, field))
        return self

    @property
    def searches(self) -> bool:
        """Whether episodes run through a search: every strategy but those of plain
        Turn-BoN (bon, fusion, refine), which do too under a token budget."""
        kind = known_kind(self.name)
        return kind is None or not kind.graph or self.token_budget is not None

    @property
    def oracle(self) -> bool:
        """Whether the task's own tests score the search's trajectories (`--value
        oracle`): the verifier guides it, an upper bound rather than a result."""
        scheme = value_scheme(self.value)
        return scheme is not None and scheme[0] == "oracle"

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
        """The setting's name in the run: `N=4` for bon, else the strategy's name and
        parameters first (`beam W=2 N=4`, `lookahead H=1 N=3`, `escalate A=0.5 N=3`,
        `fusion N=3`, a particle temperature other than 1 as `particle W=3 T=0.5 N=1`),
        and the value function when it is no model (`value=oracle`)."""
        kind = known_kind(self.name)
        if kind is not None and kind.graph and kind.selector is None:
            return f"N={n}"
        parts = [self.name]
        if self.width is not None:
            parts.append(f"W={self.width}")
        if self.horizon is not None:
            parts.append(f"H={self.horizon}")
        if self.agree is not None:
            parts.append(f"A={self.agree:g}")
        if kind is not None and kind.resamples and self.value_temperature != 1.0:
            parts.append(f"T={self.value_temperature:g}")
        parts.append(f"N={n}")
        if value_scheme(self.value) is not None:
            parts.append(f"value={self.value}")
        return " ".join(parts)


def takes(kind: StrategyKind, field: str) -> bool:
    """Whether the strategy of `kind` takes the parameter `field` of a spec."""
    if field in ("value", "rubric"):
        return kind.value
    return getattr(kind, field) is not None
