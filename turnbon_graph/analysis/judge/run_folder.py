"""Judging a run folder, around `turnbon_graph.analysis.judge`: what must hold before the
judge starts, the task instructions it reads from the run's environment, and a summary
of the verdicts that says what to do about the unknown ones."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from turnbon_graph._secrets import redact, secret_values
from turnbon_graph.analysis.judge import VERDICTS_FILE, JudgeVerdict, read_verdicts
from turnbon_graph.bench.registry import load_environment
from turnbon_graph.bench.running.runs import (
    EPISODES_FILE,
    SETTINGS_FILE,
    RunSettings,
    read_episodes,
)
from turnbon_graph.errors import ConfigurationError

REASON_CHARS = 300
"""Characters of the most common reason for unknown verdicts that are printed."""


def check_run(run: Path, model: str, settings: Sequence[str] | None) -> None:
    """Refuses a folder without episodes, settings it does not have, and a judge model
    other than the one of its earlier verdicts (their shares would mix two judges)."""
    if not (run / EPISODES_FILE).is_file():
        raise ConfigurationError(
            f"{run} is not a run folder with episodes (it has no {EPISODES_FILE}); pass the "
            "folder that `turnbon bench` printed when it started"
        )
    recorded = sorted({r.setting for r in read_episodes(run)})
    unknown = sorted(set(settings or ()) - set(recorded))
    if unknown:
        raise ConfigurationError(
            f"{run} has no setting {', '.join(unknown)} (it has {', '.join(recorded)})"
        )
    others = sorted({v.model for v in read_verdicts(run) if v.model != model})
    if others:
        raise ConfigurationError(
            f"{run / VERDICTS_FILE} holds verdicts of another judge model "
            f"({', '.join(others)}); pass --model {others[0]} to go on with it, or move the "
            f"file aside to judge with {model}"
        )


def task_instructions(run: Path, tasks: str | None) -> tuple[dict[str, str], str | None]:
    """Task id -> instruction, from the environment the run's settings name (built from
    `tasks`, the spec the run was made with); and a note when some or all instructions
    are missing (the judge then goes without them)."""
    path = run / SETTINGS_FILE
    try:
        settings = RunSettings.model_validate_json(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not readable run settings"
        return {}, (
            f"cannot tell the run's environment from {path} ({reason}); judging without "
            "the task instructions"
        )
    name = settings.environment
    try:
        found = {t.id: t.instruction for t in load_environment(name, tasks).tasks()}
    except Exception as exc:  # any failure costs the judge only the instructions
        return {}, (
            f"environment {name!r} did not load ({type(exc).__name__}: {exc}); judging "
            "without the task instructions"
        )
    missing = sorted({r.task for r in read_episodes(run)} - found.keys())
    if missing:
        listed = ", ".join(missing[:5]) + (", ..." if len(missing) > 5 else "")
        return found, (
            f"{len(missing)} task(s) of the run are not in environment {name!r} ({listed}): "
            "judging those without their instructions; pass --tasks SPEC as given to bench"
        )
    return found, None


def verdict_summary(run: Path, verdicts: Sequence[JudgeVerdict]) -> str:
    """How many verdicts of each answer; for unknown ones, their most common reason
    (keys and tokens of the environment masked) and how to ask again."""
    counts = {a: sum(v.answer == a for v in verdicts) for a in ("yes", "no", "unknown")}
    lines = [
        f"{len(verdicts)} verdicts in {run / VERDICTS_FILE}: {counts['yes']} yes, "
        f"{counts['no']} no, {counts['unknown']} unknown"
    ]
    if counts["unknown"]:
        errors = Counter(v.error or "" for v in verdicts if v.answer == "unknown")
        error, times = errors.most_common(1)[0]
        cut = error[:REASON_CHARS] + (" ..." if len(error) > REASON_CHARS else "")
        lines.append(
            f"An unknown verdict had no valid answer or its call failed; the most common "
            f"reason ({times} of {counts['unknown']}): {redact(cut, secret_values({}))}\n"
            "Fix the cause, then the same command with --retry-unknown asks them again."
        )
    return "\n".join(lines)
