"""Particle filtering over agent turns: `width` particles, each extended by one candidate
a turn (run in its own environment) and scored by the value model; then `width` draws
with replacement from the finished and the live particles together, each with
probability proportional to its copies times the softmax of its score normalised to
[0, 1] at `temperature` (`selection.resample`). A live particle drawn once goes on in
its own environment, one drawn k times as k copies, each in a fork of its own (so the
copies are equal: `forest.Forest.environments`), and one never drawn is pruned; a
finished particle drawn stays in the pool as often as it was drawn. The search stops
when every draw is a finished particle. Candidates that propose the same action run once,
as one particle standing for as many copies as proposed it, so how many particles
proposed an action still counts in the draws."""

from __future__ import annotations

import random

from turnbon_graph.bench.strategies.registry import built_in
from turnbon_graph.bench.strategies.search import Plan, Search, Strategy, StrategySetup
from turnbon_graph.bench.strategies.selection import resample
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.strategies.trajectory import Trajectory


class Particles(Strategy):
    """Particle filtering: `width` trajectories of one candidate a turn, resampled by value."""

    kind = built_in("particle")
    weighs_duplicates = True

    def __init__(self, width: int, temperature: float, rng: random.Random) -> None:
        super().__init__(width, 1)
        self.temperature = temperature
        self.rng = rng

    @classmethod
    async def build(cls, spec: StrategySpec, n: int, setup: StrategySetup) -> Strategy:
        """Resampling seeded by the run's seed, the task and the trial."""
        assert spec.width is not None  # the kind's default when not given
        return cls(spec.width, spec.value_temperature, random.Random(setup.seed))

    def wanted(self, live: list[Trajectory]) -> Plan:
        """One candidate a particle; the task's start proposes one for every particle."""
        return [(t, self.width if t.turns == 0 else 1) for t in live]

    async def settle(self, search: Search, children: list[Trajectory]) -> list[Trajectory]:
        pool = [*search.held, *children]
        drawn = resample([t.entry() for t in pool], self.width, self.temperature, self.rng)
        survivors: list[Trajectory] = []
        for position, trajectory in enumerate(pool):
            copies = drawn.get(position, 0)
            search.nodes[trajectory.node].copies = copies
            if not copies:
                await search.drop(trajectory)
                continue
            if trajectory.ended is not None:  # it stays in the pool, in `copies` slots
                trajectory.copies = copies
                if not search.is_held(trajectory):
                    await search.hold(trajectory, trajectory.ended)
                continue
            made = await search.copies(trajectory, copies)
            for particle in made:
                particle.copies = 1  # drawn: each copy is one particle from here on
            survivors += made
        return survivors
