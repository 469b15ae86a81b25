"""Turn-BoN as a search of width one: N candidates a turn, the engine's selector picks
one, which runs in the trajectory's own environment. `turnbon bench` runs plain bon
through the agent graph (`bench.attempt`); this is the same policy under a token
budget, which the search loop can keep to. fusion and refine are bon whose engine has
their selector (`bon_selectors`)."""

from __future__ import annotations

from turnbon_graph.bench.strategies.registry import built_in
from turnbon_graph.bench.strategies.search import Strategy, StrategySetup
from turnbon_graph.bench.strategies.spec import StrategySpec


class BestOfN(Strategy):
    """Plain best-of-N: one trajectory, a selector's pick among N candidates every turn."""

    kind = built_in("bon")
    forks = False

    def __init__(self, n: int) -> None:
        super().__init__(1, n)

    @classmethod
    async def build(cls, spec: StrategySpec, n: int, setup: StrategySetup) -> Strategy:
        return cls(n)


class Fused(BestOfN):
    """bon whose selector writes the action from the candidates (`FusionSelector`)."""

    kind = built_in("fusion")


class Refined(BestOfN):
    """bon whose selector's pick is critiqued and revised once (`RefineSelector`)."""

    kind = built_in("refine")
