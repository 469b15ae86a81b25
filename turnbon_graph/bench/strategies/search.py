"""The loop every strategy shares: plan a turn within the token budget, expand the live
trajectories (one generator call each, n = its candidates), run each distinct child in
a fork of its parent's environment, score the children with the value model, and let
the strategy settle which go on.

What a strategy decides are the hooks of `Strategy`: how many candidates each live
trajectory proposes, what a child's value costs and how it is found, and which
trajectories go on after a turn. The base is beam search; particle filtering, bon,
lookahead and escalate override what differs. The tree and the environments are the
`forest.Forest`'s to keep.

A trajectory that ends (a final answer, the turn limit) is held while it is among the
ones the strategy keeps; the search stops when the strategy keeps no live trajectory
(beam: the top `width` have all finished), or when the budget cannot afford another
step. Every trajectory that finished is a leaf, held or not: its environment stays open
until the caller has verified it too (`leaves`), then every environment is closed
(`close_all`). The best leaf by value is the one the caller verifies as the episode's
answer, whether the strategy still held it or not (ties: the earliest to finish; a
search whose only trajectory ended without a turn chooses that one).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from turnbon_graph._litellm.loading import load_litellm
from turnbon_graph.bench.environment import Budgeted, Episode, TaskSpec
from turnbon_graph.bench.episode import is_agent_failure
from turnbon_graph.bench.metering.budget import REFUSED, Kind, Ledger, request_chars
from turnbon_graph.bench.metering.metered import (
    MeteredClient,
    metered_engine,
    metered_selector,
)
from turnbon_graph.bench.strategies.forest import Forest
from turnbon_graph.bench.strategies.registry import StrategyKind, built_in
from turnbon_graph.bench.strategies.selection import top_width
from turnbon_graph.bench.strategies.trajectory import Pick, Trajectory, step_size, take_step
from turnbon_graph.bench.strategies.tree import TreeNode
from turnbon_graph.bench.values.value import checked_score
from turnbon_graph.openai.messages import to_openai_messages, to_openai_tools
from turnbon_graph.turn.candidates import Candidate, group_by_action
from turnbon_graph.turn.engine import TurnEngine, turn_record

if TYPE_CHECKING:
    from turnbon_graph.bench.strategies.spec import StrategySpec
    from turnbon_graph.bench.values.value import ValueFunction
    from turnbon_graph.turn.state import GeneratedTurn

Plan = list[tuple[Trajectory, int]]
"""The turn's expansion: each trajectory with the candidates it proposes."""


@dataclass(frozen=True)
class StrategySetup:
    """What building a strategy for one episode may use (`Strategy.build`)."""

    engine: TurnEngine
    """The episode's engine: its generator, selector and options."""
    seed: str
    """Seeds the strategy's own draws: the run's seed, the task and the trial."""


class Strategy:
    """How a search expands and cuts. The base keeps the top `width` of the finished and
    the live trajectories together, by value (beam search); the others override what
    differs. A strategy of your own is a subclass with a `kind` of its own (its name and
    the parameters it takes), registered with `registry.register_strategy`."""

    kind: ClassVar[StrategyKind] = built_in("beam")
    forks: ClassVar[bool] = True
    """Whether each distinct candidate becomes a child (in a fork of its parent's
    environment, scored by the value function); else the engine's selector picks the
    one child, run in the parent's own environment (bon)."""
    weighs_duplicates: ClassVar[bool] = False
    """Whether a child stands for as many copies as candidates proposed its action
    (particle filtering: one particle per proposal, duplicates weighted, not merged)."""

    def __init__(self, width: int, n: int) -> None:
        self.width = width
        self.n = n

    @property
    def name(self) -> str:
        """The strategy's name (`kind.name`), as its turn records and tree name it."""
        return self.kind.name

    @classmethod
    async def build(cls, spec: StrategySpec, n: int, setup: StrategySetup) -> Strategy:
        """The strategy of `spec` at N=n for one episode (`setup`: what else it may
        use); the base takes `spec.width` (1 when its kind takes no width) and n."""
        return cls(spec.width or 1, n)

    def wanted(self, live: list[Trajectory]) -> Plan:
        """Every live trajectory proposes n candidates (the most valuable first)."""
        return [(t, self.n) for t in live]

    async def revise(
        self, search: Search, parent: Trajectory, turn: GeneratedTurn, engine: TurnEngine
    ) -> GeneratedTurn:
        """The turn's candidates the children come from: the generator's (escalate may
        sample the turn again)."""
        return turn

    def scoring_cost(self, search: Search, parent: Trajectory, k: int) -> float:
        """The estimated cost of scoring k children of `parent`: a value call each, on
        its request grown by a step."""
        return search.value_cost(parent, 1, k)

    async def evaluate(self, search: Search, children: list[Trajectory]) -> None:
        """Each child's value, when there is more than one thing to compare."""
        if search.scores(len(children)):
            await asyncio.gather(*(search.rate(c) for c in children))

    def annotate(self, node: TreeNode, message: AIMessage) -> None:
        """What the strategy adds to a child's tree node from its chosen `message`."""

    async def settle(self, search: Search, children: list[Trajectory]) -> list[Trajectory]:
        """The top `width` of the finished trajectories and the children together go on
        (`selection.top_width`): those of them that finished are held, the live ones are
        returned, best first; every other is cut (a finished one stays a leaf)."""
        pool = [*search.held, *children]
        kept = [pool[p] for p in top_width([t.entry() for t in pool], self.width)]
        for trajectory in pool:
            if not any(trajectory is k for k in kept):
                await search.drop(trajectory)
            elif trajectory.ended is not None and not search.is_held(trajectory):
                await search.hold(trajectory, trajectory.ended)
        return [t for t in kept if t.ended is None]


class Search(Forest):
    """One episode's search, from its root trajectory (the task's fresh episode)."""

    def __init__(
        self,
        strategy: Strategy,
        engine: TurnEngine,
        value: ValueFunction | None,
        task: TaskSpec,
        root: Episode,
        ledger: Ledger,
    ) -> None:
        super().__init__(root, ledger)
        self.strategy = strategy
        selector, self._selector_metered = metered_selector(engine.selector, ledger)
        self.engine = metered_engine(engine, ledger, "generator", selector)
        self.value = value
        self.task = task
        self.tools = to_openai_tools(list(root.tools))
        segments = [task.instruction, *task.follow_ups]
        first = Trajectory([HumanMessage(segments[0])], root, "0", "e0", segments[1:])
        self.live: list[Trajectory] = [first]
        self.value_errors: list[str] = []
        self.value_calls = 0
        self.value_failed = 0
        self.value_unparsed = 0
        self._engines: dict[tuple[int, Kind], TurnEngine] = {}
        self.native_n = False

    # ------------------------------------------------------------------ the loop

    async def run(self) -> Trajectory | None:
        """Searches until done; the trajectory to verify (None: every one failed)."""
        await self.prime()
        while self.live:
            plan = self.plan()
            planned = {id(t) for t, _ in plan}
            # What the budget cannot extend ends here, as at a turn limit.
            for left_out in [t for t in self.live if id(t) not in planned]:
                await self.hold(left_out, "token budget")
            self.live = [t for t in self.live if id(t) in planned]
            if not plan:
                break
            self.ledger.expect(self.cost(plan))
            expanded = await asyncio.gather(*(self._expand(t, k) for t, k in plan))
            children = [c for group in expanded for c in group]
            if self.value is not None and self.strategy.forks:
                await self.strategy.evaluate(self, children)
            self.live = await self.strategy.settle(self, children)
            self.ledger.expect(0.0)
            for trajectory in self.live:
                self.nodes[trajectory.node].fate = "kept"
        return await self.choose()

    async def choose(self) -> Trajectory | None:
        """The best leaf by value, over every leaf, not only those the strategy held at
        the end: a finished trajectory pushed out of the beam or never drawn again may be
        the best. A leaf never scored (its turn had one child to compare) is scored first,
        where the budget allows, so that it is not ranked below a scored one unseen."""
        pool = self.leaves() or self.held
        if not pool:
            return None
        if self.value is not None and len(pool) > 1:
            for leaf in pool:
                if leaf.value is None and self.ledger.fits(self.value_cost(leaf, 0)):
                    await self.rate(leaf)
        best = pool[top_width([t.entry() for t in pool], 1)[0]]
        self.nodes[best.node].fate = "chosen"
        return best

    async def prime(self) -> None:
        """Under a budget, before the run's first call: the first prompt's tokens per
        character, counted by the generator model's tokenizer (off the event loop)."""
        estimates = self.ledger.estimates
        known = estimates.frozen or estimates.first_ratio is not None or estimates.ratios
        if self.ledger.budget is None or known:
            return
        messages = to_openai_messages(self.engine.transcript(self.live[0].messages))
        litellm = await load_litellm()
        model = self.engine.generator.model_for(0)
        try:
            counted = await asyncio.to_thread(
                litellm.token_counter, model=model, messages=messages, tools=self.tools
            )
        except Exception:  # a tokenizer that cannot count: the estimates' fallback stands
            return
        estimates.first_ratio = counted / max(request_chars(messages, self.tools), 1)

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
        """The estimated cost of a turn's expansion: its generator calls, the value
        calls that score its children, and a bon selector's call."""
        ledger, total = self.ledger, 0.0
        children = sum(k for _, k in plan)
        for trajectory, k in plan:
            size = self.request_size(trajectory.messages)
            total += ledger.estimate("generator", size, k, calls=1 if self.native_n else k)
            if self.strategy.forks and self.value is not None and self.scores(children):
                total += self.strategy.scoring_cost(self, trajectory, k)
            if not self.strategy.forks and k > 1:
                total += self.selector_cost(size, k)
        return total

    def request_size(self, messages: Sequence[BaseMessage]) -> int:
        """Characters of the generator's request for `messages` (with the tools)."""
        return request_chars(to_openai_messages(self.engine.transcript(messages)), self.tools)

    def value_size(self, trajectory: Trajectory) -> int:
        """Characters of the value request for `trajectory` as it stands."""
        if self.value is None:
            return 0
        return self.value.request_size(self.engine.transcript(trajectory.messages))

    def value_cost(self, trajectory: Trajectory, steps: int, calls: int = 1) -> float:
        """The estimated cost of `calls` value calls on `trajectory` grown by `steps`
        steps; nothing for a value function that sends no request (the oracle, or a
        function of the transcript alone)."""
        size = self.value_size(trajectory)
        if size == 0:
            return 0.0
        ledger = self.ledger
        return ledger.estimate("value", size + steps * ledger.growth, calls, calls=calls)

    def selector_cost(self, size: float, k: int) -> float:
        """The estimated cost of a selector's call on k candidates for a request of
        `size` characters."""
        return self.ledger.estimate("selector", size + k * self.ledger.growth / 4)

    def scores(self, children: int) -> bool:
        """Whether children are scored: always but a lone child with nothing to compare."""
        return children > 1 or bool(self.held) or len(self.live) > 1

    # ------------------------------------------------------------------ one parent

    async def _expand(self, parent: Trajectory, k: int) -> list[Trajectory]:
        """The parent's children: one generator call, then each distinct candidate in a
        fork of the parent's environment (a lone one in the parent's own: `environments`)."""
        engine = self.engine_for(k)
        try:
            turn = await self.generate(engine, parent.messages)
            self.native_n = bool(turn.sampling.native_n)
            turn = await self.strategy.revise(self, parent, turn, engine)
        except Exception as exc:
            if not is_agent_failure(exc):
                raise
            if REFUSED in str(exc):  # the budget, not a failure: it ends here
                await self.hold(parent, "token budget")
                return []
            self.fail(parent, f"{type(exc).__name__}: {exc}")
            await self.close(parent.episode)
            return []
        picks = await self._picks(parent, turn, engine)
        if picks and (record := turn_record(picks[0][0])) is not None:
            self.ledger.prompt_tokens_a_call_each += record.prompt_tokens_a_call_each
        if not picks:
            await self.close(parent.episode)
        episodes = await self.environments(parent.episode, len(picks))
        children = await asyncio.gather(
            *(
                self._child(parent, message, tokens, where)
                for (message, tokens, _), where in zip(picks, episodes, strict=True)
            )
        )
        for child, (_, _, votes) in zip(children, picks, strict=True):
            if child is not None:
                self.nodes[child.node].proposed = votes
                if self.strategy.weighs_duplicates:
                    child.copies = votes
        return [c for c in children if c is not None]

    async def generate(
        self, engine: TurnEngine, messages: list[BaseMessage], extra: dict[str, Any] | None = None
    ) -> GeneratedTurn:
        """One generator call of `engine` (its n candidates) for `messages`; its spend
        goes on the ledger through the engine's metered client."""
        return await engine.generate(messages, tools=self.tools, extra=extra)

    async def _picks(
        self, parent: Trajectory, turn: GeneratedTurn, engine: TurnEngine
    ) -> list[tuple[AIMessage, int, int]]:
        """The chosen message of each child, with its turn record, the generator tokens
        of the candidates it stands for, and how many they are."""
        ok = turn.ok
        if not self.strategy.forks:
            message = await engine.select(parent.messages, turn)
            record = turn_record(message)
            assert record is not None
            if not self._selector_metered:  # its spend known only from the record
                self.ledger.add("selector", record.usage.selector, 0)
            return [(message, candidate_tokens(turn.candidates), len(ok))]
        groups = list(group_by_action(ok).values()) if ok[0].valid else [[0]]
        picks = []
        for group in groups:
            picker = Pick(self.strategy.name, ok[group[0]].action)
            chooser = TurnEngine(generator=engine.generator, selector=picker, config=engine.config)
            message = await chooser.select(parent.messages, turn)
            picks.append((message, candidate_tokens([ok[p] for p in group]), len(group)))
        return picks

    async def _child(
        self, parent: Trajectory, message: AIMessage, tokens: int, where: Episode | str
    ) -> Trajectory | None:
        fork = parent.fork if where is parent.episode else self.fork_id(where)
        node = self.add_node(parent, message, fork, tokens)
        self.strategy.annotate(self.nodes[node], message)
        if isinstance(where, str):
            self.prune_node(node, where)
            return None
        child = await self.step(parent, message, where, fork, node)
        if isinstance(child, str):
            self.prune_node(node, child)
            return None
        return child

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
        self.ledger.grew(step_size(child, parent), bool(message.tool_calls))
        return child

    async def rate(self, trajectory: Trajectory, into: Trajectory | None = None) -> None:
        """The value function's score of `trajectory`, on its last node (with the call's
        tokens) and given to `into` (default: itself) to rank by. A failed or unusable
        answer (a score outside 0 to 10 among them) is counted and leaves it unscored."""
        assert self.value is not None
        transcript = self.engine.transcript(trajectory.messages)
        asked = checked_score(await self.value.score(transcript, trajectory.episode))
        if not isinstance(getattr(self.value, "client", None), MeteredClient):
            self.ledger.add("value", asked.usage, self.value.request_size(transcript))
        node = self.nodes[trajectory.node]
        node.value, node.tokens = asked.value, node.tokens + asked.usage.total_tokens
        error = asked.error
        if error is None or REFUSED not in error:  # a refused call asked nothing
            self.value_calls += 1
        if error is not None:
            node.error = error
        if error is not None and REFUSED not in error:
            self.value_errors.append(error)
            if error.startswith("invalid answer"):
                self.value_unparsed += 1
            else:
                self.value_failed += 1
        target = into or trajectory
        target.value = self.nodes[target.node].value = asked.value

    # ------------------------------------------------------------------ bookkeeping

    def engine_for(self, k: int, kind: Kind = "generator") -> TurnEngine:
        """The episode's engine asking for k candidates, its calls metered as `kind`."""
        if k == self.engine.config.n and kind == "generator":
            return self.engine
        if (k, kind) not in self._engines:
            config = self.engine.config.model_copy(update={"n": k})
            engine = TurnEngine(
                generator=self.engine.generator,
                selector=self.engine.selector,
                config=config,
                trace=self.engine.trace,
            )
            if kind != "generator":
                engine = metered_engine(engine, self.ledger, kind)
            self._engines[(k, kind)] = engine
        return self._engines[(k, kind)]


def candidate_tokens(candidates: Sequence[Candidate]) -> int:
    """Prompt and completion tokens of the candidates' calls."""
    return sum(c.usage.total_tokens for c in candidates)
