"""The loop every strategy shares: plan a turn within the token budget, expand the live
trajectories (one generator call each, n = its candidates), run each distinct child in
a fork of its parent's environment, score the children with the value model, and cut.

The strategies differ in how many candidates a trajectory proposes, how its children are
evaluated and how they are cut (`Strategy`'s hooks): beam keeps the best, particle
filtering resamples, bon keeps the one its selector picked, lookahead scores each child
by a short rollout, escalate samples a disagreeing turn again with more effort. A
trajectory that ends (a final answer, the turn limit) is held; the search stops once
`width` trajectories ended, when a held one is worth at least every live one, or when
the budget cannot afford another step. The best held trajectory (by value) is the one
the caller verifies; every other environment is closed.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from turnbon_graph.bench.environment import Budgeted, Episode, TaskSpec
from turnbon_graph.bench.episode import is_agent_failure
from turnbon_graph.bench.strategies.budget import Ledger, characters
from turnbon_graph.bench.strategies.trajectory import (
    Pick,
    Trajectory,
    describe,
    step_size,
    take_step,
)
from turnbon_graph.bench.strategies.tree import Fate, TreeNode, short_action
from turnbon_graph.openai.messages import to_openai_tools
from turnbon_graph.records import Usage
from turnbon_graph.turn.candidates import Candidate, group_by_action
from turnbon_graph.turn.engine import TurnEngine, turn_record

if TYPE_CHECKING:
    from turnbon_graph.bench.strategies.value import ValueModel
    from turnbon_graph.turn.state import GeneratedTurn

Plan = list[tuple[Trajectory, int]]
"""The turn's expansion: each trajectory with the candidates it proposes."""


class Strategy:
    """How a search expands and cuts. The base keeps the best children by value, up to
    the width (beam search); the others override what differs."""

    name = "beam"
    forks = True
    """Whether each distinct candidate becomes a child (in a fork of its parent's
    environment, scored by the value model); else the engine's selector picks the one
    child, run in the parent's own environment (bon)."""

    def __init__(self, width: int, n: int) -> None:
        self.width = width
        self.n = n

    def wanted(self, live: list[Trajectory]) -> Plan:
        """Every live trajectory proposes n candidates (the most valuable first)."""
        return [(t, self.n) for t in live]

    async def revise(
        self, search: Search, parent: Trajectory, turn: GeneratedTurn, engine: TurnEngine
    ) -> GeneratedTurn:
        """The turn's candidates the children come from: the generator's (escalate may
        sample the turn again)."""
        return turn

    def scoring_cost(self, search: Search, size: int, k: int) -> float:
        """The estimated tokens of scoring k children of a request of `size` characters:
        a value call each, on the request grown by a step."""
        ledger = search.ledger
        return ledger.estimate("value", size + ledger.growth, k, calls=k)

    async def evaluate(self, search: Search, children: list[Trajectory]) -> None:
        """Each child's value, when there is more than one thing to compare."""
        if search.scores(len(children)):
            await asyncio.gather(*(search.rate(c) for c in children))

    async def settle(self, search: Search, children: list[Trajectory]) -> list[Trajectory]:
        """The ended children held, the cut among the others: the live trajectories."""
        for child in children:
            if child.ended is not None:
                await search.hold(child, child.ended)
        return await self.cut(search, [c for c in children if c.ended is None])

    def annotate(self, node: TreeNode, message: AIMessage) -> None:
        """What the strategy adds to a child's tree node from its chosen `message`."""

    async def cut(self, search: Search, children: list[Trajectory]) -> list[Trajectory]:
        """The children that go on: the best by value, up to the width not yet ended."""
        room = max(self.width - len(search.held), 0)
        ranked = sorted(children, key=lambda t: -t.score)  # stable: earlier first on ties
        for dropped in ranked[room:]:
            await search.prune(dropped)
        return ranked[:room]


class Search:
    """One episode's search, from its root trajectory (the task's fresh episode)."""

    def __init__(
        self,
        strategy: Strategy,
        engine: TurnEngine,
        value: ValueModel | None,
        task: TaskSpec,
        root: Episode,
        ledger: Ledger,
    ) -> None:
        self.strategy = strategy
        self.engine = engine
        self.value = value
        self.task = task
        self.ledger = ledger
        self.tools = to_openai_tools(list(root.tools))
        segments = [task.instruction, *task.follow_ups]
        first = Trajectory([HumanMessage(segments[0])], root, "0", "e0", segments[1:])
        self.nodes: dict[str, TreeNode] = {
            "0": TreeNode(id="0", parent=None, turn=0, action="(the task starts)", fork="e0")
        }
        self.live: list[Trajectory] = [first]
        self.held: list[Trajectory] = []
        self.errors: list[str] = []
        self.open: set[int] = {id(root)}
        self._episodes: dict[int, Episode] = {id(root): root}
        self._forks = 0
        self._fork_ids: dict[int, str] = {}
        self._engines: dict[int, TurnEngine] = {}
        self.native_n = False

    # ------------------------------------------------------------------ the loop

    async def run(self) -> Trajectory | None:
        """Searches until done; the trajectory to verify (None: every one failed)."""
        while self.live and not self._enough():
            plan = self.plan()
            planned = {id(t) for t, _ in plan}
            # What the budget cannot extend ends here, as at a turn limit.
            for left_out in [t for t in self.live if id(t) not in planned]:
                await self.hold(left_out, "token budget")
            self.live = [t for t in self.live if id(t) in planned]
            if not plan:
                break
            expanded = await asyncio.gather(*(self._expand(t, k) for t, k in plan))
            children = [c for group in expanded for c in group]
            if self.value is not None and self.strategy.forks:
                await self.strategy.evaluate(self, children)
            self.live = await self.strategy.settle(self, children)
            for trajectory in self.live:
                self.nodes[trajectory.node].fate = "kept"
        for trajectory in self.live:  # enough ended: the unfinished are cut
            await self.prune(trajectory)
        self.live = []
        if not self.held:
            return None
        best = max(self.held, key=lambda t: t.score)  # the first held on ties
        self.nodes[best.node].fate = "chosen"
        return best

    def _enough(self) -> bool:
        """Enough ended: `width` of them, or one worth at least every live trajectory."""
        if len(self.held) >= self.strategy.width:
            return True
        if self.held and self.live:
            return max(t.score for t in self.held) >= max(t.score for t in self.live) >= 0
        return False

    def plan(self) -> Plan:
        """The strategy's wanted expansion, narrowed to fit the token budget: the least
        valuable trajectory's candidates first, down to one trajectory with one
        candidate; empty when not even that fits."""
        live = sorted(self.live, key=lambda t: -t.score)
        plan = [(t, k) for t, k in self.strategy.wanted(live) if k > 0]
        while plan and not self.ledger.fits(self.cost(plan)):
            trajectory, k = plan[-1]
            if len(plan) == 1 and k == 1:
                return []
            plan[-1:] = [(trajectory, k - 1)] if k > 1 else []
        return plan

    def cost(self, plan: Plan) -> float:
        """The estimated tokens of a turn's expansion: its generator calls, the value
        calls that score its children, and a bon selector's call."""
        ledger, total = self.ledger, 0.0
        children = sum(k for _, k in plan)
        for trajectory, k in plan:
            size = characters(self.engine.transcript(trajectory.messages), self.tools)
            total += ledger.estimate("generator", size, k, calls=1 if self.native_n else k)
            if self.strategy.forks and self.scores(children):
                total += self.strategy.scoring_cost(self, size, k)
            if not self.strategy.forks and k > 1:
                total += self.selector_cost(size, k)
        return total

    def selector_cost(self, size: int, k: int) -> float:
        """The estimated tokens of a selector's call on k candidates for a request of
        `size` characters."""
        return self.ledger.estimate("selector", size + k * self.ledger.growth // 4)

    def scores(self, children: int) -> bool:
        """Whether children are scored: always but a lone child with nothing to compare."""
        return children > 1 or bool(self.held) or len(self.live) > 1

    # ------------------------------------------------------------------ one parent

    async def _expand(self, parent: Trajectory, k: int) -> list[Trajectory]:
        """The parent's children: one generator call, then each distinct candidate in a
        fork of the parent's environment (the first in the parent's own)."""
        engine = self.engine_for(k)
        try:
            turn = await self.generate(engine, parent.messages)
            self.native_n = bool(turn.sampling.native_n)
            turn = await self.strategy.revise(self, parent, turn, engine)
        except Exception as exc:
            if not is_agent_failure(exc):
                raise
            self._fail(parent, f"{type(exc).__name__}: {exc}")
            await self.close(parent.episode)
            return []
        picks = await self._picks(parent, turn, engine)
        if picks and (record := turn_record(picks[0][0])) is not None:
            self.ledger.prompt_tokens_a_call_each += record.prompt_tokens_a_call_each
        episodes = await self._environments(parent, len(picks))
        children = await asyncio.gather(
            *(
                self._child(parent, message, tokens, where)
                for (message, tokens), where in zip(picks, episodes, strict=True)
            )
        )
        return [c for c in children if c is not None]

    async def generate(
        self, engine: TurnEngine, messages: list[BaseMessage], extra: dict[str, Any] | None = None
    ) -> GeneratedTurn:
        """One generator call of `engine` (its n candidates) for `messages`, on the ledger."""
        turn = await engine.generate(messages, tools=self.tools, extra=extra)
        generated = sum((c.usage for c in turn.candidates), Usage())
        size = characters(engine.transcript(messages), self.tools)
        self.ledger.add("generator", generated, size, len(turn.candidates))
        return turn

    async def _picks(
        self, parent: Trajectory, turn: GeneratedTurn, engine: TurnEngine
    ) -> list[tuple[AIMessage, int]]:
        """The chosen message of each child, with its turn record, and the generator
        tokens of the candidates it stands for."""
        ok = turn.ok
        if not self.strategy.forks:
            message = await engine.select(parent.messages, turn)
            record = turn_record(message)
            assert record is not None
            self.ledger.add(
                "selector",
                record.usage.selector,
                characters(self.engine.transcript(parent.messages)),
            )
            return [(message, candidate_tokens(turn.candidates))]
        groups = list(group_by_action(ok).values()) if ok[0].valid else [[0]]
        picks = []
        for group in groups:
            picker = Pick(self.strategy.name, ok[group[0]].action)
            chooser = TurnEngine(generator=engine.generator, selector=picker, config=engine.config)
            message = await chooser.select(parent.messages, turn)
            picks.append((message, candidate_tokens([ok[p] for p in group])))
        return picks

    async def _environments(self, parent: Trajectory, count: int) -> list[Episode | str]:
        """The parent's episode for its first child and a fork of it for each other (or
        why a fork could not be made), all made before any child acts."""
        if count == 0:
            await self.close(parent.episode)
            return []
        forks = await asyncio.gather(*(self.fork(parent.episode) for _ in range(count - 1)))
        return [parent.episode, *forks]

    async def fork(self, episode: Episode) -> Episode | str:
        """A fork of `episode`, tracked (closed with the search), or why none was made."""
        try:
            made: Episode = await episode.fork()  # type: ignore[attr-defined]
        except Exception as exc:
            if not is_agent_failure(exc):
                raise
            return f"the fork failed: {type(exc).__name__}: {exc}"
        self._track(made)
        return made

    async def _child(
        self, parent: Trajectory, message: AIMessage, tokens: int, where: Episode | str
    ) -> Trajectory | None:
        fork = parent.fork if where is parent.episode else self.fork_id(where)
        node = self.add_node(parent, message, fork, tokens)
        self.strategy.annotate(self.nodes[node], message)
        if isinstance(where, str):
            self._prune_node(node, where)
            return None
        child = await self.step(parent, message, where, fork, node)
        if isinstance(child, str):
            self._prune_node(node, child)
            return None
        return child

    def add_node(
        self, parent: Trajectory, message: AIMessage, fork: str, tokens: int, fate: Fate = "kept"
    ) -> str:
        """A tree node for `message` taken after `parent`'s last step; its id."""
        node = str(len(self.nodes))
        content, calls = describe(message)
        self.nodes[node] = TreeNode(
            id=node,
            parent=parent.node,
            turn=parent.turns + 1,
            action=short_action(content, calls),
            fork=fork,
            tokens=tokens,
            fate=fate,
        )
        return node

    async def step(
        self, parent: Trajectory, message: AIMessage, where: Episode, fork: str, node: str
    ) -> Trajectory | str:
        """`parent` extended by `message`, run in `where` (tree node `node`); or why it
        could not run (`where` then closed)."""
        try:
            child = await take_step(parent, message, where, fork, node, self.task)
        except Exception as exc:
            if not is_agent_failure(exc):
                raise
            await self.close(where)
            return f"{type(exc).__name__}: {exc}"
        if isinstance(where, Budgeted) and (over := where.over_budget):
            await self.close(where)
            return f"the environment went over its budget: {over}"
        self.ledger.grew(step_size(child, parent))
        return child

    async def rate(self, trajectory: Trajectory, into: Trajectory | None = None) -> None:
        """The value model's score of `trajectory`, on its last node (with the call's
        tokens) and given to `into` (default: itself) to rank by."""
        assert self.value is not None
        transcript = self.engine.transcript(trajectory.messages)
        asked = await self.value.score(transcript)
        self.ledger.add("value", asked.usage, characters(transcript))
        node = self.nodes[trajectory.node]
        node.value, node.tokens = asked.value, node.tokens + asked.usage.total_tokens
        if asked.error:
            node.error = asked.error
        target = into or trajectory
        target.value = self.nodes[target.node].value = asked.value

    # ------------------------------------------------------------------ bookkeeping

    def engine_for(self, k: int) -> TurnEngine:
        """The run's engine asking for k candidates (the same generator and client)."""
        if k == self.engine.config.n:
            return self.engine
        if k not in self._engines:
            config = self.engine.config.model_copy(update={"n": k})
            self._engines[k] = TurnEngine(
                generator=self.engine.generator, selector=self.engine.selector, config=config
            )
        return self._engines[k]

    def _track(self, episode: Episode) -> None:
        self._forks += 1
        self.open.add(id(episode))
        self._episodes[id(episode)] = episode
        self._fork_ids[id(episode)] = f"e{self._forks}"

    def fork_id(self, episode: Episode | str) -> str:
        return self._fork_ids.get(id(episode), "-")

    def _fail(self, trajectory: Trajectory, error: str) -> None:
        self.errors.append(error)
        self.nodes[trajectory.node].error = error

    def _prune_node(self, node: str, error: str | None = None) -> None:
        self.nodes[node].fate = "pruned"
        if error is not None:
            self.nodes[node].error = error
            self.errors.append(error)

    async def prune(self, trajectory: Trajectory) -> None:
        """Cut: its node pruned, its environment closed."""
        self._prune_node(trajectory.node)
        await self.close(trajectory.episode)

    async def hold(self, trajectory: Trajectory, ended: str) -> None:
        """An ended trajectory waits for the choice; only the best `width` are kept."""
        trajectory.ended = ended
        node = self.nodes[trajectory.node]
        node.fate, node.ended = "held", ended
        self.held.append(trajectory)
        ranked = sorted(self.held, key=lambda t: -t.score)
        for dropped in ranked[self.strategy.width :]:
            self.held.remove(dropped)
            await self.prune(dropped)

    async def close(self, episode: Episode) -> None:
        if id(episode) in self.open:
            self.open.discard(id(episode))
            await episode.close()

    async def close_all(self) -> None:
        """Closes every environment still open (after the verifier ran)."""
        for key in list(self.open):
            await self.close(self._episodes[key])

    async def copy(self, trajectory: Trajectory) -> Trajectory | None:
        """The trajectory again, in a fork of its environment (a resampled particle's
        second copy); None when the fork failed (recorded on its node)."""
        made = await self.fork(trajectory.episode)
        if isinstance(made, str):
            self._fail(trajectory, made)
            return None
        return dataclasses.replace(
            trajectory, messages=list(trajectory.messages), episode=made, fork=self.fork_id(made)
        )

    def tree(self) -> list[TreeNode]:
        return list(self.nodes.values())


def candidate_tokens(candidates: Sequence[Candidate]) -> int:
    return sum(c.usage.total_tokens for c in candidates)
