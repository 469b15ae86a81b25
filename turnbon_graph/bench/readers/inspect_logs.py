"""An Inspect AI log folder read as a run folder's episodes, so `turnbon report` reads it.

    LOGDIR/<time>_<task>_<id>.eval   one eval: its task, model, solver and samples (or
                                     .json with `--log-format json`)

Each sample of each epoch is an episode. Its task is the sample's id (with the eval's
task name before it when the folder holds several tasks), its trial the epoch. Turn-BoN's
agent (`turnbon_inspect`) keeps each turn's record in the sample's store (`TURNS_KEY`):
its N is the setting (`N=<n>`), its records give the turns and the tokens split between
generator and selector. Another agent's samples are a setting named after its solver,
their tokens all the generator's. The outcome is the paper's: the first score decides
pass (a full score) or wrong_submission; a sample stopped by one of its limits (time,
working time, messages, tokens, cost) is `time_limit`; one that raised is `agent_error`.
Where one sample was run twice (a retried eval), the later log's stands. The logs are
read with Inspect's own reader (the `inspect` extra).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from turnbon_graph.bench.environment import Outcome
from turnbon_graph.bench.running.runs import (
    EPISODES_FILE,
    EpisodeResult,
    RunSettings,
    recorded_totals,
    setting_label,
)
from turnbon_graph.errors import ConfigurationError
from turnbon_graph.records import TurnRecord, Usage, UsageSplit

TURNS_KEY = "turnbon_turns"
"""The sample store's key of the Turn-BoN agent's turn records (`turnbon_inspect`)."""
LOG_SUFFIXES = (".eval", ".json")
LIMITS = frozenset({"time", "working", "message", "token", "cost"})
"""Inspect's limits of an attempt's allowance (time, working time, messages, tokens,
cost): a sample stopped by one is `time_limit`, the attempt's allowance spent before it
ended on its own. Any other (an operator's, a custom one) is an `agent_error`."""
EXPLANATION_TAIL = 4000


def is_log_folder(path: Path) -> bool:
    """Whether `path` holds Inspect eval logs (and is no run folder of ours)."""
    if not path.is_dir() or (path / EPISODES_FILE).exists():
        return False
    return any(log_files(path))


def log_files(path: Path) -> Iterable[Path]:
    """The eval logs in `path`: Inspect names them `<time>_<task>_<id>.eval|.json`."""
    for file in sorted(path.iterdir()):
        if file.suffix in LOG_SUFFIXES and file.name[:4].isdigit() and "_" in file.name:
            yield file


def read_logs(folder: Path) -> tuple[RunSettings, list[EpisodeResult]]:
    """The folder's evals as a run: one episode per sample and epoch.

    Raises:
        ConfigurationError: Inspect AI is not installed.
    """
    try:
        from inspect_ai.log import read_eval_log
    except ModuleNotFoundError as exc:
        from turnbon_graph._extras import install_hint

        raise ConfigurationError(
            f"{folder} holds Inspect AI logs; reading them needs Inspect: {install_hint('inspect')}"
        ) from exc
    logs = sorted((read_eval_log(str(f)) for f in log_files(folder)), key=lambda g: g.eval.created)
    tasks = {log.eval.task for log in logs}
    models = {log.eval.model for log in logs}
    kept: dict[tuple[str, str, int], EpisodeResult] = {}
    selectors: set[str] = set()
    for log in logs:
        for sample in log.samples or []:
            records = turn_records(sample.store)
            selectors.update(r.selector for r in records if r.selector.startswith("llm"))
            result = episode(log, sample, records, several_tasks=len(tasks) > 1)
            if len(models) > 1:
                result.setting += f" {log.eval.model}"
            kept[result.key] = result
    episodes = list(kept.values())
    return RunSettings(
        environment="Inspect AI ("
        + ", ".join(sorted({sandbox_of(log.eval.sandbox) for log in logs}))
        + ")",
        model=", ".join(sorted(models)) or "none",
        selector=", ".join(sorted(selectors)) or "none",
        n_values=sorted({e.n for e in episodes if e.setting.startswith("N=")}),
        trials=max((e.trial + 1 for e in episodes), default=0),
        tasks=sorted({e.task for e in episodes}),
        created=min((log.eval.created for log in logs), default=""),
    ), episodes


def episode(
    log: Any, sample: Any, records: list[TurnRecord], *, several_tasks: bool
) -> EpisodeResult:
    """One sample's epoch as an episode."""
    task = f"{log.eval.task}/{sample.id}" if several_tasks else str(sample.id)
    outcome, error = ending(sample)
    usage: UsageSplit | None = None  # Turn-BoN's: its records' own (`recorded_totals`)
    if records:
        n = max(r.n_requested for r in records)
        setting = setting_label(n)
        turns = len(records)
    else:
        n, setting = 1, str(log.eval.solver or "agent")
        usage = UsageSplit(
            generator=sum((usage_of(u, calls=0) for u in sample.model_usage.values()), Usage())
        )
        turns = sum(1 for m in sample.messages if m.role == "assistant")
    return EpisodeResult(
        task=task,
        trial=sample.epoch - 1,
        setting=setting,
        n=n,
        **recorded_totals(records, usage),
        outcome=outcome,
        turns=turns,
        duration_s=round(float(sample.total_time or 0.0), 3),
        error=error,
        verifier_output=explanation(sample)[-EXPLANATION_TAIL:],
    )


def ending(sample: Any) -> tuple[Outcome, str | None]:
    """The paper's outcome of a sample, and what went wrong."""
    if sample.error is not None:
        return "agent_error", str(sample.error.message)[:2000]
    if sample.limit is not None:
        kind = str(sample.limit.type)
        outcome: Outcome = "time_limit" if kind in LIMITS else "agent_error"
        return outcome, f"Inspect's {kind} limit ({sample.limit.limit:g})"
    scores = list((sample.scores or {}).values())
    if not scores:
        return "agent_error", "the sample has no score"
    from inspect_ai.scorer import value_to_float

    value = value_to_float()(scores[0].value)
    return ("pass" if value >= 1.0 else "wrong_submission"), None


def explanation(sample: Any) -> str:
    """What the first scorer said of the sample."""
    scores = list((sample.scores or {}).values())
    return str(scores[0].explanation or "") if scores else ""


def turn_records(store: Mapping[str, Any]) -> list[TurnRecord]:
    """The Turn-BoN agent's records in a sample's store; none for another agent."""
    return [TurnRecord.model_validate(r) for r in store.get(TURNS_KEY) or []]


def usage_of(usage: Any, calls: int = 1) -> Usage:
    """An Inspect `ModelUsage` (of `calls` calls) as this harness counts it."""
    if usage is None:
        return Usage(calls=calls)
    return Usage(
        calls=calls,
        prompt_tokens=usage.input_tokens,
        completion_tokens=usage.output_tokens,
        reasoning_tokens=usage.reasoning_tokens or 0,
        cached_tokens=usage.input_tokens_cache_read or 0,
        cost_usd=usage.total_cost,
    )


def sandbox_of(spec: Any) -> str:
    """The eval's sandbox type (`local`, `docker`, ...), or `no sandbox`."""
    return str(spec.type) if spec is not None else "no sandbox"
