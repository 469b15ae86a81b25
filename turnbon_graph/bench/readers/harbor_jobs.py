"""A Harbor job folder read as a run folder's episodes, so `turnbon report` reads both.

    JOB/config.json                          the job's settings (has a `job_name`)
    JOB/result.json                          its totals (Harbor's own summary)
    JOB/<task>__<id>/result.json             one trial: reward, exception, tokens (missing
                                             while it runs, or when harbor was killed)
    JOB/<task>__<id>/agent/turns.jsonl       the Turn-BoN agent's turns (`turnbon_harbor`),
                                             one `{"record", "observation"}` line each
    JOB/<task>__<id>/verifier/test-stdout.txt  what the task's tests printed

Each finished trial becomes an `EpisodeResult`: its setting `N=<n>` from the agent's
`--ak n` (another agent's trials are a setting named after the agent), its trials of a
task numbered in the order they started, its outcome the paper's (`ENDINGS`): the reward
decides pass or wrong_submission only for a trial that ended on its own, as in a
`turnbon bench` run; a trial Harbor cancelled (Ctrl-C) is unfinished, as a killed one.
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

from turnbon_graph.bench.environment import Outcome
from turnbon_graph.bench.running.runs import EpisodeResult, RunSettings, setting_label
from turnbon_graph.records import TurnRecord, Usage, UsageSplit

CONFIG_FILE = "config.json"
RESULT_FILE = "result.json"
TURNS_FILE = "agent/turns.jsonl"
TEST_OUTPUT = "verifier/test-stdout.txt"
OUTPUT_TAIL = 4000
"""Characters of the tests' output kept (their end), as a run folder keeps."""
TURNBON_AGENT = "turnbon"
"""The Turn-BoN agent's name in a trial's `agent_info` (`TurnBoNAgent.name()`)."""
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


def is_job_folder(path: Path) -> bool:
    """Whether `path` is a Harbor job folder (its config.json names a job)."""
    config = read_json(path / CONFIG_FILE)
    return isinstance(config, dict) and "job_name" in config


def read_job(job: Path) -> tuple[RunSettings, list[EpisodeResult]]:
    """The job as a run: its settings as `turnbon bench` would have written them, and
    one episode per finished trial."""
    trials = [t for t in sorted(job.iterdir()) if isinstance(read_json(t / CONFIG_FILE), dict)]
    finished = [(t, r) for t in trials if isinstance(r := read_json(t / RESULT_FILE), dict)]
    finished = [(t, r) for t, r in finished if exception_type(r) not in UNFINISHED]
    finished.sort(key=lambda tr: (str(tr[1].get("started_at") or ""), tr[0].name))
    episodes: list[EpisodeResult] = []
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for folder, result in finished:
        n, setting = agent_setting(result)
        task = str(result.get("task_name") or trial_task(folder))
        trial = counts[(setting, task)]
        counts[(setting, task)] += 1
        episodes.append(episode(folder, result, task, trial, n, setting))
    selectors = {selector_of(r) for _, r in finished}
    return job_settings(job, trials, episodes, selectors), episodes


def job_settings(
    job: Path, trials: list[Path], episodes: list[EpisodeResult], selectors: set[str]
) -> RunSettings:
    """What the job ran: its environment type, models, selectors, N values, tasks (every
    trial folder's, finished or not) and attempts per task."""
    configs = [c for t in trials if isinstance(c := read_json(t / CONFIG_FILE), dict)]
    agents = [c.get("agent") or {} for c in configs]
    engines = sorted({str((c.get("environment") or {}).get("type")) for c in configs})
    models = sorted({str(a.get("model_name")) for a in agents if a.get("model_name")})
    config = read_json(job / CONFIG_FILE)
    attempts = config.get("n_attempts", 1) if isinstance(config, dict) else 1
    started = read_json(job / RESULT_FILE)
    return RunSettings(
        environment=f"Harbor ({', '.join(engines)})",
        model=", ".join(models) or "unknown",
        selector=", ".join(sorted(selectors)) or "unknown",
        n_values=sorted({e.n for e in episodes}),
        trials=max(int(attempts), max((e.trial + 1 for e in episodes), default=0)),
        tasks=sorted({trial_task(t) for t in trials}),
        created=str(started.get("started_at", "")) if isinstance(started, dict) else "",
    )


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
        outcome=outcome,
        turns=turns,
        usage=usage,
        prompt_tokens_a_call_each=sum(r.prompt_tokens_a_call_each for r in records)
        if records
        else None,
        duration_s=seconds(result.get("started_at"), result.get("finished_at")),
        error=error,
        verifier_output=read_tail(folder / TEST_OUTPUT),
        category=metadata.get("category"),
        difficulty=metadata.get("difficulty"),
        tokens=usage.generator.total_tokens + usage.selector.total_tokens,
    )


def agent_setting(result: Mapping[str, Any]) -> tuple[int, str]:
    """The trial's N and setting label: `N=<n>` for the Turn-BoN agent, the agent's
    name (with its model when it has one) for any other agent, which samples once."""
    agent = (result.get("config") or {}).get("agent") or {}
    name = (result.get("agent_info") or {}).get("name") or agent.get("name") or "agent"
    if name == TURNBON_AGENT:
        n = (agent.get("kwargs") or {}).get("n", DEFAULT_N)
        return int(n), setting_label(int(n))
    model = agent.get("model_name")
    return 1, f"{name} {model}" if model else str(name)


def selector_of(result: Mapping[str, Any]) -> str:
    """The selector the Turn-BoN agent reported (`llm:<model>`, `first`, ...); another
    agent's name."""
    own = ((result.get("agent_result") or {}).get("metadata") or {}).get(TURNBON_AGENT)
    if isinstance(own, dict) and own.get("selector"):
        return str(own["selector"])
    return str((result.get("agent_info") or {}).get("name") or "unknown")


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
        generator = sum((r.usage.generator for r in records), Usage())
        selector = sum((r.usage.selector for r in records), Usage())
        return UsageSplit(generator=generator, selector=selector), len(records)
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
