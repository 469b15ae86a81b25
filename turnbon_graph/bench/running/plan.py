"""What a bench run runs and what its run folder still lacks, for every runner.

`plan_run` writes the folder's settings (or checks a rerun's against them) and lists the
episodes without a line in episodes.jsonl; `run_setting_episode` runs one of them (a
search strategy's, or plain bon's); `record_episode` writes its line last, so a killed
run resumes by skipping exactly the episodes that have one. The local runner and the Ray
runner plan, run and record through here, so they write the same run folder.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

from turnbon_graph.bench.agents import ReferenceAgent, is_reference
from turnbon_graph.bench.attempt import run_episode
from turnbon_graph.bench.draws import seeded_engine
from turnbon_graph.bench.environment import Environment, TaskSpec, chosen_tasks
from turnbon_graph.bench.metering.budget import Estimates
from turnbon_graph.bench.metering.stored import (
    ESTIMATES_FILE,
    dump_estimates,
    frozen_for,
    read_estimates,
    write_estimates,
)
from turnbon_graph.bench.reference import run_reference_episode
from turnbon_graph.bench.running.progress import Progress
from turnbon_graph.bench.running.runs import (
    EPISODES_FILE,
    SETTINGS_FILE,
    EpisodeResult,
    RunSettings,
    Setting,
    append_line,
    read_episodes,
    settings_of,
    strategy_list,
)
from turnbon_graph.bench.search_episode import run_search_episode
from turnbon_graph.bench.strategies.bon_selectors import with_selector
from turnbon_graph.bench.strategies.registry import strategy_kind
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.selectors.base import Selector
from turnbon_graph.turn.engine import TurnEngine


@dataclass
class BenchConfig:
    """What to run: the model and its options, the settings to compare, the repetitions."""

    model: str
    """The LiteLLM model id the episodes' candidates come from."""
    n_values: list[int] = field(default_factory=lambda: [1, 4])
    """The Ns to compare: each a setting (`N=1` is the plain agent)."""
    selector: str | Selector | None = None
    """The selector of every N>1 setting, as the `selector` option takes it."""
    trials: int = 1
    """Attempts per task and setting."""
    concurrency: int = 4
    """Episodes running at once."""
    engine_options: dict[str, Any] = field(default_factory=dict)
    """Further `TurnEngine.from_options` keywords (completion_kwargs, timeout, ...)."""
    redo_errors: bool = False
    """Run again the episodes the run folder has that ended in an agent error (a key or an
    endpoint fixed since); their new lines supersede the old ones."""
    strategy: StrategySpec | None = None
    """How each episode searches (`turnbon_graph.bench.strategies`); None: plain bon."""
    strategies: list[StrategySpec] | None = None
    """Several strategies (or one at several token budgets) in one run, each a setting
    with every N (particle: N=1 only; `runs.settings_of`); None: `strategy` alone."""
    single_sample: bool = False
    """Also run plain bon at N=1 (when no strategy does): the baseline of the search
    decomposition's mu and h (`stats.decomposition`)."""
    value_kwargs: dict[str, Any] | None = None
    """The value model's connection (api_base, api_key, ...); None: the generator's
    endpoint when the value model is the generator's, else LiteLLM's own."""
    estimates: dict[str, Estimates] = field(default_factory=dict, compare=False, repr=False)
    """What each setting's calls cost so far, learned from each that came back and shared
    by that setting's episodes alone (`estimates_for`): what a search under a token
    budget plans its steps on, so a setting's spend never depends on which other settings
    share its run (on Ray, each worker learns its own)."""

    agent: str = "turnbon"
    """Who plays the episodes: "turnbon" (the settings above), or a reference agent that
    calls no model (`bench.reference`: "oracle" runs each task's solution, "nop" nothing),
    the run's one setting, named after it."""

    estimates_file: Path | None = None
    """A pilot run's `estimates.json` (`turnbon bench --estimates`): every searching
    setting plans its token budget on its estimates there, frozen, so that no setting's
    spend depends on the order in which its episodes finish; None: each learns its own."""

    def estimates_for(self, setting: str) -> Estimates:
        """The cost estimates of one setting, made on first use.

        Args:
            setting: the setting's label.

        Returns:
            That setting's estimates, the same object at every call.
        """
        return self.estimates.setdefault(setting, Estimates())

    @property
    def search(self) -> StrategySpec | None:
        """The strategy when episodes run through a search, else None (plain bon)."""
        return self.strategy if self.strategy is not None and self.strategy.searches else None

    @property
    def settings(self) -> list[Setting]:
        """The run's settings: each strategy at each N (an error when two share a label,
        or a strategy is unknown)."""
        if is_reference(self.agent):
            return [Setting(StrategySpec(), 1, self.agent)]
        specs = strategy_list(self.strategies, self.strategy)
        for spec in specs:
            strategy_kind(spec.name)  # registered, or a clear error
        return settings_of(specs, self.n_values, strict=True, single_sample=self.single_sample)


Todo = tuple[TaskSpec, int, Setting]
"""An episode to run: the task, the trial, the setting."""


@dataclass
class RunPlan:
    """A run's folder prepared (or checked, on a rerun) and the episodes it lacks."""

    environment: Environment
    config: BenchConfig
    run_dir: Path
    engines: dict[int, TurnEngine]
    todo: list[Todo]


def plan_run(
    environment: Environment, config: BenchConfig, run_dir: Path, tasks: Sequence[str] | None
) -> RunPlan:
    """One engine per N, the run folder's settings written (or checked against a rerun's),
    and every (task, trial, setting) the folder has no episode line of yet."""
    chosen = chosen_tasks(environment, tasks)
    run_settings = config.settings
    reference = is_reference(config.agent)
    engines = {
        n: TurnEngine.from_options(
            config.model, n=n, selector=config.selector, **config.engine_options
        )
        for n in sorted({*config.n_values, *(s.n for s in run_settings)})
        if not reference
    }
    specs = strategy_list(config.strategies, config.strategy)
    one = specs[0] if len(specs) == 1 else None
    settings = RunSettings(
        environment=environment.name,
        model=config.model,
        selector=config.agent if reference else engines[max(config.n_values)].selector.name,
        n_values=config.n_values,
        trials=config.trials,
        tasks=[t.id for t in chosen],
        created=datetime.now(UTC).isoformat(timespec="seconds"),
        # One strategy is kept as it always was (plain bon: none); several as a list.
        strategy=one if one is not None and one.searches else None,
        strategies=specs if one is None else None,
        single_sample=config.single_sample or None,
        agent=config.agent if reference else None,
    )
    _prepare(run_dir, settings)
    config.estimates.update(_starting_estimates(run_dir, config, run_settings))
    done = {
        r.key
        for r in read_episodes(run_dir)
        if not (config.redo_errors and r.outcome == "agent_error")
    }
    todo = [
        (task, trial, setting)
        for setting in run_settings
        for task in chosen
        for trial in range(config.trials)
        if (setting.label, task.id, trial) not in done
    ]
    return RunPlan(environment, config, run_dir, engines, todo)


def _starting_estimates(
    run_dir: Path, config: BenchConfig, settings: Sequence[Setting]
) -> dict[str, Estimates]:
    """What the run's settings plan on from the start: what an interrupted run learned
    (its folder's estimates file), else the pilot's (`config.estimates_file`), frozen and
    copied into the folder, else nothing yet."""
    stored = run_dir / ESTIMATES_FILE
    if stored.exists():
        learned = read_estimates(stored)
        if config.estimates_file is not None and not all(e.frozen for e in learned.values()):
            raise ConfigurationError(
                f"{run_dir} learned its own cost estimates, so --estimates cannot apply to "
                "it: resume it without --estimates, or start a new run folder"
            )
        return learned
    if config.estimates_file is None:
        return {}
    names = {s.label: pilot_labels(s) for s in settings if s.search is not None}
    frozen = frozen_for(read_estimates(Path(config.estimates_file)), names)
    write_estimates(stored, dump_estimates(frozen))
    return frozen


def pilot_labels(setting: Setting) -> list[str]:
    """The labels `setting` may have had in a pilot run: its own, and the strategy's at
    its N with the budget (a run of several budgets) or without (a run of one)."""
    spec = setting.strategy
    bare = spec.label(setting.n)
    budgeted = f"{bare} budget={spec.budget_text}" if spec.token_budget is not None else bare
    return list(dict.fromkeys([setting.label, budgeted, bare]))


async def save_estimates(run_dir: Path, config: BenchConfig) -> None:
    """The settings' estimates into the run folder (taken here, written off the loop)."""
    if config.estimates:
        text = dump_estimates(config.estimates)
        await asyncio.to_thread(write_estimates, run_dir / ESTIMATES_FILE, text)


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
    # Plain bon has no strategy: its settings file is as it always was.
    path.write_text(settings.model_dump_json(indent=2, exclude_none=True), encoding="utf-8")


async def run_setting_episode(
    environment: Environment,
    engine: TurnEngine | None,
    config: BenchConfig,
    task: TaskSpec,
    trial: int,
    setting: Setting,
    run_dir: Path,
) -> EpisodeResult:
    """One episode of `setting` into `run_dir`, as every runner runs it: through the
    setting's search strategy, or as a plain bon attempt of the agent graph (with the
    setting's own selector for fusion and refine: `bon_selectors`), or as a reference
    agent's episode (`engine` None: no model)."""
    if is_reference(config.agent):
        agent = cast(ReferenceAgent, config.agent)
        return await run_reference_episode(environment, task, trial, agent, run_dir)
    assert engine is not None, "a Turn-BoN setting needs its engine"
    kind = strategy_kind(setting.strategy.name)
    if kind.selector is not None:
        engine = with_selector(engine, kind.selector)
    engine = seeded_engine(engine, task.id, trial)  # common random numbers across settings
    if setting.search is not None:
        return await run_search_episode(
            environment,
            engine,
            setting.search,
            task,
            trial,
            setting.n,
            run_dir,
            setting=setting.label,
            value_kwargs=config.value_kwargs,
            estimates=config.estimates_for(setting.label),
        )
    return await run_episode(
        environment,
        engine,
        task,
        trial,
        setting.n,
        run_dir,
        strategy=setting.strategy,
        setting=setting.label,
    )
