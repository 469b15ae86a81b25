"""Which search strategy a bench run uses, with its parameters: declared once here,
kept in the run's settings and on every episode row.

    bon       one trajectory; each turn N candidates, the selector picks one (Turn-BoN)
    beam      `width` trajectories; each turn every one proposes N candidates, each
              distinct candidate runs in a fork of its parent's environment, a value model
              scores the children and the best `width` go on
    particle  `width` trajectories, each extended by one candidate a turn, resampled with
              replacement by a softmax of the value model's scores at `value_temperature`
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from turnbon_graph.strategies.names import DEFAULT_WIDTH, StrategyName


class StrategySpec(BaseModel):
    """A strategy and its parameters (N is the run's setting, not part of it)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: StrategyName = "bon"
    width: int | None = Field(default=None, ge=1)
    """Trajectories kept (beam) or particles (particle); None for bon."""
    value: str | None = None
    """The value model's LiteLLM model id; None: the generator's model. Not used by bon."""
    value_temperature: float = Field(default=1.0, gt=0)
    """The softmax temperature of particle resampling (over scores 0-10)."""
    token_budget: int | None = Field(default=None, gt=0)
    """Prompt plus completion tokens an episode may spend on generator, selector and
    value calls together; None: no bound."""

    @model_validator(mode="after")
    def _fits_the_strategy(self) -> StrategySpec:
        if self.name == "bon":
            if self.width is not None or self.value is not None:
                raise ValueError(
                    "--width and --value apply to a search strategy (beam, particle), not bon"
                )
        elif self.width is None:
            object.__setattr__(self, "width", DEFAULT_WIDTH[self.name])
        return self

    @property
    def searches(self) -> bool:
        """Whether episodes run through a search (every strategy but plain bon)."""
        return self.name != "bon" or self.token_budget is not None

    def label(self, n: int) -> str:
        """The setting's name in the run: `N=4` for bon, `beam W=2 N=4` for a search."""
        if self.name == "bon":
            return f"N={n}"
        return f"{self.name} W={self.width} N={n}"
