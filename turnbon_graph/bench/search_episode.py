"""One episode of a search strategy into a run folder: the search from the task's fresh
episode, the verifier on the best ended trajectory, its turns file (the verified
trajectory's turns, as a bon episode's), its tree file, and its `EpisodeResult` with
the strategy, its parameters and what every call spent."""

from __future__ import annotations

import asyncio
import random
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from turnbon_graph.bench.attempt import TurnLog
from turnbon_graph.bench.environment import Environment, TaskSpec
from turnbon_graph.bench.episode import EpisodeEnd, classify_failure, verdict_outcome
from turnbon_graph.bench.runs import EpisodeResult, current_worker, tree_path, turns_path
from turnbon_graph.bench.strategies.beam import Beam
from turnbon_graph.bench.strategies.bon import BestOfN
from turnbon_graph.bench.strategies.budget import Ledger
from turnbon_graph.bench.strategies.escalate import Escalate, escalated_effort
from turnbon_graph.bench.strategies.lookahead import Lookahead
from turnbon_graph.bench.strategies.particle import Particles
from turnbon_graph.bench.strategies.search import Search, Strategy
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.strategies.trajectory import Trajectory
from turnbon_graph.bench.strategies.tree import TreeNode, write_tree
from turnbon_graph.bench.strategies.value import ValueModel
from turnbon_graph.config import CONNECTION_KEYS
from turnbon_graph.records import UsageSplit
from turnbon_graph.turn.engine import TurnEngine, turn_record
from turnbon_graph.turn.generator import CandidateGenerator


def make_strategy(spec: StrategySpec, n: int, seed: str, effort: str | None = None) -> Strategy:
    """The strategy of `spec` at N candidates; `seed` seeds particle resampling, `effort`
    is escalate's `reasoning_effort` (None: its step-by-step prompt)."""
    if spec.name == "bon":
        return BestOfN(n)
    if spec.name == "lookahead":
        assert spec.horizon is not None  # set for lookahead
        return Lookahead(n, spec.horizon)
    if spec.name == "escalate":
        assert spec.agree is not None  # set for escalate
        return Escalate(n, spec.agree, effort)
    assert spec.width is not None  # set for every strategy of several trajectories
    if spec.name == "particle":
        return Particles(spec.width, spec.value_temperature, random.Random(seed))
    return Beam(spec.width, n)


def value_model(
    engine: TurnEngine, spec: StrategySpec, kwargs: dict[str, Any] | None
) -> ValueModel:
    """The value model: `spec.value` (default: the generator's model, on its endpoint),
    calling through the engine's client, so the run's limits bound it too."""
    generator = engine.generator
    assert isinstance(generator, CandidateGenerator)  # what TurnEngine.from_options builds
    if kwargs is None and spec.value is None:
        endpoint = {**generator.completion_kwargs, **generator.specs[0].completion_kwargs}
        kwargs = {k: v for k, v in endpoint.items() if k in CONNECTION_KEYS}
    return ValueModel(
        spec.value or generator.models[0], completion_kwargs=kwargs, client=generator.client
    )


async def run_search_episode(
    environment: Environment,
    engine: TurnEngine,
    spec: StrategySpec,
    task: TaskSpec,
    trial: int,
    n: int,
    run_dir: Path,
    *,
    setting: str | None = None,
    value_kwargs: dict[str, Any] | None = None,
) -> EpisodeResult:
    """One attempt by the search strategy `spec`: the search, then the verifier on its
    choice. `setting`: the setting's label in the run (default: the strategy's own);
    `value_kwargs`: the value model's connection (`BenchConfig.value_kwargs`)."""
    setting = setting or spec.label(n)
    started = time.monotonic()
    ledger = Ledger(spec.token_budget)
    effort = None
    if spec.name == "escalate":  # model-map look-ups, off the event loop
        effort = await asyncio.to_thread(escalated_effort, engine.generator)
    strategy = make_strategy(spec, n, f"{engine.config.seed}|{task.id}|{trial}", effort)
    value = value_model(engine, spec, value_kwargs) if strategy.forks else None
    chosen: Trajectory | None = None
    search: Search | None = None
    try:
        root = await environment.start(task, trial)
    except Exception as exc:
        end = EpisodeEnd(*classify_failure(exc, task))
    else:
        search = Search(strategy, engine, value, task, root, ledger)
        try:
            end, chosen = await _search_and_verify(search, task)
        finally:
            await search.close_all()
    messages = chosen.messages if chosen is not None else []
    tree = search.tree() if search is not None else None
    await asyncio.to_thread(
        _write_files, run_dir, setting, task.id, trial, messages, tree
    )  # the files, off the event loop
    assert end.outcome is not None
    spent = ledger.spent
    return EpisodeResult(
        task=task.id,
        trial=trial,
        setting=setting,
        n=n,
        outcome=end.outcome,
        turns=chosen.turns if chosen is not None else 0,
        usage=UsageSplit(generator=spent["generator"], selector=spent["selector"]),
        prompt_tokens_a_call_each=ledger.prompt_tokens_a_call_each,
        duration_s=round(time.monotonic() - started, 3),
        error=end.error,
        verifier_output=(end.verdict.output if end.verdict else "")[-4000:],
        tamper=end.verdict.tamper if end.verdict else [],
        category=task.category,
        difficulty=task.difficulty,
        worker=current_worker(),
        strategy=spec,
        tokens=ledger.total,
        value_usage=spent["value"] if strategy.forks else None,
        escalated_turns=_escalated(messages) if spec.name == "escalate" else None,
    )


def _escalated(messages: list[Any]) -> int:
    """The turns among `messages` that escalate sampled again."""
    records = (turn_record(m) for m in messages if isinstance(m, AIMessage))
    return sum(1 for r in records if r is not None and r.sampling.escalation is not None)


def _write_files(
    run_dir: Path,
    setting: str,
    task: str,
    trial: int,
    messages: list[Any],
    tree: list[TreeNode] | None,
) -> None:
    """The episode's turns file and, when it searched, its tree file."""
    _write_turns(turns_path(run_dir, setting, task, trial), messages)
    if tree is not None:
        write_tree(tree_path(run_dir, setting, task, trial), tree)


async def _search_and_verify(
    search: Search, task: TaskSpec
) -> tuple[EpisodeEnd, Trajectory | None]:
    """The search within the task's agent time limit, then the verifier on its choice;
    how the attempt ended, classified as a bon episode's is (`bench.episode`)."""
    try:
        async with asyncio.timeout(task.agent_timeout_s):
            chosen = await search.run()
    except Exception as exc:
        return EpisodeEnd(*classify_failure(exc, task)), None
    if chosen is None:
        failed = search.errors[0] if search.errors else "no trajectory could be extended"
        return EpisodeEnd("agent_error", failed[:2000]), None
    try:
        verdict = await asyncio.wait_for(chosen.episode.verify(), task.verifier_timeout_s)
    except Exception as exc:
        return EpisodeEnd(*classify_failure(exc, task), messages=chosen.messages), chosen
    outcome, error = verdict_outcome(verdict)
    return EpisodeEnd(outcome, error, verdict, chosen.messages), chosen


def _write_turns(path: Path, messages: list[Any]) -> None:
    """The verified trajectory's turns file, as the agent graph's states would have
    written it: each chosen action, then its tool results together."""
    log = TurnLog(path)
    try:
        for position, message in enumerate(messages):
            following = messages[position + 1] if position + 1 < len(messages) else None
            last_result = isinstance(message, ToolMessage) and not isinstance(
                following, ToolMessage
            )
            if isinstance(message, AIMessage) or last_result:
                log(messages[: position + 1])
    finally:
        log.close()
