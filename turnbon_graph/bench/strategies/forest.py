"""The bookkeeping of a search: its tree of nodes (`tree.TreeNode`) and the environments
its trajectories run in: forks made and tracked, cut trajectories' environments closed,
finished ones held for the choice or kept open as leaves for the verifier, every one
closed at the end. `search.Search` runs the loop on top of it."""

from __future__ import annotations

import asyncio
import dataclasses

from langchain_core.messages import AIMessage

from turnbon_graph.bench.environment import Episode
from turnbon_graph.bench.episode import is_agent_failure
from turnbon_graph.bench.metering.budget import Ledger
from turnbon_graph.bench.strategies.trajectory import Trajectory, describe
from turnbon_graph.bench.strategies.tree import Fate, TreeNode, short_action


class Forest:
    """A search's nodes and environments, from its root episode."""

    def __init__(self, root: Episode, ledger: Ledger) -> None:
        self.ledger = ledger
        self.nodes: dict[str, TreeNode] = {
            "0": TreeNode(id="0", parent=None, turn=0, action="(the task starts)", fork="e0")
        }
        self.held: list[Trajectory] = []
        self.finished: list[Trajectory] = []
        """Every trajectory that ended, held or not: the leaves the caller verifies."""
        self.errors: list[str] = []
        self.open: set[int] = {id(root)}
        self._episodes: dict[int, Episode] = {id(root): root}
        self._forks = 0
        self._fork_ids: dict[int, str] = {}

    async def fork(self, episode: Episode) -> Episode | str:
        """A fork of `episode`, tracked (closed with the search), or why none was made."""
        try:
            made: Episode = await episode.fork()  # type: ignore[attr-defined]
        except Exception as exc:
            if not is_agent_failure(exc):
                raise
            return f"the fork failed: {type(exc).__name__}: {exc}"
        self.ledger.forks += 1
        self.track(made)
        return made

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

    def track(self, episode: Episode) -> None:
        self._forks += 1
        self.open.add(id(episode))
        self._episodes[id(episode)] = episode
        self._fork_ids[id(episode)] = f"e{self._forks}"

    def fork_id(self, episode: Episode | str) -> str:
        return self._fork_ids.get(id(episode), "-")

    def fail(self, trajectory: Trajectory, error: str) -> None:
        self.errors.append(error)
        self.nodes[trajectory.node].error = error

    def prune_node(self, node: str, error: str | None = None) -> None:
        self.nodes[node].fate = "pruned"
        if error is not None:
            self.nodes[node].error = error
            self.errors.append(error)

    def is_held(self, trajectory: Trajectory) -> bool:
        return any(trajectory is t for t in self.held)

    async def prune(self, trajectory: Trajectory) -> None:
        """Cut: its node pruned, and its environment closed, unless it finished (a leaf
        stays open to be verified)."""
        self.prune_node(trajectory.node)
        if trajectory.ended is not None:
            self.leaf(trajectory)
        else:
            await self.close(trajectory.episode)

    async def drop(self, trajectory: Trajectory) -> None:
        """Out of the strategy's pool: a held trajectory no longer held, any other cut."""
        self.held = [t for t in self.held if t is not trajectory]
        await self.prune(trajectory)

    async def hold(self, trajectory: Trajectory, ended: str) -> None:
        """An ended trajectory waits for the choice."""
        trajectory.ended = ended
        node = self.nodes[trajectory.node]
        node.fate, node.ended = "held", ended
        self.held.append(trajectory)
        self.leaf(trajectory)

    def leaf(self, trajectory: Trajectory) -> None:
        """A finished trajectory, to be verified: its node says how it ended."""
        self.nodes[trajectory.node].ended = trajectory.ended
        if not any(trajectory is t for t in self.finished):
            self.finished.append(trajectory)

    def leaves(self) -> list[Trajectory]:
        """The finished trajectories whose environment is open: those the verifier can
        still judge (one the task's start ended, without a turn, is none)."""
        return [t for t in self.finished if t.turns > 0 and id(t.episode) in self.open]

    async def close(self, episode: Episode) -> None:
        if id(episode) in self.open:
            self.open.discard(id(episode))
            await episode.close()

    async def close_all(self) -> None:
        """Closes every environment still open (after the verifier ran)."""
        for key in list(self.open):
            await self.close(self._episodes[key])

    async def environments(self, episode: Episode, count: int) -> list[Episode | str]:
        """Where `count` branches from `episode` go on, all made before any acts (or why
        one could not be made). A lone branch keeps `episode` itself. Several each get a
        fork, the first too, and `episode` is closed: a fork carries the files, not the
        processes or the sandbox's /tmp, so a branch left in `episode` would start from
        more than its siblings. When no fork could be made, the first keeps `episode`."""
        if count <= 1:
            return [episode] if count == 1 else []
        made = list(await asyncio.gather(*(self.fork(episode) for _ in range(count))))
        if all(isinstance(m, str) for m in made):
            return [episode, *made[1:]]
        await self.close(episode)
        return made

    async def copies(self, trajectory: Trajectory, count: int) -> list[Trajectory]:
        """`trajectory` as `count` equal copies (a particle drawn `count` times), each in
        an environment of `environments`; a copy whose fork failed is left out (recorded
        on its node)."""
        made = []
        for where in await self.environments(trajectory.episode, count):
            if isinstance(where, str):
                self.fail(trajectory, where)
            elif where is trajectory.episode:
                made.append(trajectory)
            else:
                copy = dataclasses.replace(
                    trajectory,
                    messages=list(trajectory.messages),
                    episode=where,
                    fork=self.fork_id(where),
                )
                made.append(copy)
        return made

    def tree(self) -> list[TreeNode]:
        return list(self.nodes.values())
