"""Lookahead over agent turns: Turn-BoN whose choice comes from short rollouts.

Each turn the trajectory proposes N candidates (one generator call). Each distinct
candidate runs as beam's children do (each in a fork of the trajectory's environment, a
lone one in the trajectory's own), then is continued `horizon` turns at N=1 in a fork of its
own environment taken after that step, and the value model scores where the rollout led
(its transcript). The candidate whose rollout scored best is the one the trajectory
takes, the first on ties; it goes on from that candidate's step alone. Every rollout,
the chosen candidate's too, is thrown away with its fork: the trajectory's environment
holds the chosen step and nothing its rollout did. The verifier is never asked (that
would be the oracle, which `turnbon rollouts` measures). A turn with one distinct
candidate has nothing to compare: no rollout, no value call.

A turn costs one generator call of N, then for each distinct candidate up to `horizon`
generator calls of one (counted as `rollout` calls) and one value call. Under a token
budget the plan takes fewer candidates (down to one, which needs no rollout), and a
rollout stops early, or goes unscored, when its next call would not fit.
"""

from __future__ import annotations

import asyncio
import dataclasses

from turnbon_graph.bench.environment import Episode
from turnbon_graph.bench.episode import is_agent_failure
from turnbon_graph.bench.strategies.registry import built_in
from turnbon_graph.bench.strategies.search import (
    Search,
    Strategy,
    StrategySetup,
    candidate_tokens,
)
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.strategies.trajectory import Trajectory


class Lookahead(Strategy):
    """Scores each candidate by rolling it out `horizon` turns and valuing where it led."""

    kind = built_in("lookahead")

    def __init__(self, n: int, horizon: int) -> None:
        super().__init__(1, n)
        self.horizon = horizon

    @classmethod
    async def build(cls, spec: StrategySpec, n: int, setup: StrategySetup) -> Strategy:
        assert spec.horizon is not None  # the kind's default when not given
        return cls(n, spec.horizon)

    def scoring_cost(self, search: Search, parent: Trajectory, k: int) -> float:
        """k rollouts: `horizon` generator calls of one each, on the request grown by a
        step more every turn, and a value call on where it led."""
        ledger, growth = search.ledger, search.ledger.growth
        size = search.request_size(parent.messages)
        turns = range(1, self.horizon + 1)
        rollout = sum(ledger.estimate("rollout", size + t * growth, 1) for t in turns)
        return k * (rollout + search.value_cost(parent, self.horizon + 1))

    async def evaluate(self, search: Search, children: list[Trajectory]) -> None:
        """Each child scored by where its rollout led, when there is more than one."""
        if search.scores(len(children)):
            await asyncio.gather(*(self._look(search, child) for child in children))

    async def settle(self, search: Search, children: list[Trajectory]) -> list[Trajectory]:
        """The best child (the first on ties) is taken, ended or not; the others are cut."""
        if not children:
            return []
        best = max(children, key=lambda c: c.score)  # the first of equals
        for child in children:
            if child is not best:
                await search.prune(child)
        if best.ended is not None:
            await search.hold(best, best.ended)
            return []
        return [best]

    async def _look(self, search: Search, child: Trajectory) -> None:
        """`child`'s rollout in a fork of its environment (none once it ended), scored
        into `child`; the fork closed."""
        where: Episode | str | None = None
        rollout = child
        if child.ended is None:
            where = await search.fork(child.episode)
            if isinstance(where, str):
                search.nodes[child.node].error = f"no rollout: {where}"
            else:
                rollout = await self._roll(search, child, where)
        try:
            if search.ledger.fits(search.value_cost(rollout, 0)):
                await search.rate(rollout, into=child)
        finally:
            if where is not None and not isinstance(where, str):
                await search.close(where)

    async def _roll(self, search: Search, child: Trajectory, where: Episode) -> Trajectory:
        """`child` continued up to `horizon` turns at N=1 in `where`, each step a tree
        node of fate `rollout`; it stops early when it ends, fails or the budget says so."""
        engine, ledger = search.engine_for(1, "rollout"), search.ledger
        fork = search.fork_id(where)
        rollout = dataclasses.replace(
            child,
            messages=list(child.messages),
            episode=where,
            fork=fork,
            segments=list(child.segments),
        )
        for _ in range(self.horizon):
            estimate = ledger.estimate("rollout", search.request_size(rollout.messages), 1)
            if not ledger.fits(estimate):
                search.nodes[rollout.node].error = "the rollout stopped here: the token budget"
                break
            try:
                turn = await search.generate(engine, rollout.messages)
            except Exception as exc:
                if not is_agent_failure(exc):
                    raise
                search.nodes[
                    rollout.node
                ].error = f"the rollout failed: {type(exc).__name__}: {exc}"
                break
            message = await engine.select(rollout.messages, turn)  # one candidate: no call
            node = search.add_node(
                rollout, message, fork, candidate_tokens(turn.candidates), fate="rollout"
            )
            stepped = await search.step(rollout, message, where, fork, node)
            if isinstance(stepped, str):
                search.nodes[node].error = stepped
                break
            rollout = stepped
            if rollout.ended is not None:
                break
        return rollout
