"""One episode of a search strategy into a run folder: the search from the task's fresh
episode within its budget, the verifier on the best ended trajectory (its verdict is the
episode's outcome) and then on every other finished leaf, its turns file (the verified
trajectory's turns, as a bon episode's), its tree file, and its `EpisodeResult` with the
strategy, its parameters, what every kind of call spent and its leaves' verdicts.

An episode whose budget cannot afford one call ends as `budget_exhausted`, unverified."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage

from turnbon_graph._litellm.loading import load_litellm
from turnbon_graph.bench.attempt import TurnLog
from turnbon_graph.bench.environment import Environment, TaskSpec
from turnbon_graph.bench.episode import EpisodeEnd, classify_failure, verdict_outcome
from turnbon_graph.bench.metering.budget import Estimates, Ledger, Meter
from turnbon_graph.bench.running.runs import EpisodeResult, current_worker, tree_path, turns_path
from turnbon_graph.bench.strategies.escalate import Escalate
from turnbon_graph.bench.strategies.leaves import verify_leaves
from turnbon_graph.bench.strategies.record import SearchRecord
from turnbon_graph.bench.strategies.registry import strategy_class
from turnbon_graph.bench.strategies.search import Search, Strategy, StrategySetup
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.bench.strategies.trajectory import Trajectory
from turnbon_graph.bench.strategies.tree import TreeNode, write_tree
from turnbon_graph.bench.values.valuing import make_value, value_model_id
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import UsageSplit
from turnbon_graph.turn.engine import TurnEngine, turn_record
from turnbon_graph.turn.generator import CandidateGenerator


async def make_strategy(spec: StrategySpec, n: int, setup: StrategySetup) -> Strategy:
    """The strategy of `spec` at N candidates, by its registered class (`registry`)."""
    cls = strategy_class(spec.name)
    if not (isinstance(cls, type) and issubclass(cls, Strategy)):
        raise ConfigurationError(
            f"strategy {spec.name!r} is registered as {cls!r}, which is no subclass of "
            "turnbon_graph.bench.strategies.search.Strategy"
        )
    return await cls.build(spec, n, setup)


def models_by_kind(engine: TurnEngine, spec: StrategySpec) -> dict[str, str]:
    """The model each kind of call goes to (the selector's when it names one)."""
    generator = engine.generator
    assert isinstance(generator, CandidateGenerator)
    model = generator.models[0]
    selector = getattr(engine.selector, "model", None)
    return {
        "generator": model,
        "rollout": model,
        "value": value_model_id(spec, model) or model,
        "selector": selector if isinstance(selector, str) else model,
    }


def prices(models: dict[str, str]) -> dict[str, tuple[float, float]]:
    """LiteLLM's price of a prompt and of a completion token, for each kind's model (a
    model it does not price costs nothing: the command line refuses those). Blocking:
    call it off the event loop."""
    import litellm

    found = {}
    for kind, model in models.items():
        try:
            prompt, _ = litellm.cost_per_token(model=model, prompt_tokens=1, completion_tokens=0)
            _, completion = litellm.cost_per_token(
                model=model, prompt_tokens=0, completion_tokens=1
            )
        except Exception:
            prompt = completion = 0.0
        found[kind] = (float(prompt), float(completion))
    return found


async def episode_ledger(
    engine: TurnEngine, spec: StrategySpec, estimates: Estimates | None
) -> Ledger:
    """The episode's ledger: its budget in its unit, on the run's shared `estimates`."""
    meter = Meter(spec.budget_unit)
    if spec.budget_unit == "usd":
        await load_litellm()
        meter.prices = await asyncio.to_thread(prices, models_by_kind(engine, spec))
    return Ledger(spec.token_budget, meter, estimates if estimates is not None else Estimates())


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
    estimates: Estimates | None = None,
) -> EpisodeResult:
    """One attempt by the search strategy `spec`: the search, then the verifier on its
    choice and on every other finished leaf. `setting`: the setting's label in the run
    (default: the strategy's own); `value_kwargs`: the value model's connection
    (`BenchConfig.value_kwargs`); `estimates`: what the setting's calls cost so far, shared
    by its setting's episodes (`BenchConfig.estimates_for`)."""
    setting = setting or spec.label(n)
    started = time.monotonic()
    ledger = await episode_ledger(engine, spec, estimates)
    seed = f"{engine.config.seed}|{task.id}|{trial}"
    strategy = await make_strategy(spec, n, StrategySetup(engine, seed))
    value = make_value(engine, spec, task, value_kwargs, ledger) if strategy.forks else None
    chosen: Trajectory | None = None
    search: Search | None = None
    record = SearchRecord(unit=spec.budget_unit)
    try:
        root = await environment.start(task, trial)
    except Exception as exc:
        end = EpisodeEnd(*classify_failure(exc, task))
    else:
        search = Search(strategy, engine, value, task, root, ledger)
        try:
            end, chosen = await _search_and_verify(search, task, spec)
            if chosen is not None and end.outcome != "budget_exhausted":
                passed = end.verdict.passed if end.verdict and not end.verdict.error else None
                record.leaves, record.verify_s = await verify_leaves(search, chosen, passed, task)
        finally:
            await search.close_all()
    messages = chosen.messages if chosen is not None else []
    tree = search.tree() if search is not None else None
    await asyncio.to_thread(
        _write_files, run_dir, setting, task.id, trial, messages, tree
    )  # the files, off the event loop
    assert end.outcome is not None
    spent = ledger.spent
    record.spent = round(ledger.amount, 10)
    record.rollout = spent["rollout"]
    record.steps, record.forks, record.refused = ledger.steps, ledger.forks, ledger.refused
    if search is not None:
        record.value_calls = search.value_calls
        record.value_failed, record.value_unparsed = search.value_failed, search.value_unparsed
        record.value_error = search.value_errors[0][:2000] if search.value_errors else None
    return EpisodeResult(
        task=task.id,
        trial=trial,
        setting=setting,
        n=n,
        turns=chosen.turns if chosen is not None else 0,
        usage=UsageSplit(generator=spent["generator"], selector=spent["selector"]),
        prompt_tokens_a_call_each=ledger.prompt_tokens_a_call_each,
        duration_s=round(time.monotonic() - started, 3),
        worker=current_worker(),
        **end.result_fields(task),
        strategy=spec,
        tokens=ledger.total,
        value_usage=spent["value"] if strategy.forks else None,
        escalated_turns=_escalated(messages) if isinstance(strategy, Escalate) else None,
        search=record,
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
    search: Search, task: TaskSpec, spec: StrategySpec
) -> tuple[EpisodeEnd, Trajectory | None]:
    """The search within the task's agent time limit, then the verifier on its choice;
    how the attempt ended, classified as a bon episode's is (`bench.episode`), or as
    `budget_exhausted` when the budget afforded no call at all."""
    try:
        async with asyncio.timeout(task.agent_timeout_s):
            chosen = await search.run()
    except Exception as exc:
        return EpisodeEnd(*classify_failure(exc, task)), None
    if chosen is None:
        failed = search.errors[0] if search.errors else "no trajectory could be extended"
        return EpisodeEnd("agent_error", failed[:2000]), None
    if chosen.turns == 0 and chosen.ended == "token budget":
        first = search.cost([(chosen, 1)])
        budget = spec.amount(spec.token_budget or 0)
        why = f"the budget of {budget} cannot afford one call (the first: {spec.amount(first)})"
        return EpisodeEnd("budget_exhausted", why), chosen
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
