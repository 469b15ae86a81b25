"""Turn-BoN as a search of width one: N candidates a turn, the engine's selector picks
one, which runs in the trajectory's own environment. `turnbon bench` runs plain bon
through the agent graph (`bench.attempt`); this is the same policy under a token
budget, which the search loop can keep to."""

from __future__ import annotations

from turnbon_graph.bench.strategies.search import Strategy


class BestOfN(Strategy):
    """Plain best-of-N: one trajectory, a selector's pick among N candidates every turn."""

    name = "bon"
    forks = False

    def __init__(self, n: int) -> None:
        super().__init__(1, n)
