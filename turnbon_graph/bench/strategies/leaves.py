"""The exploration/exploitation split of a search, measured: once the chosen trajectory is
verified (its verdict is the episode's outcome), every other finished leaf is verified
too, before the environments close, and each leaf is kept with its value and verdict
(`record.Leaf`). The verifier's time on them is recorded apart: it costs no model tokens
and is none of the agent's time. From the leaves, `decomposition.exploration` gives oracle
(the best leaf), realised (the chosen one), h and rho_v per setting."""

from __future__ import annotations

import asyncio
import time

from turnbon_graph.bench.environment import TaskSpec
from turnbon_graph.bench.episode import is_agent_failure
from turnbon_graph.bench.strategies.record import Leaf
from turnbon_graph.bench.strategies.search import Search
from turnbon_graph.bench.strategies.trajectory import Trajectory

LEAF_VERIFIERS = 4
"""Leaves verified at once (each verification runs the task's tests)."""


async def verdict(trajectory: Trajectory, task: TaskSpec) -> bool | None:
    """Whether the verifier passes the leaf; None when it gives no verdict (it could not
    run, or ran out of time). A bug of the harness propagates."""
    try:
        found = await asyncio.wait_for(trajectory.episode.verify(), task.verifier_timeout_s)
    except Exception as exc:
        if isinstance(exc, TimeoutError) or is_agent_failure(exc):
            return None
        raise
    return None if found.error else found.passed


async def verify_leaves(
    search: Search, chosen: Trajectory | None, chosen_passed: bool | None, task: TaskSpec
) -> tuple[list[Leaf], float]:
    """Every finished leaf of `search` with its value and verdict (the chosen one's is
    `chosen_passed`, already known), and the seconds the others took to verify."""
    others = [t for t in search.leaves() if t is not chosen]
    limit = asyncio.Semaphore(LEAF_VERIFIERS)

    async def judged(trajectory: Trajectory) -> bool | None:
        async with limit:
            return await verdict(trajectory, task)

    started = time.monotonic()
    verdicts = await asyncio.gather(*(judged(t) for t in others))
    spent = time.monotonic() - started
    found = {id(t): v for t, v in zip(others, verdicts, strict=True)}
    leaves = []
    for trajectory in search.finished:
        if trajectory.turns == 0:  # the task's start, never acted on: nothing to verify
            continue
        is_chosen = trajectory is chosen
        passed = chosen_passed if is_chosen else found.get(id(trajectory))
        search.nodes[trajectory.node].passed = passed
        leaves.append(
            Leaf(
                node=trajectory.node,
                value=trajectory.value,
                passed=passed,
                ended=trajectory.ended or "",
                chosen=is_chosen,
                held=search.is_held(trajectory),
            )
        )
    return leaves, round(spent, 3)
