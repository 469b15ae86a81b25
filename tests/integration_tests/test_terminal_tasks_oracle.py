"""Every shipped task: its reference solution passes its verifier, and its verifier fails
on the untouched environment (so each verifier can fail). Two tasks run at a time."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest

from turnbon_graph.bench.environment import TaskSpec, Verdict
from turnbon_terminal import TerminalEnvironment, load_tasks

POOL = 2
TASK_IDS = [t.id for t in load_tasks()]


@dataclass
class Outcome:
    solution: str
    solved: Verdict
    untouched: Verdict


async def _check(env: TerminalEnvironment, spec: TaskSpec, pool: asyncio.Semaphore) -> Outcome:
    async with pool:
        episode = await env.start(spec, 0)
        try:
            ran = await episode.run_solution()
            solved = await episode.verify()
        finally:
            await episode.close()
        fresh = await env.start(spec, 1)
        try:
            untouched = await fresh.verify()
        finally:
            await fresh.close()
    return Outcome(ran.render()[-2000:], solved, untouched)


async def _check_all() -> dict[str, Outcome]:
    env = TerminalEnvironment()
    pool = asyncio.Semaphore(POOL)
    specs = list(env.tasks())
    outcomes = await asyncio.gather(*(_check(env, s, pool) for s in specs))
    return {s.id: o for s, o in zip(specs, outcomes, strict=True)}


@pytest.fixture(scope="module")
def outcomes() -> dict[str, Outcome]:
    return asyncio.run(_check_all())


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_the_reference_solution_passes(outcomes: dict[str, Outcome], task_id: str) -> None:
    outcome = outcomes[task_id]
    assert outcome.solved.error is None, outcome.solved.error
    assert outcome.solved.passed, f"{outcome.solution}\n{outcome.solved.output}"


@pytest.mark.parametrize("task_id", TASK_IDS)
def test_the_verifier_fails_on_the_untouched_environment(
    outcomes: dict[str, Outcome], task_id: str
) -> None:
    verdict = outcomes[task_id].untouched
    assert verdict.error is None, verdict.error
    assert not verdict.passed
    assert " failed" in verdict.output, "the verifier should fail on assertions, not crash"
