"""`turnbon bench`: run every task of an environment, for each N and trial, into a run folder.

Episodes run concurrently up to a limit, each in its own environment episode (its own
working directory, tools and verifier), with a progress bar. Every turn is appended to
the episode's turns file as it happens; an episode's result line is written last, so a
killed run resumes by skipping exactly the episodes that have one.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from turnbon_graph.bench.environment import Environment, TaskSpec, chosen_tasks
from turnbon_graph.bench.episode import run_agent
from turnbon_graph.bench.runs import (
    EPISODES_FILE,
    SETTINGS_FILE,
    EpisodeResult,
    RunSettings,
    append_line,
    current_worker,
    read_episodes,
    setting_label,
    turns_path,
)
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import RECORD_KEY, TurnRecord, Usage, UsageSplit
from turnbon_graph.selectors.base import Selector
from turnbon_graph.turn import TurnEngine

if TYPE_CHECKING:
    from turnbon_graph.bench.ray_runner import RayOptions

OBSERVATION_LIMIT = 4000
"""Characters of a tool result kept in the turns file (the full text went to the model)."""


@dataclass
class BenchConfig:
    """What to run: the model and its options, the settings to compare, the repetitions."""

    model: str
    n_values: list[int] = field(default_factory=lambda: [1, 4])
    selector: str | Selector | None = None
    trials: int = 1
    concurrency: int = 4
    engine_options: dict[str, Any] = field(default_factory=dict)
    """Further `TurnEngine.from_options` keywords (completion_kwargs, timeout, ...)."""
    redo_errors: bool = False
    """Run again the episodes the run folder has that ended in an agent error (a key or an
    endpoint fixed since); their new lines supersede the old ones."""


async def run_benchmark(
    environment: Environment,
    config: BenchConfig,
    run_dir: Path,
    *,
    tasks: Sequence[str] | None = None,
    progress: bool = True,
    ray: str | RayOptions | None = None,
) -> list[EpisodeResult]:
    """Runs what the run folder does not have yet; returns every episode result of the run.

    `ray`: None runs the episodes here, on this event loop; a Ray address ("local" starts
    a Ray instance on this machine's cores, "auto" or "host:port" joins a cluster) or a
    `RayOptions` runs them on Ray workers (`turnbon_graph.bench.ray_runner`), into the
    same run folder."""
    if ray is not None:
        from turnbon_graph.bench.ray_runner import run_on_ray

        return await run_on_ray(
            environment, config, run_dir, tasks=tasks, progress=progress, ray=ray
        )
    plan = plan_run(environment, config, run_dir, tasks)
    engines = plan.engines
    bar = Progress(total=len(plan.todo), enabled=progress)
    limit = asyncio.Semaphore(config.concurrency)
    lock = asyncio.Lock()

    async def one(task: TaskSpec, trial: int, n: int) -> None:
        async with limit:
            result = await run_episode(environment, engines[n], task, trial, n, run_dir)
        async with lock:
            record_episode(run_dir, result, bar)

    try:
        await asyncio.gather(*(one(task, trial, n) for task, trial, n in plan.todo))
    finally:
        bar.close()
    return read_episodes(run_dir)


Todo = tuple[TaskSpec, int, int]
"""An episode to run: the task, the trial, N."""


@dataclass
class RunPlan:
    """A run's folder prepared (or checked, on a rerun) and the episodes it lacks."""

    engines: dict[int, TurnEngine]
    todo: list[Todo]


def plan_run(
    environment: Environment, config: BenchConfig, run_dir: Path, tasks: Sequence[str] | None
) -> RunPlan:
    """One engine per N, the run folder's settings written (or checked against a rerun's),
    and every (task, trial, N) the folder has no episode line of yet."""
    chosen = chosen_tasks(environment, tasks)
    engines = {
        n: TurnEngine.from_options(
            config.model, n=n, selector=config.selector, **config.engine_options
        )
        for n in config.n_values
    }
    settings = RunSettings(
        environment=environment.name,
        model=config.model,
        selector=engines[max(config.n_values)].selector.name,
        n_values=config.n_values,
        trials=config.trials,
        tasks=[t.id for t in chosen],
        created=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    _prepare(run_dir, settings)
    done = {
        r.key
        for r in read_episodes(run_dir)
        if not (config.redo_errors and r.outcome == "agent_error")
    }
    todo = [
        (task, trial, n)
        for n in config.n_values
        for task in chosen
        for trial in range(config.trials)
        if (setting_label(n), task.id, trial) not in done
    ]
    return RunPlan(engines, todo)


def record_episode(run_dir: Path, result: EpisodeResult, bar: Progress) -> None:
    """An episode's line, written last: from now on the run counts it as done."""
    append_line(run_dir / EPISODES_FILE, result.model_dump_json())
    bar.update(result)


def _prepare(run_dir: Path, settings: RunSettings) -> None:
    """Creates the run folder, or checks that a rerun asks for the same run."""
    path = run_dir / SETTINGS_FILE
    if path.exists():
        previous = RunSettings.model_validate_json(path.read_text(encoding="utf-8"))
        mine = settings.model_dump(exclude={"created"})
        theirs = previous.model_dump(exclude={"created"})
        if mine != theirs:
            changed = sorted(k for k in mine if mine[k] != theirs[k])
            raise ConfigurationError(
                f"{run_dir} holds a run with other settings ({', '.join(changed)} differ); "
                "use a new run folder, or the same arguments to resume it"
            )
        return
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(settings.model_dump_json(indent=2), encoding="utf-8")


async def run_episode(
    environment: Environment,
    engine: TurnEngine,
    task: TaskSpec,
    trial: int,
    n: int,
    run_dir: Path,
) -> EpisodeResult:
    """One attempt: the agent loop (and any follow-up user turns), then the verifier."""
    setting = setting_label(n)
    log = TurnLog(turns_path(run_dir, setting, task.id, trial))
    started = time.monotonic()
    try:
        end = await run_agent(environment, engine, task, trial, on_state=log)
    finally:
        log.close()
    assert end.outcome is not None  # verified
    return EpisodeResult(
        task=task.id,
        trial=trial,
        setting=setting,
        n=n,
        outcome=end.outcome,
        turns=sum(1 for m in end.messages if _record(m) is not None),
        usage=_usage(end.messages),
        prompt_tokens_a_call_each=sum(
            TurnRecord.model_validate(r).prompt_tokens_a_call_each
            for m in end.messages
            if (r := _record(m)) is not None
        ),
        duration_s=round(time.monotonic() - started, 3),
        error=end.error,
        verifier_output=(end.verdict.output if end.verdict else "")[-4000:],
        category=task.category,
        difficulty=task.difficulty,
        worker=current_worker(),
    )


class TurnLog:
    """The episode's turns file: each turn appended with its observation (the tool
    results that answer it) as the agent's states stream by."""

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")  # an unfinished earlier attempt starts over
        self._pending: dict[str, Any] | None = None

    def __call__(self, messages: list[BaseMessage]) -> None:
        last = messages[-1]
        if isinstance(last, AIMessage) and (record := _record(last)) is not None:
            self.close()
            self._pending = {"record": record, "observation": None}
        elif isinstance(last, ToolMessage) and self._pending is not None:
            self._pending["observation"] = [
                {"tool": m.name, "content": str(m.content)[:OBSERVATION_LIMIT]}
                for m in _tool_results(messages)
            ]
            self.close()

    def close(self) -> None:
        """Writes the turn still waiting for its observation, if any."""
        if self._pending is not None:
            append_line(self.path, json.dumps(self._pending, ensure_ascii=False))
            self._pending = None


def _tool_results(messages: Sequence[BaseMessage]) -> list[ToolMessage]:
    """The tool results that answer the last chosen action."""
    results: list[ToolMessage] = []
    for message in reversed(messages):
        if not isinstance(message, ToolMessage):
            break
        results.append(message)
    return results[::-1]


def _record(message: BaseMessage) -> dict[str, Any] | None:
    if isinstance(message, AIMessage):
        record = message.response_metadata.get(RECORD_KEY)
        return record if isinstance(record, dict) else None
    return None


def _usage(messages: Sequence[BaseMessage]) -> UsageSplit:
    total = UsageSplit()
    for message in messages:
        if (record := _record(message)) is not None:
            split = UsageSplit.model_validate(record["usage"])
            total = UsageSplit(
                generator=total.generator + split.generator,
                selector=total.selector + split.selector,
            )
    return total


class Progress:
    """tqdm bar with the pass rate and tokens so far in its postfix."""

    def __init__(self, total: int, enabled: bool) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=total, unit="episode", disable=not enabled, dynamic_ncols=True)
        self._passed = 0
        self._done = 0
        self._tokens = Usage()

    def update(self, result: EpisodeResult) -> None:
        self._done += 1
        self._passed += result.passed
        self._tokens = self._tokens + result.usage.generator + result.usage.selector
        self._bar.set_postfix(
            pass_rate=f"{self._passed / self._done:.0%}", tokens=self._tokens.total_tokens
        )
        self._bar.update(1)

    def close(self) -> None:
        self._bar.close()
