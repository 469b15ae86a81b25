"""A Harbor job folder read as a run folder's episodes, so `turnbon report` reads both.

    JOB/config.json                          the job's settings (has a `job_name`)
    JOB/result.json                          its totals (Harbor's own summary)
    JOB/<task>__<id>/result.json             one trial: reward, exception, tokens (missing
                                             while it runs, or when harbor was killed)
    JOB/<task>__<id>/agent/turns.jsonl       the Turn-BoN agent's turns (`turnbon_harbor`),
                                             one `{"record", "observation"}` line each
    JOB/<task>__<id>/verifier/test-stdout.txt  what the task's tests printed

The job's settings are its agents as it ran them (`agents` in its config.json, one per
agent and model): the Turn-BoN agent's is `N=<n>` from its `--ak n` (with the model when
the job ran several), another agent's is named after it and its model (`oracle`, `nop`,
`terminus-2 openai/gpt-4o`), with no N: none is an invented baseline. Each finished trial
becomes an `EpisodeResult` of its agent's setting, its trials of a task numbered in the
order they started, its outcome the paper's (`ENDINGS`): the reward decides pass or
wrong_submission only for a trial that ended on its own, as in a `turnbon bench` run; a
trial Harbor cancelled (Ctrl-C) is unfinished, as a killed one. A job Harbor finished
(its result.json has `finished_at`), or whose every trial has its result.json, is
complete; one Harbor was stopped in resumes with `harbor job resume -p JOB`.
This reads the JSON Harbor 0.26 writes and never imports Harbor.
"""

from __future__ import annotations

import json
import tomllib
from collections import defaultdict
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import Field

from turnbon_graph.bench.environment import Outcome
from turnbon_graph.bench.running.runs import (
    EpisodeResult,
    RunSettings,
    Setting,
    recorded_totals,
    setting_label,
)
from turnbon_graph.bench.strategies.spec import StrategySpec
from turnbon_graph.records import TurnRecord, Usage, UsageSplit, turns_usage

CONFIG_FILE = "config.json"
RESULT_FILE = "result.json"
TURNS_FILE = "agent/turns.jsonl"
TEST_OUTPUT = "verifier/test-stdout.txt"
OUTPUT_TAIL = 4000
"""Characters of the tests' output kept (their end), as a run folder keeps."""
TURNBON_AGENT = "turnbon"
"""The Turn-BoN agent's name in a trial's `agent_info` (`TurnBoNAgent.name()`)."""
TURNBON_PACKAGE = "turnbon_harbor"
"""The package of the Turn-BoN agent, as `-a turnbon_harbor:TurnBoNAgent` names it."""
DEFAULT_N = 4
"""`TurnConfig.n`'s default: the agent's N when `--ak n` was not given."""
PASSING_REWARD = 1.0
"""A Terminal-Bench trial passes with reward 1 (its tests all passed)."""

ENDINGS: Mapping[str, Outcome] = {
    "AgentTimeoutError": "time_limit",
    "ContextLengthExceededError": "out_of_context",
    "MemoryLimitExceededError": "resource_limit",
    # the tests ran out of time: the deliverable's doing, a FAIL as in `turnbon bench`
    "VerifierTimeoutError": "wrong_submission",
}
"""Harbor's exception types as the paper's outcomes; any other is an `agent_error`
(a missing or unreadable reward file, a sandbox that did not start, a provider's error),
never a pass. A timed-out agent does not pass even when Harbor's verifier, run after it,
gave reward 1: only an attempt that ended on its own can pass (`environment.Outcome`)."""
UNFINISHED = frozenset({"CancelledError"})
"""Trials Harbor stopped without an ending: left out, as episodes a kill interrupted."""


RESUME = "harbor job resume -p {job}"
"""How Harbor resumes a job it was stopped in (its trials without a result run again)."""


class JobSettings(RunSettings):
    """A Harbor job's settings as it ran them: one per agent (and model) of its config,
    never strategies times N values; whether Harbor finished it."""

    labels: list[str]
    """The settings, in the job's order of its agents."""
    agent_models: dict[str, str | None]
    """Each setting's model (`-m`), None for an agent that calls none (oracle, nop)."""
    total_trials: int
    """Trials the job runs over every setting (Harbor's `n_total_trials`)."""
    complete: bool
    """Harbor finished the job, or every trial of it has its result.json."""
    label_n: dict[str, int] = Field(default_factory=dict)
    """The Turn-BoN agent's N of each of its settings."""

    def settings(self) -> list[Setting]:
        """The job's settings (plain sampling, at the Turn-BoN agent's N; 1 for others)."""
        return [Setting(StrategySpec(), self.label_n.get(s, 1), s) for s in self.labels]

    def resume_hint(self, job: Path) -> str:
        """The command that resumes the job in Harbor."""
        return RESUME.format(job=job)


def is_job_folder(path: Path) -> bool:
    """Whether `path` is a Harbor job folder (its config.json names a job)."""
    config = read_json(path / CONFIG_FILE)
    return isinstance(config, dict) and "job_name" in config


def read_job(job: Path) -> tuple[JobSettings, list[EpisodeResult]]:
    """The job as a run: its settings as it ran them, and one episode per finished
    trial."""
    config = read_json(job / CONFIG_FILE)
    config = config if isinstance(config, dict) else {}
    trials = [t for t in sorted(job.iterdir()) if isinstance(read_json(t / CONFIG_FILE), dict)]
    agents = job_agents(config, trials)
    several = len({a.get("model_name") for a in agents if a.get("model_name")}) > 1
    results = [(t, read_json(t / RESULT_FILE)) for t in trials]
    finished = [(t, r) for t, r in results if isinstance(r, dict)]
    finished = [(t, r) for t, r in finished if exception_type(r) not in UNFINISHED]
    finished.sort(key=lambda tr: (str(tr[1].get("started_at") or ""), tr[0].name))
    episodes: list[EpisodeResult] = []
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for folder, result in finished:
        n, setting = agent_setting((result.get("config") or {}).get("agent") or {}, several)
        task = str(result.get("task_name") or trial_task(folder))
        trial = counts[(setting, task)]
        counts[(setting, task)] += 1
        episodes.append(episode(folder, result, task, trial, n, setting))
    summary = read_json(job / RESULT_FILE)
    summary = summary if isinstance(summary, dict) else {}
    total = int(summary.get("n_total_trials") or len(trials))
    every_result = all(isinstance(r, dict) for _, r in results) and len(trials) >= total
    # the selector each Turn-BoN trial reported, else what the job's config asked for
    selectors = {s for _, r in finished if (s := selector_of(r))}
    selectors = selectors or {s for a in agents if (s := selector_of_agent(a))}
    settings = [agent_setting(a, several) for a in agents]
    turnbon = [ns for a, ns in zip(agents, settings, strict=True) if is_turnbon(a)]
    configs = [c for t in trials if isinstance(c := read_json(t / CONFIG_FILE), dict)]
    engines = sorted({str((c.get("environment") or {}).get("type")) for c in configs or [config]})
    models = sorted({str(a["model_name"]) for a in agents if a.get("model_name")})
    attempts = int(config.get("n_attempts") or 1)
    return JobSettings(
        environment=f"Harbor ({', '.join(engines)})",
        model=", ".join(models) or "none",
        selector=", ".join(sorted(selectors)) or "none",
        n_values=sorted({n for n, _ in turnbon}),
        trials=max(attempts, max((e.trial + 1 for e in episodes), default=0)),
        tasks=sorted({trial_task(t) for t in trials}),
        created=str(summary.get("started_at") or ""),
        labels=list(dict.fromkeys(label for _, label in settings)),
        agent_models={
            label: a.get("model_name") or None
            for a, (_, label) in zip(agents, settings, strict=True)
        },
        label_n={label: n for n, label in turnbon},
        total_trials=total,
        complete=bool(summary.get("finished_at")) or every_result,
    ), episodes


def job_agents(config: Mapping[str, Any], trials: list[Path]) -> list[dict[str, Any]]:
    """The agents the job runs, in its order (`agents` of its config.json: one per agent
    and `-m` model); without them, those its trials ran."""
    agents = [a for a in config.get("agents") or [] if isinstance(a, dict)]
    if agents:
        return agents
    configs = [c for t in trials if isinstance(c := read_json(t / CONFIG_FILE), dict)]
    ran = [c["agent"] for c in configs if isinstance(c.get("agent"), dict)]
    return list({json.dumps(a, sort_keys=True): a for a in ran}.values())


def episode(
    folder: Path, result: dict[str, Any], task: str, trial: int, n: int, setting: str
) -> EpisodeResult:
    """One finished trial as an episode."""
    records = read_records(folder / TURNS_FILE)
    usage, turns = usage_of(records, result)
    outcome, error = ending(result)
    metadata = task_metadata(result)
    return EpisodeResult(
        task=task,
        trial=trial,
        setting=setting,
        n=n,
        **recorded_totals(records, usage),
        outcome=outcome,
        turns=turns,
        duration_s=seconds(result.get("started_at"), result.get("finished_at")),
        error=error,
        verifier_output=read_tail(folder / TEST_OUTPUT),
        category=metadata.get("category"),
        difficulty=metadata.get("difficulty"),
    )


def agent_setting(agent: Mapping[str, Any], several_models: bool = False) -> tuple[int, str]:
    """An agent config's N and setting label: `N=<n>` for the Turn-BoN agent (its `--ak
    n`, with the model after it when the job ran several), the agent's name with its
    model when it has one for any other agent, which samples once (`oracle`, `nop`)."""
    model = agent.get("model_name")
    if is_turnbon(agent):
        n = int((agent.get("kwargs") or {}).get("n", DEFAULT_N))
        label = setting_label(n)
        return n, f"{label} {model}" if several_models and model else label
    name = agent_name(agent)
    return 1, f"{name} {model}" if model else name


def agent_name(agent: Mapping[str, Any]) -> str:
    """The agent of an agent config: Harbor's name for it (`oracle`, `terminus-2`), else
    its import path (`package.module:Class`)."""
    return str(agent.get("name") or agent.get("import_path") or "agent")


def is_turnbon(agent: Mapping[str, Any]) -> bool:
    """Whether an agent config runs the Turn-BoN agent (`-a turnbon_harbor:TurnBoNAgent`)."""
    name = agent_name(agent)
    return name == TURNBON_AGENT or name.partition(":")[0].split(".")[0] == TURNBON_PACKAGE


def selector_of_agent(agent: Mapping[str, Any]) -> str | None:
    """The Turn-BoN agent's selector as its config gives it (`--ak selector=...`), else
    the default, the LLM selector on its model; None for another agent."""
    if not is_turnbon(agent):
        return None
    chosen = (agent.get("kwargs") or {}).get("selector")
    if chosen:
        return str(chosen)
    model = agent.get("model_name")
    return f"llm:{model}" if model else None


def selector_of(result: Mapping[str, Any]) -> str | None:
    """The selector a Turn-BoN trial reported (`llm:<model>`, `first`, ...); None for
    another agent's."""
    own = ((result.get("agent_result") or {}).get("metadata") or {}).get(TURNBON_AGENT)
    if isinstance(own, dict) and own.get("selector"):
        return str(own["selector"])
    return None


def ending(result: Mapping[str, Any]) -> tuple[Outcome, str | None]:
    """The paper's outcome of a trial, and what went wrong (Harbor's exception)."""
    kind = exception_type(result)
    reward = reward_of(result)
    if kind is None:
        if reward is None:
            return "agent_error", "Harbor recorded no reward and no exception"
        return ("pass" if reward >= PASSING_REWARD else "wrong_submission"), None
    info = result.get("exception_info") or {}
    error = f"{kind}: {info.get('exception_message', '')}".strip()
    if reward is not None:
        error += f" (Harbor's verifier gave reward {reward:g})"
    return ENDINGS.get(kind, "agent_error"), error[:2000]


def exception_type(result: Mapping[str, Any]) -> str | None:
    """The name of the exception a Harbor trial ended with, or None."""
    info = result.get("exception_info")
    return str(info.get("exception_type")) if isinstance(info, dict) else None


def reward_of(result: Mapping[str, Any]) -> float | None:
    """The trial's reward: the one named `reward`, else the lowest of several; None
    without a verifier result."""
    rewards = (result.get("verifier_result") or {}).get("rewards")
    if not isinstance(rewards, dict) or not rewards:
        return None
    if "reward" in rewards:
        return float(rewards["reward"])
    return min(float(v) for v in rewards.values())


def usage_of(records: list[TurnRecord], result: Mapping[str, Any]) -> tuple[UsageSplit, int]:
    """Tokens split generator/selector, and turns: from the turn records, else from what
    the agent put into Harbor's context (all of it the generator's for other agents)."""
    if records:
        return turns_usage(records), len(records)
    context = result.get("agent_result") or {}
    own = (context.get("metadata") or {}).get(TURNBON_AGENT)
    if isinstance(own, dict):
        return UsageSplit.model_validate(own.get("usage") or {}), int(own.get("turns", 0))
    generator = Usage(
        prompt_tokens=context.get("n_input_tokens") or 0,
        completion_tokens=context.get("n_output_tokens") or 0,
        cached_tokens=context.get("n_cache_tokens") or 0,
        cost_usd=context.get("cost_usd"),
    )
    return UsageSplit(generator=generator), 0


def read_records(path: Path) -> list[TurnRecord]:
    """The turn records of a turns file; a line torn by a kill is skipped."""
    records = []
    for line in read_text(path).splitlines():
        try:
            records.append(TurnRecord.model_validate(json.loads(line)["record"]))
        except (ValueError, KeyError, TypeError):
            continue
    return records


def task_metadata(result: Mapping[str, Any]) -> dict[str, str]:
    """The task's category and difficulty from its task.toml, when the task folder is
    still where the trial found it."""
    path = (result.get("task_id") or {}).get("path")
    if not path:
        return {}
    try:
        data = tomllib.loads(read_text(Path(path) / "task.toml"))
    except tomllib.TOMLDecodeError:
        return {}
    meta = data.get("metadata") or {}
    return {k: str(meta[k]) for k in ("category", "difficulty") if meta.get(k)}


def trial_task(trial: Path) -> str:
    """The task of a trial folder, finished or not (`<task>__<id>`)."""
    return trial.name.rpartition("__")[0] or trial.name


def seconds(start: Any, end: Any) -> float:
    """Seconds between two ISO timestamps, or 0 when either is missing or malformed."""
    try:
        return round(
            (datetime.fromisoformat(end) - datetime.fromisoformat(start)).total_seconds(), 3
        )
    except (TypeError, ValueError):
        return 0.0


def read_json(path: Path) -> Any:
    """`path`'s JSON, or None when it is missing or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def read_text(path: Path) -> str:
    """`path`'s text (undecodable bytes replaced), or "" when it cannot be read."""
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def read_tail(path: Path) -> str:
    """The last `OUTPUT_TAIL` characters of `path`'s text."""
    return read_text(path)[-OUTPUT_TAIL:]
