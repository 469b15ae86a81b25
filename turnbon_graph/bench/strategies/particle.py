"""Particle filtering over agent turns: `width` particles, each extended by one candidate
a turn (run in its own environment) and scored by the value model; then as many
particles as have not ended are drawn, with replacement, with probabilities the softmax
of the scores at `temperature`. A particle drawn twice goes on in a fork; one never
drawn is pruned."""

from __future__ import annotations

import math
import random
from collections import Counter

from turnbon_graph.bench.strategies.search import Plan, Search, Strategy
from turnbon_graph.bench.strategies.trajectory import Trajectory


def softmax(scores: list[float], temperature: float) -> list[float]:
    top = max(scores)
    weights = [math.exp((s - top) / temperature) for s in scores]
    total = sum(weights)
    return [w / total for w in weights]


class Particles(Strategy):
    name = "particle"

    def __init__(self, width: int, temperature: float, rng: random.Random) -> None:
        super().__init__(width, 1)
        self.temperature = temperature
        self.rng = rng

    def wanted(self, live: list[Trajectory]) -> Plan:
        """One candidate a particle; the task's start proposes one for every particle."""
        return [(t, self.width if t.turns == 0 else 1) for t in live]

    async def cut(self, search: Search, children: list[Trajectory]) -> list[Trajectory]:
        room = max(self.width - len(search.held), 0)
        if not children or not room:
            for child in children:
                await search.prune(child)
            return []
        # An unscored particle weighs as a score of 0.
        weights = softmax([max(c.score, 0.0) for c in children], self.temperature)
        drawn = Counter(self.rng.choices(range(len(children)), weights, k=room))
        survivors: list[Trajectory] = []
        for position, child in enumerate(children):
            copies = drawn.get(position, 0)
            search.nodes[child.node].copies = copies
            if not copies:
                await search.prune(child)
                continue
            survivors.append(child)
            for _ in range(copies - 1):
                if (copy := await search.copy(child)) is not None:
                    survivors.append(copy)
        return survivors
