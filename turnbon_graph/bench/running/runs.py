"""The run folder: what `turnbon bench` writes and `turnbon report` and notebooks read.

    RUN/run.json                          RunSettings
    RUN/episodes.jsonl                    one EpisodeResult per finished episode
    RUN/turns/<setting>/<task>__<trial>.jsonl
                                          one line per turn: the turn record + observation
    RUN/trees/<setting>/<task>__<trial>.jsonl
                                          a search strategy's tree: one line per node
                                          (`strategies.tree`)

An episode counts as done once its line is in episodes.jsonl; a rerun skips those and
redoes the others from the start, so killing a run loses at most the episodes in flight.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict, TypeVar

from pydantic import BaseModel, Field

from turnbon_graph.bench.environment import Outcome
from turnbon_graph.bench.strategies.record import SearchRecord
from turnbon_graph.bench.strategies.registry import known_kind
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import (
    TurnRecord,
    Usage,
    UsageSplit,
    prompt_tokens_a_call_each,
    turns_usage,
)

SETTINGS_FILE = "run.json"
EPISODES_FILE = "episodes.jsonl"
TURNS_DIR = "turns"
TREES_DIR = "trees"

M = TypeVar("M", bound=BaseModel)


class RunSettings(BaseModel):
    """What a run was asked to do; a rerun into the same folder must ask the same."""

    environment: str
    model: str
    selector: str
    n_values: list[int]
    trials: int
    tasks: list[str]
    created: str = ""
    strategy: StrategySpec | None = None
    """A run of one strategy: a search strategy's parameters; None: plain bon (and runs
    made before). A run of several has `strategies` instead."""
    strategies: list[StrategySpec] | None = None
    """A run of several strategies (or token budgets), each a setting with every N
    (`settings_of`); None: the one of `strategy`."""
    single_sample: bool | None = None
    """True: the run also has plain bon at N=1 (`turnbon bench --single-sample`), the
    decomposition's baseline; None: not asked for (runs made before too)."""

    agent: str | None = None
    """A reference agent's run (`turnbon bench --agent oracle|nop`: its one setting is
    named after it); None: Turn-BoN's settings (runs made before too)."""

    @property
    def specs(self) -> list[StrategySpec]:
        """The run's strategies, whichever field holds them."""
        return strategy_list(self.strategies, self.strategy)

    def settings(self) -> list[Setting]:
        """The run's settings, in the order it runs and reports them."""
        if self.agent is not None:
            return [Setting(StrategySpec(), 1, self.agent)]
        return settings_of(self.specs, self.n_values, single_sample=bool(self.single_sample))


class Worker(BaseModel):
    """The process that ran an episode: the local runner's own, or a Ray worker's."""

    pid: int
    host: str = ""
    node: str | None = None
    """The Ray node id (hex) of a Ray worker; None for the local runner."""


def current_worker() -> Worker:
    """This process, with its Ray node id when it is a connected Ray worker or driver
    (Ray is never imported here: only a process that already did so has a node)."""
    ray: Any = sys.modules.get("ray")
    node = None
    if ray is not None and ray.is_initialized():
        node = ray.get_runtime_context().get_node_id()
    return Worker(pid=os.getpid(), host=socket.gethostname(), node=node)


class EpisodeResult(BaseModel):
    """How one attempt at one task went."""

    task: str
    trial: int
    setting: str
    """The compared configuration, e.g. "N=1" or "N=4"; N=1 is the baseline."""
    n: int
    outcome: Outcome
    turns: int
    usage: UsageSplit = Field(default_factory=UsageSplit)
    prompt_tokens_a_call_each: int | None = None
    """The generator's prompt tokens had every candidate been its own call (a turn that
    asked once with `n` billed its prompt once); None in rows written before this."""
    duration_s: float
    error: str | None = None
    verifier_output: str = ""
    category: str | None = None
    difficulty: str | None = None
    worker: Worker | None = None
    """Who ran it; None in rows written before runs recorded it."""
    strategy: StrategySpec | None = None
    """The strategy and its parameters; None in rows written before runs recorded it."""
    tokens: int | None = None
    """Prompt plus completion tokens of every generator, selector, value and rollout call
    of the episode; None in rows written before."""
    value_usage: Usage | None = None
    """A search strategy's value-model calls; None without one."""
    search: SearchRecord | None = None
    """A search's own record: what it spent in its budget's unit and by kind, its value
    calls' failures, and its finished leaves with their verdicts; None for plain bon and
    rows written before."""
    escalated_turns: int | None = None
    """escalate: how many turns of the verified trajectory were sampled again with more
    effort (each turn's `sampling.escalation` says how); None for other strategies."""
    tamper: list[str] = Field(default_factory=list)
    """The verifier's evidence that the deliverable meddled with its verification
    (`Verdict.tamper`); empty when it saw none, or the attempt has no verdict."""
    reward: float | None = None
    """The verifier's reward (`Verdict.reward`: a Terminal-Bench 2 task's reward file);
    None when it gives none, or the attempt has no verdict."""

    @property
    def passed(self) -> bool:
        return self.outcome == "pass"

    @property
    def key(self) -> tuple[str, str, int]:
        return (self.setting, self.task, self.trial)


class RecordedTotals(TypedDict):
    """What an episode's turn records add up to, as `EpisodeResult` fields."""

    usage: UsageSplit
    prompt_tokens_a_call_each: int | None
    tokens: int


def recorded_totals(
    records: Sequence[TurnRecord], usage: UsageSplit | None = None
) -> RecordedTotals:
    """The usage, the generator's prompt tokens had every candidate been its own call,
    and the tokens of generator and selector together.

    `usage`: the episode's usage as another tool logged it, for an agent that may keep no
    turn records (its prompt tokens a call each are then unknown: None). None: the
    records are the whole episode, and none means no call (0)."""
    each = prompt_tokens_a_call_each(records)
    if usage is None:
        usage, each = turns_usage(records), each or 0
    return RecordedTotals(
        usage=usage,
        prompt_tokens_a_call_each=each,
        tokens=usage.total.total_tokens,
    )


def setting_label(n: int, strategy: StrategySpec | None = None) -> str:
    """The setting's name: `N=4`, or a search strategy's (`beam W=2 N=4`)."""
    return strategy.label(n) if strategy is not None else f"N={n}"


@dataclass(frozen=True)
class Setting:
    """One compared configuration of a run: a strategy at one N, by its label."""

    strategy: StrategySpec
    n: int
    label: str

    @property
    def search(self) -> StrategySpec | None:
        """The strategy when its episodes run through a search, else None (plain bon)."""
        return self.strategy if self.strategy.searches else None


def strategy_list(
    strategies: Sequence[StrategySpec] | None, strategy: StrategySpec | None
) -> list[StrategySpec]:
    """`strategies` once each, in order; else the one `strategy` (None: plain bon)."""
    if strategies:
        return list(dict.fromkeys(strategies))
    return [strategy or StrategySpec()]


def settings_of(
    strategies: Sequence[StrategySpec],
    n_values: Sequence[int],
    *,
    strict: bool = False,
    single_sample: bool = False,
) -> list[Setting]:
    """A setting per strategy and N, strategy by strategy: a strategy that runs at one N
    only (particle filtering: N=1, `registry.StrategyKind.n`) at that one. With
    `single_sample`, plain bon at N=1 comes first (when no strategy makes it): the
    baseline the search decomposition's mu is measured on (`stats.decomposition`). When the
    strategies' token budgets differ, each label ends in its budget (`beam W=2 N=2
    budget=4000`); the labels of a run of one budget are as they always were.

    Raises:
        ConfigurationError: with `strict` (a run being made), two different settings
            have one label (two value models of one strategy, say): each needs its own.
    """
    budgets = {spec.token_budget for spec in strategies}
    settings: dict[str, Setting] = {}
    for spec in strategies:
        kind = known_kind(spec.name)
        for n in [kind.n] if kind is not None and kind.n is not None else n_values:
            label = spec.label(n)
            if len(budgets) > 1 and spec.token_budget is not None:
                label += f" budget={spec.budget_text}"
            same = settings.setdefault(label, Setting(spec, n, label))
            if strict and same.strategy != spec:
                raise ConfigurationError(
                    f"two settings of the run are both labelled {label!r} ({same.strategy} "
                    f"and {spec}): a label shows the strategy, its width, horizon, "
                    "agreement, N, budget and a value function that is no model, so run "
                    "settings that differ otherwise in runs of their own"
                )
    bon = StrategySpec()
    if single_sample and bon.label(1) not in settings:
        settings = {bon.label(1): Setting(bon, 1, bon.label(1)), **settings}
    return list(settings.values())


def append_line(path: Path, line: str) -> None:
    """Appends one JSON line to `path` (open, write, close: a line on disk survives a
    kill). A last line torn by an earlier kill is ended first, so the new line is not
    glued onto it and lost with it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a+b") as handle:
        if handle.tell() > 0:
            handle.seek(-1, 2)
            if handle.read(1) != b"\n":
                handle.write(b"\n")
        handle.write(line.encode("utf-8") + b"\n")


def read_lines(path: Path, model: type[M]) -> list[M]:
    """Every line of the JSON-lines file `path` as a `model`; none when it does not exist.
    A line that does not parse (the torn last line of a killed writer) is skipped."""
    if not path.exists():
        return []
    items = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            items.append(model.model_validate_json(line))
        except ValueError:
            continue
    return items


def read_episodes(run: Path) -> list[EpisodeResult]:
    """Every finished episode of a run, once: an episode run again (`redo_errors`) has a
    later line, which is the one that counts. A torn last line, from a kill, is skipped."""
    latest = {r.key: r for r in read_lines(run / EPISODES_FILE, EpisodeResult)}
    return list(latest.values())


def turns_path(run: Path, setting: str, task: str, trial: int) -> Path:
    """Where an episode's turns go in the run folder: `turns/<setting>/<task>__<trial>.jsonl`."""
    safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", setting)
    return run / TURNS_DIR / safe / f"{task}__{trial}.jsonl"


def tree_path(run: Path, setting: str, task: str, trial: int) -> Path:
    """Where an episode's search tree goes: as its turns file, under trees/."""
    turns = turns_path(run, setting, task, trial)
    return run / TREES_DIR / turns.parent.name / turns.name


def read_turns(run: Path, setting: str, task: str, trial: int) -> Iterator[dict[str, object]]:
    """An episode's turn lines as the run folder holds them (none when it has no file)."""
    path = turns_path(run, setting, task, trial)
    if path.exists():
        for line in path.read_text(encoding="utf-8").splitlines():
            yield json.loads(line)
